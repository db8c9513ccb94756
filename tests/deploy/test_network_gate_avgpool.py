"""An ``AveragePool`` of a gate's product in the network mode (issue 52: the fifth family's
h_dw_mult2, ``avg_pool(x * s[:, :, None, None])`` with ``count_include_pad=False``, and
h_dw_prelu, ``AdaptiveAvgPool2d(2)`` of ``x * se(x)``, ran layer by layer in two-hot and fixed8:
"an AveragePool of an integer tensor computed on the fabric"). Rule 10d of
hlsnn.engines.network.gatein takes the product as codes at a calibrated radix ``F_g`` (the layer
path too, hlsnn.deploy.run.gatecodes), then linpool's rule 11 / 11u / 13 pools the codes.

References: the layer path on the emulator (its bits), rule 10c's conversion written out (the
exact float product through ``to_fixed`` at ``F_g``, then numpy's mean of the windows), the
C-simulated kernel and the simulated board, and the float model (torch) for the accuracy."""
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_each  # noqa: E402

SMALL = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


def se_avg(path, seed=2):
    """conv 1 -> 6 (ReLU) on 8 x 8, a squeeze-excite gate (mean, Linear 6 -> 3, ReLU, Linear 3 -> 6,
    Sigmoid), ``nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)`` of the gated map
    (counts 4, 6, 9), conv 6 -> 4 (ReLU), flatten, Linear to 10."""
    from torch import nn

    class SeAvg(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 6, 3, padding=1)
            self.f1, self.f2 = nn.Linear(6, 3), nn.Linear(3, 6)
            self.avg = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
            self.c2 = nn.Conv2d(6, 4, 3, padding=1)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            s = torch.sigmoid(self.f2(torch.relu(self.f1(x.mean((2, 3))))))
            x = self.avg(x * s[:, :, None, None])
            return self.fc(torch.flatten(torch.relu(self.c2(x)), 1))
    torch.manual_seed(seed)
    m = SeAvg().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gateavg")
    return compile_each(tmp, "se_avg", se_avg(tmp / "se_avg.onnx"), formats=SMALL, check_samples=2,
                        calibration_samples=16)


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:6]


@pytest.mark.parametrize("fmt", list(SMALL))
def test_one_network_program_with_the_layer_paths_bits(compiled, fmt):
    """The pool reads the gate's codes (a gate op at ``F_g``, then the uncounted pool); the
    program's host layer keeps ``gate_in``; the network mode gives the layer path's bits."""
    from hlsnn.network import artifact
    prog, _ = artifact.read(str(compiled[fmt]))
    pool = next(j for j in prog["layers"] if j.get("op") == "AveragePool")
    f_g = pool["gate_in"]["f_in"][0]
    assert isinstance(f_g, int) and pool["gate_in"]["f_in"][1] is None
    net = hlsnn.load(compiled[fmt], "emu", network=True)
    assert net.network is not None
    ops = net.network.ops
    k = next(i for i, op in enumerate(ops) if op.kind == "avgpool")
    assert ops[k - 1].kind == "gate" and ops[k].ins == [ops[k - 1].out] and ops[k].f.get("uncounted")
    np.testing.assert_array_equal(net(_x()), hlsnn.load(compiled[fmt], "emu", network=False)(_x()))


def test_layer_path_pools_the_products_codes(compiled):
    """Rule 10d in the layer path, written out: the pool's input is the float product converted
    by ``to_fixed`` at ``F_g`` (the deployment's rounding, 8 bits), then ONNX's uncounted mean."""
    from hlsnn.deploy.quantize.quant import to_fixed
    from hlsnn.network import artifact
    net = hlsnn.load(compiled["fixed8"], "emu", network=False)
    prog, _ = artifact.read(str(compiled["fixed8"]))
    pool = next(j for j in prog["layers"] if j.get("op") == "AveragePool")
    f_g = pool["gate_in"]["f_in"][0]
    _, env = net._dep._run(_x(), False, True)
    prod = env[pool["inputs"][0]]
    codes = to_fixed(prod, f_g, 8, True, net._dep.rounding)
    pad = np.pad(np.ldexp(np.asarray(codes, np.float64), -f_g), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    win = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_array_equal(env[pool["output"]], np.nanmean(win, axis=(-2, -1)))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_one_kernel_start_on_csim_and_the_board(compiled, fmt):
    check_kernel_run(compiled[fmt], fmt, _x(), board=True)


def test_a_model_compiled_before_says_so_and_how_to_recompile(compiled, tmp_path):
    """A revision-3 program (no ``gate_in`` on the AveragePool) now needs it in the layer path too:
    the load names the older hlsnn and the command to recompile."""
    from hlsnn.errors import InputError
    from hlsnn.network import artifact
    prog, arrays = artifact.read(str(compiled["twohot"]))[:2]
    for j in prog["layers"]:
        j.pop("gate_in", None)
    prog["revision"] = 3
    artifact.write(tmp_path / "old.hlsnn", prog, arrays)
    with pytest.raises(InputError) as e:
        hlsnn.load(tmp_path / "old.hlsnn", "emu", network=False)(_x())
    msg = str(e.value)
    assert "older hlsnn" in msg and "revision 3" in msg and "rule 10d" in msg and "hlsnn compile" in msg
