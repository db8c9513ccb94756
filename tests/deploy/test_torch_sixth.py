"""Issue 52's kinds written a sixth way (``torch_families/variant_sixth.py``): the rules its models needed.

* the dynamo exporter under a dynamic batch axis writes ``y.expand_as(x)`` with the target
  ``Concat(Shape(x, 0, 1), [C], [H], [W])`` (ECA-Net's gate) and the 1-D linear upsampling's blend
  with a symbolic batch: :mod:`hlsnn.deploy.rewrite.torchdecomp` now reasons on symbolic dimensions (the
  ``Expand`` dropped when its target broadcasts within the other operand, the gathers a ``Resize``);
* onnx's stock reference ``MaxPool`` of an (N, C, L) tensor at stride 1 with pads (InceptionTime's
  ``nn.MaxPool1d(3, stride=1, padding=1)``) fails with an IndexError: the float reference takes the
  (k, 1) 2-D pool;
* ``Split`` of a constant (dynamo's ``nn.MultiheadAttention`` with a query other than the key:
  ``in_proj_weight`` split in two) is folded;
* TorchScript's ``squeeze(d)`` of a dimension it cannot prove to be 1 is an ``If`` of a shape test:
  :mod:`hlsnn.deploy.rewrite.iffold` takes the branch when the test is the same at batch 1 and 2, and
  leaves (the importer refuses by name) one that depends on the batch.

References: onnxruntime on the same file.
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.importer.reference import reference_evaluator  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402
from netfixtures import onnxruntime_rows, save_net, torch_export  # noqa: E402


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("kw", [dict(kernel_shape=[3], strides=[1], pads=[1, 1]),
                                dict(kernel_shape=[3], strides=[2], pads=[1, 1]),
                                dict(kernel_shape=[2], strides=[2], pads=[0, 1], ceil_mode=1)])
def test_the_float_reference_of_a_1d_pool_equals_onnxruntime(op, kw):
    node = helper.make_node(op, ["x"], ["y"], **kw)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = np.random.default_rng(0).normal(size=(3, 4, 7)).astype(np.float32)
    y = reference_evaluator(m).run(None, {"x": x})[0]
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_expand_as_to_a_shape_with_a_symbolic_batch_is_the_mul_s_broadcast(tmp_path):
    """``x * sigmoid(s).expand_as(x)`` with the target ``Concat(Shape(x, 0, 1), [4], [3], [3])``."""
    nodes = [helper.make_node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
             helper.make_node("Sigmoid", ["m"], ["s"]),
             helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
             helper.make_node("Concat", ["b", "c", "hw", "hw"], ["t"], axis=0),
             helper.make_node("Expand", ["s", "t"], ["e"]),
             helper.make_node("Mul", ["x", "e"], ["y"])]
    inits = {"ax": np.array([2, 3], np.int64), "c": np.array([4], np.int64), "hw": np.array([3], np.int64)}
    path = save_net(tmp_path / "e.onnx", nodes, inits, "g", ["batch", 4, 3, 3], ["batch", 4, 3, 3], opset=18)
    net = load_onnx(path)
    assert "Expand" not in {la.attrs.get("fn", la.op) for la in net.layers}
    x = np.random.default_rng(1).normal(size=(5, 4, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-6)


def test_an_expand_beyond_the_other_operand_is_still_refused_by_name(tmp_path):
    """The target (batch, 4, 3, 6) is wider than x (batch, 4, 3, 3): not the Mul's broadcast."""
    nodes = [helper.make_node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
             helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
             helper.make_node("Concat", ["b", "c", "h", "w"], ["t"], axis=0),
             helper.make_node("Expand", ["m", "t"], ["e"]),
             helper.make_node("Mul", ["x", "e"], ["y"])]
    inits = {"ax": np.array([2, 3], np.int64), "c": np.array([4], np.int64), "h": np.array([3], np.int64),
             "w": np.array([6], np.int64)}
    path = save_net(tmp_path / "e.onnx", nodes, inits, "g", ["batch", 4, 3, 1], ["batch", 4, 3, 6], opset=18)
    with pytest.raises(UnsupportedModelError, match="Expand"):
        load_onnx(path)


