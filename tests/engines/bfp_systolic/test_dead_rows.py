"""Rule 0w of the bfp_systolic emulator: a weight row with no non-zero mantissa (a pruned model's
dead channel) outputs its bias.

The float layer's value for such a row is ``relu(bias)`` at every sample, whatever the input: that
is the independent reference. Before rule 0w the row took the format's all-zero exponent
(``emin``), its bias saturated on the way to the product's exponent and the row gave about 0.
Each target quantizes the same weights, so emu (both paths), C-simulation and the simulated board
agree bit for bit; the train extra's ``bfp_gemm`` is held to the emulator in tests/train."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from conftest import stream_path
from hlsnn.engines.bfp_systolic.emulator import weight_rows, zero_weight_row_exponents
from hlsnn.formats import bfp

ACCEL = Path(__file__).resolve().parents[3] / "configs" / "accel" / "bfp8_zcu104.yaml"   # quick on csim: the seeded sweep compiles it


def _layer(seed, n=7, k=12, batch=5, dead=(1, 4)):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(n, k))
    w[list(dead)] = 0.0
    b = rng.normal(size=n) * 2
    b[dead[0]] = abs(b[dead[0]]) + 0.5               # one dead row positive, one negative (ReLU's case)
    b[dead[1]] = -abs(b[dead[1]]) - 0.5
    return rng.normal(size=(batch, k)) * 3, w, b


def test_a_dead_rows_exponent_is_the_largest_live_rows():
    w = np.array([[0.5, -0.25], [0.0, 0.0], [4.0, 1.0], [0.0, 0.0]])
    q = bfp.quantize(w, 8, axis=-1, exponent_bits=8)
    assert list(q.exponents.reshape(-1)) == [-7, -128, -4, -128]          # the format's all-zero rule
    assert list(weight_rows(q).exponents.reshape(-1)) == [-7, -4, -4, -4]
    np.testing.assert_array_equal(weight_rows(q).mantissas, q.mantissas)
    every = bfp.quantize(np.zeros((3, 2)), 8, axis=-1, exponent_bits=8)     # nothing to take it from
    assert weight_rows(every) is every
    assert list(zero_weight_row_exponents([[1], [0]], [[3], [-128]]).reshape(-1)) == [3, 3]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("target", ["emu", "emu-stream", pytest.param("csim", marks=pytest.mark.csim), "sim"])
def test_a_dead_row_outputs_its_bias_on_every_target(target, relu):
    x, w, b = _layer(3)
    name, opts = (target.split("-")[0], stream_path("emu")) if target.startswith("emu") else (target, {})
    with hlsnn.Accelerator(ACCEL, name, **opts) as acc, \
            hlsnn.Accelerator(ACCEL, "emu") as ref:
        y = acc.gemm(x, w, bias=b, relu=relu)
        np.testing.assert_array_equal(y, ref.gemm(x, w, bias=b, relu=relu))
    want = np.maximum(b, 0) if relu else b
    m = acc.config.params["mantissa_bits"]
    for r in (1, 4):
        # one ulp of the sample's output exponent at most (the output's M-bit rounding)
        ulp = 2.0 ** (np.floor(np.log2(np.abs(y).max(axis=1))) - (m - 2))
        assert np.all(np.abs(y[:, r] - want[r]) <= ulp), (r, y[:, r], want[r])
    live = [0, 2, 3, 5, 6]
    assert np.abs(y[:, live]).max() > 0
