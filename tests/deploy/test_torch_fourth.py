"""Issue 52's kinds written a fourth way (``torch_families/variant_fourth.py``), on files torch writes in
the test (tiny untrained modules, seeded; TorchScript at opset 17 and the dynamo exporter):

* a causal ``Conv1d`` (``F.pad(x, (k - 1, 0))`` then the conv, Bai et al.'s TCN): TorchScript
  keeps the ``Pad``, the dynamo exporter folds it into the conv's pads; both import as one conv
  with the pad as its own (asymmetric) zero padding, no host ``Pad``;
* a conv and its 1x1 shortcut that both read the float input (a TCN's first block): one network
  start, on the integer engines when both read it at one radix point (rule input_quantize of
  :mod:`hlsnn.deploy.lower.program`), on ``bfp_systolic`` always (its rule bfp_input: the input's own pairs);
* RMSNorm written by hand (LLaMA's ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``):
  ``Pow`` by a constant, ``Sqrt``, ``Reciprocal`` (dynamo) or ``Div`` of a constant by a tensor
  (TorchScript) and a ``Mul`` of two tensors, and ``F.normalize`` (``ReduceL2``, ``Div``), on the
  host (:mod:`hlsnn.deploy.run.hostmath`);
* a ``Split`` / ``Slice`` of a conv's channels (``F.glu``, ``nn.GLU``, ``chunk``; grouped too): one
  conv per part (:mod:`hlsnn.deploy.rewrite.splitconv`).

References: onnxruntime on the same file (the float import) and numpy.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


def _export(module, shape, path, how):
    import warnings
    torch.manual_seed(0)
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(1, *shape),), str(path), **EXPORTS[how])
    return path


def _onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


class _CausalConv(torch.nn.Module):
    def __init__(self, left, right=0):
        super().__init__()
        torch.manual_seed(1)
        self.pad = (left, right)
        self.conv = torch.nn.Conv1d(3, 4, 3, dilation=2)

    def forward(self, x):
        return torch.relu(self.conv(torch.nn.functional.pad(x, self.pad)))


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("left, right", [(4, 0), (1, 3)])
def test_a_zero_pad_of_the_length_is_the_conv1ds_own_padding(tmp_path, how, left, right):
    path = _export(_CausalConv(left, right), (3, 10), tmp_path / f"causal_{how}.onnx", how)
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host" and la.op == "Pad"] == []
    (conv,) = [la for la in net.layers if la.kind == "conv"]
    assert conv.pads == (left, 0, right, 0)            # top (L begin), left, bottom (L end), right
    x = np.random.default_rng(2).normal(size=(5, 3, 10)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)


class _RMSNormFFN(torch.nn.Module):
    """LLaMA's RMSNorm by hand, then a token-wise Linear (on (N, T, F))."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)
        self.lin = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return self.lin(h)


class _L2Norm(torch.nn.Module):
    """x / ||x|| over the features, by hand: a Div of two computed tensors."""

    def forward(self, x):
        return x / (x.pow(2).sum(-1, keepdim=True).sqrt() + 1e-6)


class _Normalize(torch.nn.Module):
    """F.normalize over the features (ReduceL2, Clip, Expand, Div), then a token-wise Linear."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(8)
        self.lin = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.lin(torch.nn.functional.normalize(x, dim=-1))


class _PowOfTensor(torch.nn.Module):
    def forward(self, x):
        return torch.pow(x.abs() + 1, torch.sigmoid(x))


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("module, host_ops", [(_RMSNormFFN, {"Pow", "Sqrt", "Reciprocal"}),
                                              (_L2Norm, {"Pow", "Sqrt", "Div"}),
                                              (_Normalize, {"ReduceL2", "Div"})])
def test_hand_written_norms_import_on_the_host_and_equal_onnxruntime(tmp_path, how, module, host_ops):
    path = _export(module(), (4, 8), tmp_path / f"norm_{how}.onnx", how)
    net = load_onnx(path)                                 # no UnsupportedModelError, no fallback
    ops = {la.op for la in net.layers}
    assert host_ops <= ops and "fallback" not in ops
    x = np.random.default_rng(4).normal(size=(6, 4, 8)).astype(np.float32)
    x[0, 0] = 0.0                                         # a zero row: rsqrt of eps, 0 / eps
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_pow_by_a_computed_exponent_is_refused_by_name(tmp_path, how):
    from hlsnn.errors import UnsupportedModelError
    path = _export(_PowOfTensor(), (4, 8), tmp_path / f"pow_{how}.onnx", how)
    with pytest.raises(UnsupportedModelError, match=r"\(Pow\): Pow with a computed exponent: only by a constant"):
        load_onnx(path)


class _TwoReaders(torch.nn.Module):
    """A TCN block on the input: a conv and its 1x1 shortcut both read the float input."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.conv, self.down = torch.nn.Conv1d(8, 6, 3, padding=1), torch.nn.Conv1d(8, 6, 1)
        self.fc = torch.nn.Linear(6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x) + self.down(x)).mean(-1))


