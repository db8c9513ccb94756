"""The emulators' GEMMs in blocks of rows (``engines.common.exact_matmul``) give the bits of
their reference transcriptions whatever the block: with ``GEMM_ROWS`` forced small (several
blocks and a partial last one) and large (one call), on random operands, against each
engine's independent integer path."""
import numpy as np
import pytest

import hlsnn
from hlsnn.engines import common
from hlsnn.engines.bfp_systolic import emulator as bfp_em
from hlsnn.engines.shift_mac import emulator as shift_em
from hlsnn.engines.sparse_cluster.emulator import conv_accumulate

from conftest import ROOT


def _accel(name):
    return hlsnn.load_config(ROOT / "configs" / "accel" / f"{name}.yaml").params


def test_exact_matmul_blocks_equal_one_call(monkeypatch):
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (1000, 37)).astype(np.float32)
    b = rng.integers(-128, 128, (5, 37)).astype(np.float32)
    one = a @ b.T
    for rows in (1, 7, 64, 999, 1000, 10 ** 9):
        monkeypatch.setattr(common, "GEMM_ROWS", rows)
        out = np.full((1000, 5), np.nan, np.float32)
        assert common.exact_matmul(a, b.T, out) is out
        np.testing.assert_array_equal(out, one)


@pytest.mark.parametrize("rows", [5, 10 ** 9])
@pytest.mark.parametrize("accel", ["bfp8_zcu104", "bfp16_pynq-z2"])
def test_bfp_emulate_in_row_blocks_equals_reference(monkeypatch, rows, accel):
    monkeypatch.setattr(common, "GEMM_ROWS", rows)
    p0 = _accel(accel)
    m = p0["mantissa_bits"]
    rng = np.random.default_rng(11)
    for rounding in ("nearest_even", "nearest_away", "truncate"):
        p = {**p0, "rounding": rounding}
        for batch, k, n in ((23, 17, 6), (64, 130, 16), (9, 1, 3)):
            xm = rng.integers(-(1 << (m - 1)), 1 << (m - 1), (batch, k))
            xm[rng.random((batch, k)) < 0.3] = 0
            xm[0] = 0                                      # an all-zero sample
            wm = rng.integers(-(1 << (m - 1)), 1 << (m - 1), (n, k))
            xe = rng.integers(-12, 4, batch)
            we = rng.integers(-12, 4, n) if p["weight_exponent"] == "row" else np.full(n, -5)
            bm = rng.integers(-(1 << (m - 1)), 1 << (m - 1), n)
            for bias in ((None, 0), (bm, -3)):
                for relu in (False, True):
                    got = bfp_em.emulate(p, xm, xe, wm, we, *bias, relu=relu)
                    ref = bfp_em.emulate_reference(p, xm, xe, wm, we, *bias, relu=relu)
                    for g, r in zip(got, ref):
                        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("rows", [3, 10 ** 9])
@pytest.mark.parametrize("accel", ["shift8_pynq-z2", "shift8_zcu104"])
def test_shift_emulate_in_row_blocks_equals_reference(monkeypatch, rows, accel):
    from hlsnn.engines.shift_mac.cases import make_cases
    monkeypatch.setattr(common, "GEMM_ROWS", rows)
    cfg = hlsnn.load_config(ROOT / "configs" / "accel" / f"{accel}.yaml")
    for rounding in ("nearest_even", "nearest_away", "truncate"):
        p = {**cfg.params, "rounding": rounding}
        for case in make_cases(cfg, seed=29, n_random=9):
            x = case.rows_x()
            for stats in (False, True):
                kw = dict(n=case.n, mode=case.mode, delta=case.delta, relu=case.relu, stats=stats)
                got = shift_em.emulate(p, x, case.regs, case.bias, case.shift, **kw)
                ref = shift_em.emulate_reference(p, x, case.regs, case.bias, case.shift, **kw)
                assert len(got) == len(ref)
                for g, r in zip(got, ref):
                    np.testing.assert_array_equal(g, r, err_msg=f"{accel} {case.name} {rounding}")


@pytest.mark.parametrize("rows", [4, 10 ** 9])
def test_sparse_dense_accumulators_in_row_blocks_equal_pair_sums(monkeypatch, rows):
    monkeypatch.setattr(common, "GEMM_ROWS", rows)
    rng = np.random.default_rng(23)
    for c, z, kk, hp, wp in ((3, 5, 3, 9, 11), (70, 4, 5, 8, 7), (2, 6, 1, 5, 5)):
        xp = rng.integers(-128, 128, (c, hp, wp)) * (rng.random((c, hp, wp)) < 0.5)
        w = rng.integers(-128, 128, (z, c, kk, kk))
        np.testing.assert_array_equal(conv_accumulate(xp, w, method="dense"), conv_accumulate(xp, w, method="sparse"))
