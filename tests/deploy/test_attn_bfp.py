"""Attention on BFP pairs (hlsnn.engines.bfp_systolic.network.attnpairs, issue 79): each rule against
an independent reference (Python Fractions for the exact steps, numpy float64 for the error bounds,
the layer path's float quantizer and engine for rule bfp_act_matmul), a planted one-bit change in each rule
caught, and the bfp8 encoder classifier and tiny ViT (both exporters) lowered to one network program
whose emu bits are the layer path's, refused by name by the bfp network kernel (no loops yet)."""
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from hlsnn.config import load_config
from hlsnn.engines.bfp_systolic.network import attnpairs as ap
from hlsnn.engines.network.tokens import attention as at
from hlsnn.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CFG = load_config(ROOT / "configs/accel/bfp8_zcu104.yaml")
P = CFG.params                                      # nearest_even, row exponents, M 8, E 8


def _rnd(fr, rounding):
    """``fr`` (a Fraction) rounded to an integer by ``rounding``."""
    if rounding == "nearest_even":
        return round(fr)                                   # Python rounds a Fraction half to even
    fl = math.floor(fr)
    d = fr - fl
    return fl + (1 if d > Fraction(1, 2) or d == Fraction(1, 2) and fr > 0 else 0)     # half away from zero


def _sat(v, bits):
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))


def _pairs(r, shape, mbits=8, lo=-12, hi=2):
    m = r.integers(-(1 << (mbits - 1)) + 1, 1 << (mbits - 1), shape)
    m[r.random(shape) < 0.1] = 0
    return m, r.integers(lo, hi, shape)


# ---- rule bfp_pair_codes: codes of pairs ----------------------------------------------------------------------

@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away"])
def test_codes_of_pairs_are_the_rounded_values(rounding):
    from hlsnn.engines.bfp_systolic.network.gate import codes
    r = np.random.default_rng(1)
    m, e = _pairs(r, (400,), 12, -10, 4)
    m[:4], e[:4] = [3, -3, 5, 1000], [-3, -3, -2, 0]            # ties at radix 2 and a saturation
    q = codes(m, e, 2, 8, rounding)
    ref = [_sat(_rnd(Fraction(int(a)) * Fraction(2) ** (int(b) + 2), rounding), 8) for a, b in zip(m, e)]
    assert q.tolist() == ref


# ---- rule bfp_act_matmul: a MatMul of two BFP activations ----------------------------------------------------

def _block_ref(vals, M, E):
    """Rule max_pool on one block of Fractions: (mantissas, exponent)."""
    nz = [v for v in vals if v != 0]
    lop = max(math.floor(math.log2(abs(v))) for v in nz) if nz else 0
    while nz and any(abs(v) >= Fraction(2) ** (lop + 1) for v in nz):
        lop += 1                                            # log2 of a Fraction, made exact
    while nz and all(abs(v) < Fraction(2) ** lop for v in nz):
        lop -= 1
    xe = max(-(1 << (E - 1)), min((1 << (E - 1)) - 1, lop - (M - 2)))
    return [_sat(_rnd(v / Fraction(2) ** xe, P["rounding"]), M) for v in vals], xe


def _actmm_ref(a, b):
    """The engine's GEMM of A (T, K) by B (K, S) in Fractions: row and column blocks, exact sums,
    the max rule per row: (ym, e4) lists."""
    M, E = P["mantissa_bits"], P["exponent_bits"]
    rows = [_block_ref(row, M, E) for row in a]
    cols = [_block_ref([b[k][s] for k in range(len(b))], M, E) for s in range(len(b[0]))]
    ym, ye = [], []
    for xm, xe in rows:
        acc = [sum(x * w for x, w in zip(xm, wm)) for wm, _ in cols]
        e3 = [xe + we for _, we in cols]
        lops = [abs(v).bit_length() - 1 + e for v, e in zip(acc, e3) if v]
        e4 = max(-(1 << (E - 1)), min((1 << (E - 1)) - 1, max(lops) - (M - 2))) if lops else -(1 << (E - 1))
        ym.append([_sat(_rnd(Fraction(v) * Fraction(2) ** (e - e4), P["rounding"]), M) for v, e in zip(acc, e3)])
        ye.append(e4)
    return ym, ye


