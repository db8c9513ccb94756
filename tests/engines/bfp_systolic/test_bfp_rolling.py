"""bfp_systolic's rolling output-exponent method: source 001's rolling-max prediction (SPECS
Alg 1-E, claim 18) with overflow / underflow detection and correction (Alg 1-F, claims 23, 30
and 31), emulator rule 5, *rolling*.

The expected exponents are worked out by hand below from the rule's text. Samples of K = 1 with
mantissa 1 against a weight of 1 (exponent 0) have the single result 1 * 2**xe, so their max-rule
leading-one position is L = xe, and the test chooses the sequence of L directly."""
import numpy as np
import pytest
import yaml

import hlsnn
from conftest import record_calls, stream_path, test_config
from hlsnn.engines.bfp_systolic import RollingState, protocol
from hlsnn.formats import bfp

TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim), pytest.param("sim", marks=pytest.mark.csim)]

# M = 16 (t16_row), so em = L - 14; rolling_len R = 3, underflow_bits U = 2, stored u = L + 512.
# k = 1:
#   L=18: buffer empty -> the max rule, e = 4; buffer [530]
#   L=16: n=1, D=0, P = max(530, 530) = 530, ep = 530-512-14 = 4; em = 2; 4 <= 2+2: kept, e = 4;
#         buffer [530, 528]
#   L=18: n=2, S1=1058, S2=530^2+528^2=559684, D=2*559684-1058^2=4, sd=2, (1058+2)//2=530,
#         P = max(528, 530) = 530, ep = 4 = em: kept, e = 4; buffer [530, 528, 530]
#   L=17: n=3, S1=1588, S2=840584, D=3*840584-1588^2=8, sd=2, (1588+2)//3=530, P = 530, ep = 4,
#         em = 3: kept, e = 4; the buffer is full: [528, 530, 529]
#   L=17: S1=1587, S2=839525, D=6, sd=2, 1589//3=529, P = max(529, 529), ep = 3 = em: e = 3;
#         buffer [530, 529, 529]
#   L=25: S1=1588, S2=840582, D=2, sd=1, 1589//3=529, ep = 3 < em = 11: overflow, e = 11, the
#         buffer emptied, then [537]
#   zero: e = emin = -128, buffer unchanged
#   L=15: P = 537, ep = 11 > em + 2 = 3: underflow, e = 1; buffer [527]
#   L=16: P = 527, ep = 1 < em = 2: overflow, e = 2; buffer [528]
L_SEQ = [18, 16, 18, 17, 17, 25, None, 15, 16]
WANT_K1 = [4, 4, 4, 4, 3, 11, -128, 1, 2]
# k = 3 (k*sd grows the prediction):
#   L=18: e = 4, [530];  L=16: (530 + 0)//1 = 530, ep = 4 <= em + 2 = 4: e = 4, [530, 528]
#   L=18: (1058 + 3*2)//2 = 532 = P, ep = 6 <= em + 2 = 6: kept, e = 6, [530, 528, 530]
#   L=17: (1588 + 3*2)//3 = 531 = P, ep = 5 <= 3 + 2: kept, e = 5, [528, 530, 529]
#   L=17: (1587 + 3*2)//3 = 531, ep = 5 <= 5: kept, e = 5, [530, 529, 529]
#   L=25: (1588 + 3*1)//3 = 530, ep = 4 < 11: overflow, e = 11, [537]; then as for k = 1
WANT_K3 = [4, 4, 6, 5, 5, 11, -128, 1, 2]


def _roll(seq, k):
    st = RollingState(3)
    return [st.exponent(v, 16, 8, k, 2) for v in seq], st


def test_the_rule_by_hand():
    got, st = _roll(L_SEQ, 1)
    assert got == WANT_K1 and st.u == [528]
    assert _roll(L_SEQ, 3)[0] == WANT_K3
    # the buffer holds the last R = 3 entries
    _, st = _roll(L_SEQ[:5], 1)
    assert st.u == [530, 529, 529]


