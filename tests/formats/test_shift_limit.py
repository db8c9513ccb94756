"""The two-hot code limit (``max_code``, :mod:`hlsnn.formats.shift`'s "Code limit") and the DSP
banks' packing it exists for (:mod:`hlsnn.engines.shift_mac.network.dsp`).

References: brute force over every two-hot code of the format with Python ints and exact
rationals (the scale exponent by stepping, the nearest code by the least error, ties to the
smaller magnitude: the module's rules with ``M`` replaced by the limit), and plain integer
arithmetic for the packed DSP product."""
from fractions import Fraction

import numpy as np
import pytest

from hlsnn.errors import ConfigError, InputError
from hlsnn.formats import shift


def _levels(eb, delta, limit):
    """Every two-hot magnitude of ``(eb, delta)`` up to ``limit``, from the value formula."""
    top = 2 ** eb - 1
    mags = {0}
    for e1 in range(top + 1):
        for e2 in range(top + 1):
            for s in (1, -1):
                v = abs(2 ** (e1 + delta) + s * 2 ** e2)
                if v <= limit:
                    mags.add(v)
    return sorted(mags)


def _ref(w, limit, mags):
    """(F, code value) per weight of a 1-D tensor (one scale), by brute force."""
    amax = Fraction(float(np.max(np.abs(w))))
    F = 0
    while amax * Fraction(2) ** F > limit:
        F -= 1
    while amax * Fraction(2) ** (F + 1) <= limit:
        F += 1
    out = []
    for x in w:
        a = abs(Fraction(float(x))) * Fraction(2) ** F
        best = min(mags, key=lambda m: (abs(a - m), m))
        out.append(best if x >= 0 else -best)
    return F, out


@pytest.mark.parametrize("limit", [128, 192, 160])
def test_limited_codes_are_the_brute_force_nearest_and_never_above_the_limit(limit):
    rng = np.random.default_rng(limit)
    mags = _levels(3, 0, limit)
    for w in (rng.normal(size=40), rng.uniform(-3, 3, size=40) ** 3, np.array([1.0, -0.999, 0.5, 1 / 128, 0.0])):
        q = shift.quantize_twohot(w, 3, max_code=limit)
        F, want = _ref(w, limit, mags)
        assert int(q.scale_exponent.reshape(-1)[0]) == F
        assert q.code_values().tolist() == want
        assert np.abs(q.code_values()).max() <= limit


def test_without_a_limit_codes_reach_256_and_with_128_the_largest_weight_is_128():
    w = np.array([1.0, 0.74, -0.3])
    assert np.abs(shift.quantize_twohot(w, 3).code_values()).max() == 256
    assert shift.quantize_twohot(w, 3, max_code=128).code_values()[0] == 128


@pytest.mark.parametrize("bad", [100, 64, 257, 0, True, 128.0])
def test_a_limit_that_is_no_two_hot_magnitude_of_at_least_2_to_emax_is_refused(bad):
    with pytest.raises(InputError, match="max_code") as e:
        shift.quantize_twohot([1.0], 3, max_code=bad)
    assert "\n" not in str(e.value)


def test_the_config_refuses_net_dsp_without_the_limit_and_a_bad_limit(tmp_path):
    import hlsnn
    from conftest import ROOT
    text = (ROOT / "configs" / "accel" / "shift8net_pynq-z2.yaml").read_text()
    assert "max_code: 128" in text and "net_dsp: true" in text
    for new, key in ((text.replace("max_code: 128", "max_code: 256"), "net_dsp"),
                     (text.replace("max_code: 128", "max_code: 100"), "max_code")):
        (tmp_path / "c.yaml").write_text(new)
        with pytest.raises(ConfigError, match=key) as e:
            hlsnn.load_config(tmp_path / "c.yaml")
        assert "\n" not in str(e.value)


def test_packed_dsp_product_splits_exactly_for_every_weight_pair_and_activation():
    """The kernel's arithmetic (network.cpp.j2, net_dsp): ``pp = (w1 * 2^16 + w0) * x + 2^15``
    in 34 bits; ``pp >> 16`` is ``w1 * x`` and the low 16 bits with bit 15 flipped, as signed, are
    ``w0 * x``, for every ``|w| <= 128`` and int8 ``x`` (w1 at its extremes and a sample)."""
    w0 = np.arange(-128, 129, dtype=np.int64)[:, None]
    x = np.arange(-128, 128, dtype=np.int64)[None, :]
    for w1 in (-128, -127, -1, 0, 1, 77, 127, 128):
        pp = ((w1 << 16) + w0) * x + (1 << 15)
        assert (-(1 << 33) <= pp).all() and (pp < (1 << 33)).all()        # fits ap_int<34>
        hi = pp >> 16
        lo = (pp & 0xFFFF) ^ 0x8000
        lo = np.where(lo >= 1 << 15, lo - (1 << 16), lo)
        assert (hi == w1 * x).all() and (lo == w0 * x).all()


def test_dsp_rom_values_and_refusal():
    """:func:`hlsnn.engines.shift_mac.network.dsp.values` against the format's own code values, the
    ROM element ``w0 | w1 << 9`` (9-bit two's complement), and a code above 128 refused."""
    from hlsnn.engines.shift_mac.network import dsp
    rng = np.random.default_rng(3)
    q = shift.quantize_twohot(rng.normal(size=64), 3, max_code=128)
    c = (q.e1.astype(np.int64) | q.e2.astype(np.int64) << 6 | q.s2.astype(np.int64) << 12
         | (~q.zero).astype(np.int64) << 13 | q.s1.astype(np.int64) << 14 | q.zero.astype(np.int64) << 15)
    assert dsp.values(c).tolist() == q.code_values().tolist()
    code = lambda ea, eb, so, hb, sb: ea | eb << 6 | so << 12 | hb << 13 | sb << 14   # noqa: E731
    z = 1 << 15
    wl = [[np.array([z]), np.array([code(7, 0, 1, 0, 0)])], [np.array([z]), np.array([code(6, 0, 0, 1, 1)])]]
    rom = dsp.rom(wl, 2, 2)                        # lanes 0, 1; bank 1 is the DSP bank: -128 and 64 - 1 = 63
    assert rom[0][0].tolist() == [(-128 & 511) | 63 << 9]
    wl[0][1] = np.array([code(7, 6, 0, 1, 0)])     # 192
    with pytest.raises(InputError, match="192") as e:
        dsp.rom(wl, 2, 2)
    assert "\n" not in str(e.value)
