"""The compiled integer network mode (hlsnn.deploy.run.fast) on the programs of dense models: data moves
(upsample with and without its bilinear edge, zero-stuffing, reflect and edge pads, a concat that
requantizes its parts), average pools (a power-of-two count, and rule mean_divide's division), a global mean
that divides, and transposes, which it runs by their numpy rules between its compiled convs. Property:
on random inputs it gives :func:`hlsnn.deploy.lower.program.run_ints`' integers (the specification), on
random programs of those ops and on the lowered programs of the family's U-Nets at random radix
points (what ``radix: search`` tries); before, it refused such programs and the search ran numpy."""
import sys

import numpy as np
import pytest

from conftest import ROOT
from hlsnn.deploy.run import fast as netfast
from hlsnn.deploy.lower import program as netmode
from hlsnn.engines.network.pools import mean, uncounted

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_netfast import _conv  # noqa: E402

pytestmark = pytest.mark.skipif("netfast.lib() is None", reason="no C compiler for the compiled helpers")

O = netmode.Op
ROUNDINGS = ("nearest_even", "nearest_away", "truncate")


def _mean_fields(rng, n):
    """A pool's count fields over ``n`` values: ``p`` and a shift, or rule mean_divide's division."""
    f = mean.count_fields(n)
    if f["p"] or n == 1:
        return dict(f, shift=int(rng.integers(f["p"] - 1, f["p"] + 5)))
    for f_x in range(1, -8, -1):             # the finest requantization the division takes
        got = mean.plan(n, 0, int(f_x), n * 255)
        if not isinstance(got, str):
            break
    assert not isinstance(got, str), got
    div, k = got
    return dict(f, div=div, shift=k)


