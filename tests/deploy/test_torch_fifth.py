"""Issue 52's kinds written a fifth way (``torch_families/variant_fifth.py``), on files torch writes in the
test (tiny untrained modules, seeded; TorchScript at opset 17 and the dynamo exporter, both with a
dynamic batch axis as deployment tutorials export):

* nanoGPT's causal attention (``att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``
  before the softmax): ``Where(mask, -inf, scores)`` with a constant mask, a ``SwCompute`` host op
  (:mod:`hlsnn.deploy.run.maskfill`); a ``Where`` whose ``-inf`` would reach anything but a
  ``Softmax``, is refused by name;
* an SE's squeeze written as two means, ``x.mean(-1).mean(-1)`` (or ``mean(3).mean(2)``, or with
  ``keepdim=True``): one mean over (H, W), a global average pool (:mod:`hlsnn.deploy.rewrite.meanfold`),
  so that bfp8's network kernel takes it in one start;
* ``torch.clamp(x, min=a)`` / ``clamp(max=b)`` (dynamo: ``Max`` / ``Min`` by one number) as the host
  ``Clip``, statistics pooling ``torch.cat([x.mean(-1), x.std(-1)], 1)`` and ``x - x.mean(...)``
  (``Sub`` of two tensors), ``x - c`` (:mod:`hlsnn.deploy.run.hostarith`); ``Max`` of two tensors, ``Min``
  by a vector refused by name (``c - x`` too until session 32: now ``-1 * x + c``); a comparison with one number (host ``Compare``) as a
  ``Where``'s computed condition (a leaky ReLU by ``torch.where``);
* ``F.scaled_dot_product_attention(..., is_causal=True)`` or with a boolean ``attn_mask``: TorchScript
  adds a constant ``-inf`` mask (``AddInf``, read by a ``Softmax`` only), dynamo guards a fully
  masked row with ``Where(IsNaN(p), 0, p)`` (``IsNaN`` a host ``Compare``);
* inputs standardized in the model with buffers, ``(x - self.mean) / self.std``: ``AddConst`` and
  ``Scale`` on the float input, one network start.

References: onnxruntime on the same file and numpy.
"""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment, float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402
from netfixtures import torch_export  # noqa: E402


def _onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1].astype(np.float32)})[0] for i in range(len(x))])


