"""A ``PRelu`` with one slope per channel in the network mode (issue 52: ``nn.PReLU(C)`` after a conv
or a ``Linear`` ran layer by layer, "a table (rule 9) is a function of one value and takes one
scalar"; hlsnn.engines.network.gate rule 9ch: a table per channel, bank ``j`` of the kernels'
table ROM holding the tables of its channels block after block).

References: the exact rational ``x`` or ``slope_c x`` (the float32 slope taken exactly) rounded
by hand (:func:`netfixtures.round_fraction`) at the calibrated radix; the layer path on the
emulator for the bits of the network mode, the C-simulated kernel and the simulated board; the
float model (torch) for the accuracy."""
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.importer.graph import Layer  # noqa: E402
from hlsnn.deploy.quantize.quant import Act  # noqa: E402
from hlsnn.engines.network import gate as netgate  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_each, round_fraction  # noqa: E402

SMALL = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


@pytest.mark.parametrize("shape, slope", [((3, 5, 2, 3), np.array([0.25, -0.1, 0.3, 1.7, 0.0], np.float32)
                                           .reshape(5, 1, 1)),
                                          ((4, 6), np.linspace(-0.3, 0.6, 6).astype(np.float32).reshape(1, 6))])
@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_table_per_channel_is_the_exact_value_rounded_once(shape, slope, rounding):
    """Rule 9ch on codes at radix 4 with output radix 5: entry ``T[c, q]`` is ``x`` or
    ``slope_c x`` (``x = q 2**-4``) rounded at radix 5 and saturated, for every code; the layer
    path's ``host_run`` and the network mode's ``lut_ints`` index it by channel alike."""
    rng = np.random.default_rng(9)
    q = rng.integers(-128, 128, shape)
    attrs = {"slope": slope}
    consts = netgate.channel_consts("PRelu", attrs, len(shape))
    np.testing.assert_array_equal(consts, slope.reshape(-1).astype(np.float64))
    f_o, t = netgate.channel_table("PRelu", attrs, consts, (4, 8, True), rounding, 5)
    assert t.shape == (shape[1], 256)
    for c in range(shape[1]):
        for code in range(-128, 128):
            x = Fraction(code, 16)
            v = x if x >= 0 else Fraction(float(consts[c])) * x
            assert t[c, code + 128] == min(max(round_fraction(v * 32, rounding), -128), 127)
    layer = Layer("p", "host", ["x"], "y", op="PRelu", attrs=attrs)
    vals, fmt = netgate.host_run(layer, Act(np.ldexp(q.astype(np.float64), -4), (4, 8, True)), rounding, f_out=5)
    c = np.arange(shape[1]).reshape((1, -1) + (1,) * (len(shape) - 2))
    np.testing.assert_array_equal(np.ldexp(vals, 5), t[c, q + 128])
    f = dict(c=shape[1], table=t, lo=-128)
    np.testing.assert_array_equal(netgate.lut_ints(q, f), t[c, q + 128])


def test_slopes_along_another_axis_are_no_table_per_channel():
    assert netgate.channel_consts("PRelu", {"slope": np.arange(5.0)}, 4) is None           # aligned with W
    assert netgate.channel_consts("PRelu", {"slope": np.ones((5, 2, 1))}, 4) is None       # varies along H
    assert netgate.channel_consts("PRelu", {"slope": np.float32(0.2)}, 4) is None          # one scalar: rule 9
    assert netgate.channel_consts("PRelu", {"slope": np.arange(5.0)}, 2) is not None       # a Linear's features


def test_rom_banks_hold_their_channels_tables_block_after_block():
    from types import SimpleNamespace

    from hlsnn.engines.network.program import Op
    t = np.arange(5 * 4).reshape(5, 4)                  # 5 channels, 2-bit codes
    net = SimpleNamespace(ops=[Op("lut", "a", ["x"], "y", dict(c=5, table=np.arange(4), lo=-2)),
                               Op("lut", "b", ["y"], "z", dict(c=5, table=t, lo=-2))])
    rom = netgate.lut_rom(net, 2, pc=4)
    assert rom.shape == (4, 4 + 2 * 4)
    assert net.ops[1].f["rom"] == 4 and net.ops[1].f["rstep"] == 4 and net.ops[0].f["rstep"] == 0
    for j in range(4):
        np.testing.assert_array_equal(rom[j, :4], np.arange(4))
        np.testing.assert_array_equal(rom[j, 4:8], t[j])
        np.testing.assert_array_equal(rom[j, 8:], t[4] if j == 0 else np.zeros(4))


def prelu_cnn(path, seed=3):
    """conv 1 -> 6 (8 x 8, stride 2), ``nn.PReLU(6)``, conv 6 -> 6, ``nn.PReLU(6)``, flatten, Linear
    to 12, ``nn.PReLU(12)``, Linear to 10: TorchScript's export (slopes (6, 1, 1) and (12,))."""
    from torch import nn
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1, stride=2), nn.PReLU(6), nn.Conv2d(6, 6, 3, padding=1),
                      nn.PReLU(6), nn.Flatten(), nn.Linear(96, 12), nn.PReLU(12), nn.Linear(12, 10)).eval()
    with torch.no_grad():
        for p in m:
            if isinstance(p, nn.PReLU):
                p.weight.copy_(torch.linspace(-0.4, 0.7, p.weight.numel()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prelu9ch")
    return compile_each(tmp, "prelu_cnn", prelu_cnn(tmp / "prelu_cnn.onnx"), formats=SMALL, check_samples=2,
                        calibration_samples=16)


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:6]


@pytest.mark.parametrize("fmt", list(SMALL))
def test_one_network_program_with_the_layer_paths_bits(compiled, fmt):
    net = hlsnn.load(compiled[fmt], "emu", network=True)
    assert net.network is not None
    luts = [op for op in net.network.ops if op.kind == "lut"]
    assert [np.shape(op.f["table"]) for op in luts] == [(6, 256), (6, 256), (12, 256)]
    np.testing.assert_array_equal(net(_x()), hlsnn.load(compiled[fmt], "emu", network=False)(_x()))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_one_kernel_start_on_csim_and_the_board(compiled, fmt):
    check_kernel_run(compiled[fmt], fmt, _x(), board=True)


def test_a_model_compiled_before_rule_9ch_says_so_and_how_to_recompile(compiled, tmp_path):
    """A revision-3 program (before rule 9ch: no ``table`` radix on a per-channel PRelu) now needs
    it in the layer path: the load names the older hlsnn and the command to recompile."""
    from hlsnn.errors import InputError
    from hlsnn.network import artifact
    prog, arrays = artifact.read(str(compiled["fixed8"]))[:2]
    assert prog["revision"] >= 4
    for j in prog["layers"]:
        j.pop("table", None)
    prog["revision"] = 3
    artifact.write(tmp_path / "old.hlsnn", prog, arrays)
    with pytest.raises(InputError) as e:
        hlsnn.load(tmp_path / "old.hlsnn", "emu", network=False)(_x())
    msg = str(e.value)
    assert "older hlsnn" in msg and "revision 3" in msg and "rule 9ch" in msg and "hlsnn compile" in msg
