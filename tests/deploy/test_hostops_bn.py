"""The ``BatchNormalization`` host op (:func:`hlsnn.deploy.run.hostops.run`, before or after a
network kernel and in the layer path): its scale ``gamma / sqrt(var + eps)`` and the reshaped
per-channel arrays are worked out once per layer (:func:`hlsnn.deploy.run.hostops.bn_terms`), and
the outputs are bit for bit those of the per-call expression it replaced, written out here:
``(x - mean) * (gamma / sqrt(var + eps)) + beta``, broadcast over axis 1."""
import numpy as np
import pytest

from hlsnn.deploy.run import hostops


def _old(x, params, eps):
    gamma, beta, mean, var = params
    s = gamma / np.sqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(shape)) * s.reshape(shape) + beta.reshape(shape)


def _params(rng, c, dtype=np.float64):
    return [rng.normal(1, 0.5, c).astype(dtype), rng.normal(0, 1, c).astype(dtype), rng.normal(0, 2, c).astype(dtype),
            (rng.exponential(1, c) * rng.choice([1e-6, 1, 1e3], c)).astype(dtype)]


@pytest.mark.parametrize("shape", [(5, 3), (4, 6, 7), (3, 8, 5, 4), (2, 1, 9, 9)])
@pytest.mark.parametrize("xtype,ptype", [(np.float64, np.float64), (np.float32, np.float64), (np.float32, np.float32)])
def test_bits_of_the_per_call_expression(shape, xtype, ptype):
    rng = np.random.default_rng(sum(shape))
    params, eps = _params(rng, shape[1], ptype), float(rng.choice([1e-5, 1e-3, 0.0]))
    st = hostops._Spec("BatchNormalization", {"params": params, "epsilon": eps})
    for _ in range(3):                       # the first call works the terms out, the others reuse them
        x = (rng.normal(0, 3, shape) * rng.choice([1e-4, 1, 1e4], shape)).astype(xtype)
        want, got = _old(x, params, eps), hostops.run(st, [x])
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_terms_are_kept_not_recomputed():
    rng = np.random.default_rng(1)
    params = _params(rng, 4)
    st = hostops._Spec("BatchNormalization", {"params": params})
    x = rng.normal(size=(2, 4, 3, 3))
    hostops.run(st, [x])
    kept = hostops.bn_terms(st, 4)
    assert all(a is b for a, b in zip(kept, hostops.bn_terms(st, 4)))
    # the call reads the kept arrays: a changed kept scale changes the output (nothing recomputes it)
    st.bn_fixed[1][4] = (kept[0], kept[1] * 2, kept[2])
    np.testing.assert_array_equal(hostops.run(st, [x]), _old(x, [params[0] * 2] + params[1:], 1e-5))
    # replaced parameters (a new list) are worked out again
    st.attrs["params"] = _params(rng, 4)
    np.testing.assert_array_equal(hostops.run(st, [x]), _old(x, st.attrs["params"], 1e-5))


def test_a_layer_without_attributes_works_them_out_per_call():
    class Slotted:
        __slots__ = ("op", "attrs")
    st = Slotted()
    st.op, st.attrs = "BatchNormalization", {"params": _params(np.random.default_rng(2), 3)}
    x = np.random.default_rng(3).normal(size=(4, 3))
    np.testing.assert_array_equal(hostops.run(st, [x]), _old(x, st.attrs["params"], 1e-5))
