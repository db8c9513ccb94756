"""The shift_mac network kernel with activations wider than 8 bits (issue 52): on
configs/accel/shift10_pynq-z2.yaml (10-bit activations) a model with a conv, a depthwise conv,
a residual Add, a max pool, tables (HardSwish, Sigmoid, Tanh: 1024 entries each) and a
squeeze-excite Mul runs in one start of the network kernel, with two shift codes per weight
(``weight_terms: 2``), and gives the layer path's bits on emu, C-simulation and the simulated
board; the image words carry 16-bit lanes (hlsnn.engines.network.words).

References: the layer-by-layer compiled network on the emulator for the bits; the word layout
written out by hand (little-endian int16 lanes); the table's entry count 2**10; the numpy
product of the widths for the resource model's rows."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network import words  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

FORMATS = {"t10": "{type: twohot, accel: shift10_pynq-z2, weight_terms: 2}",
           "t10one": "{type: twohot, accel: shift10_pynq-z2}"}


def act10_model(path, seed=5):
    """conv (8, 3x3) -> HardSwish -> MaxPool 2x2 s2 -> depthwise conv (8, 3x3) -> Relu ->
    Add(the pooled map) -> conv (8, 1x1) -> Tanh -> the squeeze (global pool, 1x1 conv, Sigmoid)
    -> Mul(Tanh's map, gate) -> conv (12, 3x3) -> Relu -> global pool -> Gemm (10), on 1 x 8 x 8
    images."""
    rng = np.random.default_rng(seed)
    t = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)     # noqa: E731
    init = [t(rng.normal(0, 0.6, (8, 1, 3, 3)), "w1"), t(rng.normal(0, 0.1, 8), "b1"),
            t(rng.normal(0, 0.4, (8, 1, 3, 3)), "wd"), t(rng.normal(0, 0.1, 8), "bd"),
            t(rng.normal(0, 0.4, (8, 8, 1, 1)), "wp"), t(rng.normal(0, 0.1, 8), "bp"),
            t(rng.normal(0, 0.6, (8, 8, 1, 1)), "ws"), t(rng.normal(0, 0.2, 8), "bs"),
            t(rng.normal(0, 0.2, (12, 8, 3, 3)), "w2"), t(rng.normal(0, 0.1, 12), "b2"),
            t(rng.normal(0, 0.5, (10, 12)), "wg"), t(rng.normal(0, 0.1, 10), "bg")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c1"], ["h1"]),
             helper.make_node("MaxPool", ["h1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "wd", "bd"], ["d1"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("Relu", ["d1"], ["r1"]),
             helper.make_node("Add", ["r1", "p1"], ["a1"]),
             helper.make_node("Conv", ["a1", "wp", "bp"], ["c3"]),
             helper.make_node("Tanh", ["c3"], ["t3"]),
             helper.make_node("GlobalAveragePool", ["t3"], ["g1"]),
             helper.make_node("Conv", ["g1", "ws", "bs"], ["s1"]),
             helper.make_node("Sigmoid", ["s1"], ["s2"]),
             helper.make_node("Mul", ["t3", "s2"], ["m1"]),
             helper.make_node("Conv", ["m1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g2"]),
             helper.make_node("Flatten", ["g2"], ["f2"]),
             helper.make_node("Gemm", ["f2", "wg", "bg"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("netact10")
    m = act10_model(tmp / "act10.onnx")
    cfg = tmp / "act10.yaml"
    cfg.write_text(f"name: act10\nmodel: {m}\ndata: digits\nlayout: nchw\nformats:\n"
                   + "".join(f"  {k}: {v}\n" for k, v in FORMATS.items())
                   + "assignments:\n" + "".join(f"  {k}: {{default: {k}}}\n" for k in FORMATS))
    out = {}
    for fmt in FORMATS:
        out[fmt] = tmp / f"act10-{fmt}.hlsnn"
        compile_model(cfg, fmt, out[fmt])
    return out


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", FORMATS)
def test_ten_bit_network_runs_in_the_emu_network_mode_with_the_layer_paths_bits(nets, fmt):
    """Every op in the network program (none left to the host between the convs), 10-bit
    integers, the layer path's outputs."""
    x = _x(48)
    net = hlsnn.load(nets[fmt], "emu", network=True)
    assert net.network is not None and net.network.input["bits"] == 10
    kinds = [op.kind for op in net.network.ops]
    for k in ("conv", "lut", "add", "maxpool", "gate"):
        assert k in kinds, kinds
    assert [op.f["fn"] for op in net.network.ops if op.kind == "lut"] == ["HardSwish", "Tanh", "Sigmoid"]
    assert any(op.kind == "conv" and op.f["group"] == 8 == op.f["c"] for op in net.network.ops)   # depthwise
    for op in net.network.ops:
        if op.kind == "lut":
            assert np.asarray(op.f["table"]).shape == (1 << 10,)
    two = [op for op in net.network.ops if op.kind == "conv" and "zero2" in op.f["fields"]]
    assert len(two) == (6 if fmt == "t10" else 0)          # every engine layer has its second code
    np.testing.assert_array_equal(net(x), hlsnn.load(nets[fmt], "emu", network=False)(x))


def test_two_term_values_are_the_sum_of_the_two_codes(nets):
    """The network program's weights of a two-term layer: Q1 + Q2 of the stored [Q1 | Q2] rows,
    each term's shift-add fields giving its own codes' values."""
    from hlsnn.formats import shift as sfmt
    from hlsnn.network import artifact
    net = hlsnn.load(nets["t10"], "emu", network=True)
    prog, arrays = artifact.read(nets["t10"])
    j = next(j for j in prog["layers"] if j.get("kind") == "conv" and j["terms"] == 2 and j["geom"]["group"] == 1)
    t = sfmt.ShiftTensor.from_codes(j["mode"], j["exp_bits"], *(arrays[f"{j['name']}/{k}"] for k in
                                                                ("e1", "e2", "s1", "s2", "zero", "scale_exponent")),
                                    delta=j["delta"], axis=j["axis"])
    v = t.code_values()
    k = v.shape[1] // 2
    op = next(o for o in net.network.ops if o.name == j["name"])
    np.testing.assert_array_equal(op.f["codes"].reshape(v.shape[0], -1), v[:, :k] + v[:, k:])
    f = op.f["fields"]
    for sfx, want in (("", v[:, :k]), ("2", v[:, k:])):
        val = (1 - 2 * f["so" + sfx]) * ((1 << f["ea" + sfx]) + f["hb" + sfx] * (1 - 2 * f["sb" + sfx])
                                         * (1 << f["eb" + sfx]))
        np.testing.assert_array_equal(np.where(f["zero" + sfx] == 1, 0, val).reshape(want.shape), want)


def test_image_words_carry_16_bit_lanes_above_8_bits():
    """The word layout (module docstring of hlsnn.engines.network.words): four 10-bit values a
    64-bit word, sign-extended to 16 bits, element i at bits 16 (i % 4); 8-bit ones eight a word."""
    assert (words.lane_bits(8), words.lane_bits(10), words.lane_bits(16), words.lane_bits(2)) == (8, 16, 16, 8)
    assert (words.n_words(10, 10), words.n_words(10, 8), words.n_words(8, 16)) == (3, 2, 2)
    v = np.array([-3, 511, -512, 7, 100], np.int64)
    lanes = np.zeros(8, words.dtype(10))
    lanes[:5] = v
    w = lanes.view(np.uint64)                       # what NetKernel and the board hand the kernel
    want0 = (0xFFFD | (511 << 16) | (0xFE00 << 32) | (7 << 48))
    assert int(w[0]) == want0 and int(w[1]) == 100
    for bad in (1, 17, 32):
        with pytest.raises(InputError, match=rf"{bad}-bit activations.*2\.\.16"):
            words.lane_bits(bad)


def test_resource_model_declares_the_wider_buffers(nets, tmp_path):
    """The resource rows at 10 bits: activation banks 10 bits wide, kLut 16-bit words of 1024
    entries a table and bank, the gate's products 10 x 10, and the second weight ROM as the
    first; the rendered C++ declares the same (int16_t kLut, ap_int<10> activations)."""
    from hlsnn.engines.shift_mac.network import kernel as netkernel, perf as netperf
    net = hlsnn.load(nets["t10"], "emu", network=True).network
    files, _, t = netkernel.render(net, tmp_path)
    rows = {b.name: b for b in netperf.buffers(net, t)}
    assert rows["act"].width == 10 and rows["kLut"].width == 16
    assert rows["kLut"].dims == (t["pc"], 3 * 1024)
    assert rows["kWeights2"].dims == rows["kWeights"].dims and rows["kWeights2"].width == rows["kWeights"].width
    gate, = [m for m in netperf.multipliers(net, t) if m.name == "gate"]
    assert (gate.a_bits, gate.b_bits) == (10, 10)
    data = (tmp_path / "network_data.h").read_text()
    assert f"static const int16_t kLut[{t['pc']}][{3 * 1024}]" in data and "kWeights2[" in data
    head = (tmp_path / "network.h").read_text()
    assert "kActBits = 10;" in head and "kLaneBits = 16;" in head
    one = hlsnn.load(nets["t10one"], "emu", network=True).network
    _, _, t1 = netkernel.render(one, tmp_path / "one")
    assert "kWeights2" not in {b.name for b in netperf.buffers(one, t1)}
    assert all("kWeights2[" not in (tmp_path / "one" / f).read_text() for f in ("network.cpp", "network_data.h"))
    # two codes a weight: each unit's shift-add twice, the same cycles
    lut2, lut1 = (netperf.datapath(n, tt)["units"][0] for n, tt in ((net, t), (one, t1)))
    assert lut2 > 2 * lut1
    assert [c for _, _, c in netperf.op_cycles(net, t)] == [c for _, _, c in netperf.op_cycles(one, t1)]


def test_schedule_derives_every_loop_of_the_ten_bit_kernel(nets):
    """perf/schedule.py parses the rendered 10-bit, two-term kernel: every counted loop has a
    derived II (the wide lanes' load and store, the second shift-add and the int16 tables keep
    it at 1)."""
    from hlsnn.config import load_config
    from hlsnn.network.schedule import network_schedule
    net = hlsnn.load(nets["t10"], "emu", network=True).network
    rows = network_schedule(net, load_config("shift10_pynq-z2"))
    got = {c for r in rows for c in (r.get("counters") or [r.get("counter") or r["loop"]])}
    for loop in ("NetLoadWords", "NetLoad", "NetMac", "NetPool", "NetAdd", "NetLut", "NetGate", "NetStore",
                 "NetStoreWords"):
        assert loop in got, (loop, got)
    assert all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]


