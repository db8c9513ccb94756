"""A pixel shuffle (``DepthToSpace``) of a conv's output inside a network, as a 0/1 ConvTranspose
(issue 52, :mod:`hlsnn.deploy.rewrite.pixelshuffle`): d_unet_shuffle's ``relu(PixelShuffle(conv(..)))``
before a skip ``Concat`` ran layer by layer ("layer /up/DepthToSpace (DepthToSpace): no integer
rule for this host op here").

References: ONNX's definition of ``DepthToSpace`` (the reshape / transpose / reshape of the
operator's documentation, in numpy) and onnxruntime on the original graph; the layer-by-layer
emulator for the bits of the network mode and of the C-simulated kernel."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.rewrite import pixelshuffle  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat, compiled_per_format,  # noqa: E402
                         save_net, weight_drawer)


def _onnx_d2s(x, r, mode):
    """ONNX's ``DepthToSpace`` as its operator documentation writes it (numpy)."""
    n, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(n, r, r, c // r ** 2, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // r ** 2, r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // r ** 2, h * r, w * r)


@pytest.mark.parametrize("mode", ["CRD", "DCR"])
@pytest.mark.parametrize("r", [2, 3])
def test_the_weight_is_onnxs_depth_to_space(r, mode):
    """The 0/1 ConvTranspose (kernel = stride = r, written out as numpy sums) moves each value where
    ONNX's ``DepthToSpace`` does."""
    x = np.random.default_rng(r).normal(size=(2, 4 * r * r, 3, 5))
    w = pixelshuffle.weight(x.shape[1], r, mode)
    y = np.einsum("nkhw,kcij->nchiwj", x, w).reshape(2, 4, 3 * r, 5 * r)
    np.testing.assert_array_equal(y, _onnx_d2s(x, r, mode))
    assert sorted(np.unique(w)) == [0.0, 1.0] and (w.sum(axis=(1, 2, 3)) == 1).all()


def _net(path, out_is_shuffle=False):
    """x (1, 8, 8) -> conv 3x3 (4) Relu -> a; conv 3x3 stride 2 (16) of a -> m (16, 4, 4);
    DepthToSpace 2 (CRD) -> (4, 8, 8); Relu; Concat [a, .] (8, 8, 8); conv 1x1 (4) Relu; Flatten;
    Gemm (10). ``out_is_shuffle``: the graph's output is the shuffle itself."""
    from onnx import helper
    inits, w = weight_drawer(71)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (4, 1, 3, 3), 0.6), w("c1_b", 4, 0.1)], ["c1"],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["a"]),
             helper.make_node("Conv", ["a", w("c2_w", (16, 4, 3, 3), 0.3), w("c2_b", 16, 0.1)], ["m"],
                              pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("DepthToSpace", ["m"], ["d" if not out_is_shuffle else "y"], blocksize=2, mode="CRD")]
    if out_is_shuffle:
        return save_net(path, nodes, inits, "shuffle_out", ("N", 1, 8, 8), ("N", 4, 8, 8))
    nodes += [helper.make_node("Relu", ["d"], ["u"]),
              helper.make_node("Concat", ["a", "u"], ["cat"], axis=1),
              helper.make_node("Conv", ["cat", w("c3_w", (4, 8, 1, 1), 0.5), w("c3_b", 4, 0.1)], ["c3"]),
              helper.make_node("Relu", ["c3"], ["r3"]),
              helper.make_node("Flatten", ["r3"], ["f"]),
              helper.make_node("Gemm", ["f", w("d_w", (256, 10), 0.1)], ["y"])]
    return save_net(path, nodes, inits, "shuffle_cat", ("N", 1, 8, 8))


def test_the_rewritten_graph_is_the_original_on_onnxruntime(tmp_path):
    """onnxruntime gives the rewritten graph the original's outputs (the products are ``x * 1``);
    a shuffle that is the graph's output is left as it is."""
    import onnx
    ort = pytest.importorskip("onnxruntime")
    m = onnx.load(str(_net(tmp_path / "a.onnx")))
    new = pixelshuffle.rewrite(m)
    assert [n.op_type for n in new.graph.node].count("ConvTranspose") == 1
    assert "DepthToSpace" not in [n.op_type for n in new.graph.node]
    x = np.random.default_rng(3).normal(size=(5, 1, 8, 8)).astype(np.float32)
    got, want = (ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
                 for g in (new, m))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    end = onnx.load(str(_net(tmp_path / "b.onnx", out_is_shuffle=True)))
    assert pixelshuffle.rewrite(end) is end


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "shuffle_cat", lambda path, fmt: _net(path)))


def _x(n):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="nchw").x_test[:n]


@pytest.mark.slow          # the quick suite covers the rewrite (above) and the transposed conv's lowering elsewhere
@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_the_shuffle_net_runs_in_the_emu_network_mode_with_the_layer_paths_bits(net, fmt):
    """No host op is left between the convs; the network mode gives the layer path's bits."""
    prog = artifact.read(str(net[fmt]))[0]
    assert not any(j.get("op") == "DepthToSpace" for j in prog["layers"])
    check_emu_network_run(net[fmt], fmt, _x(96))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_one_kernel_start_on_csim_and_the_simulated_board(net, fmt):
    check_kernel_run(net[fmt], fmt, _x(6), board=True)
