"""Dilation and groups in the BFP network mode (issue 52): a dilated conv's patch is its taps
alone (dh, dw apart, nothing between them: the layer path's im2col), so its shared exponent is
the layer path's; a grouped conv runs as the layer path's GEMMs, one per pack of groups, each
with its own patch exponents (one pack: a dense conv with block-diagonal weights). The network
mode (emu) and the bfp network kernel (C-simulation, the simulated board) give the layer path's
bits in one start.

References: the layer-by-layer compiled network on the emulator (BfpExec: im2col with the
dilation, per pack of groups), and the pixels under a dilated window's holes, which a
zero-filled kernel's patch would take in."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.engines.bfp_systolic.network import lower as netbfp  # noqa: E402

FORMAT = "{type: bfp, accel: bfp8_pynq-z2}"


def grouped_dilated_model(path, seed=7):
    """On 1 x 8 x 8 images: a 3x3 conv dilated (2, 2) to 24 channels with ReLU, a grouped 3x3
    conv (4 groups of 6 channels) dilated (1, 2) with ReLU, and a dense 1x1 conv to 3."""
    import onnx
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.5, (24, 1, 3, 3)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 24).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.4, (24, 6, 3, 3)).astype(np.float32), "w2"),
            numpy_helper.from_array(rng.normal(0, 0.1, 24).astype(np.float32), "b2"),
            numpy_helper.from_array(rng.normal(0, 0.3, (3, 24, 1, 1)).astype(np.float32), "w3"),
            numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), "b3")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[2, 2, 2, 2], dilations=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 2, 1, 2], dilations=[1, 2], group=4),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3", "b3"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 3, 8, 8])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("bfpdil")
    m = grouped_dilated_model(tmp / "gd.onnx")
    cfg = tmp / "gd.yaml"
    cfg.write_text(f"name: gd\nmodel: {m}\ndata: digits\nlayout: nchw\nformats:\n  bfp8: {FORMAT}\n"
                   "assignments:\n  bfp8: {default: bfp8}\n")
    out = tmp / "gd-bfp8.hlsnn"
    compile_model(cfg, "bfp8", out)
    return out


def _digits(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


def test_grouped_and_dilated_convs_run_in_the_network_mode_with_the_layer_paths_bits(small):
    x = _digits(64)
    layers = hlsnn.load(small, "emu", network=False)
    want = layers(x)
    geoms = [j["geom"] for j in layers.program["layers"] if j["kind"] == "conv"]
    assert [(g["dilations"], g["group"]) for g in geoms] == [([2, 2], 1), ([1, 2], 4), ([1, 1], 1)]
    net = hlsnn.load(small, "emu", network=True)
    convs = [op.f for op in net.network.ops if op.kind == "conv"]
    # the window's extent and the taps' spacing; the grouped conv as the layer path's GEMMs: here
    # one per group (gp = 1, the cycle model's choice on this array), 6 channels to 6 outputs each
    assert [(f["kh"], f["kw"], f["dh"], f["dw"]) for f in convs] == [(5, 5, 2, 2), (3, 5, 1, 2), (1, 1, 1, 1)]
    grouped, = [j for j in layers.program["layers"] if j["kind"] == "conv" and j["geom"]["group"] == 4]
    assert (grouped["gp"], grouped["groups"]) == (1, 4) and convs[1]["packs"] == 4
    assert [ch["wm"].shape for ch in convs[1]["chunks"]] == [(6, 6, 3, 3)] * 4
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


def test_a_dilated_patch_exponent_leaves_out_the_pixels_under_its_holes():
    """The pixel under a hole is the largest of its window: the zero-filled window's exponent
    would be its, the taps' exponent is smaller, and the network mode takes the taps'."""
    f = dict(c=1, h=1, w=3, z=1, oh=1, ow=1, kh=1, kw=3, sh=1, sw=1, dh=1, dw=2, pads=(0, 0, 0, 0), relu=False,
             chunks=[dict(rows=(0, 1), wm=np.array([[[[1, 1]]]]), we=np.array([0]), bm=np.array([0]), be=0)])
    p = dict(mantissa_bits=8, exponent_bits=8, rounding="nearest_even", acc_bits=32, output_exponent="max")
    m = np.array([[[[3, 100, 5]]]])                 # 3 and 5 (x 2**-10) at the taps, 100 under the hole
    e = np.array([[[[-10, 0, -10]]]])
    assert netbfp.taps(f) == (1, 2)
    ym, ye = netbfp.conv_pairs((m, e), f, p)        # msb(5) - 10 - (M - 2): both taps exact at 2**-14
    assert int(ym[0, 0, 0, 0]) * 2.0 ** int(ye[0, 0, 0, 0]) == 8 * 2.0 ** -10
    # the zero-filled kernel's window takes in the 100: exponent 6 - 6 = 0, and 3, 5 round to 0
    zf = dict(f, dw=1, chunks=[dict(f["chunks"][0], wm=np.array([[[[1, 0, 1]]]]))])
    ym, _ = netbfp.conv_pairs((m, e), zf, p)
    assert int(ym[0, 0, 0, 0]) == 0


@pytest.mark.csim
@pytest.mark.strict_csim           # the bfp kernel runs on the strict library (its ports and distances checked)
def test_grouped_and_dilated_convs_are_bit_exact_on_csim_and_the_board_in_one_start(small):
    """The bfp network kernel (C-simulation) reads the dilated taps at their offsets (its tap
    table for the exponent pass, steps of dw and dh for the multiply pass): the layer path's
    bits, one start per batch; its loop counters are the perf model's iterations."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    x = _digits(8)
    board = hlsnn.load(small, "csim", network=True)
    assert board.network.engine == "bfp_systolic"
    np.testing.assert_array_equal(board(x), hlsnn.load(small, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in bfpperf.iterations(board.network, k.tables).items()}
    # the multiply pass walks the taps alone: 9 per channel block, not the 25 of a 5 x 5 window;
    # a row per pack of groups, each over the channel blocks its 6 channels span (the third pack:
    # channels 12..17, banks 12..15 of block 0 and 0..1 of block 1), its outputs from lane zfirst
    # of its first block of 8 (the third: outputs 12..17, lanes 4..7 of block 1 and 0..1 of 2);
    # the last conv a 1 x 1 over 24 channels: 2 blocks of 16
    rows = [dict(zip(r["names"], r["vals"])) for r in k.tables["rows"] if r["vals"][0] == 0]
    assert [r["steps"] for r in rows] == [9, 9, 9, 18, 9, 2]
    assert [(r["zfirst"], r["zb"], r["cg"]) for r in rows[1:5]] == [(0, 1, 6), (6, 2, 12), (4, 2, 18), (2, 1, 8)]
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    with hlsnn.load(small, "sim", network=True) as sim:             # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1


def test_every_loop_of_the_kernel_stays_at_ii_1(small):
    """The walk's steps of dw and dh, the bank window [kTapC0, kTapC) and the lane window
    (zfirst) add no loop-carried path: perf.schedule derives II 1 for every loop of the rendered
    kernel (ConvExp, ConvMac among them)."""
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    from hlsnn.deploy.lower import program as netmode
    prog, arrays = artifact.read(small)
    net = netmode.lower(prog, arrays)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert {"ConvExp", "ConvMac"} <= {r["loop"] for r in rows}
    assert all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]