@pytest.mark.csim
def test_ten_bit_network_kernel_on_csim_and_the_simulated_board(nets):
    """The quick csim case of the 10-bit, two-term kernel (wide lanes, int16 tables, kWeights2):
    one start, the layer path's bits on C-simulation and on the simulated board; the loop
    counters are the perf model's iterations (the image words: ceil(64 / 4) in, ceil(10 / 4) out)."""
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = _x(8)
    want = hlsnn.load(nets["t10"], "emu", network=False)(x)
    board = hlsnn.load(nets["t10"], "csim", network=True)
    np.testing.assert_array_equal(board(x), want)
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert k.lane_bits == 16 and (k.in_words, k.out_words) == (16, 3)
    assert {n: it for n, (it, _) in k.counters.items() if n.startswith("Net")} == {     # (strict: op counters too)
        n: 8 * v for n, v in netperf.iterations(board.network, k.tables).items()}
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    from hlsnn.network import nethost
    with hlsnn.load(nets["t10"], "sim", network=True) as sim:
        np.testing.assert_array_equal(sim(x), want)       # the C host path (16-bit lanes) where it builds
        assert sim.last_kernel_starts == 1
        assert nethost.input_rule(sim.network)[1] == 10
        q = netmode.quantize_input(sim.network, x)
        np.testing.assert_array_equal(nethost.quantize(sim.network, x), q)     # rule 1 in C, int16 lanes
        np.testing.assert_array_equal(sim._kernel.run(q), k.run(q))          # the numpy driver's words
        if nethost.available():
            qs, ys = sim._kernel.run_pipelined(x)                             # double-buffered starts in C
            np.testing.assert_array_equal(ys.reshape(want.shape), want)


