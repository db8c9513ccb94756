"""Dilation in the network mode (issue 52, hlsnn.deploy.lower.dilate): a dilated convolution is the
ordinary one with its kernel's holes filled with zero weights (extent d*(k-1)+1, padding
unchanged), so the TC-ResNet of tests/data/torch/beyond (a dilated Conv1d in its residual
block) runs in one network-kernel start in two-hot (shift_mac) and fixed8 (sparse_cluster).
bfp_systolic's patch exponent is shared over the layer's taps alone, so its network mode reads
the taps dh, dw apart instead (tests/deploy/test_network_bfp_dilation.py); tcresnet runs in one
start in bfp8 too.

References: a dilated convolution written as loops from its definition, and the
layer-by-layer compiled network on the emulator (convgeom's im2col with the dilation)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.engines.convgeom import spread  # noqa: E402
from hlsnn.deploy.lower.dilate import dilate  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _config, _data  # noqa: E402

TCRESNETS = ["tcresnet_dynamo", "tcresnet_ts17"]


def _conv_loops(x, w, dh, dw, pads):
    """A (dilated) convolution, stride 1, from its definition: y[z, oy, ox] = sum over c, i, j of
    x_padded[c, oy + i*dh, ox + j*dw] * w[z, c, i, j]."""
    t, l, b, r = pads
    xp = np.pad(x, ((0, 0), (t, b), (l, r)))
    z, c, kh, kw = w.shape
    oh, ow = xp.shape[1] - dh * (kh - 1), xp.shape[2] - dw * (kw - 1)
    y = np.zeros((z, oh, ow), np.int64)
    for zz in range(z):
        for oy in range(oh):
            for ox in range(ow):
                y[zz, oy, ox] = sum(int(xp[cc, oy + i * dh, ox + j * dw]) * int(w[zz, cc, i, j])
                                    for cc in range(c) for i in range(kh) for j in range(kw))
    return y


@pytest.mark.parametrize("dh,dw", [(2, 1), (1, 3), (3, 2)])
def test_the_zero_filled_kernel_convolves_as_the_dilated_one(dh, dw):
    rng = np.random.default_rng(dh * 10 + dw)
    x = rng.integers(-128, 128, (3, 11, 12))
    w = rng.integers(-128, 128, (2, 3, 3, 2))
    fields = {"zero": (w == 0).astype(np.int64), "ea": rng.integers(0, 7, w.shape)}
    big, extra = dilate(w, {"mode": "twohot", "fields": fields}, dh, dw)
    assert big.shape == (2, 3, dh * 2 + 1, dw + 1)
    np.testing.assert_array_equal(_conv_loops(x, big, 1, 1, (1, 2, 1, 2)), _conv_loops(x, w, dh, dw, (1, 2, 1, 2)))
    # the holes are zero codes in the shift-add fields too; the taps keep theirs
    hole = np.ones(big.shape[2:], bool)
    hole[::dh, ::dw] = False
    assert (extra["fields"]["zero"][..., hole] == 1).all() and (extra["fields"]["ea"][..., hole] == 0).all()
    np.testing.assert_array_equal(extra["fields"]["ea"][..., ::dh, ::dw], fields["ea"])
    assert dilate(w, {}, 1, 1)[0] is w
    np.testing.assert_array_equal(spread(np.ones((1, 2)), 1, 2), [[1, 0, 1]])


@pytest.fixture(scope="module")
def tcresnets(tmp_path_factory):
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("tcresnet")
    out = {}
    for name in TCRESNETS:
        cfg = _config(tmp, name)
        for fmt in ("bfp8", "twohot", "fixed8"):
            out[name, fmt] = tmp / f"{name}-{fmt}.hlsnn"
            compile_model(cfg, fmt, out[name, fmt])
        # bfp8 on the PYNQ-Z2's array: the grouped conv's packs as the cycle model chooses them (1 GEMM since Steps II 1)
        z2 = tmp / f"{name}-z2.yaml"
        z2.write_text(cfg.read_text().replace("bfp8_zcu104", "bfp8_pynq-z2"))
        out[name, "bfp8_z2"] = tmp / f"{name}-bfp8_z2.hlsnn"
        compile_model(z2, "bfp8", out[name, "bfp8_z2"])
    return out


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
@pytest.mark.parametrize("name", TCRESNETS)
def test_tcresnet_runs_in_the_network_mode_with_the_layer_paths_bits(tcresnets, name, fmt):
    """Before: one engine start per conv/dense layer (the network mode had no dilation); now
    one network program, the dilated conv as a 5 x 1 kernel with zeros at its holes."""
    x = _data(name).x_test[:48]
    layers = hlsnn.load(tcresnets[name, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want = layers(x)
    starts = _kernel_calls(layers) - before
    assert starts >= sum(1 for j in layers.program["layers"] if j["kind"] != "host") >= 6     # a group may take its own
    net = hlsnn.load(tcresnets[name, fmt], "emu", network=True)
    dilated = [j for j in net.program["layers"] if j["kind"] == "conv" and j["geom"]["dilations"] != [1, 1]]
    assert [j["geom"]["dilations"] for j in dilated] == [[2, 1]]
    op = [o for o in net.network.ops if o.name == dilated[0]["name"]][0]
    assert (op.f["kh"], op.f["kw"]) == (5, 1) and not op.f["codes"][:, :, 1::2].any()
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before            # no engine call: the whole network in the network mode


# packs: the cycle model's choice (hlsnn.measure.layers.group_pack). On bfp8_pynq-z2 it was 2 GEMMs of 12
# channels while bfp Steps ran at II 7; at II 1 one GEMM over the 24 channels is the faster there too.
# Several packs in the network mode: tests/deploy/test_network_bfp_dilation.py (4 packs).
@pytest.mark.parametrize("fmt,packs", [("bfp8", 1), ("bfp8_z2", 1)])
@pytest.mark.parametrize("name", TCRESNETS)
def test_tcresnet_runs_in_the_bfp_network_mode_with_the_layer_paths_bits(tcresnets, name, fmt, packs):
    """Before: refused by name (the zero-filled kernel's patch exponent is not the layer
    path's; and the grouped Conv1d), 6 or 7 engine starts a batch. Now one network program: the
    dilated conv's patch its 3 taps 2 apart (hlsnn.engines.bfp_systolic.network.lower rule 3),
    the grouped one (4 groups) as the layer path's GEMMs: one over its 24 channels on both configs
    (the packs the cycle model chooses; the bits of a pack are its own patch exponents)."""
    x = _data(name).x_test[:48]
    layers = hlsnn.load(tcresnets[name, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want = layers(x)
    assert _kernel_calls(layers) - before >= 6
    grouped, = [j for j in layers.program["layers"] if j["kind"] == "conv" and j["geom"]["group"] != 1]
    assert (grouped["geom"]["group"], grouped["groups"]) == (4, packs)
    net = hlsnn.load(tcresnets[name, fmt], "emu", network=True)
    dil = [op.f for op in net.network.ops if op.kind == "conv" and op.f["dh"] != 1]
    assert [(f["kh"], f["kw"], f["dh"], f["chunks"][0]["wm"].shape[2:]) for f in dil] == [(5, 1, 2, (3, 1))]
    g, = [op.f for op in net.network.ops if op.kind == "conv" and op.name == grouped["name"]]
    assert g["packs"] == packs and [ch["wm"].shape[:2] for ch in g["chunks"]] == [(24 // packs, 24 // packs)] * packs
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before            # no engine call: the whole network in the network mode


def small_dilated_model(path, seed=5):
    """A 3x3 conv dilated (2, 2) with ReLU, then a 3x3 conv dilated (1, 2), on 1 x 8 x 8 images."""
    import onnx
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.3, (3, 4, 3, 3)).astype(np.float32), "w2"),
            numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[2, 2, 2, 2], dilations=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 2, 1, 2], dilations=[1, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 3, 8, 8])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


SMALL_FORMATS = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


@pytest.mark.slow      # test_tcresnet_runs_in_the_network_mode... covers the same lowering on emu
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(SMALL_FORMATS))
def test_dilated_convs_are_bit_exact_on_csim_in_one_start(tmp_path, fmt):
    """The network kernels (C-simulation; shift_mac, sparse_cluster) on the zero-filled kernels:
    the layer path's bits, one start per batch."""
    from hlsnn.deploy import datasets
    from netfixtures import compile_onnx
    out = compile_onnx(tmp_path, "dil", small_dilated_model(tmp_path / "dil.onnx"), fmt, formats=SMALL_FORMATS)
    x = datasets.load("digits", layout="nchw").x_test[:8]
    board = hlsnn.load(out, "csim", network=True)
    assert board.network.engine == {"twohot": "shift_mac"}.get(fmt, "sparse_cluster")
    assert [(op.f["kh"], op.f["kw"]) for op in board.network.ops if op.kind == "conv"] == [(5, 5), (3, 5)]
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8", "bfp8_z2"])
def test_tcresnet_is_bit_exact_on_csim_in_one_start(tcresnets, fmt):
    """The whole TC-ResNet in one start of the network kernel's C-simulation, the layer path's bits."""
    x = _data("tcresnet_ts17").x_test[:8]
    board = hlsnn.load(tcresnets["tcresnet_ts17", fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(tcresnets["tcresnet_ts17", fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    if fmt.startswith("bfp8"):         # its loops' counts are the perf model's, and the simulated board's bits
        from hlsnn.engines.bfp_systolic.network import perf as bfpperf
        k = board._kernel
        assert {n: it for n, (it, _) in k.counters.items()} == {
            n: 8 * v for n, v in bfpperf.iterations(board.network, k.tables).items()}
        with hlsnn.load(tcresnets["tcresnet_ts17", fmt], "sim", network=True) as sim:
            np.testing.assert_array_equal(sim(x), board(x))
            assert sim.last_kernel_starts == 1
