"""Attention's integer rules attn_gather, add_const, act_matmul and int_softmax (hlsnn.engines.network.tokens.attention): each rule against an
independent reference (numpy moves, hlsnn's to_fixed of the float sum, exact rational arithmetic,
numpy's float64 softmax within the rule's stated bound), a planted one-bit change in each rule
caught by the exact references, and the encoder classifier (nn.TransformerEncoderLayer,
tests/data/torch/beyond/encoder_clf_*.onnx) and the tiny ViT (tests/data/torch/vit), both exporters,
lowered to one network program whose bits are the layer path's on emu, on the sparse_cluster network
kernel's strict C-simulation and on the simulated board, a planted bit in each kernel loop, and the
refusal by name where a kernel has no loop."""
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from hlsnn.deploy.quantize.quant import to_fixed
from hlsnn.engines.network.tokens import attention as at
from hlsnn.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
E_BITS, K_BITS = 16, 40           # the docstring's E and K, written here independently


def _round_sat(num, den, bits, rounding):
    """num / den (exact) rounded to an integer by ``rounding`` and saturated: the reference."""
    v = Fraction(int(num), int(den))
    fl = math.floor(v)
    rest = v - fl
    if rounding == "nearest_even":
        t = fl + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and fl % 2 == 1))
    else:                                       # nearest_away
        t = fl + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and v > 0))
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return min(max(t, lo), hi)


# ---- rule attn_gather: moves as index patterns ---------------------------------------------------------

def test_gather_patterns_are_the_moves():
    x = np.arange(8 * 48).reshape(8, 1, 48)
    attrs = dict(fn="Reshape", in_shapes=[[8, 1, 48]], out_shape=[8, 1, 3, 16])
    assert (at.move_index(attrs) == x.reshape(-1)).all()
    t = dict(fn="Transpose", in_shapes=[[1, 8, 1, 3, 16]], out_shape=[3, 8, 1, 1, 16], perm=[3, 1, 2, 0, 4])
    ref = np.arange(8 * 48).reshape(1, 8, 1, 3, 16).transpose(3, 1, 2, 0, 4).reshape(-1)
    assert (at.move_index(t) == ref).all()
    g = dict(fn="Gather", in_shapes=[[3, 8, 1, 16]], out_shape=[8, 1, 16], axis=0, indices=2)
    assert (at.move_index(g) == np.arange(384).reshape(3, 8, 1, 16)[2].reshape(-1)).all()
    q = np.random.default_rng(0).integers(-128, 128, (5, 384))
    assert (at.gather(q, at.move_index(t)) == q.reshape(5, 1, 8, 1, 3, 16).transpose(0, 4, 2, 3, 1, 5).reshape(5, -1)
            ).all()


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even"])
def test_class_token_codes_are_to_fixed_and_the_concat_pattern(rounding):
    """Rule class_token: a Concat's constant part as codes at the tensor's radix (hlsnn's to_fixed of the
    constant, ties included) and its place in the pattern (numpy's concatenate)."""
    r = np.random.default_rng(8)
    c = r.normal(0, 0.3, (1, 1, 16))
    c[0, 0, :3] = np.ldexp([0.5, 1.5, -2.5], -5)                      # ties at radix 5
    for f in (5, 7, 2):
        assert (at.const_codes(c, f, 8, rounding) == to_fixed(c, f, 8, True, rounding)).all()
    attrs = dict(in_shapes=[[1, 4, 16]], axis=1, operands=[["c", c.tolist()], ["x", 0]])
    idx, consts = at.concat_index(attrs, 5, 8, rounding)
    q = r.integers(-128, 128, (3, 64))
    want = np.concatenate([np.broadcast_to(to_fixed(c, 5, 8, True, rounding), (3, 1, 1, 16)),
                           q.reshape(3, 1, 4, 16)], axis=2).reshape(3, -1)
    assert (at.gather(q, idx, consts) == want).all()
    assert (at.gather(q, idx, consts ^ 1) != want).any()               # a planted bit of a constant code


# ---- rule add_const: a per-element constant -----------------------------------------------------------

