"""The compiled calibration (hlsnn.deploy.quantize.calibrate; issue 32: calibration as fast per image as
the run) against its specification, the layer path's calibration (Deployment.run(x,
calibrate=True)): the same radix points, histograms, statistics, refitted codes and biases,
and so the same outputs afterwards. On random networks (strided, rectangular, asymmetric,
depthwise and 1x1 convs, MaxPool, ReLU6 as Clip, a residual Add with and without ReLU, global
pooling, dense; both engines, per-tensor and per-channel weight scales, every rounding,
overflow ratios) and on the shipped models."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.quantize import calibrate as netcal, shift_auto
from hlsnn.deploy.run import fast as netfast  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

pytestmark = pytest.mark.skipif("netfast.lib() is None", reason="no C compiler for the compiled helpers")

SPARSE = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"
SHIFT = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"


def _net(rng, depthwise, relu_add, clip):
    """x -> c1 (3x3, ReLU[6]) -> maxpool -> c2 (3x2 stride 2, asymmetric pads, depthwise or
    not) -> c3 (1x1, no ReLU) + c4 (1x1 stride 2 shortcut) -> Add [ReLU] -> GAP -> dense."""
    c, h = int(rng.integers(1, 4)), int(rng.choice([8, 16]))
    z1, z3 = int(rng.choice([8, 24])), int(rng.choice([8, 12, 40]))
    w = lambda *s: rng.normal(0, 0.4, s)          # noqa: E731
    b = lambda n: rng.normal(0, 0.1, n)           # noqa: E731
    g2 = z1 if depthwise else 1
    layers = [Layer("c1", "conv", ["x"], "t1", w=w(z1, c, 3, 3), b=b(z1), relu=True, pad=1)]
    src = "t1"
    if clip:
        layers.append(Layer("r6", "host", ["t1"], "t1c", op="Clip", attrs={"lo": 0.0, "hi": 6.0}))
        src = "t1c"
    layers += [
        Layer("mp", "host", [src], "t2", op="MaxPool", attrs={"kernel_shape": [2, 2], "strides": [2, 2],
                                                             "pads": [0, 0, 0, 0]}),
        Layer("c2", "conv", ["t2"], "t3", w=w(z1, z1 // g2, 3, 2), b=b(z1), relu=True, pads=(1, 0, 1, 1),
              strides=(2, 2), group=g2),
        Layer("c3", "conv", ["t3"], "t4", w=w(z3, z1, 1, 1), b=b(z3), relu=False),
        Layer("c4", "conv", ["t2"], "t5", w=w(z3, z1, 1, 1), b=b(z3), relu=False, strides=(2, 2)),
        Layer("add", "host", ["t4", "t5"], "t6", op="Add")]
    out = "t6"
    if relu_add:
        layers.append(Layer("ra", "host", ["t6"], "t7", op="Relu"))
        out = "t7"
    layers += [Layer("gap", "host", [out], "t8", op="GlobalAveragePool"),
               Layer("fl", "host", ["t8"], "t9", op="Flatten", attrs={"axis": 1}),
               Layer("fc", "dense", ["t9"], "y", w=w(10, z3), b=b(10))]
    return Network(name="n", path="", input="x", input_shape=(None, c, h, h), output="y", layers=layers), (c, h)


def _state(dep):
    """Everything a calibration sets, per layer."""
    out = {}
    for k, ex in dep.execs.items():
        s = ex.stats
        st = dict(f_x=np.asarray(ex.f_x).tolist(), f_out=ex.f_out, f_in=s.f_in, hist=list(s.histogram),
                  sat=s.sat_count, density=s.input_density, sparsity=s.weight_sparsity, in_shape=ex.in_shape)
        b_fit = getattr(ex, "b_fit", None)
        st["b_fit"] = None if b_fit is None else np.asarray(b_fit).tobytes()
        wq = ex.wq
        st["w"] = np.asarray(wq).tobytes() if isinstance(wq, np.ndarray) else b"".join(
            np.asarray(getattr(wq, a), np.int64).tobytes() for a in ("e1", "e2", "s1", "s2", "zero"))
        out[k] = st
    return out


def _pair(net, fmt, acc, **kw):
    mk = lambda: Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc}, **kw)   # noqa: E731
    return mk(), mk()


def _check(fast, ref, x_cal, x):
    assert netcal.calibrate(fast, x_cal), "the compiled calibration did not apply"
    ref.fast = False
    ref.calibrate(x_cal)
    a, b = _state(fast), _state(ref)
    for k in b:
        assert a[k] == b[k], k
    ref.fast = True
    np.testing.assert_array_equal(fast.run(x).view(np.uint64), ref.run(x).view(np.uint64))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("engine", ["sparse", "twohot", "pot"])
def test_random_networks_calibrate_as_the_layer_path(seed, engine, monkeypatch):
    """Also the AVX2 and the portable loops (netcal.ISA), a seed each; every other seed splits
    even the smallest layer between threads (netcal._MIN_WORK 1: their counts merged)."""
    monkeypatch.setattr(netcal, "ISA", [3, 2, 1, 0][seed % 4])
    if seed % 2:
        monkeypatch.setattr(netcal, "_MIN_WORK", 1)
    rng = np.random.default_rng([seed, ["sparse", "twohot", "pot"].index(engine)])
    net, (c, h) = _net(rng, depthwise=bool(seed % 2), relu_add=seed % 4 < 2, clip=seed % 3 == 0)
    fmt = FormatSpec("f", "fixed" if engine == "sparse" else engine, "a",
                     prune=float(rng.choice([0.0, 0.5])) if engine == "sparse" else 0.0,
                     delta=int(rng.integers(0, 2)) if engine == "twohot" else 0,
                     weight_scale="channel" if seed % 3 == 1 else "tensor",
                     weight_fit="nearest" if seed % 5 == 4 else "output")
    rounding = ["nearest_away", "nearest_even", "truncate"][seed % 3]
    nb = 5 if seed % 5 == 2 else 24                     # few images: padded first, then pixels in threads
    x_cal = rng.uniform(-1, 2, (nb, c, h, h)) * (rng.random((nb, c, h, h)) < 0.7)
    x_cal[rng.random(x_cal.shape) < 0.004] *= 16            # outliers: the overflow ratio lets them saturate
    x = rng.uniform(-1, 2, (9, c, h, h))
    acc = Accelerator(SPARSE if engine == "sparse" else SHIFT, "emu")
    try:
        fast, ref = _pair(net, fmt, acc, rounding=rounding, overflow_ratio=[0.0, 0.01][seed % 2])
        _check(fast, ref, x_cal, x)
        # a second calibration starts from the first's radix points (DETERMINE's f_prev)
        x2 = x_cal[::-1] * 0.25
        assert netcal.calibrate(fast, x2)
        ref.fast = False
        ref.calibrate(x2)
        assert _state(fast) == _state(ref)
        # c1 all zero (ReLU of negative biases on a zero input): its F_out is the previous one
        net.layers[0].b = -np.abs(net.layers[0].b) - 0.1
        zeros = np.zeros_like(x_cal)
        assert netcal.calibrate(fast, zeros)
        ref.fast = False
        ref.calibrate(zeros)
        assert _state(fast) == _state(ref)
        assert fast.execs["c1"].stats.histogram == [0] * len(fast.execs["c1"].stats.histogram)
    finally:
        acc.close()


@pytest.mark.parametrize("seed", range(40))
def test_the_radix_of_a_sum_is_host_radix(seed):
    """netcal.sum_radix (from MSB counts, the count of -1 and the largest magnitude) equals
    host_radix on the values themselves: sums of every scale, only {-1, 0}, all zero."""
    from hlsnn.deploy.quantize.quant import host_radix
    from hlsnn.primitives import msb_histogram
    rng = np.random.default_rng(seed)
    top = int(rng.integers(0, 31))
    s = rng.integers(-(1 << top), 1 << top, int(rng.integers(1, 300)))
    if seed % 10 == 1:
        s = rng.integers(-1, 1, 50)                  # only -1 and 0
    if seed % 10 == 2:
        s = np.zeros(7, np.int64)
    if seed % 10 == 3:
        s = np.abs(s)                                # after a ReLU
    r, bits = int(rng.integers(-3, 12)), int(rng.choice([4, 8, 16]))
    ratio = float(rng.choice([0.0, 0.01, 0.2]))
    amax = max(-int(s.min()), int(s.max()))
    got = netcal.sum_radix(msb_histogram(s, 32), int(np.count_nonzero(s == -1)), amax, s.size, r, bits, ratio)
    want = host_radix(np.ldexp(s.astype(np.float64), -r), bits, True, ratio)
    assert got == want
    ends = np.array([s.min(), s.max()])                # at ratio 0 the extremes alone
    assert netcal.sum_radix(msb_histogram(ends, 32), int(np.count_nonzero(ends == -1)), amax, 2, r, bits,
                            0.0) == host_radix(np.ldexp(s.astype(np.float64), -r), bits, True, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_the_sums_statistics_are_numpys(seed):
    """hlsnn_net_add_raw's sum (rule 4 before the requantization) and the statistics it
    gathers: min, max, the count of -1 and the MSB counts of msb_histogram."""
    from hlsnn.primitives import msb_histogram
    so = netfast.lib()
    rng = np.random.default_rng(seed)
    b, hw, c = 5, int(rng.choice([4, 16])), int(rng.choice([3, 70]))
    a = rng.integers(-3, 3, (b, hw, c)).astype(np.int32)
    o = rng.integers(-3, 3, (b, hw, c)).astype(np.int32)
    sa, sb, relu, gap = int(rng.integers(0, 3)), int(rng.integers(0, 3)), seed % 2, seed % 3 == 0
    want = (a.astype(np.int64) << sa) + (o.astype(np.int64) << sb)
    want = np.maximum(want, 0) if relu else want
    want = want.sum(axis=1, keepdims=True) if gap else want
    s = np.empty(want.shape, np.int32)
    st = np.zeros(35, np.int64)
    st[0], st[1] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    p = netfast._ptr
    assert so.hlsnn_net_add_raw(p(a), p(o), hw, c, sa, sb, relu, int(gap), 0, b, p(s), p(st), 1) == 0
    np.testing.assert_array_equal(s, want)
    assert (st[0], st[1], st[2]) == (want.min(), want.max(), np.count_nonzero(want == -1))
    np.testing.assert_array_equal(st[3:], msb_histogram(want, 32))


@pytest.mark.parametrize("isa", [0, 2])
@pytest.mark.parametrize("seed", range(4))
def test_the_statistics_units_counts_are_msb_histograms(seed, isa):
    """hlsnn_net_msb_counts (the calibration's histogram of the wide results, per channel)
    against primitives.msb_histogram of each channel: rows beyond the 255 its byte counters
    hold, channel counts that fill no vector or part of one, a row range that starts inside the
    map, a channel whose rows all land in one counter, values at every MSB position with 0, -1
    and the int32 extremes; the counts add to what the array held."""
    from hlsnn.primitives import msb_histogram
    so = netfast.lib()
    rng = np.random.default_rng([seed, isa])
    z = int(rng.choice([3, 8, 16, 40]))
    n = [7, 255, 256, 600][seed]
    v = (rng.integers(-(1 << 31), 1 << 31, (n, z)) >> rng.integers(0, 32, (n, z))).astype(np.int32)
    v.flat[rng.choice(v.size, min(v.size, 6), replace=False)] = [0, -1, -(1 << 31), (1 << 31) - 1, 1, -2][:min(v.size, 6)]
    v[:, -1] = 3                                             # every row in one counter
    q0 = int(rng.integers(0, 3))
    counts = np.full((z, 32), 5, np.int64)                   # added to
    so.hlsnn_net_msb_counts(netfast._ptr(v), z, q0, n, netfast._ptr(counts), isa)
    for c in range(z):
        np.testing.assert_array_equal(counts[c] - 5, msb_histogram(v[q0:, c].astype(np.int64), 32))


@pytest.mark.parametrize("isa", [0, 1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_the_output_stage_is_shift_round_sat(seed, isa):
    """hlsnn_net_requant (the main operation on the stored wide results) against
    primitives.shift_round_sat and the clamp, in place: every rounding mode, shifts in the
    branch-free range and outside it (<= 0, > 62), the int32 lanes' range (every shift <= 30)
    and beyond it (31, 32: int64 lanes), widths of 16 channels or not, saturation."""
    from hlsnn.primitives import ROUNDING_CODES, shift_round_sat
    so = netfast.lib()
    rng = np.random.default_rng([seed, isa])
    z = int(rng.choice([8, 16, 12, 40]))
    v = (rng.integers(-(1 << 31), 1 << 31, (50, z)) >> rng.integers(0, 31, (50, z))).astype(np.int32)
    v[0, :2] = -(1 << 31), (1 << 31) - 1
    shift = rng.integers(1, 25, z) if seed % 3 != 2 else rng.integers(26, 31 + (seed // 3) * 2, z)
    tie = (rng.random(v.shape) < 0.3) & (shift[None, :] <= 31)          # exact ties
    v[tie] = ((v.astype(np.int64) >> (shift - 1)) << (shift - 1))[tie]
    if seed % 2:
        shift[rng.random(z) < 0.3] = rng.choice([0, -3, 63, 70])
    bits = int(rng.choice([8, 4, 16]))
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if seed % 3 else (-5, 7)
    for rounding, mode in ROUNDING_CODES.items():
        want, sat = shift_round_sat(v.astype(np.int64), shift[None, :], bits, rounding)
        y = v.copy()
        p = netfast._ptr
        got_sat = so.hlsnn_net_requant(p(y), z, p(np.ascontiguousarray(shift, np.int64)), bits, mode, lo, hi, 0,
                                       len(v), p(y), isa)
        np.testing.assert_array_equal(y, np.clip(want, lo, hi))
        assert got_sat == int(np.asarray(sat).sum())


@pytest.mark.parametrize("isa", [0, 2])
@pytest.mark.parametrize("seed", range(10))
def test_the_run_paths_add_is_rule_4(seed, isa):
    """hlsnn_net_add (the run's residual Add / ReLU / GlobalAveragePool) against its rule in
    numpy: the exact sum ``(a << sa) + (b << sb)``, ReLU, the pixels summed for GAP, then
    primitives.shift_round_sat at ``shift``: every rounding mode, shifts in the vectorized
    range [1, 62] and outside it (<= 0, 63), one input or two, saturation, lengths that fill
    no vector or part of one; the portable loops and AVX-512."""
    from hlsnn.primitives import ROUNDING_CODES, shift_round_sat
    so = netfast.lib()
    rng = np.random.default_rng(seed)
    b, hw, c = int(rng.integers(1, 5)), int(rng.integers(1, 40)), 70 if seed == 6 else int(rng.integers(1, 70))
    sa, sb = seed % 4, (seed + 1) % 4
    two, relu, gap = seed % 2 == 0, seed % 3 != 0, seed in (3, 6)
    shift = [5, 1, 0, -2, 62, 63, 9, 3, 12, 20][seed]
    bits = int(rng.choice([8, 4, 16]))
    # sums of about shift + bits bits (most outputs in range: the rounding decides them), some
    # far beyond (saturation), and exact ties (the bits below the rounded one zero)
    top = int(np.clip(shift + bits - 2 - max(sa, sb), 4, 20))
    a = rng.integers(-(1 << top), 1 << top, (b, hw, c)).astype(np.int32)
    o = rng.integers(-(1 << top), 1 << top, (b, hw, c)).astype(np.int32)
    a[rng.random(a.shape) < 0.1] <<= 8
    if 1 <= shift - sa <= 20:
        tie = rng.random(a.shape) < 0.3
        a[tie] = (a[tie] >> (shift - sa - 1)) << (shift - sa - 1)
        o[tie] = 0
    s = (a.astype(np.int64) << sa) + ((o.astype(np.int64) << sb) if two else 0)
    if relu:
        s = np.maximum(s, 0)
    if gap:
        s = s.sum(axis=1, keepdims=True)
    p = netfast._ptr
    for rounding, mode in ROUNDING_CODES.items():
        want, sat = shift_round_sat(s, shift, bits, rounding)
        y = np.zeros((b, 1 if gap else hw, c), np.int32)
        got_sat = so.hlsnn_net_add(p(a), p(o) if two else None, hw, c, sa, sb, int(relu), int(gap), shift, bits,
                                   mode, 0, b, p(y), isa)
        np.testing.assert_array_equal(y, want)
        assert got_sat == int(np.asarray(sat).sum())


MODELS = [("configs/models/resnet8_digits32.yaml", ["fixed8", "sparse50"]),
          ("tests/data/torch/tiny/mobilenet_relu6_ts17.yaml", ["twohot", "fixed8"]),
          ("tests/data/torch/tiny/dscnn_dynamo.yaml", ["twohot", "fixed8"]),
          ("tests/data/torch/tiny/autoencoder_ts17.yaml", ["twohot", "fixed8"])]
# ResNet-8's shift formats choose their pair from four calibrations, two of them layer by layer
# (about 45 CPU-s): slow; the tiny models' twohot above check the same chosen-pair path quickly.
SLOW = [pytest.param("configs/models/resnet8_digits32.yaml", ["twohot", "pot"], marks=pytest.mark.slow,
                     id="resnet8_digits32.yaml-shift")]


@pytest.mark.parametrize("path,assignments", MODELS + SLOW,
                         ids=[m[0].split("/")[-1] for m in MODELS] + ["resnet8_digits32.yaml-shift"])
def test_shipped_models_calibrate_as_the_layer_path(path, assignments):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import _layout, open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    cfg = load_deploy_config(ROOT / path)
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    accs = open_accelerators(cfg, "emu", assignments)
    try:
        for name in assignments:
            mk = lambda f: Deployment(net, cfg.assignments[name], f, accs,   # noqa: E731
                                      overflow_ratio=cfg.calibration["overflow_ratio"], rounding=cfg.rounding)
            fast, ref = mk(cfg.formats), mk(cfg.formats)
            if shift_auto.wanted(ref):      # radix/weight_fit auto: the compiled calibration of the pair chosen
                ref.fast = False
                ref.calibrate(ds.x_train[:48])
                fast = mk(ref.formats)
            _check(fast, ref, ds.x_train[:48], ds.x_test[:40])
    finally:
        for a in accs.values():
            a.close()


def test_what_it_does_not_replicate_is_left_to_the_layer_path():
    """A bias that does not fit the kernel's field: the compiled calibration declines and leaves
    the deployment as it was; Deployment.calibrate then raises the layer path's error."""
    rng = np.random.default_rng(5)
    net, (c, h) = _net(rng, depthwise=False, relu_add=True, clip=False)
    net.layers[0].b = np.full(8, 1e9)
    acc = Accelerator(SPARSE, "emu")
    try:
        dep, _ = _pair(net, FormatSpec("f", "fixed", "a"), acc)
        before = _state(dep)
        x = rng.uniform(0, 1, (4, c, h, h))
        assert not netcal.calibrate(dep, x)
        assert _state(dep) == before and not dep.calibrated
        with pytest.raises(InputError, match="bias does not fit"):
            dep.calibrate(x)
    finally:
        acc.close()


def test_no_compiled_helper_no_compiled_calibration(monkeypatch):
    monkeypatch.setattr(netfast, "lib", lambda: None)
    rng = np.random.default_rng(6)
    net, (c, h) = _net(rng, depthwise=False, relu_add=True, clip=False)
    acc = Accelerator(SPARSE, "emu")
    try:
        dep, _ = _pair(net, FormatSpec("f", "fixed", "a"), acc)
        assert not netcal.calibrate(dep, rng.uniform(0, 1, (4, c, h, h)))
        dep.calibrate(rng.uniform(0, 1, (4, c, h, h)))          # the layer path
        assert dep.calibrated
    finally:
        acc.close()


@pytest.mark.parametrize("fast", [True, False])
def test_bad_calibration_input_gets_a_clear_error(fast):
    """A calibration batch of another image size, of no images, or with NaN or infinity, and a
    run on NaN: InputError naming the problem (they were a ValueError from inside numpy), on
    the compiled path and on the layer path; the deployment stays uncalibrated."""
    rng = np.random.default_rng(7)
    net, (c, h) = _net(rng, depthwise=False, relu_add=True, clip=False)
    acc = Accelerator(SPARSE, "emu")
    try:
        dep, _ = _pair(net, FormatSpec("f", "fixed", "a"), acc)
        dep.fast = fast
        with pytest.raises(InputError, match="values per image"):
            dep.calibrate(np.zeros((4, c, h + 1, h)))
        with pytest.raises(InputError, match="at least one image"):
            dep.calibrate(np.zeros((0, c, h, h)))
        bad = rng.uniform(0, 1, (4, c, h, h))
        bad[1, 0, 2, 3] = np.nan
        with pytest.raises(InputError, match="1 value.*NaN or infinite"):
            dep.calibrate(bad)
        assert not dep.calibrated
        dep.calibrate(rng.uniform(0, 1, (4, c, h, h)))
        bad[2, 0, 0, 0] = np.inf
        with pytest.raises(InputError, match="2 value.*NaN or infinite"):
            dep.run(bad)
    finally:
        acc.close()


def _strided_net(rng):
    """x -> c (3x3 stride 2, pad 1, ReLU; only the centre taps: output (i, j) is the input at
    (2i, 2j) scaled, the stride-1 form's odd positions read the odd pixels) -> GAP -> dense."""
    w = np.zeros((3, 1, 3, 3))
    w[:, 0, 1, 1] = [1.0, 0.5, 0.75]
    layers = [Layer("c", "conv", ["x"], "t1", w=w, b=np.zeros(3), relu=True, pad=1, strides=(2, 2)),
              Layer("gap", "host", ["t1"], "t2", op="GlobalAveragePool"),
              Layer("fl", "host", ["t2"], "t3", op="Flatten", attrs={"axis": 1}),
              Layer("fc", "dense", ["t3"], "y", w=rng.normal(0, 0.4, (10, 3)), b=rng.normal(0, 0.1, 10))]
    return Network(name="n", path="", input="x", input_shape=(None, 1, 8, 8), output="y", layers=layers)


@pytest.mark.parametrize("scale,radix", [("tensor", "msb"), ("channel", "msb"), ("tensor", "lse")])
def test_strided_stats_kept_calibrates_as_the_layer_path(scale, radix):
    """``strided_stats="kept"``: the compiled calibration equals the layer path (radix points,
    histograms, outputs after), and on an input whose dropped stride-1 results are 4 times the
    kept ones the strided conv's F_out is 2 finer than with ``all``; its histogram counts the
    non-zero kept outputs (16 per image and channel) instead of every non-zero stride-1
    result (32: the even and the odd pixels)."""
    rng = np.random.default_rng(5)
    net = _strided_net(rng)
    x = np.zeros((6, 1, 8, 8))
    x[:, :, 0::2, 0::2] = rng.uniform(0.1, 0.25, (6, 1, 4, 4))
    x[:, :, 1::2, 1::2] = rng.uniform(0.1, 1.0, (6, 1, 4, 4))
    x[:, 0, 0, 0], x[:, 0, 1, 1] = 0.25, 1.0
    fmt = FormatSpec("f", "fixed", "a", weight_scale=scale, radix=radix)
    acc = Accelerator(SPARSE, "emu")
    try:
        f_out = {}
        for rule in ("all", "kept"):
            fast, ref = _pair(net, fmt, acc, strided_stats=rule)
            _check(fast, ref, x, x[::-1] * 0.5)
            f_out[rule] = fast.execs["c"].f_out
            n = sum(fast.execs["c"].stats.histogram)
            assert n == 6 * 3 * (16 if rule == "kept" else 32)     # the non-zero results counted: kept, all
        assert f_out["kept"] == f_out["all"] + 2 or radix == "lse"      # lse: up to 3 bits finer (radix_lse)
        assert f_out["kept"] > f_out["all"]
        with pytest.raises(InputError, match="static calibration"):
            Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc}, strided_stats="kept", dynamic=True)
    finally:
        acc.close()


