"""shift_mac: the worked examples of SPECS.md §1.5 through the kernel, the PoT-summed ==
two-hot (delta 0) equivalence, the emulator against an independent per-element reference,
convolution against a direct convolution, csim == emulator sweeps, and clear errors."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from hlsnn.engines.shift_mac import emulate, im2col, protocol
from hlsnn.engines.shift_mac.cases import make_cases
from hlsnn.formats import shift as sfmt
from hlsnn.primitives import shift_round_sat

from conftest import ROOT

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = [ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml", ROOT / "configs" / "accel" / "shift8_zcu104.yaml"]
SHIFT10 = ROOT / "configs" / "accel" / "shift10_pynq-z2.yaml"          # 10-bit activations (issue 52)
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


def cfgp(name):
    return CONFIGS / f"{name}.yaml"


def regs(p, fields, cfg_bit):
    """Register lanes for a single unit row from rows of (e1, s1, z1, e2, s2, z2) tuples."""
    f = np.array(fields, dtype=np.int64).T[:, None, :]   # (6, 1, K)
    return protocol.pack_registers(p, *f, np.full(f.shape[1:], cfg_bit))


# ---------------------------------------------------------------- SPECS 1.5 on the kernel

@pytest.mark.parametrize("target", TARGETS)
def test_T0_2_to_T0_6_single_unit(target):
    with hlsnn.Accelerator(cfgp("s_unit"), target) as acc:
        p = acc.config.params
        run = lambda x, f, mode, d=0: acc.run_registers(np.array([[x]]), regs(p, [f], 0 if mode == "twohot" else 1),  # noqa: E731
                                                        n=2 if mode == "pot" else 1, mode=mode, delta=d)[0]
        assert run(3, (2, 0, 0, 0, 0, 0), "twohot").tolist() == [15]             # T0.2: w = 5
        assert run(3, (2, 0, 0, 0, 0, 0), "twohot", d=1).tolist() == [27]        # T0.3: w = 9 (r = 1)
        assert run(5, (3, 1, 0, 1, 0, 0), "twohot").tolist() == [30]             # T0.4: 40 - 10
        assert run(5, (3, 1, 0, 1, 1, 0), "twohot").tolist() == [-30]            # T0.4 with s2 = 1
        # T0.5 PoT: C = 40 (shifter 1, acc2) is neuron 0, A = -10 (shifter 2, acc1) neuron 1
        assert run(5, (3, 0, 0, 1, 1, 0), "pot").tolist() == [40, -10]
        assert run(5, (3, 0, 0, 1, 1, 0), "pot_sum").tolist() == [30]           # SUMMED
        assert run(-3, (2, 0, 0, 0, 0, 0), "twohot").tolist() == [-15]           # T0.6


@pytest.mark.parametrize("target", TARGETS)
def test_T0_7_dot_product_and_T0_8_reset_on_mode_change(target):
    with hlsnn.Accelerator(cfgp("s_unit"), target) as acc:
        p = acc.config.params
        w = [(2, 0, 0, 0, 0, 0), (2, 0, 0, 1, 1, 0), (3, 0, 0, 0, 0, 0)]        # 5, -6, 9
        y = acc.run_registers(np.array([[1, 2, 3]]), regs(p, w, 0), n=1, mode="twohot")
        assert y.tolist() == [[20]]                                              # 5 - 12 + 27
        # T0.8: registers 0-1 two-hot, 2-3 PoT: the change at 2 resets both accumulators, so
        # only the PoT registers count; routed as two-hot, the output is accumulator 1 (A path)
        fields = [(1, 0, 0, 2, 0, 0), (3, 1, 0, 0, 0, 0), (4, 0, 0, 3, 1, 0), (0, 0, 0, 1, 0, 0)]
        lanes = protocol.pack_registers(p, *np.array(fields).T[:, None, :], np.array([[0, 0, 1, 1]]))
        y = acc.run_registers(np.array([[1, 1, 1, 1]]), lanes, n=1, mode="twohot")
        assert y.tolist() == [[-8 + 2]]                                          # -(1 << 3) + (1 << 1)


def test_T0_9_pot_mode_doubles_products_per_cycle():
    est = hlsnn.load_config(SHIPPED[0]).estimates
    assert est["products_per_cycle"]["pot"] == 2 * est["products_per_cycle"]["twohot"]
    assert est["resources"]["dsp"] == 0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["s_unsigned", "s_wide"])
def test_pot_summed_equals_twohot_at_delta_0(target, name):
    """Source 000: a two-hot weight at delta 0 is the sum of two PoT weights; the kernel gives
    the same bits in two-hot mode and in summed-PoT mode."""
    rng = np.random.default_rng(3)
    with hlsnn.Accelerator(cfgp(name), target) as acc:
        p = acc.config.params
        w = rng.normal(size=(11, 17)) * np.where(rng.random((11, 17)) < 0.5, 1.0, 0.1)
        t = sfmt.quantize_twohot(w, p["exp_bits"], delta=0, axis=0)
        a, b = acc.kernel._quantize_weights(w, "pot_sum", 0)
        np.testing.assert_array_equal(a.dequantize() + b.dequantize(), t.dequantize())
        lo, hi = (-(1 << (p["act_bits"] - 1)), 1 << (p["act_bits"] - 1)) if p["act_signed"] else (0, 1 << p["act_bits"])
        x = rng.integers(lo, hi, (5, 17))
        bias = rng.integers(-1000, 1000, 11)
        # an output scale that spreads the results over the output range (not an expected value)
        big = int((np.abs(x) @ np.abs(t.code_values()).T).max())
        sh = max(0, big.bit_length() - (p["act_bits"] - 1))
        y1 = acc.gemm_int(x, t, bias=bias, shift=sh, relu=True)
        y2 = acc.gemm_int(x, (a, b), bias=bias, shift=sh, relu=True)
        np.testing.assert_array_equal(y1, y2)
        assert np.unique(y1).size > 3


# ---------------------------------------------------------------- emulator vs reference

def ref_emulate(p, x, lanes, bias, shift, n, mode, delta, relu):
    """Per-element transcription of the unit (Alg 0-A/0-B) with Python ints, cycle by cycle."""
    rows, k = lanes.shape
    e1, s1, z1, e2, s2, z2, cfg = (f.tolist() for f in protocol.unpack_registers(p, lanes))
    A, B = p["acc_bits"], p["act_bits"]
    out = np.zeros((len(x), n), np.int64)
    for bi, xr in enumerate(x.tolist()):
        accs = []
        for u in range(rows):
            a1 = a2 = 0
            prev = 0 if mode == "twohot" else 1
            for kk in range(k):
                if cfg[u][kk] != prev:
                    a1 = a2 = 0
                prev = cfg[u][kk]
                c, aa = xr[kk] << e1[u][kk], xr[kk] << e2[u][kk]
                if cfg[u][kk] == 0:
                    bb = 0 if z1[u][kk] else ((c << delta) - aa if s1[u][kk] else (c << delta) + aa)
                    a1 = a1 - bb if s2[u][kk] else a1 + bb
                else:
                    pa, pc = (0 if z2[u][kk] else aa), (0 if z1[u][kk] else c)
                    a1 = a1 - pa if s2[u][kk] else a1 + pa
                    a2 = a2 - pc if s1[u][kk] else a2 + pc
            accs.append((a1, a2))
        vals = []
        for u, (a1, a2) in enumerate(accs):
            vals += {"twohot": [a1], "pot": [a2, a1], "pot_sum": [a1 + a2]}[mode]
        for j in range(n):
            v = max(-(1 << (A - 1)), min((1 << (A - 1)) - 1, vals[j] + int(bias[j])))
            v = max(v, 0) if relu else v
            if p["act_signed"]:
                out[bi, j] = shift_round_sat(np.array([v]), int(shift[j]), B, p["rounding"])[0][0]
            else:
                out[bi, j] = min(max(int(shift_round_sat(np.array([v]), int(shift[j]), B + 1, p["rounding"])[0][0]), 0),
                                 (1 << B) - 1)
    return out


@pytest.mark.parametrize("name", ["s_unit", "s_unsigned", "s_wide", "s_tiny"])
def test_emulator_matches_cycle_by_cycle_reference(name):
    cfg = hlsnn.load_config(cfgp(name))
    for case in make_cases(cfg, seed=5, n_random=6):
        x = case.rows_x()
        if x.shape[1] > 100 or x.shape[0] > 60:
            continue
        y, _ = emulate(cfg.params, x, case.regs, case.bias, case.shift, n=case.n, mode=case.mode,
                       delta=case.delta, relu=case.relu)
        r = ref_emulate(cfg.params, x, case.regs, case.bias, case.shift, case.n, case.mode, case.delta, case.relu)
        np.testing.assert_array_equal(y, r, err_msg=case.name)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv2d_int_equals_direct_convolution(target, padding):
    """Accumulators of the kernel's convolution against a direct sum over kernel offsets with
    the weights' integer code values (no im2col), then the same requantization."""
    rng = np.random.default_rng(8)
    with hlsnn.Accelerator(cfgp("s_unsigned"), target) as acc:
        p = acc.config.params
        x = rng.integers(0, 1 << p["act_bits"], (2, 6, 5))
        w = rng.normal(size=(4, 2, 3, 3))
        wq = sfmt.quantize_twohot(w, p["exp_bits"], delta=2, axis=0)
        shift = 6
        y = acc.conv2d_int(x, wq, padding=padding, shift=shift)
        pad = 1 if padding == "same" else 0
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
        cv = wq.code_values()
        oh, ow = xp.shape[1] - 2, xp.shape[2] - 2
        accs = np.zeros((4, oh, ow), np.int64)
        for ky in range(3):
            for kx in range(3):
                accs += np.einsum("zc,chw->zhw", cv[:, :, ky, kx], xp[:, ky:ky + oh, kx:kx + ow])
        y1, _ = shift_round_sat(accs, shift, p["act_bits"] + 1, p["rounding"])
        np.testing.assert_array_equal(y, np.clip(y1, 0, (1 << p["act_bits"]) - 1))