@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even"])
def test_addc_is_to_fixed_of_the_float_sum(rounding):
    r = np.random.default_rng(1)
    for f_in, f_out in ((6, 6), (6, 4), (3, 7), (5, 5)):
        q = r.integers(-128, 128, (64, 8, 16))
        c = r.normal(0, 0.6, (8, 16)).astype(np.float32).astype(np.float64)
        c[0, :4] = np.ldexp(np.arange(4) + 0.5, -f_out)          # ties of the output radix
        p = at.addc_plan(c, f_in, f_out)
        y = at.addc(q, p["cq"], f_in, p["g"], f_out, 8, rounding)
        ref = to_fixed(np.ldexp(q.astype(np.float64), -f_in) + c, f_out, 8, True, rounding)
        assert (y == ref).all()


def test_addc_planted_bit_fails():
    r = np.random.default_rng(2)
    q, c = r.integers(-128, 128, (64, 16)), r.normal(0, 0.5, 16)
    p = at.addc_plan(c, 6, 5)
    ref = to_fixed(np.ldexp(q.astype(np.float64), -6) + c, 5, 8, True, "nearest_away")
    bad = at.addc(q, p["cq"], 6, p["g"], 5, 8, "nearest_away") ^ 1          # the result's low bit
    assert (bad != ref).any()
    bad = at.addc(q, p["cq"] + (1 << (p["g"] - 5)), 6, p["g"], 5, 8, "nearest_away")  # the constant's bit at F_o
    assert (bad != ref).any()


# ---- rule act_matmul: a MatMul of two activations -------------------------------------------------------

def _actmm_ref(a, b, shift, bits, rounding):
    acc = np.einsum("...tk,...ks->...ts", a.astype(object), b.astype(object))
    return np.vectorize(lambda v: _round_sat(v, 1 << shift, bits, rounding) if shift >= 0 else
                        _round_sat(v * (1 << -shift), 1, bits, rounding))(acc).astype(np.int64)


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even"])
def test_actmm_exact_against_rationals(rounding):
    r = np.random.default_rng(3)
    a, b = r.integers(-128, 128, (4, 2, 8, 8)), r.integers(-128, 128, (4, 2, 8, 8))
    for shift in (9, 7, 3):
        assert (at.actmm(a, b, shift, 8, rounding) == _actmm_ref(a, b, shift, 8, rounding)).all()
    # against numpy's float matmul of the values: within half a unit where nothing saturates
    fa, fb, fo = 5, 6, 4
    y = at.actmm(a >> 3, b >> 3, fa + fb - fo, 8, rounding)
    v = np.ldexp((a >> 3).astype(np.float64), -fa) @ np.ldexp((b >> 3).astype(np.float64), -fb)
    assert np.abs(np.ldexp(y.astype(np.float64), -fo) - v).max() <= 2.0 ** -(fo + 1)


def test_actmm_planted_bit_fails(monkeypatch):
    r = np.random.default_rng(4)
    a, b = r.integers(-128, 128, (2, 8, 16)), r.integers(-128, 128, (2, 16, 8))
    ref = _actmm_ref(a, b, 8, 8, "nearest_away")
    real = at.actmm_acc
    monkeypatch.setattr(at, "actmm_acc", lambda x, y: real(x, y) ^ (1 << 7))    # one bit of the sums
    assert (at.actmm(a, b, 8, 8, "nearest_away") != ref).any()


# ---- rule int_softmax: softmax over the keys -------------------------------------------------------------

def _softmax_ref(row, f, bits):
    """The docstring's steps 1-5 on one row, in Python integers (the table by math.exp)."""
    fp = bits - 1
    m = max(row)
    e = [int(round(math.ldexp(math.exp(-math.ldexp(m - v, -f)), E_BITS))) for v in row]
    s = sum(e)
    rr = (1 << K_BITS) // s
    return [min((ei * rr + (1 << (K_BITS - fp - 1))) >> (K_BITS - fp), (1 << fp) - 1) for ei in e]


@pytest.mark.parametrize("f,n", [(3, 8), (5, 16), (1, 8)])
def test_softmax_exact_to_its_steps_and_near_float(f, n):
    r = np.random.default_rng(5 + f)
    q = r.integers(-128, 128, (200, n))
    q[0] = 0                                           # a flat row
    q[1] = -128
    q[1, 0] = 127                                      # one key takes it all (saturates)
    y = at.softmax(q, at.exp_table(f, 8), 8)
    assert y.tolist() == [_softmax_ref(row.tolist(), f, 8) for row in q]
    x = np.ldexp(q.astype(np.float64), -f)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    assert np.abs(np.ldexp(y.astype(np.float64), -7) - ref).max() <= at.softmax_error_bound(n, 8)