def _clip_net(rng):
    """x -> c (3x3, pad 1, ReLU; only the centre taps: output channel k is the input times
    ``w_k``) -> Clip(0, 6) (ReLU6: the conv's only reader) -> GAP -> dense."""
    w = np.zeros((3, 1, 3, 3))
    w[:, 0, 1, 1] = [1.0, 0.5, 0.75]
    layers = [Layer("c", "conv", ["x"], "t0", w=w, b=np.zeros(3), relu=True, pad=1),
              Layer("r6", "host", ["t0"], "t1", op="Clip", attrs={"lo": 0.0, "hi": 6.0}),
              Layer("gap", "host", ["t1"], "t2", op="GlobalAveragePool"),
              Layer("fl", "host", ["t2"], "t3", op="Flatten", attrs={"axis": 1}),
              Layer("fc", "dense", ["t3"], "y", w=rng.normal(0, 0.4, (10, 3)), b=rng.normal(0, 0.1, 10))]
    return Network(name="n", path="", input="x", input_shape=(None, 1, 8, 8), output="y", layers=layers)


@pytest.mark.parametrize("engine,radix", [("fixed", "msb"), ("twohot", "msb"), ("fixed", "lse")])
def test_clip_stats_clipped_calibrates_as_the_layer_path(engine, radix):
    """``clip_stats="clipped"``: the compiled calibration equals the layer path (radix points,
    histograms, outputs after) under both rules, on both engines; a conv read only by a ReLU6
    whose calibration maximum (8.375 after the input's conversion) is above 127/16 takes
    F_out 4 with ``clipped`` (the DETERMINE of values clipped at 6, worked out here: the top
    magnitude bit 6 holds the largest value's MSB, ``6 - floor(log2(max))``) and 3 with ``off``
    (the default: the old rule); the radix holds the bound 6 (saturation free). ``radix: lse``
    refines on the same clipped values (up to 3 bits finer: compared with the layer path only)."""
    rng = np.random.default_rng(6)
    net = _clip_net(rng)
    x = rng.uniform(0.1, 7.0, (6, 1, 8, 8))
    x[:, 0, 0, 0] = 8.4
    f_x = 6 - int(np.floor(np.log2(np.abs(x).max())))             # the input's radix: 3
    xq = np.rint(x * 2.0 ** f_x) / 2.0 ** f_x                    # its values (the maximum 8.375)
    y = np.maximum(xq[:, 0, :, :, None] * np.array([1.0, 0.5, 0.75]), 0)          # the conv's results
    want = {r: 6 - int(np.floor(np.log2((np.minimum(y, 6) if r == "clipped" else y).max())))
            for r in ("off", "clipped")}
    assert want == {"off": 3, "clipped": 4}
    fmt = FormatSpec("f", engine, "a", radix=radix)
    acc = Accelerator(SPARSE if engine == "fixed" else SHIFT, "emu")
    try:
        for rule in ("off", "clipped"):
            fast, ref = _pair(net, fmt, acc, clip_stats=rule)
            _check(fast, ref, x, x[::-1] * 0.7)
            assert fast.execs["c"].f_out == ref.execs["c"].f_out, rule
            assert fast.execs["c"].f_out == want[rule] or radix == "lse", rule
            assert fast.execs["c"].clip_saturation_free is ref.execs["c"].clip_saturation_free \
                is (True if rule == "clipped" else None)
            assert fast.execs["fc"].clip_saturation_free is None            # no Clip reads the dense layer
        with pytest.raises(InputError, match="static calibration"):
            Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc}, clip_stats="clipped", dynamic=True)
        with pytest.raises(InputError, match="static calibration"):
            Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc}, clip_stats="clipped", update="e5")
        with pytest.raises(InputError, match="one of off, clipped"):
            Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc}, clip_stats="kept")
    finally:
        acc.close()


def test_clip_stats_needs_the_clip_as_the_only_reader():
    """A second reader of the conv's output (here the GAP reads it too, through an Add with
    the clipped values) sees the unclipped values: the option does not apply (F_out 3)."""
    rng = np.random.default_rng(6)
    net = _clip_net(rng)
    net.layers[2:3] = [Layer("add", "host", ["t1", "t0"], "ta", op="Add"),
                       Layer("gap", "host", ["ta"], "t2", op="GlobalAveragePool")]
    x = rng.uniform(0.1, 7.0, (6, 1, 8, 8))
    x[:, 0, 0, 0] = 8.4
    acc = Accelerator(SPARSE, "emu")
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a", radix="msb")},
                         {"a": acc}, clip_stats="clipped")
        dep.calibrate(x)
        assert dep.execs["c"].f_out == 3 and dep.execs["c"].clip_saturation_free is None
    finally:
        acc.close()