def test_a_split_constant_is_folded_into_the_weights_it_feeds(tmp_path):
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Split", ["w", "sizes"], ["wa", "wb"], axis=0),
             helper.make_node("Transpose", ["wa"], ["wat"], perm=[1, 0]),
             helper.make_node("Transpose", ["wb"], ["wbt"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wat"], ["a"]),
             helper.make_node("MatMul", ["a", "wbt"], ["y"])]
    inits = {"w": rng.normal(size=(14, 6)).astype(np.float32), "sizes": np.array([6, 8], np.int64)}
    path = save_net(tmp_path / "s.onnx", nodes, inits, "g", ["batch", 6], ["batch", 6])
    net = load_onnx(path)
    assert [la.kind for la in net.layers] == ["dense", "dense"]
    x = rng.normal(size=(4, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-6)


def _if_model(path, on_batch):
    """y = Gemm(squeeze-if-1(t)): t = x transposed to (1, N, 8) (its axis 0 always 1), or, with
    ``on_batch``, x itself (N, 8) tested on its batch axis (1 only at batch 1)."""
    rng = np.random.default_rng(3)
    t = "x" if on_batch else "t"
    nodes = ([] if on_batch else [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2])]) + [
        helper.make_node("Shape", [t], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["d0"], axis=0),
        helper.make_node("Equal", ["d0", "one"], ["c"]),
        helper.make_node("If", ["c"], ["u"],
                         then_branch=helper.make_graph([helper.make_node("Squeeze", [t, "ax0"], ["sq"])], "then", [],
                                                       [helper.make_tensor_value_info("sq", TensorProto.FLOAT, ["batch", 8])]),
                         else_branch=helper.make_graph([helper.make_node("Identity", [t], ["id"])], "else", [],
                                                       [helper.make_tensor_value_info("id", TensorProto.FLOAT, [1, "batch", 8])])),
        helper.make_node("MatMul", ["u", "w"], ["y"])]
    inits = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "ax0": np.array([0], np.int64),
             "w": rng.normal(size=(8, 3)).astype(np.float32)}
    return save_net(path, nodes, inits, "g", ["batch", 8] if on_batch else ["batch", 1, 8], ["batch", 3])