def test_softmax_planted_bit_fails(monkeypatch):
    r = np.random.default_rng(6)
    q = r.integers(-20, 20, (300, 8))
    ref = [_softmax_ref(row.tolist(), 3, 8) for row in q]
    real = at.exp_table

    def planted(f, bits):
        t = real(f, bits).copy()
        t[1] ^= 1 << 8                                 # one bit of one entry (d = 1)
        return t
    monkeypatch.setattr(at, "exp_table", planted)
    assert at.softmax(q, at.exp_table(3, 8), 8).tolist() != ref


# ---- the encoder classifier in one program -------------------------------------------------------

MODELS = {"encoder_clf_ts17": ("attention.yaml", None, "fixed8"),
          "encoder_clf_dynamo": ("attention.yaml", "encoder_clf_dynamo", "fixed8"),
          "vit_ts17": ("vit.yaml", None, "fixed8"), "vit_dynamo": ("vit.yaml", "g_vit_dynamo", "fixed8"),
          "encoder_clf_twohot": ("attention.yaml", None, "twohot")}      # shift_mac: LUT 92% (allow_overfit)


def _compile(tmp_path_factory, name):
    """A model of :data:`MODELS` compiled (the docs' YAML, its other export swapped in)."""
    pytest.importorskip("onnx")
    from hlsnn.network.build import compile_model
    yaml_name, other, asg = MODELS[name]
    src = ROOT / "docs" / "beyond" / yaml_name
    d = tmp_path_factory.mktemp(name)
    text = src.read_text().replace("../../tests", str(ROOT / "tests"))
    if other:
        text = text.replace("encoder_clf_ts17", other).replace("g_vit_ts17", other)
    (d / yaml_name).write_text(text)
    compile_model(str(d / yaml_name), asg, str(d / "m.hlsnn"), allow_overfit=asg == "twohot")
    return d / "m.hlsnn"


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return _compile(tmp_path_factory, "encoder_clf_ts17")


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    return _compile(tmp_path_factory, request.param)


