"""The deploy runner's host conversions (hlsnn.deploy.quantize.quant): the float64 ``to_fixed`` gives the
bits of its integer rule ``to_fixed_reference`` (``fixed.convert`` on the values written at a
radix 24 bits finer), on ties, values finer than that radix (two roundings), saturation,
unsigned formats and values too large for the float path."""
import numpy as np
import pytest

from hlsnn.deploy.quantize.quant import to_fixed, to_fixed_reference
from hlsnn.errors import InputError


def _values(rng, f):
    """Dyadic values around the format's steps at radix ``f``: exact ties, values just off a tie
    below the finer radix (2**-(f+24)) and beyond it (rounded there first), large and small."""
    n = 4000
    ints = rng.integers(-300, 300, n).astype(np.float64)
    half = (ints + 0.5) * 2.0 ** -f                                  # exact ties
    near = half + rng.choice([-1, 1], n) * 2.0 ** -(f + 24)          # one unit of the finer radix off
    finer = half + rng.choice([-1, 1], n) * 2.0 ** -(f + 26)         # below it: a tie after the first rounding
    noise = rng.normal(size=n) * 2.0 ** (-f + rng.integers(-4, 10, n))
    return np.concatenate([ints * 2.0 ** -f, half, near, finer, noise, [0.0, -0.0]])


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even", "truncate"])
@pytest.mark.parametrize("signed", [True, False])
def test_to_fixed_equals_its_integer_rule(rounding, signed):
    rng = np.random.default_rng(len(rounding) + signed)
    for f, bits in ((0, 8), (5, 8), (-3, 8), (-30, 12), (12, 16)):
        x = np.concatenate([_values(rng, f), [2.0 ** (bits + 1 - f), -2.0 ** (bits + 1 - f)]])
        got, want = to_fixed(x, f, bits, signed, rounding), to_fixed_reference(x, f, bits, signed, rounding)
        assert got.dtype == want.dtype == np.int64
        np.testing.assert_array_equal(got, want)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        assert got.min() == lo and got.max() == hi                   # saturation was exercised


def test_to_fixed_worked_examples():
    """Source-style worked examples: 0.75 at radix 1 is 1.5 units, a tie."""
    x = np.array([0.75, -0.75, 0.25, 100.0, -100.0])
    assert to_fixed(x, 1, 8, True, "nearest_away").tolist() == [2, -2, 1, 127, -128]
    assert to_fixed(x, 1, 8, True, "nearest_even").tolist() == [2, -2, 0, 127, -128]
    assert to_fixed(x, 1, 8, True, "truncate").tolist() == [1, -2, 0, 127, -128]
    assert to_fixed(x, 1, 8, False, "nearest_away").tolist() == [2, 0, 1, 200, 0]


def test_to_fixed_large_values_take_the_integer_rule():
    """Values whose wide integer leaves float64's exact range (here 2**54 at radix 44) run the
    reference itself; beyond its own range (2**62) both refuse them."""
    x = np.array([2.0 ** 10, -(2.0 ** 10), 1.5 * 2.0 ** -20 + 2.0 ** -44])
    np.testing.assert_array_equal(to_fixed(x, 20, 8, True, "nearest_away"), [127, -128, 2])
    with pytest.raises(InputError, match="out of range"):
        to_fixed(np.array([2.0 ** 40]), 20, 8, True, "nearest_away")