@pytest.mark.slow      # two tiny models compiled; the packs' lowering is covered by the small model above
# packs: the cycle model's choice (hlsnn.measure.layers.group_pack); MobileNet's last depthwise conv
# went from 4 packs to 2 when bfp Steps came to II 1 (fewer, larger GEMMs pay off once a step costs 1 cycle)
@pytest.mark.parametrize("name,packs", [("dscnn_ts17", [2, 2, 2]), ("mobilenet_relu_ts17", [1, 2, 4, 2])])
def test_depthwise_models_run_in_the_bfp_network_mode_with_the_layer_paths_bits(tmp_path, name, packs):
    """The tiny DS-CNN and MobileNet (depthwise 3x3 convs) in bfp8 on bfp8_pynq-z2, whose layer
    path runs each depthwise conv as GEMMs of packs of 8 groups: one network program (before:
    refused, one engine start per layer), the layer path's bits."""
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    from conftest import ROOT
    tiny = ROOT / "tests" / "data" / "torch" / "tiny"
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text((tiny / f"{name}.yaml").read_text().replace("bfp8_zcu104", "bfp8_pynq-z2")
                   .replace(f"model: {name}.onnx", f"model: {tiny / (name + '.onnx')}"))
    out = tmp_path / f"{name}.hlsnn"
    compile_model(cfg, "bfp8", out, calibration_samples=16, check_samples=0)
    x = datasets.load("digits32", layout="nchw").x_test[:16]
    layers = hlsnn.load(out, "emu", network=False)
    want = layers(x)
    net = hlsnn.load(out, "emu", network=True)
    assert [op.f["packs"] for op in net.network.ops if op.kind == "conv" and op.f["packs"] > 1] == \
        [p for p in packs if p > 1]
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


def test_each_pack_of_groups_has_its_own_patch_exponents():
    """Two packs of one channel each, 1x1 taps: pack 0 reads 3 (x 2**-10), pack 1 reads 100. One
    patch over both (a single GEMM) would take 100's exponent and round the 3 away; each pack's
    own patch keeps it; pack 0 of image 1 is all zero (its output the bias, 0), pack 1 its 100."""
    one = dict(rows=(0, 1), wm=np.array([[[[1]]]]), we=np.array([0]), bm=np.array([0]), be=0)
    f = dict(c=2, h=1, w=1, z=2, oh=1, ow=1, kh=1, kw=1, sh=1, sw=1, dh=1, dw=1, pads=(0, 0, 0, 0), relu=False,
             packs=2, chunks=[one, dict(one, rows=(1, 2))])
    p = dict(mantissa_bits=8, exponent_bits=8, rounding="nearest_even", acc_bits=32, output_exponent="max")
    m = np.array([[[[3]], [[100]]], [[[0]], [[100]]]])
    e = np.array([[[[-10]], [[0]]], [[[0]], [[0]]]])
    ym, ye = netbfp.conv_pairs((m, e), f, p)
    assert ym[0, 0, 0, 0] * 2.0 ** ye[0, 0, 0, 0] == 3 * 2.0 ** -10            # its own exponent: 1 - 10 - 6
    assert ym[0, 1, 0, 0] * 2.0 ** ye[0, 1, 0, 0] == 100.0
    assert ym[1, 0, 0, 0] == 0 and ym[1, 1, 0, 0] * 2.0 ** ye[1, 1, 0, 0] == 100.0
    assert netbfp.pack(f, 1)["chunks"][0]["rows"] == (0, 1) and netbfp.pack(f, 1)["c"] == 1
    # one patch over both channels: the 3 rounds away at 100's exponent
    whole = dict(f, packs=1, z=1, chunks=[dict(one, wm=np.array([[[[1]], [[0]]]]))])
    assert netbfp.conv_pairs((m[:1], e[:1]), whole, p)[0][0, 0, 0, 0] == 0