def _rolling_config(tmp_path, **extra):
    data = yaml.safe_load(test_config("t16_row").read_text())
    data["bfp_systolic"].update(rolling_len=3, **extra)
    path = tmp_path / "t16_rolling.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _samples(p, seq):
    M, E = p["mantissa_bits"], p["exponent_bits"]
    xm = np.array([[0 if v is None else 1] for v in seq])
    xe = np.array([[0 if v is None else v] for v in seq])
    x = bfp.BFPTensor.from_parts(xm, xe, M, exponent_bits=E, axis=1, block_size=None)
    w = bfp.BFPTensor.from_parts(np.array([[1]]), np.array([[0]]), M, exponent_bits=E, axis=1, block_size=None)
    return x, w


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k, want", [(1, WANT_K1), (3, WANT_K3)])
def test_the_kernel_follows_the_hand_example(tmp_path, target, k, want):
    with hlsnn.Accelerator(_rolling_config(tmp_path), target, **stream_path(target)) as acc:
        x, w = _samples(acc.config.params, L_SEQ)
        calls = record_calls(acc)
        y = acc.gemm_bfp(x, w, method="rolling", stats_k=k)
        assert np.asarray(y.exponents).reshape(-1).tolist() == want
        # the value 2**L itself, shifted to its exponent: 2**(L - e); zero for the zero sample
        assert y.mantissas.reshape(-1).tolist() == [0 if v is None else 1 << (v - e) for v, e in zip(L_SEQ, want)]
        # the operation's first call empties the buffer: a second operation gives the same result
        y2 = acc.gemm_bfp(x, w, method="rolling", stats_k=k)
        np.testing.assert_array_equal(y2.exponents, y.exponents)
        assert all(f & protocol.FLAG_ROLL_CLEAR for f, _ in calls)
        if target != "emu":        # the cycle model: RollPredict once a sample, in closed form
            from hlsnn.perf.closed_form import bfp_call_counts
            counts = acc.kernel.last_cycles.counts
            assert counts["RollPredict"] == (9, 9)
            assert counts == bfp_call_counts(acc.config.params, 9, 1, 1, rolling=True)


@pytest.mark.parametrize("target", ["emu", pytest.param("csim", marks=pytest.mark.csim)])
def test_the_buffer_carries_over_between_the_calls_of_an_operation(tmp_path, target):
    """A batch split into calls by the transfer limit gives the result of one call: only the
    first call empties the buffer."""
    rng = np.random.default_rng(4)
    cfg = _rolling_config(tmp_path)
    seq = [int(v) for v in np.cumsum(rng.integers(-2, 3, size=40)) + 20]
    with hlsnn.Accelerator(cfg, "emu") as whole:
        x, w = _samples(whole.config.params, seq)
        ref = whole.gemm_bfp(x, w, method="rolling", stats_k=1)
        p = whole.config.params
        limit = protocol.n_input_beats(p, 7, 1, 1, False) * p["stream_bits"] // 8
    with hlsnn.Accelerator(cfg, target, max_transfer_bytes=limit, **stream_path(target)) as tiled:
        calls = record_calls(tiled)
        got = tiled.gemm_bfp(x, w, method="rolling", stats_k=1)
    assert len(calls) > 3
    assert [bool(f & protocol.FLAG_ROLL_CLEAR) for f, _ in calls] == [True] + [False] * (len(calls) - 1)
    np.testing.assert_array_equal(got.exponents, ref.exponents)
    np.testing.assert_array_equal(got.mantissas, ref.mantissas)
    # and the method did something: some exponents are predictions above the max rule
    e_max = np.array(seq) - 14
    e = np.asarray(ref.exponents).reshape(-1)
    assert (e > e_max).any() and (e >= e_max).all() and (e <= e_max + 2).all()


def test_rolling_is_a_method_choice_and_clear_errors(tmp_path):
    with hlsnn.Accelerator(test_config("t16_row"), "emu") as acc:
        with pytest.raises(hlsnn.InputError, match="'max', 'stats' or 'rolling'"):
            acc.gemm(np.ones((2, 3)), np.ones((2, 3)), method="median")
    data = yaml.safe_load(test_config("t16_row").read_text())
    data["bfp_systolic"].update(rolling_len=0)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(hlsnn.ConfigError, match="rolling_len"):
        hlsnn.load_config(path)