def _program(rng, engine, rounding, seed_kind=0):
    """x -> conv -> pad (reflect or edge) -> average pool -> conv -> upsample (maybe with the
    bilinear edge) -> 1x1 conv; concat of 2-3 of those two (requantized by random shifts) ->
    zero-stuff -> conv -> global mean (divided where the count is not a power of two) -> dense."""
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(4, 8)), int(rng.integers(4, 8))
    ops, shapes = [], {"x": (c, h, w)}

    def conv(name, src, out, z, k, pads, dense=False):
        op, shapes[out] = _conv(rng, name, src, out, shapes[src] if not dense else (shapes[src][0], 1, 1), z, k,
                                (1, 1), pads, 1, engine, dense=dense)
        z = shapes[out][0]                   # outputs that keep a spread of values (and saturate some)
        op.f.update(shift=rng.integers(5, 10, z), bias=rng.integers(-(1 << 10), 1 << 10, z), relu=bool(rng.random() < 0.3))
        ops.append(op)

    conv("c1", "x", "t1", int(rng.choice([3, 8, 16])), (3, 3), (1, 1, 1, 1))
    z1 = shapes["t1"][0]
    mode = str(rng.choice(["reflect", "edge"]))
    t, l, b, r = (int(v) for v in rng.integers(0, 3, 4))
    ops.append(O("pad", "pad", ["t1"], "t2", dict(c=z1, h=h, w=w, oh=h + t + b, ow=w + l + r, pads=(t, l, b, r),
                                                  mode=mode)))
    shapes["t2"] = (z1, h + t + b, w + l + r)
    kh, kw = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    sh, sw = 2, int(rng.integers(1, 3))
    h2, w2 = shapes["t2"][1:]
    pp = tuple(int(v) for v in rng.integers(0, 2, 4))
    oh, ow = (h2 + pp[0] + pp[2] - kh) // sh + 1, (w2 + pp[1] + pp[3] - kw) // sw + 1
    my, mx = ((1 << (k - 1)) - 2 if rng.random() < 0.5 else 0 for k in (kh, kw))     # rule bilinear_x2's tap weights 2
    pool = dict(c=z1, h=h2, w=w2, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pp, my=my, mx=mx, rounding=rounding)
    n = (kh + bin(my).count("1")) * (kw + bin(mx).count("1"))
    if any(pp) and not my and not mx and seed_kind % 2:        # rule avg_pool_uncounted: the padding not counted
        pool["uncounted"] = n = uncounted.fields(pool)["uncounted"]
    ops.append(O("avgpool", "pool", ["t2"], "t3", dict(pool, **_mean_fields(rng, n))))
    shapes["t3"] = (z1, oh, ow)
    conv("c2", "t3", "t4", int(rng.choice([4, 16])), (3, 3), (1, 1, 1, 1))
    z2 = shapes["t4"][0]
    fh, fw = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    ey, ex = int(fh == 2 and rng.random() < 0.5), int(fw == 2 and rng.random() < 0.5)
    uh, uw = oh * fh + 2 * ey, ow * fw + 2 * ex
    ops.append(O("upsample", "up", ["t4"], "t5", dict(c=z2, h=oh, w=ow, fh=fh, fw=fw, oh=uh, ow=uw, edge=(ey, ex))))
    shapes["t5"] = (z2, uh, uw)
    conv("c3", "t5", "t6", int(rng.choice([2, 5])), (1, 1), (0, 0, 0, 0))
    parts = [str(v) for v in rng.choice(["t5", "t6"], int(rng.integers(2, 4)))]
    cs = [shapes[p][0] for p in parts]
    ops.append(O("concat", "cat", parts, "t7", dict(cs=cs, hw=uh * uw, h=uh, w=uw, rounding=rounding,
                                                    shifts=[int(v) for v in rng.integers(-3, 4, len(parts))])))
    shapes["t7"] = (sum(cs), uh, uw)
    zh, zw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    sh7, sw7 = (uh - 1) * zh + 1, (uw - 1) * zw + 1
    ops.append(O("zerostuff", "zs", ["t7"], "t8", dict(c=sum(cs), h=uh, w=uw, sh=zh, sw=zw, oh=sh7, ow=sw7)))
    shapes["t8"] = (sum(cs), sh7, sw7)
    conv("c4", "t8", "t9", int(rng.choice([3, 16])), (3, 3), (1, 1, 1, 1))
    z4 = shapes["t9"][0]
    n = sh7 * sw7
    ops.append(O("add", "gap", ["t9"], "t10", dict(c=z4, hw=n, sa=0, sb=0, relu=True, gap=True,
                                                    rounding=rounding, single=True, **_mean_fields(rng, n))))
    shapes["t10"] = (z4, 1, 1)
    conv("fc", "t10", "y", 10, None, None, dense=True)
    params = {"acc_bits": 42, "act_bits": 8, "act_signed": True, "rounding": rounding}
    net = netmode.NetProgram("t", ops, shapes, dict(name="x", shape=(c, h, w), f=0, bits=8, signed=True,
                                                    rounding=rounding),
                             dict(tensor="y", f=0, name="y", shape=(10,)), [], params, "a", {}, engine)
    return netmode.check_ops(net)


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_of_moves_and_pools_equal_run_ints(seed):
    rng = np.random.default_rng([seed, 52])
    engine = ("sparse_cluster", "shift_mac")[seed % 2]
    net = _program(rng, engine, ROUNDINGS[seed % 3], seed // 2)
    kinds = {op.kind for op in net.ops}
    assert {"pad", "avgpool", "upsample", "concat", "zerostuff", "add"} <= kinds
    fn = netfast.build(net)
    assert fn is not None                       # before: None (the numpy path ran these programs)
    fn.chunk = int(rng.integers(1, 9))
    xq = rng.integers(-128, 128, (int(rng.integers(1, 24)),) + net.input["shape"])
    xq[rng.random(xq.shape) < 0.3] = 0
    ref, env = netmode.run_ints(net, xq, keep=True)
    y, sat, _ = fn.run(xq)
    np.testing.assert_array_equal(y, ref)
    # not a vacuous equality: every op's outputs vary, and some convs saturate
    for op in net.ops:
        assert len(np.unique(env[op.out])) > 1, op.name
    assert sum(sat.values()) > 0


@pytest.mark.parametrize("kind", ["upsample", "zerostuff", "pad", "avgpool", "concat"])
def test_a_move_of_a_dense_outputs_view_equals_run_ints(kind):
    """A dense layer's output viewed as a map (an autoencoder's ``Linear`` bottleneck, ``view``
    back; d_ae_linear) is a (1, 1, K) map whose values are in the view's NCHW order: the move
    reads it in that order, not as the view's NHWC map."""
    rng = np.random.default_rng(len(kind))
    c2, h2, w2 = 3, 4, 5
    fc, (k,) = _conv(rng, "fc", "x", "t1", (2, 5, 5), c2 * h2 * w2, None, None, None, 1, "sparse_cluster", dense=True)
    fc.f.update(shift=rng.integers(5, 10, k), bias=rng.integers(-(1 << 10), 1 << 10, k), relu=False)
    shapes = {"x": (2, 5, 5), "t1": (k,), "v": (c2, h2, w2)}
    f = dict(c=c2, h=h2, w=w2)
    if kind == "upsample":
        f.update(fh=2, fw=3, oh=2 * h2, ow=3 * w2)
    elif kind == "zerostuff":
        f.update(sh=2, sw=2, oh=2 * h2 - 1, ow=2 * w2 - 1)
    elif kind == "pad":
        f.update(pads=(1, 0, 2, 1), mode="reflect", oh=h2 + 3, ow=w2 + 1)
    elif kind == "avgpool":
        f.update(kh=2, kw=2, sh=1, sw=1, pads=(0, 0, 0, 0), my=0, mx=0, oh=h2 - 1, ow=w2 - 1, p=2, n=4, shift=1,
                 rounding="nearest_even")
    else:
        f = dict(cs=[c2, c2], hw=h2 * w2, h=h2, w=w2, shifts=[0, 1], rounding="nearest_even")
    op = O(kind, "m", ["v"] * (2 if kind == "concat" else 1), "t2", f)
    shapes["t2"] = (2 * c2 if kind == "concat" else c2, f.get("oh", h2), f.get("ow", w2))
    conv, shapes["y"] = _conv(rng, "c", "t2", "y", shapes["t2"], 4, (3, 3), (1, 1), (1, 1, 1, 1), 1, "sparse_cluster")
    conv.f.update(shift=rng.integers(5, 10, 4), bias=rng.integers(-(1 << 10), 1 << 10, 4))
    net = netmode.check_ops(netmode.NetProgram(
        "t", [fc, op, conv], shapes, dict(name="x", shape=(2, 5, 5), f=0, bits=8, signed=True, rounding="nearest_even"),
        dict(tensor="y", f=0, name="y", shape=shapes["y"]), [], {"act_bits": 8, "act_signed": True,
                                                                 "rounding": "nearest_even"}, "a", {"v": "t1"},
        "sparse_cluster"))
    xq = rng.integers(-128, 128, (5, 2, 5, 5))
    ref, env = netmode.run_ints(net, xq, keep=True)
    assert len(np.unique(env["t2"])) > 4
    np.testing.assert_array_equal(netfast.build(net).run(xq)[0], ref)


#: the family's U-Nets in tests/data (torch_families/variant_family.py, variant_fourth.py): a
#: bilinear-upsample U-Net with average pools (d_seg_bilinear's ops), a milesial U-Net whose
#: average pools divide (d_unet_classic's shape), transposed convolutions, nearest upsamples by
#: size, and a transpose of token rows
UNETS = ["v_f_unet_bil_ts17", "v_f_unet_milesial_ts17", "unet_convtranspose_ts17", "v_unet_size_ts17",
         "v_tc_view_ts17", "p_f_tok_cat_last_ts17"]


@pytest.fixture(scope="module")
def calibrated():
    """{name: a fixed8 deployment calibrated (radix: msb) on 8 random images}."""
    from hlsnn.deploy.config import Assignment, FormatSpec
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.runtime import Accelerator
    acc = Accelerator(ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml", "emu")
    out = {}
    for name in UNETS:
        net = load_onnx(ROOT / "tests" / "data" / "torch" / "beyond" / f"{name}.onnx")
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a")}, {"a": acc})
        dep.calibrate(np.random.default_rng(1).uniform(0, 1, (8,) + tuple(net.input_shape[1:])))
        out[name] = dep
    return out


@pytest.mark.parametrize("name", UNETS)
def test_unet_programs_at_random_radix_points_equal_run_ints(calibrated, name):
    """What ``radix: search`` evaluates: the program at radix points moved by -2..2 bits (a Concat's
    parts then requantized by shifts), on random input integers."""
    from hlsnn.errors import InputError
    dep = calibrated[name]
    rng = np.random.default_rng(7)
    saved = {k: (ex.f_x, ex.f_out) for k, ex in dep.execs.items()}
    tried = 0
    try:
        for trial in range(6):
            for ex in dep.execs.values():
                if trial and ex.f_out is not None and np.ndim(ex.f_out) == 0 and rng.random() < 0.5:
                    ex.f_out = int(ex.f_out) + int(rng.integers(-2, 3))
            try:
                net = dep._lowered()
            except InputError:                 # a point the network mode refuses: the search skips it too
                continue
            fn = netfast.build(net)
            assert fn is not None, sorted({op.kind for op in net.ops})
            xq = rng.integers(-128, 128, (int(rng.integers(1, 20)),) + tuple(net.input["shape"]))
            np.testing.assert_array_equal(fn.run(xq)[0], netmode.run_ints(net, xq))
            tried += 1
    finally:
        for k, (fx, fo) in saved.items():
            dep.execs[k].f_x, dep.execs[k].f_out = fx, fo
    assert tried >= 3
    kinds = {op.kind for op in net.ops}
    assert kinds & set(netmode.MOVE_KINDS), kinds