def test_attention_models_lower_to_one_program_with_the_layer_paths_bits(model):
    """The encoder classifier and the tiny ViT, both exporters: one network program (no host op)
    whose numpy run gives the compile-time layer path's bits, and the network path on emu."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(model)[:2]
    net = netmode.lower(prog, arrays)
    kinds = [op.kind for op in net.ops]
    for k in ("addc", "gather", "actmm", "softmax", "lnorm", "lut"):
        assert k in kinds
    blocks = 2 if "vit" in str(model.parent.name) else 1
    assert kinds.count("actmm") == 2 * blocks and kinds.count("softmax") == blocks and not net.host_after
    q = netmode.run_ints(net, netmode.quantize_input(net, arrays["check/x"]))
    got = netmode.dequantize(net, q).reshape(arrays["check/logits"].shape)
    assert (got == arrays["check/logits"]).all()                     # the layer path's bits, at compile time
    with hlsnn.load(model, "emu") as m:
        assert m.network is not None
        assert m.self_check() == len(arrays["check/x"])


def _images(arrays, n=200):
    """``n`` inputs near the stored ones (the digits' value range)."""
    x = arrays["check/x"]
    r = np.random.default_rng(7)
    return x[r.integers(0, len(x), n)] + r.normal(0, float(x.std()), (n,) + x.shape[1:])


def test_encoder_network_bits_on_more_images_and_planted_bit(encoder, monkeypatch):
    """The network mode equals the layer path (``network=False``) on 200 images; a one-bit change
    of rule int_softmax's reciprocal (K one less) changes its logits."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(encoder)[:2]
    x = _images(arrays)
    with hlsnn.load(encoder, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))

    def logits():
        net = netmode.lower(prog, arrays)
        return netmode.dequantize(net, netmode.run_ints(net, netmode.quantize_input(net, x))).reshape(want.shape)
    assert (logits() == want).all()
    real = at.softmax
    monkeypatch.setattr(at, "softmax", lambda q, t, bits: real(q, t, bits) ^ 1)     # each probability's low bit
    assert (logits() != want).any()


def test_kernels_without_the_loops_refuse_by_name(encoder):
    """An engine whose network kernel has no attention loops (bfp_systolic's, on BFP pairs)
    refuses the program by the op's name and rule."""
    from types import SimpleNamespace
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(encoder)[:2]
    net = netmode.lower(prog, arrays)
    at.refuse_kernel(net)                                           # sparse_cluster has the loops
    at.refuse_kernel(SimpleNamespace(engine="shift_mac", ops=net.ops))          # and shift_mac
    with pytest.raises(InputError, match=r"op /emb/Add \(addc, attention's rule add_const\).*no loop"):
        at.refuse_kernel(SimpleNamespace(engine="bfp_systolic", ops=net.ops))


# ---- the sparse_cluster network kernel's loops (C-simulation) ------------------------------------

@pytest.mark.csim
@pytest.mark.strict_csim           # the loops are born under the strict rules
def test_attention_models_one_kernel_start_bit_exact_on_csim_and_sim(model):
    """The strict C-simulation of the sparse network kernel and the simulated board give the
    layer path's bits on 200 images in one start; the loop counters are the cycle model's
    iterations; every bank's access sites within its ports."""
    from hlsnn.engines.sparse_cluster.network import perf as sparseperf
    from hlsnn.network import artifact
    from conftest import checked_raw
    prog, arrays = artifact.read(model)[:2]
    x = _images(arrays, 60)
    with hlsnn.load(model, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))
    with hlsnn.load(model, "csim", network=True) as net:
        got = np.asarray(net.logits(x))
        assert net.last_kernel_starts == 1
        k = net._kernel
        assert k.strict and checked_raw(k.strict_report)["act"] > 0    # its deepest pipeline (sc: an Add's)
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        assert {m: it for m, (it, _) in k.counters.items()} == {
            m: len(x) * v for m, v in sparseperf.iterations(net.network, k.tables).items()}
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    with hlsnn.load(model, "sim") as net:
        np.testing.assert_array_equal(np.asarray(net.logits(x[:8])).view(np.uint64), want[:8].view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("plant", ["gather", "addc", "actmm", "softmax"])
def test_encoder_planted_kernel_bit_fails_the_comparison(encoder, monkeypatch, plant):
    """One planted one-bit change in each attention loop's data or C++ (a gather's source bank,
    the position constant's bit at the output radix, the MatMul's requantization shift, the
    Softmax's output radix) makes the C-simulation differ from the emulator."""
    from hlsnn.engines.network.tokens import attnkernel
    from hlsnn.network import artifact
    prog, arrays = artifact.read(encoder)[:2]
    x = _images(arrays, 20)
    with hlsnn.load(encoder, "emu", network=False) as ref:
        want = np.asarray(ref.logits(x))
    real_tables, real_desc, real_widths = attnkernel.tables, attnkernel.descriptor, attnkernel.widths

    def tables(net, place, pc):
        t = real_tables(net, place, pc)
        if plant == "gather":
            t["gather"] = t["gather"] ^ np.uint64(1)                  # every element's source bank, low bit
        if plant == "addc":
            g = next(op.f for op in net.ops if op.kind == "addc")
            t["addc"] = t["addc"] ^ (1 << (g["g"] - g["f_out"]))      # the constant's bit at F_o
        return t

    def descriptor(net, op, d, place, name, pc):
        real_desc(net, op, d, place, name, pc)
        if plant == "actmm" and op.kind == "actmm":
            d["shift"] += 1

    def widths(net, t, pc):
        w = real_widths(net, t, pc)
        if plant == "softmax":
            w["smax_fp"] -= 1
        return w
    monkeypatch.setattr(attnkernel, "tables", tables)
    monkeypatch.setattr(attnkernel, "descriptor", descriptor)
    monkeypatch.setattr(attnkernel, "widths", widths)
    with hlsnn.load(encoder, "csim", network=True, self_check=False) as net:
        got = np.asarray(net.logits(x))
    assert (got != want).any()


def test_a_reshaped_head_merge_is_the_gathers_layout(tmp_path):
    """v_sdpa (scaled_dot_product_attention, heads merged by Transpose then a plain Reshape into
    the out-projection's rows): the merge's gather writes the rows the RowsToMap takes, so the
    lowering gets past it to its next refusal, the LayerNorm over (T, F) together (no rule layer_norm)."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"name: s\nmodel: {ROOT}/tests/data/torch/beyond/v_sdpa_ts17.onnx\ndata: digits\nlayout: ntf\n"
                   "formats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                   "assignments:\n  fixed8: {default: fixed8}\n")
    compile_model(str(cfg), "fixed8", str(tmp_path / "s.hlsnn"))
    prog, arrays = artifact.read(tmp_path / "s.hlsnn")[:2]
    with pytest.raises(InputError, match=r"layer /norm/LayerNormalization \(LayerNormalization\)"):
        netmode.lower(prog, arrays)
