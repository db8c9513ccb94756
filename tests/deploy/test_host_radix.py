"""host_radix (DETERMINE on host values) gives the point of its rule written out with
``acquire``: random values of every magnitude, signs, overflow ratios, sizes on both sides of
the compiled histogram's threshold, with and without the compiled helpers."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.deploy.quantize.quant import host_radix
from hlsnn.formats import fixed

from conftest import stable_seed


def reference(values, bits, signed, overflow_ratio):
    v = np.asarray(values, np.float64)
    amax = float(np.abs(v).max()) if v.size else 0.0
    if amax == 0:
        return bits - 1
    g = 52 - int(np.floor(np.log2(amax))) - 1
    wide = np.rint(np.ldexp(v, g)).astype(np.int64)
    st = fixed.acquire(wide, bins=64)
    return fixed.determine(st, g, bits, overflow_ratio=overflow_ratio, signed=signed, f_min=-64, f_max=64)


@pytest.fixture(params=["compiled", "numpy"])
def helpers(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setenv("HLSNN_NATIVE", "0")
    native.forget()
    yield request.param
    native.forget()


@pytest.mark.parametrize("seed", range(6))
def test_host_radix_is_acquire_and_determine(helpers, seed):
    rng = np.random.default_rng(stable_seed("host_radix", seed))
    for _ in range(25):
        n = int(rng.choice([1, 7, 300, 5000, 70000]))
        scale = float(2.0 ** rng.integers(-1080, 1000))
        v = rng.standard_normal(n) * scale
        if rng.random() < 0.5:
            v = np.maximum(v, 0)
        if rng.random() < 0.3:
            v[rng.random(n) < 0.5] = 0.0
        if rng.random() < 0.2:
            v = np.ldexp(np.rint(np.ldexp(v / scale, 6)), -6) * 2.0 ** int(rng.integers(-20, 20))   # dyadic
        for bits, signed, ratio in [(8, True, 0.0), (8, False, 0.0), (16, True, 0.001), (4, True, 0.3)]:
            assert host_radix(v, bits, signed, ratio) == reference(v, bits, signed, ratio)
    assert host_radix(np.zeros(5), 8, True) == reference(np.zeros(5), 8, True, 0.0) == 7
    assert host_radix(np.zeros(0), 8, True) == 7
    edge = np.array([-2.0 ** 1023, 2.0 ** -1074, -0.0])
    assert host_radix(edge, 8, True) == reference(edge, 8, True, 0.0)