def test_actmm_pairs_against_fractions_and_the_layer_paths_engine():
    from hlsnn.engines import ENGINES
    from hlsnn.engines.bfp_systolic.kernel import Kernel
    from hlsnn.runtime.targets import EmuTarget
    r = np.random.default_rng(2)
    a, b = _pairs(r, (3, 8, 16)), _pairs(r, (3, 16, 8))
    a[0][0, 1] = 0                                              # an all-zero row of A
    ym, ye = ap.actmm_pairs(a, b, P)
    for g in range(3):
        fa = [[Fraction(int(m)) * Fraction(2) ** int(e) for m, e in zip(*row)] for row in zip(a[0][g], a[1][g])]
        fb = [[Fraction(int(m)) * Fraction(2) ** int(e) for m, e in zip(*row)] for row in zip(b[0][g], b[1][g])]
        rm, re_ = _actmm_ref(fa, fb)
        nz = ym[g] != 0
        assert ym[g].tolist() == rm
        assert (np.where(nz, ye[g], 0) == np.where(nz, np.asarray(re_)[:, None], 0)).all()
    kern = Kernel(CFG, EmuTarget(CFG, ENGINES[CFG.engine]))                                          # the layer path: float operands, the engine
    for g in range(3):
        xa = np.ldexp(a[0][g].astype(float), a[1][g])
        xb = np.ldexp(b[0][g].astype(float), b[1][g])
        want = kern.gemm_bfp(kern.quantize_activations(xa), kern.quantize_weights(xb.T)).dequantize()
        assert (np.ldexp(ym[g].astype(float), ye[g]) == want).all()


def test_actmm_pairs_near_float_and_planted_bit(monkeypatch):
    r = np.random.default_rng(3)
    a, b = _pairs(r, (4, 8, 16)), _pairs(r, (4, 16, 8))
    fa, fb = np.ldexp(a[0].astype(float), a[1]), np.ldexp(b[0].astype(float), b[1])
    y = np.ldexp(*(v.astype(float) if i == 0 else v for i, v in enumerate(ap.actmm_pairs(a, b, P))))
    ref = fa @ fb
    scale = np.abs(fa).max(axis=2, keepdims=True) * np.abs(fb).max(axis=1, keepdims=True) * 16
    assert (np.abs(y - ref) <= scale * 2.0 ** -6).all()        # blocks of 8-bit mantissas: a few ulps of the row
    want = ap.actmm_pairs(a, b, P)
    real = ap.block
    monkeypatch.setattr(ap, "block", lambda m, e, p, axis: (real(m, e, p, axis)[0] ^ 1, real(m, e, p, axis)[1]))
    assert (ap.actmm_pairs(a, b, P)[0] != want[0]).any()


# ---- rule bfp_softmax: softmax of pairs ---------------------------------------------------------------------