class _Causal(torch.nn.Module):
    """nanoGPT's CausalSelfAttention (fused c_attn split in three, heads by view + transpose, the
    mask from a tril buffer), on (N, T=8, F=8) tokens, the last token's features out."""

    def __init__(self, e=8, h=2, t=8):
        super().__init__()
        torch.manual_seed(2)
        self.c_attn, self.c_proj, self.h, self.e = torch.nn.Linear(e, 3 * e), torch.nn.Linear(e, e), h, e
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.e, dim=2)
        q, k, v = (z.view(B, T, self.h, C // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))[:, -1]


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_a_causal_mask_is_a_masked_fill_and_equals_onnxruntime(tmp_path, how):
    path = torch_export(_Causal(), (8, 8), tmp_path / "m.onnx", how)
    assert "Where" in {n.op_type for n in onnx.load(str(path)).graph.node}
    net = load_onnx(path)
    where = [la for la in net.layers if la.kind == "host" and la.attrs.get("fn") == "Where"]
    assert len(where) == 1 and where[0].op == "SwCompute"
    # the mask is torch's: the upper triangle (future tokens) takes the fill
    cond = np.broadcast_to(where[0].attrs["cond"], (1, 2, 8, 8))
    assert all(np.array_equal(c, np.triu(np.ones((8, 8)), 1) == 1) for c in cond[0])
    x = np.random.default_rng(0).normal(size=(6, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-4, atol=1e-5)


def _deployment(tmp_path, path, fmt, accel):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: causal\nmodel: {path}\ndata: digits\nlayout: ntf\n"
                   f"formats:\n  f: {{type: {fmt}, accel: {accel}}}\nassignments:\n  f: {{default: f}}\n")
    cfg = load_deploy_config(cfg)
    accs = open_accelerators(cfg, "emu")
    return Deployment(load_onnx(cfg.model), cfg.assignments["f"], cfg.formats, accs, rounding=cfg.rounding), accs


@pytest.mark.parametrize("fmt,accel", [("bfp", "bfp8_zcu104"), ("twohot", "shift8_pynq-z2"),
                                       ("fixed", "sparse8_pynq-z2")])
def test_a_causal_mask_deploys_compiles_and_runs_as_deployed(tmp_path, fmt, accel):
    """Every format: the deployment is near onnxruntime (8-bit operands: within 10 %); ``hlsnn
    compile`` keeps the mask (a compiled model holds finite numbers only: the -inf is a boolean
    mask in its attributes) and the compiled model gives the deployment's bits."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    path = torch_export(_Causal(), (8, 8), tmp_path / "m.onnx", "ts17")
    dep, accs = _deployment(tmp_path, path, fmt, accel)
    ds = datasets.load("digits", layout="ntf")
    try:
        dep.calibrate(ds.x_train[:128])
        x = ds.x_test[:16]
        y, ref = dep.run(x), _onnxruntime(path, x)
    finally:
        for a in accs.values():
            a.close()
    assert y.shape == ref.shape and np.all(np.isfinite(y))
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.1
    compile_model(tmp_path / "c.yaml", "f", tmp_path / "m.hlsnn")
    np.testing.assert_array_equal(hlsnn.load(tmp_path / "m.hlsnn", "emu")(x), y)


def _where_graph(path, cond_const=True, reader="Softmax", fill=-np.inf):
    """y = reader(Where(mask, fill, x W)) on (1, 4, 4)."""
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), "w"),
            numpy_helper.from_array(np.array(fill, np.float32), "fill")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["s"])]
    if cond_const:
        init.append(numpy_helper.from_array(np.triu(np.ones((4, 4), bool), 1), "m"))
    else:
        nodes.append(helper.make_node("Greater", ["s", "fill"], ["m"]))
    nodes += [helper.make_node("Where", ["m", "fill", "s"], ["f"], name="mask"),
              helper.make_node(reader, ["f"], ["y"], **({"axis": -1} if reader == "Softmax" else {}))]
    g = helper.make_graph(nodes, "w", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 4])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_finite_masked_fill_equals_numpy_whatever_reads_it(tmp_path):
    path = _where_graph(tmp_path / "w.onnx", reader="Relu", fill=-2.5)
    x = np.random.default_rng(1).normal(size=(5, 4, 4))
    w = numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0]).astype(np.float64)
    ref = np.maximum(np.where(np.triu(np.ones((4, 4), bool), 1), -2.5, x @ w), 0)
    np.testing.assert_allclose(float_forward(load_onnx(path), x), ref, rtol=1e-6, atol=1e-6)


def test_an_infinite_fill_read_by_anything_but_a_softmax_is_refused_by_name(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"mask \(Where\): .*-Inf values, which only a Softmax may "
                                                    r"read \(read here by Relu\)"):
        load_onnx(_where_graph(tmp_path / "w.onnx", reader="Relu"))


def test_a_computed_condition_equals_numpy_and_a_comparison_of_two_tensors_is_refused_by_name(tmp_path):
    path = _where_graph(tmp_path / "w.onnx", cond_const=False, reader="Relu", fill=0.5)   # Greater(s, 0.5)
    x = np.random.default_rng(2).normal(size=(5, 4, 4))
    w = numpy_helper.to_array(onnx.load(str(path)).graph.initializer[0]).astype(np.float64)
    s = x @ w
    np.testing.assert_allclose(float_forward(load_onnx(path), x), np.maximum(np.where(s > 0.5, 0.5, s), 0),
                               rtol=1e-6, atol=1e-6)
    m = onnx.load(str(path))
    m.graph.node[1].input[1] = "x"                       # Greater(s, x): two computed tensors
    m.graph.node[1].name = "cmp"
    onnx.save(m, str(tmp_path / "w2.onnx"))
    with pytest.raises(UnsupportedModelError, match=r"cmp \(Greater\): Greater of two computed tensors: only with "
                                                    r"one constant number"):
        load_onnx(tmp_path / "w2.onnx")


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_a_leaky_relu_by_torch_where_deploys_and_compiles(tmp_path, how):
    """``torch.where(h > 0, h, 0.1 * h)``: ``Greater`` by a number (host ``Compare``), ``Where`` of the
    computed condition (:mod:`hlsnn.deploy.run.maskfill`); the compiled model gives the deployment's bits."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model

    class Leaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(11)
            self.c, self.fc = torch.nn.Conv1d(8, 6, 3, padding=1), torch.nn.Linear(6, 10)

        def forward(self, x):
            h = self.c(x)
            return self.fc(torch.where(h > 0, h, 0.1 * h).mean(-1))

    path = torch_export(Leaky(), (8, 8), tmp_path / "m.onnx", how)
    ds = datasets.load("digits", layout="ntf")
    np.testing.assert_allclose(float_forward(load_onnx(path), ds.x_test[:8]), _onnxruntime(path, ds.x_test[:8]),
                               rtol=1e-5, atol=1e-5)
    dep, accs = _deployment(tmp_path, path, "bfp", "bfp8_zcu104")
    try:
        dep.calibrate(ds.x_train[:128])
        y = dep.run(ds.x_test[:16])
    finally:
        for a in accs.values():
            a.close()
    assert np.linalg.norm(y - _onnxruntime(path, ds.x_test[:16])) / np.linalg.norm(y) < 0.05
    compile_model(tmp_path / "c.yaml", "f", tmp_path / "m.hlsnn")
    np.testing.assert_array_equal(hlsnn.load(tmp_path / "m.hlsnn", "emu")(ds.x_test[:16]), y)


class _MeanMean(torch.nn.Module):
    """A conv, then an SE-style mean over (H, W) written as two means, then a Linear."""

    def __init__(self, how, c=2):
        super().__init__()
        torch.manual_seed(3)
        self.conv, self.fc, self.how = torch.nn.Conv2d(c, 4, 3, padding=1), torch.nn.Linear(4, 3), how

    def forward(self, x):
        h = torch.relu(self.conv(x))
        if self.how == "last_last":
            s = h.mean(-1).mean(-1)
        elif self.how == "3_2":
            s = h.mean(3).mean(2)
        elif self.how == "keep":
            s = h.mean(-1, keepdim=True).mean(-2, keepdim=True).flatten(1)
        else:                           # over W, then over the channels: not a spatial mean
            return self.fc(h.mean(-1).mean(1).flatten(1)[:, :4])
        return self.fc(s)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("form", ["last_last", "3_2", "keep", "w_then_c"])
def test_two_spatial_means_are_one_global_average_pool(tmp_path, how, form):
    path = torch_export(_MeanMean(form), (2, 4, 4), tmp_path / "m.onnx", how)
    assert [n.op_type for n in onnx.load(str(path)).graph.node].count("ReduceMean") == 2
    net = load_onnx(path)
    ops = [la.op for la in net.layers if la.kind == "host"]
    if form == "w_then_c":
        assert "GlobalAveragePool" not in ops
    else:
        assert ops.count("GlobalAveragePool") == 1 and "ReduceAxes" not in ops, ops
    x = np.random.default_rng(4).normal(size=(5, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-6)


def test_two_spatial_means_run_in_one_network_start_in_bfp8(tmp_path):
    import hlsnn
    from hlsnn.network.build import compile_model
    path = torch_export(_MeanMean("last_last", c=1), (1, 8, 8), tmp_path / "m.onnx", "ts17")
    (tmp_path / "c.yaml").write_text(f"name: mm\nmodel: {path}\ndata: digits\nlayout: nchw\n"
                                     "formats:\n  f: {type: bfp, accel: bfp8_zcu104}\nassignments:\n"
                                     "  f: {default: f}\n")
    compile_model(tmp_path / "c.yaml", "f", tmp_path / "m.hlsnn")
    assert hlsnn.load(tmp_path / "m.hlsnn", "emu").network is not None


class _Arith(torch.nn.Module):
    """A Conv1d, then one of: ``torch.clamp(min=0)`` / ``clamp(max=0.5)`` (dynamo: ``Max`` / ``Min``),
    statistics pooling (mean and std over the length), centring by the mean, ``x - c``."""

    def __init__(self, how, c=4):
        super().__init__()
        torch.manual_seed(6)
        self.conv, self.how = torch.nn.Conv1d(c, 6, 3, padding=1), how
        self.fc = torch.nn.Linear(12 if how == "stats" else 6, 3)

    def forward(self, x):
        h = self.conv(x)
        if self.how == "clamp_min":
            h = torch.clamp(h, min=0.1).amax(-1)
        elif self.how == "clamp_max":
            h = h.clamp(max=0.5).mean(-1)
        elif self.how == "stats":
            h = torch.cat([h.mean(-1), h.std(-1)], 1)
        elif self.how == "centre":
            h = (h - h.mean(-1, keepdim=True)).amax(-1)
        else:
            h = (h - 0.25).amax(-1)
        return self.fc(h)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("form", ["clamp_min", "clamp_max", "stats", "centre", "minus_c"])
def test_clamps_statistics_pooling_and_differences_equal_onnxruntime(tmp_path, how, form):
    path = torch_export(_Arith(form), (4, 8), tmp_path / "m.onnx", how)
    net = load_onnx(path)
    assert not any(la.op == "fallback" for la in net.layers if la.kind == "host")
    x = np.random.default_rng(7).normal(size=(5, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def test_statistics_pooling_deploys_near_onnxruntime(tmp_path):
    path = torch_export(_Arith("stats", c=8), (8, 8), tmp_path / "m.onnx", "dynamo")
    dep, accs = _deployment(tmp_path, path, "fixed", "sparse8_pynq-z2")
    try:
        from hlsnn.deploy import datasets
        ds = datasets.load("digits", layout="ncl")
        dep.calibrate(ds.x_train[:128])
        y, ref = dep.run(ds.x_test[:32]), _onnxruntime(path, ds.x_test[:32])
    finally:
        for a in accs.values():
            a.close()
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.05


def _binary(path, op, b_const=None, a_const=None):
    """y = op(a, b) on (1, 4) with a = Relu(x) and b = Sigmoid(x) or a constant."""
    init, ins = [], []
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["x"], ["s"])]
    for name, c, comp in (("a", a_const, "r"), ("b", b_const, "s")):
        if c is None:
            ins.append(comp)
        else:
            init.append(numpy_helper.from_array(np.asarray(c, np.float32), name))
            ins.append(name)
    nodes.append(helper.make_node(op, ins, ["y"], name="n"))
    g = helper.make_graph(nodes, "b", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("op,kw,msg", [
    ("Max", {}, r"n \(Max\): Max of two computed tensors: only with one constant number \(a clamp\)"),
    ("Min", {"b_const": [0.1, 0.2, 0.3, 0.4]}, r"n \(Min\): Min with a constant of shape \(4,\): only with one number")])
def test_max_and_min_outside_their_rules_are_refused_by_name(tmp_path, op, kw, msg):
    with pytest.raises(UnsupportedModelError, match=msg):
        load_onnx(_binary(tmp_path / "b.onnx", op, **kw))


def test_a_difference_of_two_tensors_equals_numpy(tmp_path):
    x = np.random.default_rng(8).normal(size=(6, 4))
    got = float_forward(load_onnx(_binary(tmp_path / "b.onnx", "Sub")), x)
    np.testing.assert_allclose(got, np.maximum(x, 0) - 1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-12)


def test_a_computed_tensor_from_a_constant_equals_numpy(tmp_path):
    """``c - x`` (refused by name until session 32): ``-1 * x + c`` (hlsnn.deploy.rewrite.sklfold)."""
    x = np.random.default_rng(8).normal(size=(6, 4))
    got = float_forward(load_onnx(_binary(tmp_path / "b.onnx", "Sub", a_const=1.5)), x)
    np.testing.assert_allclose(got, 1.5 - 1 / (1 + np.exp(-x)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_a_circular_conv1d_equals_onnxruntime(tmp_path, how):
    """``Conv1d(padding_mode='circular')``: dynamo writes ``Pad`` mode ``wrap`` (numpy's ``wrap``,
    a move of values), TorchScript ``Slice``s and a ``Concat``."""
    torch.manual_seed(9)
    m = torch.nn.Sequential(torch.nn.Conv1d(4, 6, 3, padding=2, padding_mode="circular"), torch.nn.ReLU())
    path = torch_export(m, (4, 8), tmp_path / "m.onnx", how)
    x = np.random.default_rng(9).normal(size=(5, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(load_onnx(path), x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_f_softsign_as_torch_writes_it_equals_onnxruntime(tmp_path, how):
    """``F.softsign`` exports ``x / (1 + |x|)``: ``Abs`` on the host (:mod:`hlsnn.deploy.run.hostunary`)."""
    torch.manual_seed(10)
    lin = torch.nn.Linear(8, 5)
    m = torch.nn.Sequential(lin, torch.nn.Softsign())
    path = torch_export(m, (8,), tmp_path / "m.onnx", how)
    assert "Abs" in {n.op_type for n in onnx.load(str(path)).graph.node}
    x = np.random.default_rng(10).normal(size=(6, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(load_onnx(path), x), _onnxruntime(path, x), rtol=1e-5, atol=1e-6)


class _Sdpa(torch.nn.Module):
    """nanoGPT's flash path: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` (or a
    boolean ``attn_mask``), heads by view + transpose, the last token."""

    def __init__(self, how):
        super().__init__()
        torch.manual_seed(12)
        self.qkv, self.out, self.how = torch.nn.Linear(8, 24), torch.nn.Linear(8, 10), how
        self.register_buffer("mask", torch.tril(torch.ones(8, 8, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (z.view(B, T, 2, 4).transpose(1, 2) for z in self.qkv(x).split(8, dim=2))
        if self.how == "causal":
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)
        return self.out(y.transpose(1, 2).reshape(B, T, C)[:, -1])


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("form", ["causal", "boolmask"])
def test_sdpa_with_a_causal_or_boolean_mask_equals_onnxruntime(tmp_path, how, form):
    """TorchScript adds a constant -inf mask to the scores (``AddInf``, :mod:`hlsnn.deploy.run.maskfill`);
    dynamo's boolean mask guards fully masked rows with ``Where(IsNaN(p), 0, p)`` (host ``Compare``)."""
    path = torch_export(_Sdpa(form), (8, 8), tmp_path / "m.onnx", how)
    x = np.random.default_rng(12).normal(size=(6, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(load_onnx(path), x), _onnxruntime(path, x), rtol=1e-4, atol=1e-5)


def test_an_additive_mask_compiles_and_runs_as_deployed(tmp_path):
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    path = torch_export(_Sdpa("causal"), (8, 8), tmp_path / "m.onnx", "ts17")
    dep, accs = _deployment(tmp_path, path, "fixed", "sparse8_pynq-z2")
    ds = datasets.load("digits", layout="ntf")
    try:
        dep.calibrate(ds.x_train[:128])
        y = dep.run(ds.x_test[:16])
    finally:
        for a in accs.values():
            a.close()
    assert np.linalg.norm(y - _onnxruntime(path, ds.x_test[:16])) / np.linalg.norm(y) < 0.1
    compile_model(tmp_path / "c.yaml", "f", tmp_path / "m.hlsnn")
    np.testing.assert_array_equal(hlsnn.load(tmp_path / "m.hlsnn", "emu")(ds.x_test[:16]), y)


def test_an_additive_infinite_mask_read_by_anything_but_a_softmax_is_refused_by_name(tmp_path):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), "w"),
            numpy_helper.from_array(np.where(np.triu(np.ones((4, 4)), 1) > 0, -np.inf, 0).astype(np.float32), "m")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["s"]),
             helper.make_node("Transpose", ["s"], ["st"], perm=[0, 2, 1]),
             helper.make_node("Add", ["st", "m"], ["a"], name="addmask"), helper.make_node("Relu", ["a"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4, 4])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 4])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "a.onnx"))
    with pytest.raises(UnsupportedModelError, match=r"addmask \(Add\): Add of a constant with -Inf values \(an "
                                                    r"additive mask\), which only a Softmax may read \(read here "
                                                    r"by Relu\)"):
        load_onnx(tmp_path / "a.onnx")


class _Standardize(torch.nn.Module):
    """A jet MLP that standardizes its inputs with buffers, ``(x - self.mean) / self.std``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(13)
        self.register_buffer("mean", torch.rand(64) * 0.5)
        self.register_buffer("std", torch.rand(64) + 0.5)
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))

    def forward(self, x):
        return self.net((x - self.mean) / self.std)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_inputs_standardized_in_the_model_import_and_run_in_one_network_start(tmp_path, how):
    """``x - mean`` is the host ``AddConst`` of ``-mean`` (before: no rule for ``Sub``), ``/ std`` a
    ``Scale``, both on the float input before the kernel (one start in fixed8)."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    path = torch_export(_Standardize(), (64,), tmp_path / "m.onnx", how)
    x = datasets.load("digits", layout="flat").x_test[:16]
    np.testing.assert_allclose(float_forward(load_onnx(path), x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)
    (tmp_path / "c.yaml").write_text(f"name: st\nmodel: {path}\ndata: digits\nlayout: flat\n"
                                     "formats:\n  f: {type: fixed, accel: sparse8_pynq-z2}\nassignments:\n"
                                     "  f: {default: f}\n")
    compile_model(tmp_path / "c.yaml", "f", tmp_path / "m.hlsnn")
    net = hlsnn.load(tmp_path / "m.hlsnn", "emu", network=True)
    assert net.network is not None
    np.testing.assert_array_equal(net(x), hlsnn.load(tmp_path / "m.hlsnn", "emu", network=False)(x))