@pytest.mark.slow      # test_ten_bit_network_kernel_on_csim_and_the_simulated_board covers the kernel
@pytest.mark.csim
def test_ten_bit_network_kernel_compiles_against_both_header_models(nets, tmp_path):
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(nets["t10"], "netkernel", tmp_path)


def test_a_table_of_codes_wider_than_12_bits_is_refused_by_name():
    """16-bit activations: the layer path computes a HardSwish in float64 (rule 9 takes codes of at
    most 12 bits), so the network mode refuses the table by name instead of computing it otherwise."""
    from hlsnn.deploy.lower.program import Op
    from hlsnn.engines.network import gate as netgate
    j = {"name": "hs", "op": "HardSwish", "inputs": ["a"], "output": "b", "attrs": {}}
    why = lambda j, what: InputError(f"layer {j['name']}: {what}")      # noqa: E731
    with pytest.raises(InputError, match=r"layer hs: a table activation of 16-bit codes.*2\.\.12 bits"):
        netgate.lower_host(j, {"a": ("q", 8)}, {"a": (2, 2, 2)}, [], 16, "nearest_even", why, Op)
    ops = []
    assert netgate.lower_host(j, {"a": ("q", 8)}, {"a": (2, 2, 2)}, ops, 12, "nearest_even", why, Op)
    assert ops[0].f["table"].shape == (1 << 12,)


