"""The C host call's Softmax (``hlsnn_in_softmax`` of ``native/netin.c``, through
:func:`hlsnn.network.nethost.softmax`): the bits of the numpy Softmax the emulator runs
(:func:`hlsnn.deploy.hostops.run`, the reference) on the dequantized output integers, for every
length up to 300 (numpy's pairwise sum: in order below 8, eight partial sums up to 128, halves
beyond), int8 and int16 lanes, radix points from -3 to 12, ties and a constant row; and which
networks the C call applies it to (:func:`~hlsnn.network.nethost.softmax_rule`)."""
from types import SimpleNamespace

import numpy as np
import pytest

from hlsnn.deploy import hostops
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


def _net(after, shape=(10,), engine="sparse_cluster"):
    inp = {"signed": True, "bits": 8, "rounding": "nearest_even", "f": 4}
    return SimpleNamespace(engine=engine, input=inp, output={"tensor": "z", "shape": shape}, host_after=after)


def test_the_rule_takes_one_softmax_over_each_images_vector_only():
    sm = {"op": "Softmax", "inputs": ["z"], "attrs": {"axis": 1}}
    assert nethost.softmax_rule(_net([sm]))
    assert nethost.softmax_rule(_net([dict(sm, attrs={})]))                 # axis -1 by default
    assert not nethost.softmax_rule(_net([]))
    assert not nethost.softmax_rule(_net([sm], shape=(2, 5)))               # over one axis of a map
    assert not nethost.softmax_rule(_net([sm, {"op": "Identity", "inputs": ["probs"]}]))
    assert not nethost.softmax_rule(_net([dict(sm, op="LogSoftmax")]))
    assert not nethost.softmax_rule(_net([dict(sm, inputs=["z", "x"])]))
    assert not nethost.softmax_rule(_net([sm], engine="bfp_systolic"))     # its words: not integers
