"""Valid configs at the small end of every range (issue 33, finding 7): the seeded cases of
``compare``/``csim`` respect the config's own limits, so a config that passes ``info`` passes
``compare`` (a bfp config of max_k 1 was sent K = 3 and stopped on a kernel assert; sparse
configs of max_hw 7 got a 13x11 map; tiles of 1-3 crashed the case generator)."""
import pytest

from hlsnn.compare import compare
from hlsnn.config import load_config
from hlsnn.engines import ENGINES


def _cfg(engine, **params):
    return load_config({"name": "t", "board": "pynq-z2", "engine": engine, engine: params}, check_fit=False)


BFP = [dict(rows=1, cols=1, mantissa_bits=2, exponent_bits=3, acc_bits=8, max_k=1, max_n=1),
       dict(rows=2, cols=3, mantissa_bits=4, exponent_bits=3, acc_bits=16, max_k=3, max_n=2),
       dict(rows=1, cols=2, mantissa_bits=8, exponent_bits=4, acc_bits=20, max_k=5, max_n=1, weight_exponent="tensor")]


@pytest.mark.parametrize("params", BFP, ids=lambda p: f"r{p['rows']}c{p['cols']}k{p['max_k']}n{p['max_n']}")
def test_bfp_cases_fit_the_config(params):
    from hlsnn.engines.bfp_systolic.spec import k_limit
    cfg = _cfg("bfp_systolic", **params)
    p = cfg.params
    for c in ENGINES["bfp_systolic"].cases.make_cases(cfg, seed=0, n_random=4):
        b, n, k = c.shape
        assert 1 <= k <= (p["max_k"] if c.resident else k_limit(p)), (c.name, c.shape)
        assert 1 <= n <= p["max_n"] and len(c.we) == n and (c.bm is None or len(c.bm) == n), (c.name, c.shape)
    assert compare(cfg, "emu", seed=0, n_random=4)["mismatches"] == 0


SPARSE = [dict(units=8, max_hw=7), dict(units=8, max_hw=8), dict(units=1, tile_h=1, tile_w=1, max_hw=1, max_ksize=1),
          dict(units=2, tile_h=2, tile_w=3, max_hw=3, max_ksize=5), dict(units=1, tile_h=3, tile_w=2, max_hw=2)]


@pytest.mark.parametrize("params", SPARSE, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_sparse_cases_fit_the_config(params):
    cfg = _cfg("sparse_cluster", **params)
    p = cfg.params
    for c in ENGINES["sparse_cluster"].cases.make_cases(cfg, seed=0, n_random=6):
        assert max(c.x.shape[1:]) <= p["max_hw"] and c.w.shape[2] <= p["max_ksize"], c.name
    if p["units"] <= 2:          # the planner of 8 units takes seconds: the fit above is the point
        assert compare(cfg, "emu", seed=0, n_random=2)["mismatches"] == 0


def test_sparse_pooling_needs_a_tile_of_2x2():
    """A pooled job covers whole 2x2 windows: a config of tile_h 1 stopped on a kernel assert in
    C-simulation; the Python API now says so, and the seeded cases leave pooling out."""
    import numpy as np
    from hlsnn import Accelerator
    from hlsnn.errors import InputError
    cfg = _cfg("sparse_cluster", units=1, tile_h=1, tile_w=2, max_hw=3, max_ksize=3)
    assert not any(c.pool for c in ENGINES["sparse_cluster"].cases.make_cases(cfg, seed=0, n_random=6))
    with Accelerator(cfg, "emu") as acc, pytest.raises(InputError, match="2x2 pooling needs output tiles"):
        acc.conv2d_int(np.ones((1, 3, 3), np.int64), np.ones((1, 1, 3, 3), np.int64), pool=True)
