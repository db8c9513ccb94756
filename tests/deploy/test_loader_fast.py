"""``net.run``'s fast path on the C host path (:meth:`hlsnn.network.loader.CompiledNet._run_c`):
the same output bits as the general path (``run(x, keep=True)``, which checks every input with
``_check_input``) and as the layer-by-layer emulator (the reference), for every input dtype the
C call takes as stored and for the ones converted; the same errors, by name, for a wrong shape,
dtype, an empty batch and non-finite values, with or without a prefix (which decides whether
the C call counts the non-finite values itself).

Models: small ONNX graphs built here (an MLP ending in a Softmax, with and without an input
BatchNormalization before the start) in each engine's format; the simulated board."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import nethost  # noqa: E402

pytestmark = [pytest.mark.skipif("not nethost.available()", reason="no C compiler for the C host path"),
              pytest.mark.slow, pytest.mark.csim]

FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def mlp_softmax(path, bn):
    """x (N, 64) -> [BatchNormalization] -> Gemm 64x16 -> Relu -> Gemm 16x10 -> Softmax."""
    r = np.random.default_rng(5)
    inits = [_init("w1", r.normal(0, 0.2, (16, 64))), _init("b1", r.normal(0, .1, 16)),
             _init("w2", r.normal(0, 0.3, (10, 16))), _init("b2", r.normal(0, .1, 10))]
    nodes = [helper.make_node("Gemm", ["n" if bn else "x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Gemm", ["r", "w2", "b2"], ["z"], transB=1),
             helper.make_node("Softmax", ["z"], ["y"], axis=1)]
    if bn:
        inits += [_init("s", r.uniform(0.5, 2, 64)), _init("b", r.normal(0, 0.3, 64)), _init("m", r.normal(5, 2, 64)),
                  _init("v", r.uniform(1, 30, 64))]
        nodes.insert(0, helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], epsilon=1e-5))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


#: (graph, format): no prefix on the sparse and bfp engines (the C call counts the non-finite
#: values; bfp: in its pass that writes the words), a BatchNormalization prefix on the shift engine
CASES = [("plain", "fixed8"), ("plain", "bfp8"), ("bn", "twohot")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from netfixtures import compile_onnx
    tmp = tmp_path_factory.mktemp("loaderfast")
    cache = {}

    def get(graph, fmt):
        if (graph, fmt) not in cache:
            onnx_path = tmp / f"{graph}.onnx"
            if not onnx_path.exists():
                mlp_softmax(onnx_path, graph == "bn")
            cache[graph, fmt] = compile_onnx(tmp, graph, onnx_path, fmt, formats=FORMATS, layout="flat",
                                             calibration_samples=16, check_samples=2)
        return cache[graph, fmt]
    return get


def _inputs(engine):
    """The digits (k / 16) as float64, float32, uint8 codes k (not for bfp: its uint8 goes to
    float64 through the general check either way), int64, a list, a strided view and a
    big-endian float32 array: each with the float64 values the reference runs."""
    x = datasets.load("digits", layout="flat").x_test[:3]
    k = np.rint(x * 16)
    cases = {"float64": x, "float32": x.astype(np.float32), "int64": k.astype(np.int64), "list": x.tolist(),
             "strided": np.repeat(x, 2, axis=0)[::2], "big-endian": x.astype(">f4"), "uint8": k.astype(np.uint8)}
    return {name: (v, np.asarray(v, np.float64)) for name, v in cases.items()}


@pytest.mark.parametrize("graph,fmt", CASES)
def test_the_fast_path_gives_the_general_paths_and_the_emulators_bits(compiled, graph, fmt):
    path = compiled(graph, fmt)
    with hlsnn.load(path, "emu", network=False) as ref, hlsnn.load(path, "sim") as net:
        assert net._c_run is not None, "the sim board's starts go through the C host path"
        # the C call applies the Softmax: to bfp8's words too, from its table of numpy's exp
        # (nethost.softmax_rule, bfp_exp_table: 2**(8 + 8) entries, within BFP_TABLE_MAX)
        assert net._c_run[-1], "the C call applies the Softmax"
        for name, (x, x64) in _inputs(net.network.engine).items():
            fast = net.run(x)
            general, _ = net.run(x, keep=True)
            want = ref.run(x64)
            assert fast.shape == want.shape == (3, 10), name
            assert fast.view(np.uint64).tolist() == general.view(np.uint64).tolist(), name
            assert fast.view(np.uint64).tolist() == want.view(np.uint64).tolist(), name
            assert net.last_kernel_starts == 1 and net.last_host_s >= 0
        y1, y2 = net.run(_inputs("")["float32"][0]), net.run(_inputs("")["float32"][0][:1])
        assert not np.shares_memory(y1, y2), "each call's output is its own array"
        assert y2.view(np.uint64).tolist() == y1[:1].view(np.uint64).tolist()


@pytest.mark.parametrize("graph,fmt", CASES)
def test_the_fast_path_refuses_what_the_general_path_refuses_with_the_same_error(compiled, graph, fmt):
    path = compiled(graph, fmt)
    x = datasets.load("digits", layout="flat").x_test[:2].astype(np.float32)
    nan32 = x.copy()
    nan32[0, 3], nan32[1, 5] = np.nan, np.inf
    bad = {"one sample": x[0], "wrong shape": x[:, :32], "empty batch": x[:0], "complex": x.astype(np.complex64),
           "strings": np.array([["a"] * 64]), "nan float32": nan32, "nan float64": nan32.astype(np.float64),
           "nan list": nan32.tolist(), "50 million images": np.broadcast_to(x[0], (50_000_000, 64)),
           "50 million uint8 images": np.broadcast_to(x[0].astype(np.uint8), (50_000_000, 64))}
    with hlsnn.load(path, "sim") as net:
        assert net._c_run[2] == (graph == "plain"), "whether the C call counts the non-finite values"
        want = net.run(x)
        for name, v in bad.items():
            with pytest.raises(InputError) as fast:
                net.run(v)
            with pytest.raises(InputError) as general:
                net.run(v, keep=True)
            assert str(fast.value) == str(general.value), name
            assert str(fast.value).startswith("input: "), name
            if name.startswith("nan"):
                assert "2 non-finite value(s) (NaN or Inf)" in str(fast.value), name
        assert net.run(x).view(np.uint64).tolist() == want.view(np.uint64).tolist(), "runs after a refusal"
