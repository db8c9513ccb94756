"""``x.max(dim=1).values`` over the tokens of a token-wise ``Linear``'s output in the network mode
(:mod:`hlsnn.engines.network.pools.reduce` rule 4t): the ``ReduceMax`` of the ``(T, F)`` rows a
``MapToRows`` made is rule 3's max pool of the ``F x T x 1`` map's ``T`` pixels. Before, it had no
integer rule and the model ran layer by layer (2 kernel starts).

References: the layer path (the network mode must give its bits), onnxruntime on the file torch
wrote."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class _MaxTokens(torch.nn.Module):
    """(N, 8, 8) rows -> token-wise Linear 8 -> 12 + ReLU -> max over the 8 tokens -> Linear 10."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.fc, self.out = torch.nn.Linear(8, 12), torch.nn.Linear(12, 10)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)).max(dim=1).values)


_MADE = {}


def _compiled(tmp_path_factory, fmt):
    from netfixtures import FORMATS, compile_onnx, torch_export
    if fmt not in _MADE:
        tmp = tmp_path_factory.mktemp(f"maxtok_{fmt}")
        path = torch_export(_MaxTokens(), (8, 8), tmp / "m.onnx", "ts17")
        _MADE[fmt] = path, compile_onnx(tmp, "m", path, fmt, formats={fmt: FORMATS[fmt]}, layout="ntf",
                                        check_samples=2, calibration_samples=16)
    return _MADE[fmt]


def _x(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="ntf").x_test[:n]


@pytest.mark.parametrize("fmt", ["fixed8", pytest.param("twohot", marks=pytest.mark.slow),
                                 pytest.param("bfp8", marks=pytest.mark.slow)])
def test_a_max_over_tokens_runs_in_one_start_with_the_layer_paths_bits(tmp_path_factory, fmt):
    import hlsnn
    path, art = _compiled(tmp_path_factory, fmt)
    x = _x(24)
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None                               # before: "no integer rule" (ReduceAxes)
    assert "maxpool" in [op.kind for op in net.network.ops]
    y = net(x)
    np.testing.assert_array_equal(y, hlsnn.load(art, "emu", network=False)(x))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x.astype(np.float32)})[0]
    assert np.abs(y - ref).max() < 0.1 * np.abs(ref).max()


@pytest.mark.slow
def test_on_the_simulated_board_it_is_one_start(tmp_path_factory):
    from netfixtures import check_kernel_run
    _, art = _compiled(tmp_path_factory, "fixed8")
    check_kernel_run(art, "fixed8", _x(3), board=True)