def test_softmax_pairs_exact_steps_near_float_and_planted_bit(monkeypatch):
    r = np.random.default_rng(4)
    m, e = _pairs(r, (300, 8), 8, -6, -2)
    f = 3
    y, ye = ap.softmax_pairs((m, e), f, 8, "nearest_even")
    assert (ye == -7).all()
    x = np.ldexp(m.astype(float), e)
    q = np.asarray([[_sat(_rnd(Fraction(float(v)) * 2 ** f, "nearest_even"), 8) for v in row] for row in x])
    assert (y == at.softmax(q, at.exp_table(f, 8), 8)).all()   # rule int_softmax on rule bfp_pair_codes's codes
    xq = np.ldexp(q.astype(float), -f)
    ref = np.exp(xq - xq.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    assert np.abs(np.ldexp(y.astype(float), -7) - ref).max() <= at.softmax_error_bound(8, 8)
    xr = np.exp(x - x.max(axis=1, keepdims=True))               # against the pairs' own values: the codes'
    xr /= xr.sum(axis=1, keepdims=True)                         # half unit at radix 3 moves e^x by <= 6.5%
    assert np.abs(np.ldexp(y.astype(float), -7) - xr).max() <= at.softmax_error_bound(8, 8) + 0.07
    real = ap.codes
    monkeypatch.setattr(ap, "codes", lambda *a: real(*a) ^ 1)
    assert (ap.softmax_pairs((m, e), f, 8, "nearest_even")[0] != y).any()


# ---- rule bfp_add_const: a position embedding on pairs ---------------------------------------------------------

def test_addc_pairs_is_to_fixed_of_the_codes_sum_and_planted_bit(monkeypatch):
    from hlsnn.deploy.quantize.quant import to_fixed
    r = np.random.default_rng(5)
    m, e = _pairs(r, (50, 64), 8, -8, -3)
    c = r.normal(0, 0.4, 64).astype(np.float32).astype(float)
    fi, fo = 5, 4
    p = at.addc_plan(c, fi, fo)
    y, ye = ap.addc_pairs((m, e), p["cq"][None, :], fi, p["g"], fo, 8, "nearest_even")
    assert (ye == -fo).all()
    q = np.asarray([[_rnd(Fraction(float(v)) * 2 ** fi, "nearest_even") for v in row]
                    for row in np.ldexp(m.astype(float), e)])
    q = np.clip(q, -128, 127)
    assert (y == to_fixed(np.ldexp(q.astype(float), -fi) + c, fo, 8, True, "nearest_even")).all()
    real = at.addc
    monkeypatch.setattr(at, "addc", lambda *a: real(*a) ^ 1)
    assert (ap.addc_pairs((m, e), p["cq"][None, :], fi, p["g"], fo, 8, "nearest_even")[0] != y).any()


# ---- rule bfp_layer_norm: LayerNorm of pairs --------------------------------------------------------------------

def test_lnorm_pairs_near_float_of_its_codes_and_planted_bit(monkeypatch):
    r = np.random.default_rng(6)
    m, e = _pairs(r, (40, 8, 16), 12, -9, -4)
    gamma, beta = r.normal(1, 0.2, 16), r.normal(0, 0.1, 16)
    attrs = dict(epsilon=1e-5, scale=gamma, bias=beta)
    fi, fo = 4, 5
    pl = ap.lnorm_plan(16, fi, 8, attrs)
    y, ye = ap.lnorm_pairs((m, e), pl, fo, 8, "nearest_even")
    assert (ye == -fo).all()
    from hlsnn.engines.bfp_systolic.network.gate import codes
    xq = np.ldexp(codes(m, e, fi, 8, "nearest_even").astype(float), -fi)
    mu, var = xq.mean(axis=-1, keepdims=True), xq.var(axis=-1, keepdims=True)
    ref = (xq - mu) / np.sqrt(var + 1e-5) * gamma + beta
    inside = np.abs(ref) < 2.0 ** (7 - fo) - 2.0 ** -fo            # not saturated at 8 bits, radix 5
    err = np.abs(np.ldexp(y.astype(float), -fo) - ref)[inside]
    assert err.max() <= 2.0 ** -fo                                    # rule layer_norm's table and the rounding: < 1 code
    real = ap.codes
    monkeypatch.setattr(ap, "codes", lambda *a: real(*a) ^ 1)
    assert (ap.lnorm_pairs((m, e), pl, fo, 8, "nearest_even")[0] != y).any()


# ---- rule bfp_scale: the Scale of q and k ----------------------------------------------------------------

def test_scale_constant_rounded_to_24_bits_and_exact_product():
    for c in (8 ** -0.25, 0.5, 1 / 3, -0.7, 3.0):
        cm, ce = ap.odd_pair(c)
        assert cm % 2 == 1 and abs(cm) < 1 << 24
        lead = math.floor(math.log2(abs(c)))
        want = _rnd(Fraction(c) / Fraction(2) ** (lead - 23), "nearest_even") * Fraction(2) ** (lead - 23)
        assert Fraction(cm) * Fraction(2) ** ce == want
        m, e = np.array([5, -127, 0, 3, (1 << 25) - 1]), np.array([-3, 2, 0, 1, -4])
        ym, ye = ap.scale_pairs((m, e), cm, ce)
        for a, b, y0, y1 in zip(m, e, ym, ye):
            exact = Fraction(int(a)) * Fraction(2) ** int(b) * want
            got = Fraction(int(y0)) * Fraction(2) ** int(y1)
            assert abs(int(y0)) < 1 << ap.ODD_BITS
            if exact == got:
                continue                                    # exact where the product fits
            assert int(y0) % 2 and abs(got) < abs(exact) + Fraction(2) ** int(y1) and \
                abs(exact) < abs(got) + Fraction(2) ** int(y1) and (got > 0) == (exact > 0)    # rounded to odd


# ---- the models -----------------------------------------------------------------------------------

MODELS = {"encoder_clf_ts17": ("attention.yaml", None), "encoder_clf_dynamo": ("attention.yaml", "encoder_clf_dynamo"),
          "vit_ts17": ("vit.yaml", None), "vit_dynamo": ("vit.yaml", "g_vit_dynamo")}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    pytest.importorskip("onnx")
    from hlsnn.network.build import compile_model
    yaml_name, other = MODELS[request.param]
    d = tmp_path_factory.mktemp(request.param)
    text = (ROOT / "docs" / "beyond" / yaml_name).read_text().replace("../../tests", str(ROOT / "tests"))
    if other:
        text = text.replace("encoder_clf_ts17", other).replace("g_vit_ts17", other)
    (d / yaml_name).write_text(text)
    compile_model(str(d / yaml_name), "bfp8", str(d / "m.hlsnn"))
    return d / "m.hlsnn"


def test_bfp8_attention_lowers_to_one_program_with_the_layer_paths_bits(model):
    """One network program on pairs (no host op) whose bits are the layer path's: the compiled
    self-check pairs and 100 more images near them; the bfp network kernel refuses it by name."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(model)[:2]
    net = netmode.lower(prog, arrays)
    kinds = [op.kind for op in net.ops]
    for k in ("gather", "pscale", "actmm", "softmax", "plnorm", "lut", "add", "conv"):
        assert k in kinds
    assert not net.host_after
    q = netmode.run_ints(net, netmode.quantize_input(net, arrays["check/x"]))
    assert (netmode.dequantize(net, q).reshape(arrays["check/logits"].shape) == arrays["check/logits"]).all()
    x0 = arrays["check/x"]
    r = np.random.default_rng(7)
    x = (x0[r.integers(0, len(x0), 100)] + r.normal(0, float(x0.std()), (100,) + x0.shape[1:]))
    x = x.astype(np.float32).astype(np.float64)
    with hlsnn.load(model, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))
    got = netmode.dequantize(net, netmode.run_ints(net, netmode.quantize_input(net, x))).reshape(want.shape)
    assert (got == want).all()
    at.refuse_kernel(net)                                       # the bfp kernel has the loops on pairs
    assert all(op.f.get("pairs") for op in net.ops if op.kind in at.KINDS)


# ---- the bfp_systolic network kernel's loops (C-simulation, the simulated board) ------------------

def _images(arrays, n):
    x0 = arrays["check/x"]
    r = np.random.default_rng(11)
    x = x0[r.integers(0, len(x0), n)] + r.normal(0, float(x0.std()), (n,) + x0.shape[1:])
    return x.astype(np.float32).astype(np.float64)


@pytest.mark.csim
@pytest.mark.strict_csim
def test_bfp8_attention_one_kernel_start_bit_exact_on_csim_and_sim(model):
    """The strict C-simulation of the bfp network kernel and the simulated board give the layer
    path's bits in one start; the loop counters are the cycle model's iterations; every bank's
    access sites within its ports."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.network import artifact
    prog, arrays = artifact.read(model)[:2]
    x = _images(arrays, 40)
    with hlsnn.load(model, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))
    with hlsnn.load(model, "csim", network=True) as net:
        got = np.asarray(net.logits(x))
        assert net.last_kernel_starts == 1
        k = net._kernel
        assert k.strict and all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        want_it = {m: len(x) * v for m, v in bfpperf.iterations(net.network, k.tables).items()}
        assert {m: k.counters[m][0] for m in want_it} == want_it
        for loop in ("NetGather", "NetPScale", "NetAmmBExp", "NetAmmAExp", "NetAmm", "NetAmmOut", "NetSmaxOut",
                     "NetPlnSum", "NetPlnStat", "NetPlnOut"):
            assert want_it[loop] > 0
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    with hlsnn.load(model, "sim") as net:
        np.testing.assert_array_equal(np.asarray(net.logits(x[:8])).view(np.uint64), want[:8].view(np.uint64))
        assert net.last_kernel_starts == 1


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    pytest.importorskip("onnx")
    from hlsnn.network.build import compile_model
    d = tmp_path_factory.mktemp("enc")
    (d / "a.yaml").write_text((ROOT / "docs/beyond/attention.yaml").read_text().replace("../../tests",
                                                                                         str(ROOT / "tests")))
    compile_model(str(d / "a.yaml"), "bfp8", str(d / "m.hlsnn"))
    return d / "m.hlsnn"


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("plant", ["gather", "pscale", "addc", "actmm", "softmax", "plnorm"])
def test_bfp8_encoder_planted_kernel_bit_fails_the_comparison(encoder, monkeypatch, plant):
    """One planted one-bit change in each attention loop's data (a gather's source bank, the Scale's
    exponent, the position constant's bit at the output radix, the MatMul's operand order, the
    Softmax's output radix, the LayerNorm's output shift) makes the C-simulation differ from the
    emulator."""
    from hlsnn.engines.bfp_systolic.network import attnkern
    from hlsnn.network import artifact
    prog, arrays = artifact.read(encoder)[:2]
    x = _images(arrays, 20)
    with hlsnn.load(encoder, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))
    real_tables, real_desc, real_fields = attnkern.tables, attnkern.descriptor, attnkern.fields

    def tables(net, place, pc, eb):
        t = real_tables(net, place, pc, eb)
        if plant == "gather":
            t["gather"] = t["gather"] ^ np.uint64(1)                  # every element's source bank, low bit
        if plant == "addc":
            g = next(op.f for op in net.ops if op.kind == "addc")
            t["addc"] = t["addc"] ^ (1 << (g["g"] - g["f_out"]))      # the constant's bit at F_o
        return t

    def descriptor(net, op, d, place, name, pc):
        real_desc(net, op, d, place, name, pc)
        if plant == "pscale" and op.kind == "pscale":
            d["sb"] ^= 1                                              # the constant's exponent, bit 0
        if plant == "actmm" and op.kind == "actmm":
            d["single"] ^= 1                                          # A and B swapped
        if plant == "plnorm" and op.kind == "plnorm":
            d["kh"] += 1                                              # the output's shift

    def fields(net, t, rows, pc, eb):
        w = real_fields(net, t, rows, pc, eb)
        if plant == "softmax":
            w["smax_fp"] -= 1
        return w
    monkeypatch.setattr(attnkern, "tables", tables)
    monkeypatch.setattr(attnkern, "descriptor", descriptor)
    monkeypatch.setattr(attnkern, "fields", fields)
    with hlsnn.load(encoder, "csim", network=True, self_check=False) as net:
        got = np.asarray(net.logits(x))
    assert (got != want).any()