def test_im2col_order_matches_the_kernel_rules():
    fmap = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    rows, (oh, ow) = im2col(fmap, 3, 1)
    assert (oh, ow) == (3, 4) and rows.shape == (12, 18)
    # pixel (1, 2) = sample 6; feature (ci=1, ky=0, kx=2) = index 9 + 2 -> fmap[1, 0, 3]
    assert rows[6, 11] == fmap[1, 0, 3]
    assert rows[0, 0] == 0           # (ci 0, ky 0, kx 0) at pixel (0, 0) is padding


# ---------------------------------------------------------------- floats

@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
def test_float_gemm_and_conv_are_close_to_float_reference(mode):
    rng = np.random.default_rng(2)
    with hlsnn.Accelerator(SHIPPED[0], "emu") as acc:
        x, w, b = rng.normal(size=(6, 40)), rng.normal(size=(20, 40)) * 0.2, rng.normal(size=20)
        y = acc.gemm(x, w, bias=b, relu=True, mode=mode)
        ref = np.maximum(x @ w.T + b, 0)
        assert np.abs(y - ref).max() <= 0.2 * np.abs(ref).max()
        assert np.corrcoef(y.ravel(), ref.ravel())[0, 1] > 0.97
        xc, wc = rng.normal(size=(3, 8, 8)), rng.normal(size=(5, 3, 3, 3)) * 0.3
        yc = acc.conv2d(xc, wc, padding="same", mode=mode)
        pad = np.pad(xc, ((0, 0), (1, 1), (1, 1)))
        refc = sum(np.einsum("zc,chw->zhw", wc[:, :, i, j], pad[:, i:i + 8, j:j + 8]) for i in range(3) for j in range(3))
        assert yc.shape == (5, 8, 8)
        assert np.corrcoef(yc.ravel(), refc.ravel())[0, 1] > 0.97


