"""``times_pow2`` (engines/common.py) gives ``np.ldexp``'s bits for every exponent: normal,
subnormal, zero, overflowing and non-finite values and results, float and int64 inputs."""
import numpy as np

from hlsnn.engines.common import times_pow2


def test_times_pow2_is_ldexp_bit_for_bit():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=2000) * np.exp2(rng.integers(-1074, 1023, size=2000)),
                        [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                         np.inf, -np.inf, np.nan]])
    xi = rng.integers(-2 ** 62, 2 ** 62, size=200)
    with np.errstate(over="ignore"):
        for e in (-1100, -1075, -1074, -1022, -600, -53, -1, 0, 1, 30, 600, 1023, 1024, 1100):
            ref, got = np.ldexp(x, e), times_pow2(x, e)
            assert np.array_equal(ref.view(np.int64), got.view(np.int64), equal_nan=False) or \
                np.array_equal(np.isnan(ref), np.isnan(got)) and np.array_equal(
                    ref[~np.isnan(ref)].view(np.int64), got[~np.isnan(got)].view(np.int64))
            assert np.array_equal(np.ldexp(xi.astype(np.float64), e).view(np.int64), times_pow2(xi, e).view(np.int64))
            out = np.empty_like(x)
            assert times_pow2(x, e, out=out) is out
