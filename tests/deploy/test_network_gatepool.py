"""Rule 10m (:mod:`hlsnn.engines.network.pools.gatepool`): a ``MaxPool2d`` or a nearest ``nn.Upsample`` of
an ``nn.SiLU`` output (``x * sigmoid(x)``, a gate's product pending until its engine consumer) runs
in one network start in two-hot and fixed8 (before: layer by layer). The gate is materialized at the
consumer's radix point, then pooled / moved: the layer path's bits (max and moves commute with the
monotone requantization).

References: the layer path (emulator, layer by layer); onnxruntime for the float import."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from netfixtures import check_kernel_run, compile_onnx  # noqa: E402

nn = torch.nn


class _SiluNet(nn.Module):
    """conv, SiLU, MaxPool 2, conv, SiLU, nearest x2, conv (an encoder and decoder of SiLU convs)."""

    def __init__(self, act=None):
        super().__init__()
        torch.manual_seed(9)
        act = act or nn.SiLU()
        self.net = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), act, nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1),
                                 act, nn.Upsample(scale_factor=2), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x)


def _export(tmp_path, module, name="silu"):
    import warnings
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (torch.rand(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17)
    return path


def _x(n=8):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", ["fixed8", "twohot"])
def test_a_pool_and_an_upsample_of_a_silu_run_in_one_start(tmp_path, fmt):
    import hlsnn
    art = compile_onnx(tmp_path, "silu", _export(tmp_path, _SiluNet()), fmt, check_samples=2, calibration_samples=16)
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("gate") == 2 and "maxpool" in kinds and "upsample" in kinds
    x = _x()
    np.testing.assert_array_equal(net(x), hlsnn.load(art, "emu", network=False)(x))


def test_a_pool_of_a_gate_read_by_a_host_op_is_declined_by_name():
    from types import SimpleNamespace
    from hlsnn.engines.network.pools.gatepool import lower
    from hlsnn.engines.network.program import Op, _why
    from hlsnn.errors import InputError
    j = dict(name="p", kind="host", op="MaxPool", inputs=["g"], output="pm", attrs={"kernel_shape": [2, 2]})
    program = {"layers": [j, dict(name="t", kind="host", op="Sigmoid", inputs=["pm"], output="s")]}
    w = SimpleNamespace(state={"g": ("gate", {"name": "g"})}, shapes={"g": (4, 4, 4)}, ops=[], aliases={})
    with pytest.raises(InputError, match="read by engine layers at one radix point only"):
        lower(j, program, w, SimpleNamespace(rounding="nearest_even"), _why, Op, None)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fixed8", "twohot"])
def test_on_csim_the_kernel_gives_the_emulators_bits(tmp_path, fmt):
    art = compile_onnx(tmp_path, "silu", _export(tmp_path, _SiluNet()), fmt, check_samples=2, calibration_samples=16)
    check_kernel_run(art, fmt, _x(3))