@pytest.mark.csim
def test_float_gemm_csim_equals_emu_for_shipped_configs():
    rng = np.random.default_rng(12)
    for path in SHIPPED:
        with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
            signed = c.config.params["act_signed"]
            x = rng.normal(size=(7, 33)) if signed else np.abs(rng.normal(size=(7, 33)))
            w = rng.normal(size=(19, 33))
            for mode in ("twohot", "pot", "pot_sum"):
                np.testing.assert_array_equal(c.gemm(x, w, relu=True, mode=mode), e.gemm(x, w, relu=True, mode=mode))
            xc = rng.normal(size=(2, 9, 7)) if signed else np.abs(rng.normal(size=(2, 9, 7)))
            wc = rng.normal(size=(4, 2, 3, 3))
            np.testing.assert_array_equal(c.conv2d(xc, wc, padding="valid"), e.conv2d(xc, wc, padding="valid"))


# ---------------------------------------------------------------- csim sweeps, CLI

@pytest.mark.csim
@pytest.mark.parametrize("path", SHIPPED + [SHIFT10] + sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_csim_equals_emulator_in_every_mode(path):
    from hlsnn.compare import compare
    rep = compare(hlsnn.load_config(path), "csim", seed=77, n_random=6)
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []
    names = {r["case"] for r in rep["results"]}
    assert {"twohot_mode_change_reset", "pot_ragged", "pot_sum_k1"} <= names


@pytest.mark.csim
def test_cli_compare_and_standalone_testbench(tmp_path):
    env = dict(os.environ)                  # the session's build folder: the library compiles once a run
    res = subprocess.run(["hlsnn", "compare", str(SHIPPED[0]), "--target", "csim", "--json"], capture_output=True,
                         text=True, env=env)
    rep = json.loads(res.stdout)
    assert res.returncode == 0 and rep["mismatches"] == 0 and rep["engine"] == "shift_mac"
    from hlsnn import codegen, csim
    r = codegen.render(hlsnn.load_config(cfgp("s_unsigned")), tmp_path / "hls")
    exe = tmp_path / "tb"
    subprocess.run([csim.compiler(), "-std=c++14", "-O1", f"-I{r.dir / 'include'}", f"-I{r.dir}",
                    f"-isystem{csim.ap_types_dir()}", str(r.dir / "shift_mac.cpp"), str(r.dir / "tb.cpp"), "-o",
                    str(exe)], check=True)
    ok = subprocess.run([str(exe), str(r.dir / "tb_data")], capture_output=True, text=True)
    assert ok.returncode == 0 and "0 mismatching" in ok.stdout, ok.stdout


def test_kernel_source_has_no_multiplication():
    """No `*` operator in the rendered kernel (products are shifts), and the pragmas that keep
    the tool from inferring DSPs are there."""
    from hlsnn import codegen
    import re
    r = codegen.render(hlsnn.load_config(SHIPPED[0]))
    code = (r.dir / "shift_mac.cpp").read_text()
    body = re.sub(r"//[^\n]*", "", code)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    # every `*` must have a compile-time constant operand (a literal or a k-constant): index
    # arithmetic on unrolled loops, never a product of two run-time values, let alone a weight
    products = re.findall(r"([\w:]+)\s*\*\s*([\w:]+)", body)
    assert products, "expected constant index products such as p * kLane"
    const = re.compile(r"^(\d+|k\w+|Cfg::k\w+)$")
    bad = [pr for pr in products if not (const.match(pr[0]) or const.match(pr[1]))]
    assert not bad, f"run-time multiplications in the kernel: {bad}"
    assert "ALLOCATION operation instances = mul limit = 0" in code
    assert code.count("impl = fabric") >= 4


@pytest.mark.parametrize("call, match", [
    (lambda a: a.gemm(np.ones((2, 3)), np.ones((4, 3)), mode="nope"), "mode"),
    (lambda a: a.gemm(np.ones((2, 3)), np.ones((4, 3)), delta=9), "delta"),
    (lambda a: a.gemm(np.ones((2, 3)), np.ones((4, 5))), "K"),
    (lambda a: a.gemm_int(np.ones((2, 3), int), sfmt.quantize_pot(np.ones((4, 3)), 2, axis=0)), "exp_bits"),
    (lambda a: a.gemm_int(np.full((2, 3), 300), sfmt.quantize_pot(np.ones((4, 3)), 4, axis=0)), r"\[-128, 127\]"),
    (lambda a: a.conv2d(np.ones((1, 4, 4)), np.ones((2, 1, 2, 2)), padding="same"), "odd"),
    (lambda a: a.conv2d(np.ones((1, 2, 2)), np.ones((2, 1, 5, 5)), padding="valid"), "does not fit"),
])
def test_bad_calls_are_clear_errors(call, match):
    with hlsnn.Accelerator(SHIPPED[0], "emu") as acc:
        with pytest.raises(hlsnn.InputError, match=match):
            call(acc)


def test_unsigned_config_rejects_negative_activations_and_no_conv_config_rejects_conv():
    with hlsnn.Accelerator(SHIPPED[1], "emu") as acc:
        with pytest.raises(hlsnn.InputError, match="unsigned"):
            acc.gemm(-np.ones((2, 3)), np.ones((4, 3)))
    with hlsnn.Accelerator(cfgp("s_wide"), "emu") as acc:
        with pytest.raises(hlsnn.InputError, match="conv: false"):
            acc.conv2d_int(np.ones((1, 3, 3), int), sfmt.quantize_pot(np.ones((2, 1, 3, 3)), 5, axis=0))


@pytest.mark.parametrize("name", ["s_unit", "s_unsigned", "s_wide", "s_tiny", "shift8_zcu104"])
def test_fast_emulator_equals_reference_transcription(name):
    from hlsnn.engines.shift_mac.emulator import emulate_reference
    path = SHIPPED[1] if name == "shift8_zcu104" else cfgp(name)
    cfg = hlsnn.load_config(path)
    for rounding in ("nearest_even", "nearest_away", "truncate"):
        p = {**cfg.params, "rounding": rounding}
        for case in make_cases(cfg, seed=21, n_random=9):
            x = case.rows_x()
            kw = dict(n=case.n, mode=case.mode, delta=case.delta, relu=case.relu)
            got = emulate(p, x, case.regs, case.bias, case.shift, block_elems=11, **kw)
            ref = emulate_reference(p, x, case.regs, case.bias, case.shift, **kw)
            np.testing.assert_array_equal(got[0], ref[0], err_msg=f"{name} {case.name} {rounding}")
            assert got[1] == ref[1], (name, case.name, rounding)


# ---------------------------------------------------------------- the stream protocol by hand

def test_output_stream_order_by_hand():
    """s_unsigned: rows 3, cols 2, 32-bit beats (2 lanes). B = 3, N = 4 two-hot: tiles of 3
    neurons (0-2, 3); groups of 2 samples (0-1, 2). Per tile, per group, per neuron: the
    group's samples, padded to a whole beat."""
    p = hlsnn.load_config(cfgp("s_unsigned")).params
    y = np.arange(12).reshape(3, 4) + 100            # y[b, n] = 100 + 4 b + n
    want = [100, 104, 101, 105, 102, 106,            # tile 0, group 0 (samples 0, 1): neurons 0, 1, 2
            108, 0, 109, 0, 110, 0,                  # tile 0, group 1 (sample 2, padded)
            103, 107,                                # tile 1, group 0: neuron 3
            111, 0]                                  # tile 1, group 1
    beats = protocol.pack_output(p, y, "twohot")
    assert beats.reshape(-1).view("<i2").tolist() == want
    assert beats.shape[0] == protocol.n_output_beats(p, 3, 4) == 8
    np.testing.assert_array_equal(protocol.unpack_output(p, beats, 3, 4, "twohot"), y)
    # dual PoT: one tile of 6 neurons holds all four
    got = protocol.pack_output(p, y, "pot").reshape(-1).view("<i2").tolist()
    assert got == [100, 104, 101, 105, 102, 106, 103, 107, 108, 0, 109, 0, 110, 0, 111, 0]
    # a convolution's groups are per output row: 2 rows of 3 pixels, one neuron
    yc = np.array([[1], [2], [3], [4], [5], [6]])
    assert protocol.pack_output(p, yc, "twohot", row=3).reshape(-1).view("<i2").tolist() == [1, 2, 3, 0, 4, 5, 6, 0]


def test_input_stream_by_hand():
    """s_unsigned (32-bit beats: 2 lanes of 16 bits, or 4 byte lanes for its 6-bit
    activations; rows 3): parameters (four 16-bit lanes per neuron), then the samples (K byte
    lanes each, padded to a beat), then each tile's K steps of 3 register lanes (padded to 4:
    2 beats); a resident call has no weights; a convolution sends its weights, then the rows,
    per row per channel."""
    p = hlsnn.load_config(cfgp("s_unsigned")).params
    regs = np.arange(1, 7, dtype=np.uint16).reshape(3, 2)     # one tile of 3 rows, K = 2
    x = np.array([[7, 8], [9, 10]])
    beats = protocol.pack_input(p, regs=regs, bias=[-2, 70000], shift=[3, -1], n=2, mode="twohot", x=x)
    raw = beats.reshape(-1)
    assert raw[:16].view("<u2").tolist() == [0xFFFE, 0xFFFF, 3, 0, 70000 & 0xFFFF, 1, 0xFFFF, 0]  # lo, hi, shift, 0
    assert raw[16:24].tolist() == [7, 8, 0, 0, 9, 10, 0, 0]                                        # the samples
    assert raw[24:].view("<u2").tolist() == [1, 3, 5, 0, 2, 4, 6, 0]                               # steps k = 0, 1
    assert beats.shape[0] == protocol.n_input_beats(p, batch=2, n=2, k=2, mode="twohot") == 10
    res = protocol.pack_input(p, regs=None, bias=[-2, 70000], shift=[3, -1], n=2, mode="twohot", x=x, resident=True)
    assert res.reshape(-1).tolist() == raw[:24].tolist()
    fmap = np.array([[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])    # (C=2, H=2, W=3)
    regs9 = np.arange(3 * 18, dtype=np.uint16).reshape(3, 18)
    conv = protocol.pack_input(p, regs=regs9, bias=[0], shift=[0], n=1, mode="twohot", fmap=fmap)
    tail = conv.reshape(-1)[8 + 18 * 2 * 4:].tolist()                        # after 2 + 36 beats
    assert tail == [1, 2, 3, 0, 7, 8, 9, 0, 4, 5, 6, 0, 10, 11, 12, 0]      # row 0: channels 0, 1; row 1
    assert conv.shape[0] == protocol.n_input_beats(p, batch=0, n=1, k=18, mode="twohot", fmap_shape=(2, 2, 3))
    # signed activations of 8 bits or less are signed bytes, 16-bit ones 16-bit lanes
    ps = hlsnn.load_config(SHIPPED[0]).params
    b = protocol.pack_input(ps, regs=None, bias=[0], shift=[0], n=1, mode="twohot", x=np.array([[-1, 5, -128]]),
                            resident=True).reshape(-1)
    assert b[8:16].view("<i1").tolist() == [-1, 5, -128, 0, 0, 0, 0, 0]
    pw = hlsnn.load_config(cfgp("s_wide")).params
    b = protocol.pack_input(pw, regs=None, bias=[0], shift=[0], n=1, mode="twohot", x=np.array([[-300, 7]]),
                            resident=True).reshape(-1)
    assert b[32:36].view("<i2").tolist() == [-300, 7]


def test_lut_model_by_hand():
    """The shifter model of spec.shifter_luts, counted by hand for 8-bit activations: a shift
    by 0..15 is a 4:1 stage over 8+3 = 11 bits and one over 8+15 = 23 bits (34 LUTs); by
    0..22 (e1 + delta, delta folded) a third, 2:1 stage over 30 bits, two bits per LUT (15):
    49; the separate delta shifter of the source (23 bits by 0..7): 26 + 15 = 41."""
    from hlsnn.engines.shift_mac import spec
    assert spec.shifter_luts(8, 15) == 34
    assert spec.shifter_luts(8, 22) == 49
    assert spec.shifter_luts(23, 7) == 41
    assert spec.shifter_luts(8, 0) == 0
    p = hlsnn.load_config(SHIPPED[0]).params      # 8-bit signed, E = 4, delta 7, 42-bit accumulators
    parts = spec.unit_luts(p)
    assert parts == {"shifter_1": 49, "shifter_2": 34, "shifter_3": 0, "adder": 31, "select": 31, "acc1": 42,
                     "acc2": 42, "handover": 42}          # 84 shadow bits, two 2:1 multiplexers per LUT6
    unfolded = spec.unit_luts(p, fold_delta=False)
    assert (unfolded["shifter_1"], unfolded["shifter_3"]) == (34, 41)
    # folding delta saves 34 + 41 - 49 = 26 LUTs per unit
    assert spec.lut_per_unit(p, fold_delta=False) - spec.lut_per_unit(p) == 26
