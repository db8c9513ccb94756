"""deploy.run.calcodes.codes_at_radix (the step rules 9e and 10c share in the layer path) against
numpy's own arithmetic: the codes are the values rounded at radix F and saturated, read back as
q * 2**-F; a calibration takes the max-based radix; without a radix outside a calibration it
refuses with the caller's message."""
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT
from hlsnn.deploy.run.calcodes import codes_at_radix
from hlsnn.errors import InputError

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import round_array  # noqa: E402


def _dep(rounding="nearest_away", dynamic=False):
    return SimpleNamespace(rounding=rounding, dynamic=dynamic, overflow_ratio=0.0)


def _reference(x, f, bits, rounding):
    """Codes at radix ``f`` by numpy (``x * 2**f`` is exact for these dyadic values), saturated."""
    q = np.clip(round_array(x * 2.0 ** f, rounding), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return q * 2.0 ** -f


def _never():
    raise AssertionError("refused although a radix was given")


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even", "truncate"])
@pytest.mark.parametrize("bits", [4, 8, 12])
@pytest.mark.parametrize("f", [-2, 0, 3, 9])
def test_codes_at_a_given_radix_are_numpy_rounding_and_saturation(rounding, bits, f):
    rng = np.random.default_rng(bits * 100 + f)
    x = rng.integers(-40000, 40000, 500) * 2.0 ** -10          # dyadic: x * 2**f exact
    x = np.concatenate([x, [0.5 * 2.0 ** -f, -0.5 * 2.0 ** -f, 1.5 * 2.0 ** -f, -2.5 * 2.0 ** -f]])  # ties
    v, got_f = codes_at_radix(_dep(rounding), x, f, bits, False, _never)
    assert got_f == f
    assert v.dtype == np.float64
    np.testing.assert_array_equal(v, _reference(x, f, bits, rounding))


@pytest.mark.parametrize("bits", [4, 8])
def test_calibration_takes_the_max_based_radix(bits):
    rng = np.random.default_rng(bits)
    x = rng.uniform(-3.0, 3.0, 300)
    x = np.concatenate([x, [5.3]])                            # |max| 5.3: 2**2 <= 5.3 < 2**3
    f_want = bits - 2 - 2                                     # the largest radix at which 5.3 fits
    for calibrate, dep, given in ((True, _dep(), None), (True, _dep(), 17), (False, _dep(dynamic=True), 17)):
        v, f = codes_at_radix(dep, x, given, bits, calibrate, _never)
        assert f == f_want
        assert isinstance(f, int)
        np.testing.assert_array_equal(v, _reference(x, f, bits, "nearest_away"))
    assert np.abs(x).max() * 2.0 ** f <= 2 ** (bits - 1) - 1 < 5.3 * 2.0 ** (f + 1)    # fits at F, not at F + 1


def test_no_radix_outside_a_calibration_refuses_with_the_callers_message():
    with pytest.raises(InputError, match="layer L: no calibrated radix"):
        codes_at_radix(_dep(), np.ones(3), None, 8, False, lambda: "layer L: no calibrated radix")


def test_custom_codes_are_read_back_at_the_radix():
    seen = []

    def codes(values, f):
        seen.append(f)
        return np.arange(values.size, dtype=np.int64) - 1
    v, f = codes_at_radix(_dep(), np.zeros(4), 3, 8, False, _never, codes)
    assert seen == [3] and f == 3
    np.testing.assert_array_equal(v, np.array([-1, 0, 1, 2]) / 8.0)
