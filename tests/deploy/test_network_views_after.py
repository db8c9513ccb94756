"""A view after the logits (a ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze`` or
``Identity``: the 1-D autoencoders' ``Reshape`` back to ``(N, C, L)``) on the network path
(:mod:`hlsnn.deploy.lower.netafter`): no byte copied, applied as one ``reshape`` of the dequantized
output, and charged nothing by the latency model (:mod:`hlsnn.network.latency`).

References: :func:`hlsnn.deploy.run.hostops.run` op by op (the layer path's host ops); the same
network compiled without the views (the latency model's figures)."""
from types import SimpleNamespace

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from netfixtures import compile_each  # noqa: E402


def _host(name, op, **attrs):
    return dict(name=name, kind="host", op=op, attrs=attrs, inputs=[name + "_in"], output=name + "_out")


def test_views_after_the_logits_are_one_reshape_of_the_same_values():
    """A Flatten, Unsqueeze, Softmax, Identity, Reshape after (10, 1, 1) logits: the views on either
    side of the Softmax are folded into one reshape each, the values and shape are the host ops'
    run one by one, and the views copy nothing."""
    from hlsnn.deploy.run import hostops
    from hlsnn.deploy.lower.layers import _host_layer
    from hlsnn.deploy.lower.netafter import stubs
    after = [_host("f", "Flatten", axis=1), _host("u", "Unsqueeze", axes=[1]), _host("s", "Softmax", axis=-1),
             _host("i", "Identity"), _host("r", "Reshape", shape=[0, 5, -1])]
    net = SimpleNamespace(output=dict(shape=(10, 1, 1)), host_after=after)
    fns = stubs(net)
    assert len(fns) == 3                                   # view, Softmax, view
    y0 = np.random.default_rng(5).normal(size=(3, 10, 1, 1))
    want = y0
    for j in after:
        want = hostops.run(_host_layer(j, {}), [want])
    got = y0
    for k, fn in enumerate(fns):
        prev, got = got, fn(got)
        if k != 1:
            assert np.shares_memory(got, prev)           # a view: no byte copied
    assert got.shape == want.shape == (3, 5, 2)
    np.testing.assert_array_equal(got, want)


def _net(path, view, softmax=False):
    """x (N, 1, 8, 8): Conv 3x3 1 -> 4 (pad 1) + Relu; Conv 1x1 4 -> 3, the logits (N, 3, 8, 8);
    with ``view`` a Reshape to (N, 3, 64) then an Unsqueeze to (N, 3, 64, 1) after them (with
    ``softmax`` a Softmax over the 64 between the two)."""
    r = np.random.default_rng(7)
    inits = [numpy_helper.from_array(r.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(r.normal(0, 0.1, 4).astype(np.float32), "b1"),
             numpy_helper.from_array(r.normal(0, 0.5, (3, 4, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([0, 3, -1], np.int64), "shape"),
             numpy_helper.from_array(np.array([3], np.int64), "ax")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y" if not view else "c2"])]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 8, 8])]
    if view:
        nodes += [helper.make_node("Reshape", ["c2", "shape"], ["rs"]),
                  helper.make_node("Unsqueeze", ["sm" if softmax else "rs", "ax"], ["y"])]
        if softmax:
            nodes.insert(-1, helper.make_node("Softmax", ["rs"], ["sm"], axis=-1))
        out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 64, 1])]
    g = helper.make_graph(nodes, "views", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                          out, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """name -> the two-hot compile of :func:`_net` without (``plain``) and with (``with``) the views."""
    tmp = tmp_path_factory.mktemp("views_after")
    return {name: compile_each(tmp, name, _net(tmp / f"{name}.onnx", *how), ["twohot"], check_samples=2,
                               calibration_samples=16)["twohot"]
            for name, how in (("plain", (False,)), ("with", (True,)), ("soft", (True, True)))}


@pytest.mark.parametrize("host", ["c", "python"])
def test_a_view_after_the_logits_costs_nothing_in_the_latency_model(nets, host):
    """The same network with and without a Reshape and an Unsqueeze after its logits (a chain of
    host layers after them: the network mode skips each): the same figures (host time and bytes,
    end to end), the views' rows 0 us and 0 bytes; on emu the network path's output is the layer
    path's."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.latency import model
    plain, with_ = (model(str(nets[n]), host=host) for n in ("plain", "with"))
    assert plain["path"] == with_["path"] == "network"
    views = [r for r in with_["layers"] if r["kind"].endswith("(a view)")]
    assert [r["kind"] for r in views] == ["host Reshape (a view)", "host Unsqueeze (a view)"]
    assert all(r["host_us"] == 0 and r["host_bytes"] == 0 and r["end_to_end_us"] == 0 for r in views)
    for k in ("host_us", "host_bytes", "end_to_end_us", "kernel_us", "logits_out_us"):
        assert with_[k] == pytest.approx(plain[k]), k
    x = datasets.load("digits", layout="nchw").x_test[:16]
    net = hlsnn.load(nets["with"], "emu", network=True)
    assert [j["op"] for j in net.network.host_after] == ["Reshape", "Unsqueeze"]
    y = net(x)
    assert y.shape == (16, 3, 64, 1)
    np.testing.assert_array_equal(y, hlsnn.load(nets["with"], "emu", network=False)(x))


def test_a_softmax_between_views_after_the_logits(nets):
    """Reshape, Softmax, Unsqueeze after the logits: the network mode runs the chain on the host
    (the layer path's logits bit for bit, its float output after the Softmax within 1e-12, as the
    self-check compares it: numpy's sum may take another order on another memory layout), the
    Softmax charged as the model charges it, the views nothing."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network import hostmodel
    from hlsnn.network.latency import model
    x = datasets.load("digits", layout="nchw").x_test[:16]
    net = hlsnn.load(nets["soft"], "emu", network=True)
    assert [j["op"] for j in net.network.host_after] == ["Reshape", "Softmax", "Unsqueeze"]
    y = net(x)
    np.testing.assert_allclose(y.sum(axis=2), 1.0)
    lay = hlsnn.load(nets["soft"], "emu", network=False)
    np.testing.assert_allclose(y, lay(x), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(net.logits(x), lay.logits(x))
    res = model(str(nets["soft"]))
    after = {r["kind"]: r["host_us"] for r in res["layers"] if r["name"] in res["host_only_layers"]}
    fixed, ns = hostmodel.HOST_OPS["Softmax"]         # measured per op and element; on the logits' values
    n_out = int(np.prod(net.network.output["shape"]))
    assert after == {"host Reshape (a view)": 0,
                     "host Softmax": pytest.approx((fixed + ns * n_out / 1e3) * hostmodel.SCALE[res["cpu"]]["python"]),
                     "host Unsqueeze (a view)": 0}