def test_an_if_fixed_by_the_shapes_is_its_branch(tmp_path):
    path = _if_model(tmp_path / "i.onnx", on_batch=False)
    net = load_onnx(path)
    x = np.random.default_rng(4).normal(size=(5, 1, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-6)


def test_an_if_on_the_batch_size_is_refused_by_name(tmp_path):
    path = _if_model(tmp_path / "i.onnx", on_batch=True)
    with pytest.raises(UnsupportedModelError, match="control flow"):
        load_onnx(path)


# --- the patterns as torch writes them (dynamic batch axis, both exporters) ---------------------------

torch = pytest.importorskip("torch")


class _Eca(torch.nn.Module):
    """ECA-Net's gate: the pooled vector through a Conv1d across the channels, ``expand_as``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.conv0 = torch.nn.Conv2d(1, 6, 3, padding=1)
        self.conv = torch.nn.Conv1d(1, 1, 3, padding=1, bias=False)

    def forward(self, x):
        x = torch.relu(self.conv0(x))
        y = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        y = self.conv(y.squeeze(-1).transpose(-1, -2)).transpose(-1, -2).unsqueeze(-1)
        return x * torch.sigmoid(y).expand_as(x)


class _LinUp(torch.nn.Module):
    """A 1-D decoder's ``F.interpolate(scale_factor=2, mode='linear')`` after a conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.conv = torch.nn.Conv1d(2, 3, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.interpolate(torch.relu(self.conv(x)), scale_factor=2, mode="linear")


class _QueryPool(torch.nn.Module):
    """Attention pooled by one learned query (``nn.MultiheadAttention``, (T, N, E)), ``squeeze(0)``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(7)
        self.embed = torch.nn.Linear(4, 8)
        self.query = torch.nn.Parameter(torch.randn(1, 1, 8))
        self.mha = torch.nn.MultiheadAttention(8, 2)

    def forward(self, x):
        h = self.embed(x).transpose(0, 1)
        out, _ = self.mha(self.query.expand(-1, h.size(1), -1), h, h)
        return out.squeeze(0)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("name,module,shape", [("eca", _Eca, (1, 6, 6)), ("linup", _LinUp, (2, 8))])
def test_dynamic_batch_exports_import_and_equal_onnxruntime(tmp_path, how, name, module, shape):
    path = torch_export(module(), shape, tmp_path / f"{name}.onnx", how)
    net = load_onnx(path)
    assert not {"Expand", "GatherND", "fallback"} & {la.attrs.get("fn", la.op) for la in net.layers}
    x = np.random.default_rng(8).normal(size=(4,) + shape).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_attention_pooled_by_a_learned_query_imports_and_equals_onnxruntime(tmp_path, how):
    path = torch_export(_QueryPool(), (6, 4), tmp_path / "q.onnx", how)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert ("If" in ops) == (how == "ts17")          # TorchScript's squeeze(0) of an unproven axis
    net = load_onnx(path)
    x = np.random.default_rng(9).normal(size=(4, 6, 4)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("c_shape,x_shape", [((2, 4), (4, 5)), ((3, 2, 4), (3, 4, 5)), ((1, 3, 1, 4), (3, 4, 5))])
def test_a_constant_times_a_computed_tensor_is_a_dense_layer_and_equals_onnxruntime(tmp_path, c_shape, x_shape):
    """``C @ relu(x)`` (a learned query's scores): an engine GEMM of the transposed rows, one per
    head (per (M, K) matrix of C), moves around them, no host MatMul."""
    rng = np.random.default_rng(10)
    c = rng.normal(size=c_shape).astype(np.float32)
    out = tuple(np.broadcast_shapes(c_shape[:-2], x_shape[:-2])) + (c_shape[-2], x_shape[-1])
    out = out[1:] if len(out) > len(x_shape) else out
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["c", "r"], ["y"])]
    path = save_net(tmp_path / "c.onnx", nodes, {"c": c}, "g", ["batch", *x_shape], ["batch", *out])
    net = load_onnx(path)
    heads = int(np.prod(np.broadcast_shapes(c_shape[:-2], x_shape[:-2]))) if len(c_shape) > 2 else 1
    assert len([la for la in net.layers if la.kind != "host"]) == heads       # an engine GEMM per head
    assert "MatMulAct" not in {la.op for la in net.layers}
    x = rng.normal(size=(4, *x_shape)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-5)


def _chomp_model(path, stride=1, ends=-2):
    """relu(Slice(Conv1d(x, k=2, dilation 2, pads [2, 2], stride), 0:ends on axis 2))."""
    w = np.random.default_rng(11).normal(size=(3, 2, 2)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 2], dilations=[2], strides=[stride], kernel_shape=[2]),
             helper.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    inits = {"w": w, "st": np.array([0], np.int64), "en": np.array([ends], np.int64), "ax": np.array([2], np.int64),
             "sp": np.array([1], np.int64)}
    n_out = (8 + 4 - 2 - 1) // stride + 1 + ends
    return save_net(path, nodes, inits, "g", ["batch", 2, 8], ["batch", 3, n_out])


@pytest.mark.parametrize("stride,ends,folded", [(1, -2, True), (1, -1, True), (2, -1, False)])
def test_a_chomped_conv_is_the_conv_with_less_end_padding(tmp_path, stride, ends, folded):
    """Chomp1d (``x[:, :, :-c]`` after a ``Conv1d(padding=p)``): at stride 1 the conv's end pads
    less c, no move after it; at stride 2 the crop stays a per-sample move. Both equal onnxruntime."""
    path = _chomp_model(tmp_path / "c.onnx", stride, ends)
    net = load_onnx(path)
    convs = [la for la in net.layers if la.kind == "conv"]
    assert len(convs) == 1
    moves = [la for la in net.layers if la.kind == "host" and la.attrs.get("fn") == "Slice"]
    assert (not moves) == folded
    x = np.random.default_rng(12).normal(size=(4, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-6)


class _Wave(torch.nn.Module):
    """A WaveNet block: causal conv by padding + Chomp1d, chunk into tanh * sigmoid, AdaptiveAvgPool1d."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(13)
        self.conv = torch.nn.Conv1d(4, 8, 2, padding=2, dilation=2)
        self.pool = torch.nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        f, g = torch.chunk(self.conv(x)[:, :, :-2].contiguous(), 2, dim=1)
        return self.pool(torch.tanh(f) * torch.sigmoid(g)).squeeze(-1)


@pytest.mark.parametrize("how", ["ts17", pytest.param("dynamo", marks=pytest.mark.slow)])
def test_a_wavenet_block_has_no_move_and_a_global_pool(tmp_path, how):
    """The chomp folded, the chunk two convs (splitconv), AdaptiveAvgPool1d(1) a global average pool
    in both exports (dynamo: Unsqueeze, ReduceMean over [3, 2], Squeeze; before, under a dynamic
    batch, a per-sample SwCompute that no network kernel takes)."""
    path = torch_export(_Wave(), (4, 8), tmp_path / "w.onnx", how)
    net = load_onnx(path)
    fns = [la.attrs.get("fn", la.op) for la in net.layers if la.kind == "host"]
    assert "Slice" not in fns and "Split" not in fns and "ReduceMean" not in fns
    assert "GlobalAveragePool" in [la.op for la in net.layers]
    x = np.random.default_rng(14).normal(size=(4, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis,trans", [(1, 1), (-1, 0)])
def test_a_split_linear_is_one_gemm_per_part(tmp_path, axis, trans):
    """``a, b = linear(x).chunk(2, dim=-1)``; ``a * hardsigmoid(b)``: two dense layers, no move."""
    rng = np.random.default_rng(15)
    w = rng.normal(size=(8, 6) if trans else (6, 8)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=trans, alpha=0.5, beta=2.0),
             helper.make_node("Split", ["h", "sizes"], ["p", "q"], axis=axis),
             helper.make_node("HardSigmoid", ["q"], ["s"]),
             helper.make_node("Mul", ["p", "s"], ["y"])]
    inits = {"w": w, "b": rng.normal(size=8).astype(np.float32), "sizes": np.array([4, 4], np.int64)}
    path = save_net(tmp_path / "g.onnx", nodes, inits, "g", ["batch", 6], ["batch", 4])
    net = load_onnx(path)
    assert [la.kind for la in net.layers if la.kind != "host"] == ["dense", "dense"]
    assert not [la for la in net.layers if la.attrs.get("fn") == "Split"]
    x = rng.normal(size=(5, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-6)


class _FlatConv(torch.nn.Module):
    """Flat features into a Conv1d by ``x.unsqueeze(1)``, a Linear head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(16)
        self.conv = torch.nn.Conv1d(1, 4, 5, stride=2, padding=2)
        self.fc = torch.nn.Linear(4 * 32, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x.unsqueeze(1))).flatten(1))


@pytest.mark.slow
@pytest.mark.parametrize("fmt,accel", [("twohot", "shift8_pynq-z2"), ("fixed", "sparse8_pynq-z2")])
def test_flat_features_into_a_conv1d_run_in_the_network_mode(tmp_path, fmt, accel):
    """A conv that reads the flat input as one channel of 64 pixels runs in the network mode
    (rule input_view, :mod:`hlsnn.engines.network.inview`: the kernel's input takes the conv's view; the
    kernel's C-simulation: ``tests/deploy/test_network_sixth.py``), with the layer path's bits
    (before: refused by name, layer by layer; before that "op ... reads a map of shape (1, 1,
    64)", an internal error ending the format's run)."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.runner import Deployment
    path = torch_export(_FlatConv(), (64,), tmp_path / "f.onnx", "ts17")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: flat\nmodel: {path}\ndata: digits\nlayout: flat\n"
                   f"formats:\n  f: {{type: {fmt}, accel: {accel}}}\nassignments:\n  f: {{default: f}}\n")
    cfg = load_deploy_config(cfg)
    accs = open_accelerators(cfg, "emu")
    ds = datasets.load("digits", layout="flat")
    net = load_onnx(path)
    outs = []
    try:
        for fast in (False, True):
            dep = Deployment(net, cfg.assignments["f"], cfg.formats, accs, rounding=cfg.rounding)
            dep.fast = fast
            dep.calibrate(ds.x_train[:32])
            outs.append(dep.run(ds.x_test[:16]))
            if fast:
                assert dep.fast_network() is not None
    finally:
        for a in accs.values():
            a.close()
    np.testing.assert_array_equal(outs[1], outs[0])


@pytest.mark.parametrize("perm,folded", [([0, 2, 1, 3], True), ([0, 1, 3, 2], False)])
def test_a_channel_shuffle_before_a_grouped_conv_is_in_its_weights(tmp_path, perm, folded):
    """ShuffleNet's ``view(b, g, c // g, l).transpose(1, 2).view(b, c, l)`` read by a grouped conv:
    the conv reads x with its input channels permuted (no move); a chain that mixes channels with
    the length (a transpose of the last two axes) is left as per-sample moves. Both equal onnxruntime."""
    rng = np.random.default_rng(17)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s4"], ["a"]),
             helper.make_node("Transpose", ["a"], ["t"], perm=perm),
             helper.make_node("Reshape", ["t", "s3"], ["u"]),
             helper.make_node("Conv", ["u", "w", "b"], ["c"], group=2, kernel_shape=[3], pads=[1, 1]),
             helper.make_node("Add", ["c", "r"], ["y"])]
    inits = {"s4": np.array([-1, 2, 2, 6], np.int64), "s3": np.array([-1, 4, 6], np.int64),
             "w": rng.normal(size=(4, 2, 3)).astype(np.float32), "b": rng.normal(size=4).astype(np.float32)}
    path = save_net(tmp_path / "s.onnx", nodes, inits, "g", ["batch", 4, 6], ["batch", 4, 6])
    net = load_onnx(path)
    moves = [la for la in net.layers if la.kind == "host" and la.attrs.get("fn") == "Transpose"]
    assert (not moves) == folded
    x = rng.normal(size=(5, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["ts17", pytest.param("dynamo", marks=pytest.mark.slow)])
def test_eca_s_conv_across_the_channels_is_a_1x1_conv_of_the_pool(tmp_path, how):
    """ECA's ``conv(y.squeeze(-1).transpose(-1, -2)).transpose(-1, -2).unsqueeze(-1)``: one 1x1 conv
    of the pooled (N, C, 1, 1) tensor with the banded weight (no per-sample move), equal to onnxruntime."""
    path = torch_export(_Eca(), (1, 6, 6), tmp_path / "e.onnx", how)
    net = load_onnx(path)
    assert not [la for la in net.layers if la.attrs.get("fn") in ("Transpose", "Squeeze", "Unsqueeze")]
    eca = [la for la in net.layers if la.kind == "conv" and la.w.shape == (6, 6, 1, 1)]
    assert len(eca) == 1 and np.count_nonzero(np.triu(eca[0].w[:, :, 0, 0], 2)) == 0   # banded: k = 3
    x = np.random.default_rng(18).normal(size=(4, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(path, x), rtol=1e-4, atol=1e-5)