@pytest.fixture(scope="module")
def unet10(tmp_path_factory):
    """v_unet_mix_ts17 of tests/data/torch/beyond (average pool, bilinear and nearest upsample,
    zero-stuffing, concat) compiled for shift10_pynq-z2."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "deploy"))
    from test_torch_beyond import DATA
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("unet10")
    cfg = tmp / "u.yaml"
    cfg.write_text(f"name: v_unet_mix_ts17\nmodel: {DATA / 'v_unet_mix_ts17.onnx'}\ndata: digits\nlayout: auto\n"
                   "formats:\n  t10: {type: twohot, accel: shift10_pynq-z2}\nassignments:\n  t10: {default: t10}\n")
    compile_model(cfg, "t10", tmp / "u.hlsnn")
    return tmp / "u.hlsnn"


def _unet_x(n):
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "deploy"))
    from test_torch_beyond import _data
    return _data("v_unet_mix_ts17").x_test[:n]


def test_the_data_moves_and_pools_at_ten_bits_have_the_layer_paths_bits(unet10):
    """The moves and the average pool's rule at 10 bits (a concat's requantization widths from
    act_bits): the emu network mode equals the layer path."""
    x = _unet_x(16)
    net = hlsnn.load(unet10, "emu", network=True)
    assert {"avgpool", "concat", "upsample", "zerostuff"} <= {op.kind for op in net.network.ops}
    np.testing.assert_array_equal(net(x), hlsnn.load(unet10, "emu", network=False)(x))


@pytest.mark.slow      # test_ten_bit_network_kernel_on_csim_and_the_simulated_board covers the 10-bit kernel
@pytest.mark.csim
def test_the_data_moves_and_pools_at_ten_bits_on_csim(unet10):
    x = _unet_x(8)
    board = hlsnn.load(unet10, "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(unet10, "emu", network=False)(x))
    assert board.last_kernel_starts == 1


def test_layer_by_layer_latency_counts_the_second_term(nets):
    """``hlsnn perf --layer-by-layer`` of a two-term model: each engine layer's kernel cycles are
    the cycle model's of the layer with K doubled (hlsnn.deploy.quantize.twoterm, rule 4), the one-term
    model's are its own layer's; the two-term model costs more (it gave the same figure before)."""
    from hlsnn.deploy.lower.layers import LayerStub
    from hlsnn.measure.layers import layer_kernel_cycles
    from hlsnn.network import latency
    two, one = (latency.model(nets[k], network=False) for k in ("t10", "t10one"))
    eng2 = {r["name"]: r for r in two["layers"] if not r["kind"].startswith("host")}
    eng1 = {r["name"]: r for r in one["layers"] if not r["kind"].startswith("host")}
    assert eng2.keys() == eng1.keys() and eng2
    assert all(eng2[n]["kernel_cycles"] > eng1[n]["kernel_cycles"] for n in eng2)
    net = hlsnn.load(nets["t10"], "emu", network=False)
    try:
        ex = next(iter(net._dep.execs.values()))
        layer = ex.layer
        n, k = layer.w.shape[0], layer.w.shape[1]
        wide = LayerStub(layer.name, layer.kind, layer.relu, layer.b, (n, 2 * k) + layer.w.shape[2:], layer.geom)
        kc = layer_kernel_cycles(wide, ex.acc.config, 1, fmt_type="twohot", in_hw=(8, 8),
                                 weight_sparsity=0.0, input_density=ex.stats.input_density)
    finally:
        net.close()
    assert eng2[layer.name]["kernel_cycles"] == kc.cycles
