"""The C host call's Softmax (``hlsnn_in_softmax`` of ``native/netin.c``, through
:func:`hlsnn.network.nethost.softmax`): the bits of the numpy Softmax the emulator runs
(:func:`hlsnn.deploy.run.hostops.run`, the reference) on the dequantized output integers, for every
length up to 300 (numpy's pairwise sum: in order below 8, eight partial sums up to 128, halves
beyond), int8 and int16 lanes, radix points from -3 to 12, ties and a constant row; a
``bfp_systolic`` network's pairs (m, e) (``hlsnn_in_softmax_bfp``: one shared exponent, zeros of
any exponent, over bfp8's whole exponent range) and the rows its table does not cover; and which
networks the C call applies it to (:func:`~hlsnn.network.nethost.softmax_rule`)."""
from types import SimpleNamespace

import numpy as np
import pytest

from hlsnn.deploy.run import hostops
from hlsnn.network import nethost

pytestmark = pytest.mark.skipif("not nethost.available()", reason="no C compiler for the C host path")


def _numpy_softmax(q, f, axis=1):
    return hostops.run(hostops._Spec("Softmax", {"axis": axis}), [np.ldexp(q.astype(np.float64), -f)])


@pytest.mark.parametrize("lane,f", [(np.int8, 2), (np.int8, -3), (np.int8, 7), (np.int16, 12), (np.int16, 0)])
def test_the_c_softmax_is_numpys_bit_for_bit(lane, f):
    rng = np.random.default_rng(int(f) + 20)
    info = np.iinfo(lane)
    table = nethost.exp_table(f, lane == np.int16)
    for n in list(range(1, 140)) + [255, 256, 300]:
        q = rng.integers(info.min, info.max + 1, (2, n)).astype(lane)
        q[1, : n // 2] = q[1, 0]                         # ties, and at n = 1 a constant row
        got = nethost.softmax(q, f, table)
        want = _numpy_softmax(q, f)
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist(), (n, f)
        assert np.allclose(got.sum(axis=1), 1.0)


def test_the_extreme_rows():
    """The lanes' whole range in one row (the table's last entry) and a constant row."""
    q = np.array([[-128, 127] + [0] * 8, [5] * 10], np.int8)
    want = _numpy_softmax(q, 0)
    assert nethost.softmax(q, 0).view(np.uint64).tolist() == want.view(np.uint64).tolist()
    assert nethost.softmax(q, 0)[1].tolist() == [0.1] * 10


@pytest.mark.parametrize("e", [-128, -75, -60, -20, -7, 0, 4, 9, 11, 127])
def test_the_c_softmax_of_bfp_pairs_is_numpys_bit_for_bit(e):
    """Rows of M = 8-bit mantissas at one exponent e (bfp8's range [-128, 127]: the table's every
    row kind, from exp(-d 2**e) = 1 to 0), a fifth of them zeros carrying other exponents, ties
    and a constant row: the bits of the numpy Softmax on the values m 2**e."""
    rng = np.random.default_rng(e + 200)
    table = nethost.bfp_exp_table(8, 8)
    for n in list(range(1, 140)) + [255, 256, 300]:
        pm = rng.integers(-128, 128, (2, n))
        pm[1, : n // 2] = pm[1, 0]
        pe = np.full((2, n), e)
        zero = rng.random((2, n)) < 0.2
        pm[zero] = 0
        pe[zero] = rng.integers(-300, 300, int(zero.sum()))     # a zero's exponent does not matter
        got, done = nethost.softmax_bfp(pm, pe, 8, 8, table)
        want = hostops.run(hostops._Spec("Softmax", {"axis": 1}), [np.ldexp(pm.astype(np.float64), pe) + 0.0])
        assert done.all(), (n, e)
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist(), (n, e)


def test_bfp_rows_the_table_does_not_cover_are_left_to_numpy():
    """Two non-zero exponents, an exponent outside [-128, 127], mantissas 256 or more apart (wider
    than 8 bits): not covered (the C call leaves the row; CHost.run applies numpy's Softmax)."""
    pm = np.array([[3, 5, 0], [3, 5, 0], [200, -100, 1], [0, 0, 0]])
    pe = np.array([[1, 2, 0], [130, 130, 0], [0, 0, 0], [9, 4, -7]])
    got, done = nethost.softmax_bfp(pm, pe, 8, 8)
    assert done.tolist() == [False, False, False, True]
    assert got[3].tolist() == [1 / 3] * 3 and np.isnan(got[:3]).all()


def _net(after, shape=(10,), engine="sparse_cluster", params=None):
    inp = {"signed": True, "bits": 8, "rounding": "nearest_even", "f": 4}
    return SimpleNamespace(engine=engine, input=inp, output={"tensor": "z", "shape": shape}, host_after=after,
                           params=params or {})


def test_the_rule_takes_one_softmax_over_each_images_vector_only():
    sm = {"op": "Softmax", "inputs": ["z"], "attrs": {"axis": 1}}
    assert nethost.softmax_rule(_net([sm]))
    assert nethost.softmax_rule(_net([dict(sm, attrs={})]))                 # axis -1 by default
    assert not nethost.softmax_rule(_net([]))
    assert not nethost.softmax_rule(_net([sm], shape=(2, 5)))               # over one axis of a map
    assert not nethost.softmax_rule(_net([sm, {"op": "Identity", "inputs": ["probs"]}]))
    assert not nethost.softmax_rule(_net([dict(sm, op="LogSoftmax")]))
    assert not nethost.softmax_rule(_net([dict(sm, inputs=["z", "x"])]))
    bfp = {"mantissa_bits": 8, "exponent_bits": 8}
    assert nethost.softmax_rule(_net([sm], engine="bfp_systolic", params=bfp))   # bfp8: a 65,536-entry table
    assert not nethost.softmax_rule(_net([sm], engine="bfp_systolic", params=dict(bfp, mantissa_bits=16)))
    assert not nethost.softmax_rule(_net([sm], engine="bfp_systolic"))
    assert not nethost.softmax_rule(_net([sm], shape=(2, 5), engine="bfp_systolic", params=bfp))