@pytest.fixture(scope="module")
def two_readers(tmp_path_factory):
    """The model compiled in two-hot and fixed8 (once for the module)."""
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("two_readers")
    path = _export(_TwoReaders(), (8, 8), tmp / "two_readers.onnx", "ts17")
    return compile_each(tmp, "two_readers", path, ["twohot", "fixed8", "bfp8"], layout="ncl")


def test_two_layers_reading_the_input_at_one_radix_run_in_the_network_mode(two_readers):
    """Rule input_quantize of hlsnn.deploy.lower.program: the second reader takes the integers the first one's
    quantization wrote (both at the same F_x; bfp: the input's pairs); the network mode gives the
    layer path's bits."""
    import hlsnn
    from hlsnn.deploy.datasets import load
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    x = load("digits", layout="ncl").x_test[:12]
    for fmt, path in two_readers.items():
        prog = artifact.read(str(path))[0]
        readers = [j for j in prog["layers"] if j["kind"] == "conv"][:2]
        assert len({j["f_x"] for j in readers}) == 1, fmt       # the shortcut reads x at the conv's F_x
        kernel_network(*artifact.read(str(path)))               # no InputError
        with hlsnn.load(path, "emu") as net, hlsnn.load(path, "emu", network=False) as ref:
            assert net.network is not None
            np.testing.assert_array_equal(net(x), ref(x))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", "fixed8",                 # bfp8: the bfp network kernel's g++ compile;
                                 pytest.param("bfp8", marks=pytest.mark.slow)])    # its lowering: the emu test above
def test_two_layers_reading_the_input_run_in_one_kernel_start(two_readers, fmt):
    from hlsnn.deploy.datasets import load
    from netfixtures import check_kernel_run
    check_kernel_run(two_readers[fmt], fmt, load("digits", layout="ncl").x_test[:6])


class _Glu(torch.nn.Module):
    """A gated 1-D conv: F.glu over the channels (or nn.GLU, or chunk and a sigmoid gate)."""

    def __init__(self, how, groups=1):
        super().__init__()
        torch.manual_seed(6)
        self.conv, self.how = torch.nn.Conv1d(8, 12, 3, padding=1, groups=groups), how
        self.fc = torch.nn.Linear(6, 10)

    def forward(self, x):
        h = self.conv(x)
        if self.how == "F.glu":
            h = torch.nn.functional.glu(h, dim=1)
        elif self.how == "nn.GLU":
            h = torch.nn.GLU(dim=1)(h)
        else:
            a, b = h.chunk(2, dim=1)
            h = a * torch.sigmoid(b)
        return self.fc(h.mean(-1))


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("glu, groups", [("F.glu", 1), ("nn.GLU", 1), ("chunk", 1), ("F.glu", 4), ("chunk", 2)])
def test_a_conv_split_by_channels_is_one_conv_per_part(tmp_path, how, glu, groups):
    import onnx
    path = _export(_Glu(glu, groups), (8, 8), tmp_path / f"glu_{how}.onnx", how)
    assert {"Split", "Slice"} & {n.op_type for n in onnx.load(str(path)).graph.node}     # what torch writes
    net = load_onnx(path)
    convs = [la for la in net.layers if la.kind == "conv"]
    assert len(convs) == 2 and all(la.group == 1 for la in convs)
    assert not any(la.op in ("SwMove", "Split") for la in net.layers)
    x = np.random.default_rng(7).normal(size=(5, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)
