"""The integer network mode compiled (hlsnn.deploy.run.fast, native/netint.c; issue 32's
evaluation speed) against its specification, netmode.run_ints (numpy, int64), on random
programs: every geometry the network mode takes (strides, asymmetric pads, rectangular and
big kernels, groups, depthwise, dense), both engines' output rules, every rounding mode,
shifts that round, shift left and go beyond 62, saturation, clamps, weights whose sums need
int64, and the AVX-512, AVX2 and portable loops. Then a deployment: the fast path
gives the layer-by-layer path's bits and statistics."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.deploy.run import fast as netfast
from hlsnn.deploy.lower import program as netmode
from hlsnn.errors import InputError
from hlsnn.primitives import saturate, shift_round_sat

pytestmark = pytest.mark.skipif("netfast.lib() is None", reason="no C compiler for the compiled helpers")

O = netmode.Op
ROUNDINGS = ("nearest_even", "nearest_away", "truncate")


def _codes(rng, shape, engine, big):
    if engine == "sparse_cluster":
        return rng.integers(-128, 128, shape) * (rng.random(shape) < 0.7)
    a, b = rng.integers(0, 25 if big else 7, shape), rng.integers(0, 6, shape)
    v = (1 << a) + rng.choice([-1, 0, 1], shape) * (1 << b)
    return v * rng.choice([-1, 1], shape) * (rng.random(shape) < 0.8)


def _conv(rng, name, src, out, chw, z, k, s, pads, group, engine, big=False, dense=False, relu=None):
    c, h, w = chw
    kh, kw = (h, w) if dense else k
    sh, sw = (1, 1) if dense else s
    pads = (0, 0, 0, 0) if dense else pads
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    codes = _codes(rng, (z, c // group, kh, kw), engine, big)
    shift = rng.integers(-2, 14, z)
    shift[rng.random(z) < 0.1] = rng.choice([0, 63, 70])
    lo, hi = (-128, 127) if rng.random() < 0.5 else (int(rng.integers(-128, -20)), int(rng.integers(20, 127)))
    f = dict(c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=tuple(pads), group=group,
             clip=(lo, hi), codes=codes.astype(np.int64), bias=rng.integers(-(1 << 20), 1 << 20, z),
             shift=shift, relu=bool(rng.random() < 0.5) if relu is None else relu, dense=dense, engine=engine)
    return O("conv", name, [src], out, f), ((z,) if dense else (z, oh, ow))


def _program(rng, engine, rounding, big):
    """x (C, H, W) -> conv -> maxpool -> [conv, grouped or depthwise conv] + 1x1 shortcut
    (add, ReLU) -> conv -> global pool (add of one) -> dense."""
    c, h, w = int(rng.integers(1, 6)), int(rng.integers(6, 13)), int(rng.integers(6, 13))
    z1 = int(rng.choice([4, 16, 19]))
    ops, shapes = [], {"x": (c, h, w)}
    k = (int(rng.integers(1, 6)), int(rng.integers(1, 5)))
    pads = tuple(int(v) for v in rng.integers(0, 3, 4))
    op, shapes["t1"] = _conv(rng, "c1", "x", "t1", (c, h, w), z1, k, (int(rng.integers(1, 3)), 1), pads, 1, engine, big)
    ops.append(op)
    _, h1, w1 = shapes["t1"]
    mp = dict(c=z1, h=h1, w=w1, kh=2, kw=2, sh=1, sw=1, pads=(0, 0, 1, 1))
    mp.update(oh=(h1 + 1 - 2) + 1, ow=(w1 + 1 - 2) + 1)
    ops.append(O("maxpool", "p1", ["t1"], "t2", mp))
    shapes["t2"] = (z1, mp["oh"], mp["ow"])
    g = int(rng.choice([1, z1])) if z1 != 19 else 1
    if z1 == 16 and rng.random() < 0.5:
        g = 4                                             # groups of 4 channels in, 4 out
    op, shapes["t3"] = _conv(rng, "c2", "t2", "t3", shapes["t2"], z1, (3, 3), (1, 1), (1, 1, 1, 1), g, engine, big)
    ops.append(op)
    op, shapes["t4"] = _conv(rng, "sc", "t2", "t4", shapes["t2"], z1, (1, 1), (1, 1), (0, 0, 0, 0), 1, engine, big)
    ops.append(op)
    hw = shapes["t3"][1] * shapes["t3"][2]
    ops.append(O("add", "a1", ["t3", "t4"], "t5", dict(c=z1, hw=hw, sa=int(rng.integers(0, 3)), sb=0, relu=True,
                                                       gap=False, shift=int(rng.integers(-1, 4)), rounding=rounding,
                                                       single=False)))
    shapes["t5"] = shapes["t3"]
    z3 = int(rng.choice([8, 32]))
    op, shapes["t6"] = _conv(rng, "c3", "t5", "t6", shapes["t5"], z3, (3, 2), (2, 2), (1, 0, 1, 1), 1, engine, big)
    ops.append(op)
    hw6 = shapes["t6"][1] * shapes["t6"][2]
    ops.append(O("add", "gap", ["t6"], "t7", dict(c=z3, hw=hw6, sa=0, sb=0, relu=False, gap=True,
                                                   shift=int(rng.integers(0, 8)), rounding=rounding, single=True)))
    shapes["t7"] = (z3, 1, 1)
    op, shapes["y"] = _conv(rng, "fc", "t7", "y", (z3, 1, 1), 10, None, None, None, 1, engine, big, dense=True,
                            relu=False)
    ops.append(op)
    params = {"acc_bits": int(rng.choice([20, 42])), "act_bits": 8, "act_signed": True, "rounding": rounding}
    return netmode.NetProgram("t", ops, shapes, dict(name="x", shape=(c, h, w), f=0, bits=8, signed=True,
                                                     rounding=rounding),
                              dict(tensor="y", f=0, name="y", shape=(10,)), [], params, "a", {}, engine)


def _sat_counts(net, env):
    """Each conv's saturated outputs from the primitives, on run_ints' tensors."""
    out = {}
    for op in net.ops:
        if op.kind != "conv":
            continue
        f = op.f
        x = env[op.ins[0]].reshape((-1, f["c"], f["h"], f["w"]))
        acc = netmode.conv_acc(x, f).reshape(-1, f["z"])
        v = acc + np.asarray(f["bias"])[None, :]
        if f["engine"] == "shift_mac":
            v = saturate(v, net.params["acc_bits"])
        if f["relu"]:
            v = np.maximum(v, 0)
        bits = net.input["bits"] if f["engine"] == "shift_mac" else 8
        out[op.name] = int(shift_round_sat(v, np.asarray(f["shift"])[None, :], bits, net.params["rounding"])[1].sum())
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("engine", ["shift_mac", "sparse_cluster"])
def test_random_programs_equal_run_ints(seed, engine):
    rng = np.random.default_rng(100 * seed + (engine == "sparse_cluster"))
    rounding = ROUNDINGS[seed % 3]
    net = _program(rng, engine, rounding, big=seed % 4 == 3)
    xq = rng.integers(-128, 128, (int(rng.integers(1, 40)),) + net.input["shape"])
    xq[rng.random(xq.shape) < 0.3] = 0
    ref, env = netmode.run_ints(net, xq, keep=True)
    fast = netfast.build(net)
    if seed % 4 == 3 and engine == "shift_mac":          # int8 taps always fit; big shift-add codes may not
        assert not all(c.exact32 for c in fast.convs.values())        # some sums need int64: the numpy rule
    else:
        assert all(c.exact32 for c in fast.convs.values())
    for isa in (3, 2, 1, 0):                 # AVX-512 VNNI, AVX-512, AVX2, the portable loops (as the CPU has them)
        fn = netfast.build(net, isa=isa)
        fn.chunk = int(rng.integers(1, 9))
        y, sat, nz = fn.run(xq)
        assert y.dtype == np.int64 and y.shape == ref.shape
        np.testing.assert_array_equal(y, ref)
        assert sat == _sat_counts(net, env)
        for op in net.ops:
            if op.kind == "conv":
                x = env[op.ins[0]].reshape((-1,) + tuple(net.shapes[op.ins[0]]) if op.f["dense"] else
                                           (-1, op.f["c"], op.f["h"], op.f["w"]))
                x = x.reshape(-1, op.f["c"], op.f["h"], op.f["w"])
                np.testing.assert_array_equal(nz[op.name], np.count_nonzero(x, axis=(0, 1)).reshape(-1))


def _one_conv(rng, c, z, group, codes, bits=8, engine="shift_mac"):
    op, shape = _conv(rng, "c1", "x", "y", (c, 7, 6), z, (3, 2), (1, 2), (1, 0, 1, 1), group, engine)
    op.f["codes"] = codes
    net = netmode.NetProgram("t", [op], {"x": (c, 7, 6), "y": shape},
                             dict(name="x", shape=(c, 7, 6), f=0, bits=bits, signed=True, rounding="nearest_even"),
                             dict(tensor="y", f=0, name="y", shape=shape), [],
                             {"acc_bits": 42, "act_bits": bits, "act_signed": True, "rounding": "nearest_even"}, "a",
                             {}, engine)
    return net, op


@pytest.mark.parametrize("c, group, pairs", [(1, 1, True), (5, 1, True), (8, 2, True), (6, 3, True), (6, 2, False),
                                            (6, 6, False)])
def test_channel_pairs_where_they_apply(c, group, pairs):
    """The int16-pair conv (hlsnn_net_conv16) runs a conv with one group or groups of an even
    channel count (an odd count's pair would straddle two groups; depthwise has its own loop),
    and gives run_ints' integers on every vector unit."""
    rng = np.random.default_rng(c * 10 + group)
    codes = rng.integers(-300, 300, (12, c // group, 3, 2))
    net, op = _one_conv(rng, c, 12, group, codes)
    fast = netfast.build(net)
    assert fast.convs["c1"].pairs is pairs
    xq = rng.integers(-128, 128, (9, c, 7, 6))
    ref = netmode.run_ints(net, xq)
    for isa in (3, 2, 1, 0):
        np.testing.assert_array_equal(netfast.build(net, isa=isa).run(xq)[0], ref)


def test_channel_pairs_at_the_int16_limits():
    """16-bit inputs at -2**15 times weights of -2**15: the pair sum 2**30 + ... is the edge
    the exactness bound (2**15 * sum|w| < 2**31) allows; weights beyond int16, or inputs of
    more than 16 bits, take the int32 loop."""
    rng = np.random.default_rng(5)
    codes = np.zeros((16, 4, 3, 2), np.int64)
    codes[:, 0, 0, 0] = -(1 << 15)
    codes[:, 1, 0, 0] = rng.integers(-(1 << 14), 1 << 14, 16)
    codes[:, 2:, 1, 1] = rng.integers(-100, 100, (16, 2))
    net, op = _one_conv(rng, 4, 16, 1, codes, bits=16)
    fast = netfast.build(net)
    assert fast.convs["c1"].pairs and fast.convs["c1"].exact32
    xq = rng.integers(-(1 << 15), 1 << 15, (6, 4, 7, 6))
    xq[:, :2] = -(1 << 15)
    ref = netmode.run_ints(net, xq)
    for isa in (3, 2, 1, 0):
        np.testing.assert_array_equal(netfast.build(net, isa=isa).run(xq)[0], ref)
    big = codes.copy()
    big[0, 3, 0, 0] = 1 << 15                            # one weight beyond int16
    assert not netfast.build(_one_conv(rng, 4, 16, 1, big, bits=15)[0]).convs["c1"].pairs
    small = np.clip(codes, -3, 3)
    assert not netfast.build(_one_conv(rng, 4, 16, 1, small, bits=17)[0]).convs["c1"].pairs


@pytest.mark.parametrize("f,rounding", [(6, "nearest_away"), (-3, "nearest_away"), (0, "nearest_even"),
                                        (-30, "nearest_away"), (-30, "nearest_even"), (20, "nearest_even"),
                                        (29, "nearest_away"), (3, "truncate")])
@pytest.mark.parametrize("chw", [(3, 4, 5), (1, 6, 10), (60, 1, 1)])
def test_compiled_input_quantization_is_to_fixed(f, rounding, chw, monkeypatch):
    """Rule 1 in C (netfast.quantize_nhwc: hlsnn_net_quantize, or quantize_input where its fast
    path does not apply: truncation, values beyond 2**52 at the wide radix, NaN) against the
    deployment's to_fixed, ties and near-ties included, into NHWC maps; a batch in slices."""
    from hlsnn.deploy.quantize.quant import to_fixed
    rng = np.random.default_rng(f + 40)
    k = rng.integers(-300, 300, 120).astype(np.float64)
    x = np.concatenate([np.ldexp(k + 0.5, -f), np.ldexp(k + 0.5 - 2.0 ** -30, -f), np.ldexp(k + 0.5 + 2.0 ** -26, -f),
                        rng.normal(0, 2.0 ** -f * 60, 120), rng.normal(0, 2.0 ** -f * 1e4, 16),  # saturating
                        np.ldexp([127.5, -128.5, 128.5, -129.5, 127.4999], -f), [0.0, -0.0, 1e-300, -1e-300]])
    n = int(np.prod(chw))
    x = np.resize(x, (len(x) // n + 1) * n).reshape((-1,) + chw)
    net = netmode.NetProgram("t", [], {}, dict(f=f, bits=8, signed=True, rounding=rounding, shape=chw), {}, [], {},
                             "a", {})
    so = netfast.lib()
    c, h, w = chw
    want = to_fixed(x, f, 8, True, rounding).transpose(0, 2, 3, 1)
    out = np.full((len(x), h, w, c), 7777, np.int32)
    half = len(x) // 2
    fast = rounding != "truncate"
    assert np.abs(np.rint(np.ldexp(x, max(f + 24, 0)))).max() < 2.0 ** 52       # saturating, in the fast path
    with monkeypatch.context() as m:
        if fast:                                # the C loop must have done it: no numpy fallback
            m.setattr(netmode, "quantize_input", None)
        for b0, b1 in ((0, half), (half, len(x))):
            netfast.quantize_nhwc(net, so, np.ascontiguousarray(x[b0:b1]), out[b0:b1])
    np.testing.assert_array_equal(out, want)
    bad = x.copy()
    bad[-1, 0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        netfast.quantize_nhwc(net, so, bad, out)
    if rounding != "truncate":                  # one value beyond the fast path: that slice falls back
        x[1, 0, 0, 0] = 2.0 ** (60 - max(f + 24, 0))
        out2 = np.empty_like(out)
        netfast.quantize_nhwc(net, so, x, out2)
        np.testing.assert_array_equal(out2, to_fixed(x, f, 8, True, rounding).transpose(0, 2, 3, 1))


def test_flattened_map_into_a_dense_layer_in_nchw_order():
    """A dense layer reads a (C, H, W) map flattened in NCHW order: netfast permutes its
    weight columns to the NHWC buffers (asymmetric C, H, W so that a wrong order shows)."""
    rng = np.random.default_rng(7)
    engine = "sparse_cluster"
    op1, s1 = _conv(rng, "c1", "x", "t1", (2, 5, 4), 3, (3, 3), (1, 1), (1, 1, 1, 1), 1, engine)
    op2, s2 = _conv(rng, "fc", "t1f", "y", s1, 7, None, None, None, 1, engine, dense=True)
    net = netmode.NetProgram("t", [op1, op2], {"x": (2, 5, 4), "t1": s1, "t1f": (60,), "y": s2},
                             dict(name="x", shape=(2, 5, 4), f=0, bits=8, signed=True, rounding="nearest_away"),
                             dict(tensor="y", f=0, name="y", shape=(7,)), [],
                             {"rounding": "nearest_even"}, "a", {"t1f": "t1"}, engine)
    xq = rng.integers(-128, 128, (5, 2, 5, 4))
    np.testing.assert_array_equal(netfast.build(net).run(xq)[0], netmode.run_ints(net, xq))


def test_no_compiled_helper_no_fast_network(monkeypatch):
    monkeypatch.setenv("HLSNN_NATIVE", "0")
    native.forget()
    try:
        net = _program(np.random.default_rng(1), "shift_mac", "nearest_even", False)
        assert netfast.build(net) is None
    finally:
        monkeypatch.delenv("HLSNN_NATIVE")
        native.forget()


@pytest.fixture(scope="module")
def digits_cnn():
    pytest.importorskip("onnx")
    from conftest import ROOT
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import _layout
    from hlsnn.deploy.importer.onnx_import import load_onnx
    cfg = load_deploy_config(ROOT / "configs" / "models" / "digits_cnn.yaml")
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    return cfg, net, ds


@pytest.mark.parametrize("assignment", ["twohot", "fixed8", "sparse50", "pot"])
def test_deployment_fast_path_is_the_layer_path(digits_cnn, assignment):
    """Deployment.run on emu takes the compiled network; its outputs, saturation counts and
    input densities are the layer-by-layer path's."""
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.runner import Deployment
    cfg, net, ds = digits_cnn
    if assignment not in cfg.assignments:
        pytest.skip(f"{assignment} not in {cfg.path}")
    accs = open_accelerators(cfg, "emu", [assignment])
    try:
        dep = Deployment(net, cfg.assignments[assignment], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(ds.x_train[:32])
        x = ds.x_test[:150]
        y = dep.run(x)
        assert dep.fast_network() is not None
        st = {k: (e.stats.sat_count, e.stats.input_density) for k, e in dep.execs.items()}
        dep.fast = False
        y_ref = dep.run(x)
        np.testing.assert_array_equal(y.view(np.uint64), y_ref.view(np.uint64))
        for k, e in dep.execs.items():
            assert st[k][0] == e.stats.sat_count
            assert st[k][1] == pytest.approx(e.stats.input_density, rel=1e-12)
        dep.fast = True
        dep.calibrate(ds.x_train[32:64])           # a new calibration makes a new program
        assert dep._fastnet is None
        dep.fast = False
        y2 = dep.run(x)
        dep.fast = True
        np.testing.assert_array_equal(dep.run(x).view(np.uint64), y2.view(np.uint64))
    finally:
        for a in accs.values():
            a.close()


def test_an_input_of_another_size_is_refused_on_both_paths(digits_cnn):
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.errors import InputError
    cfg, net, ds = digits_cnn
    accs = open_accelerators(cfg, "emu", ["fixed8"])
    try:
        dep = Deployment(net, cfg.assignments["fixed8"], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(ds.x_train[:16])
        for fast in (True, False):
            dep.fast = fast
            with pytest.raises(InputError, match=r"input of shape \(3, 1, 9, 9\): .* takes \(batch,\) \+ "
                                                 r"\(1, 8, 8\) \(64 values per image\)"):
                dep.run(np.zeros((3, 1, 9, 9)))
    finally:
        for a in accs.values():
            a.close()
