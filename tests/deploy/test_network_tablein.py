"""A table activation of a computed tensor (issue 52, rule 9e of hlsnn.engines.network.tablein):
a LeakyRelu after a residual Add, a HardSwish after a gate Mul of two maps, a Tanh after an
AveragePool and a Sigmoid after an Add of two MLP outputs (CBAM) run in the integer network
modes (shift_mac, sparse_cluster) in one start, with the layer path's bits.

References: the layer-by-layer compiled network on the emulator for the bits (and, for the rule
itself, the codes computed here from the float op output with numpy: round half away from zero
of v * 2**F, saturated); the fixtures hfam exported from torch (tests/data/torch/beyond v_f_*)."""
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402

FORMATS = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}
BEYOND = Path(__file__).resolve().parents[1] / "data" / "torch" / "beyond"


def tablein_model(path, seed=3, gate_act="HardSwish", gated="l1"):
    """conv (8, 3x3) c1 -> conv (8, 3x3) c2 -> Add(c1, c2) -> LeakyRelu (rule 9e of an Add) l ->
    conv (8, 1x1) -> Sigmoid s -> Mul(l, s) (a gate of two maps) -> HardSwish (rule 9e of a gate)
    -> AveragePool 2x2 -> Tanh (rule 9e of a pool) -> conv (8, 3x3) -> Relu -> global pool ->
    Gemm (10), on 1 x 8 x 8 images."""
    rng = np.random.default_rng(seed)
    t = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)     # noqa: E731
    init = [t(rng.normal(0, 0.6, (8, 1, 3, 3)), "w1"), t(rng.normal(0, 0.1, 8), "b1"),
            t(rng.normal(0, 0.3, (8, 8, 3, 3)), "w2"), t(rng.normal(0, 0.1, 8), "b2"),
            t(rng.normal(0, 0.5, (8, 8, 1, 1)), "w3"), t(rng.normal(0, 0.1, 8), "b3"),
            t(rng.normal(0, 0.3, (8, 8, 3, 3)), "w4"), t(rng.normal(0, 0.1, 8), "b4"),
            t(rng.normal(0, 0.5, (10, 8)), "wg"), t(rng.normal(0, 0.1, 10), "bg")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c1", "c2"], ["a1"]),
             helper.make_node("LeakyRelu", ["a1"], ["l1"], alpha=0.125),
             helper.make_node("Conv", ["l1", "w3", "b3"], ["c3"]),
             helper.make_node("Sigmoid", ["c3"], ["s3"]),
             helper.make_node("Mul", [gated, "s3"], ["m1"]),
             helper.make_node(gate_act, ["m1"], ["h1"]),
             helper.make_node("AveragePool", ["h1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Tanh", ["p1"], ["t1"]),
             helper.make_node("Conv", ["t1", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c4"], ["r4"]),
             helper.make_node("GlobalAveragePool", ["r4"], ["g1"]),
             helper.make_node("Flatten", ["g1"], ["f1"]),
             helper.make_node("Gemm", ["f1", "wg", "bg"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _compile(tmp, model, name, formats=None):
    from hlsnn.network.build import compile_model
    formats = formats or FORMATS
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(f"name: {name}\nmodel: {model}\ndata: digits\nlayout: auto\nformats:\n"
                   + "".join(f"  {k}: {v}\n" for k, v in formats.items())
                   + "assignments:\n" + "".join(f"  {k}: {{default: {k}}}\n" for k in formats))
    out = {}
    for fmt in formats:
        out[fmt] = tmp / f"{name}-{fmt}.hlsnn"
        compile_model(cfg, fmt, out[fmt])
    return out


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tablein")
    return _compile(tmp, tablein_model(tmp / "tablein.onnx"), "tablein")


@pytest.fixture(scope="module")
def bfp_net(tmp_path_factory):
    """The model for bfp_systolic (rule 9b of a sum, a product, a mean): a HardSigmoid after the
    gate (9c's HardSwish takes M-bit mantissas only), the gate of a conv's map (its 8-bit
    mantissas times the Sigmoid's 16 stay in the kernel's 25 bits)."""
    tmp = tmp_path_factory.mktemp("tablein_bfp")
    return _compile(tmp, tablein_model(tmp / "tablein.onnx", gate_act="HardSigmoid", gated="c1"), "tablein",
                    {"bfp8": "{type: bfp, accel: bfp8_zcu104}"})["bfp8"]


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_of_an_add_a_gate_and_a_pool_run_in_the_network_mode_with_the_layer_paths_bits(nets, fmt):
    """Each table reads the op's requantized output (an add, gate or avgpool op writes it, the
    lut op reads it), all in one program; the emu network mode gives the layer path's bits."""
    x = _x(48)
    net = hlsnn.load(nets[fmt], "emu", network=True)
    ops = net.network.ops
    made = {op.out: op.kind for op in ops}
    luts = {op.f["fn"]: made.get(op.ins[0]) for op in ops if op.kind == "lut"}
    assert luts == {"LeakyRelu": "add", "Sigmoid": "conv", "HardSwish": "gate", "Tanh": "avgpool"}, luts
    np.testing.assert_array_equal(net(x), hlsnn.load(nets[fmt], "emu", network=False)(x))


def test_bfp_tables_of_a_sum_a_product_and_a_mean_have_the_layer_paths_bits(bfp_net):
    """bfp_systolic: rule 9b reads the add, gate and avgpool ops' exact pairs (wider mantissas)
    as it reads a conv's; the emu network mode gives the layer path's bits."""
    x = _x(48)
    net = hlsnn.load(bfp_net, "emu", network=True)
    made = {op.out: op.kind for op in net.network.ops}
    luts = {op.f["fn"]: made.get(op.ins[0]) for op in net.network.ops if op.kind == "lut"}
    assert luts == {"LeakyRelu": "add", "Sigmoid": "conv", "HardSigmoid": "gate", "Tanh": "avgpool"}, luts
    np.testing.assert_array_equal(net(x), hlsnn.load(bfp_net, "emu", network=False)(x))


def test_rule_9e_codes_are_the_ops_float_values_rounded_at_the_calibrated_radix(nets):
    """The layer path's rule 9e by hand: the Add's float values (c1 + c2 of the compiled layers'
    outputs) rounded half away from zero at the stored radix F_t, saturated to 8 bits, then the
    LeakyRelu table (alpha 1/8: exact) at its radix: the network's lut op output."""
    from hlsnn.network import artifact
    prog, _ = artifact.read(nets["twohot"])
    j = next(j for j in prog["layers"] if j.get("op") == "LeakyRelu")
    f_t = j["table_in"]["f_in"]
    lay = hlsnn.load(nets["twohot"], "emu", network=False)
    x = _x(16)
    dep = lay._dep
    _, env = dep._run(dep._input(x), False, True)
    v = env["c1"] + env["c2"]
    q = np.clip(np.sign(v) * np.floor(np.abs(v) * 2.0 ** f_t + 0.5), -128, 127)
    f_o = j["table"]["f_out"] if "table" in j else None
    got = env["l1"]
    lr = np.where(q >= 0, q, q / 8) * 2.0 ** -f_t           # the exact LeakyRelu of the codes
    if f_o is not None:
        want = np.clip(np.sign(lr) * np.floor(np.abs(lr) * 2.0 ** f_o + 0.5), -128, 127) * 2.0 ** -f_o
        np.testing.assert_array_equal(got, want)
    else:
        assert np.max(np.abs(got - lr)) <= 2.0 ** -f_t


def test_the_resource_model_counts_a_table_rom_per_rule_9e_table(nets, tmp_path):
    """kLut holds one 256-entry table per lut op: four here (three of computed tensors)."""
    from hlsnn.engines.shift_mac.network import kernel as netkernel, perf as netperf
    net = hlsnn.load(nets["twohot"], "emu", network=True).network
    _, _, t = netkernel.render(net, tmp_path)
    rows = {b.name: b for b in netperf.buffers(net, t)}
    assert rows["kLut"].dims == (t["pc"], 4 * 256)


def test_a_table_without_its_code_radix_is_refused_by_name(nets):
    """A compiled program whose table of a computed tensor has no table_in (written before
    rule 9e) runs layer by layer, the reason named."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.errors import InputError
    from hlsnn.network import artifact
    prog, arrays = artifact.read(nets["twohot"])
    for j in prog["layers"]:
        j.pop("table_in", None)
    with pytest.raises(InputError, match=r"LeakyRelu.*table_in"):
        netmode.lower(prog, arrays)


@pytest.mark.csim
@pytest.mark.parametrize("fmt", FORMATS)
def test_tables_of_computed_tensors_on_csim(nets, fmt):
    """The quick csim case of each integer engine's kernel with rule 9e tables: one start, the
    layer path's bits."""
    x = _x(6)
    want = hlsnn.load(nets[fmt], "emu", network=False)(x)
    board = hlsnn.load(nets[fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), want)
    assert board.last_kernel_starts == 1


@pytest.mark.slow     # test_tables_of_computed_tensors_on_csim is the quick csim case (integer engines)
@pytest.mark.csim
def test_bfp_tables_of_computed_tensors_on_csim(bfp_net):
    """The bfp_systolic kernel with rule 9b tables of a sum, a product and a mean: one start,
    the layer path's bits."""
    x = _x(4)
    want = hlsnn.load(bfp_net, "emu", network=False)(x)
    board = hlsnn.load(bfp_net, "csim", network=True)
    np.testing.assert_array_equal(board(x), want)
    assert board.last_kernel_starts == 1


FIXTURES = ("v_f_dw_cbam_ts17", "v_f_dw_cbam_dynamo", "v_f_mbv3_dl_ts17", "v_f_mbv3_dl_dynamo")


@pytest.mark.parametrize("name", FIXTURES)
def test_fresh_family_models_run_in_one_start_with_the_layer_paths_bits(name, tmp_path):
    """hfam's CBAM (Sigmoid of an Add of two MLP outputs) and MobileNetV3 (HardSwish after the
    squeeze-excite gate) exported from torch: network mode on both integer engines, the layer
    path's bits on emu (bfp_systolic too: MobileNetV3's HardSwish of a gate's pairs by rule 9f,
    tests/deploy/test_network_bfp_hswish_gate.py)."""
    model = BEYOND / f"{name}.onnx"
    if not model.exists():
        pytest.skip(f"{model.name}: hfam's fixture (branch hfam)")
    nets = _compile(tmp_path, model, name, dict(FORMATS, bfp8="{type: bfp, accel: bfp8_zcu104}"))
    x = _x(24)
    for fmt, path in nets.items():
        net = hlsnn.load(path, "emu", network=True)
        made = {op.out: op.kind for op in net.network.ops}
        assert any(op.kind == "lut" and made.get(op.ins[0]) in ("add", "gate") for op in net.network.ops), fmt
        np.testing.assert_array_equal(net(x), hlsnn.load(path, "emu", network=False)(x))
