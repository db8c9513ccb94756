"""Helpers the network-mode tests share (tests/deploy/test_network_*.py): the three formats of
the small test models, a compile of an ONNX file in one of them, the rounding of an exact
Fraction written out from the definitions, and the checks every network-kernel C-simulation
case makes (the layer path's bits in one start, the loops' iterations the perf model's, the
strict C-simulation's port checks, optionally the simulated board); the mean tests' AveragePool
net and onnx's reference AveragePool against the lowered pool; and what the tests of the files
PyTorch wrote (tests/data/torch/beyond) share: onnxruntime's outputs and a deployment config;
the small nets' ONNX writing (checked, saved) and initializers; the ``radix: lse`` tests' check
that the compiled calibration is the layer path's."""
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

#: one format per engine, as the small models' deployment configs name them
FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}
ENGINE = {"bfp8": "bfp_systolic", "twohot": "shift_mac", "fixed8": "sparse_cluster"}


def round_fraction(v, rounding):
    """A Fraction rounded to an integer: half to even, half away from zero, or floor (truncate)."""
    fl = math.floor(v)
    r = v - fl
    if rounding == "truncate" or r == 0:
        return fl
    if r != Fraction(1, 2):
        return fl + (r > Fraction(1, 2))
    if rounding == "nearest_even":
        return fl + (fl % 2)
    return fl + 1 if v > 0 else fl


def round_array(w, rounding):
    """The numpy values ``w`` rounded to integers in their own dtype (longdouble references):
    half away from zero (``nearest_away``), half to even (``nearest_even``), else floor."""
    w = np.asarray(w)
    if rounding == "nearest_away":
        return np.sign(w) * np.floor(np.abs(w) + w.dtype.type(0.5))
    if rounding == "nearest_even":
        return np.rint(w)
    return np.floor(w)


def write_config(tmp, name, model, *, formats=None, layout="nchw", stem=None, extra=""):
    """The deployment config ``tmp/STEM.yaml`` (``stem`` default ``name``) of the ONNX file
    ``model``: every format of ``formats`` (default :data:`FORMATS`), one assignment each;
    ``extra``: more top-level lines (e.g. a regression task's)."""
    formats = FORMATS if formats is None else formats
    cfg = tmp / f"{stem or name}.yaml"
    cfg.write_text(f"name: {name}\nmodel: {model}\ndata: digits\nlayout: {layout}\n{extra}formats:\n"
                   + "".join(f"  {k}: {v}\n" for k, v in formats.items())
                   + "assignments:\n" + "".join(f"  {k}: {{default: {k}}}\n" for k in formats))
    return cfg


def compile_each(tmp, name, model, fmts=None, *, formats=None, layout="nchw", stem=None, **compile_kw):
    """``{fmt: tmp/STEM-FMT.hlsnn}``: the ONNX file ``model`` compiled in each of ``fmts``
    (default every format of the config, :func:`write_config`); ``compile_kw`` to compile_model."""
    from hlsnn.network.build import compile_model
    formats = FORMATS if formats is None else formats
    cfg = write_config(tmp, name, model, formats=formats, layout=layout, stem=stem)
    out = {}
    for fmt in (formats if fmts is None else fmts):
        out[fmt] = tmp / f"{stem or name}-{fmt}.hlsnn"
        compile_model(cfg, fmt, out[fmt], **compile_kw)
    return out


def compile_onnx(tmp, name, model, fmt, *, formats=None, layout="nchw", stem=None, **compile_kw):
    """Compile the ONNX file ``model`` in format ``fmt`` (one of ``formats``, default
    :data:`FORMATS`: the config lists them all, one assignment each) to ``tmp/STEM-FMT.hlsnn``."""
    return compile_each(tmp, name, model, [fmt], formats=formats, layout=layout, stem=stem, **compile_kw)[fmt]


def check_kernel_run(path, fmt, x, board=False):
    """The network kernel of the compiled model ``path`` on C-simulation for the batch ``x``:
    ``fmt``'s engine, the layer-by-layer emulator's bits, one start, every loop's iterations the
    perf model's, and (a strict library) every bank within its ports; ``board``: the simulated
    board gives the same bits in one start. Returns the csim model."""
    import hlsnn
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    k_run = hlsnn.load(path, "csim", network=True)
    assert k_run.network.engine == ENGINE[fmt]
    np.testing.assert_array_equal(k_run(x), hlsnn.load(path, "emu", network=False)(x))
    assert k_run.last_kernel_starts == 1
    k = k_run._kernel
    perf = bfpperf if fmt == "bfp8" else netperf
    assert {c: it for c, (it, _) in k.counters.items()} == {
        c: len(x) * v for c, v in perf.iterations(k_run.network, k.tables).items()}
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    if board:
        with hlsnn.load(path, "sim", network=True) as sim:       # the simulated board
            np.testing.assert_array_equal(sim(x), k_run(x))
            assert sim.last_kernel_starts == 1
    return k_run


def avgpool_net(path, count_include_pad, seed, name):
    """A 2-D net of the mean tests: conv 3x3 padded (8x8), Relu, AveragePool 3x3 stride 1 padded by
    1 (``count_include_pad`` 1: every window over 9; 0: over the taps inside the map), conv 3x3
    stride 2 (3x3), Relu, GlobalAveragePool over 3x3, a dense layer; weights drawn from ``seed``."""
    import onnx
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.6, (6, 1, 3, 3)).astype(np.float32), "c1_w"),
            numpy_helper.from_array(rng.normal(0, 0.1, 6).astype(np.float32), "c1_b"),
            numpy_helper.from_array(rng.normal(0, 0.4, (8, 6, 3, 3)).astype(np.float32), "c2_w"),
            numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "c2_b"),
            numpy_helper.from_array(rng.normal(0, 0.5, (8, 10)).astype(np.float32), "d_w")]
    nodes = [helper.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("AveragePool", ["r1"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              count_include_pad=count_include_pad),
             helper.make_node("Conv", ["ap", "c2_w", "c2_b"], ["c2"], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]), helper.make_node("MatMul", ["f", "d_w"], ["y"])]
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 10])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def cbam_net(path, seed=52, gate_on_gate=False):
    """A CBAM-like 2-D net (issue 52): conv 3x3 (1 -> 8, 8x8) + Relu = h; channel attention
    ``a = mlp(GlobalAveragePool(h)) + mlp(GlobalMaxPool(h))`` through one shared MLP of 1x1 convs
    (8 -> 2, Relu, 2 -> 8), ``y = h * Sigmoid(a)`` (the map waits for its gate while both pooled
    branches run: a third activation buffer); with ``gate_on_gate`` then ``y * Sigmoid(conv1x1(y))``
    (a product of three codes, ``h * s * t``); conv 3x3 stride 2 + Relu, GlobalAveragePool, Gemm
    to 10; weights drawn from ``seed``."""
    from onnx import helper
    init, w = weight_drawer(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", w("c1_w", (8, 1, 3, 3), 0.6), w("c1_b", (8,), 0.1)], ["c1"], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["h"]), n("GlobalAveragePool", ["h"], ["pa"]), n("GlobalMaxPool", ["h"], ["pm"])]
    w("m1_w", (2, 8, 1, 1), 0.5), w("m2_w", (8, 2, 1, 1), 0.6)
    for p in ("pa", "pm"):             # the shared MLP (one set of weights, read twice)
        nodes += [n("Conv", [p, "m1_w"], [p + "1"]), n("Relu", [p + "1"], [p + "r"]),
                  n("Conv", [p + "r", "m2_w"], [p + "2"])]
    nodes += [n("Add", ["pa2", "pm2"], ["a"]), n("Sigmoid", ["a"], ["s"]), n("Mul", ["h", "s"], ["y"])]
    last = "y"
    if gate_on_gate:
        nodes += [n("Conv", ["y", w("g_w", (8, 8, 1, 1), 0.4), w("g_b", (8,), 0.1)], ["g"]),
                  n("Sigmoid", ["g"], ["t"]), n("Mul", ["y", "t"], ["y2"])]
        last = "y2"
    nodes += [n("Conv", [last, w("c2_w", (8, 8, 3, 3), 0.3), w("c2_b", (8,), 0.1)], ["c2"], strides=[2, 2],
                pads=[1, 1, 1, 1]),
              n("Relu", ["c2"], ["r2"]), n("GlobalAveragePool", ["r2"], ["gp"]), n("Flatten", ["gp"], ["f"]),
              n("Gemm", ["f", w("d_w", (10, 8), 0.5), w("d_b", (10,), 0.1)], ["out"], transB=1)]
    return save_net(path, nodes, init, "cbam", ["N", 1, 8, 8], y="out")


#: the onnx reference's input radixes and the consumer's (F_in, F_x) the pool checks run at
POOL_RADIXES = ((4, 4), (5, 3), (2, 6))
POOL_ROUNDINGS = ("nearest_even", "nearest_away", "truncate")


def lowered_pool(attrs, q, f_in, f_x, rounding):
    """The AveragePool of ONNX attributes ``attrs`` lowered on its own (hlsnn.engines.network.pools.linpool,
    8 bits) on the integer maps ``q`` at radix ``f_in``, materialized at the consumer's ``f_x``:
    ``(its integer result, the lowered op)``."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.network.pools import linpool
    j = dict(kind="host", op="AveragePool", name="p", inputs=["x"], output="y", attrs=attrs)
    state, shapes, ops = {"x": ("q", f_in)}, {"x": q.shape[1:]}, []
    assert linpool.lower_host(j, state, shapes, ops, 8, netmode._why, netmode.Op)
    linpool.materialize({"name": "next", "f_x": f_x}, "y", state["y"], state, shapes, ops, {}, rounding,
                        netmode._why, netmode.Op)
    op, = ops
    return linpool.run(op, {"x": q}.get, len(q), 8), op


def check_pool_is_onnx_reference(q, attrs, check_op=None):
    """On the 8-bit maps ``q`` (N, C, H, W), at every radix pair of :data:`POOL_RADIXES` and every
    rounding: the lowered pool (:func:`lowered_pool`) equals onnx's reference AveragePool of
    ``attrs`` (float64) quantized by the layer path's ``to_fixed`` at F_x; ``check_op(op)`` asserts
    what the test expects of each lowered op."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    from hlsnn.deploy.quantize.quant import to_fixed
    for f_in, f_x in POOL_RADIXES:
        x = np.ldexp(q.astype(np.float64), -f_in)
        g = helper.make_graph([helper.make_node("AveragePool", ["x"], ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, list(x.shape))],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)])
        ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])).run(None, {"x": x})[0]
        for rounding in POOL_ROUNDINGS:
            got, op = lowered_pool(attrs, q, f_in, f_x, rounding)
            if check_op is not None:
                check_op(op)
            np.testing.assert_array_equal(got, to_fixed(ref, f_x, 8, True, rounding))


#: the ONNX files PyTorch 2.13 wrote for issue 52's kinds (tests/deploy/test_torch_*.py) and their MANIFEST
BEYOND = Path(__file__).resolve().parents[1] / "data" / "torch" / "beyond"
BEYOND_MANIFEST = json.loads((BEYOND / "MANIFEST.json").read_text())


def onnxruntime_rows(model, x):
    """onnxruntime's output for the batch ``x`` of the ONNX file (path) or serialized model
    (bytes) ``model``, one sample a run (batch-1 exports), concatenated."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model if isinstance(model, bytes) else str(model), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {inp: x[i:i + 1].astype(np.float32)})[0] for i in range(len(x))])


def beyond_config(tmp, name):
    """The deployment config of the beyond file ``name`` (:data:`BEYOND`): digits, layout auto,
    every format of :data:`FORMATS`; a dense model's a regression onto its inputs."""
    extra = "task: regression\ntargets: inputs\n" if BEYOND_MANIFEST["models"][name]["task"] == "dense" else ""
    return write_config(tmp, name, BEYOND / f"{name}.onnx", layout="auto", extra=extra)


def save_net(path, nodes, inits, name, x_shape, y_shape=("N", 10), *, y="y", opset=17):
    """The ONNX graph ``name`` of ``nodes`` and initializers ``inits``, its float input ``x`` of
    ``x_shape`` and float output ``y`` of ``y_shape``, checked and saved at ``path`` (opset
    ``opset``, IR version 8: what onnxruntime reads). ``inits`` is a list of tensors or a dict
    ``{name: array}`` (each array's own dtype). Returns ``path``."""
    import onnx
    from onnx import helper, numpy_helper
    if isinstance(inits, dict):
        inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info(y, onnx.TensorProto.FLOAT, list(y_shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def f32_init(name, a):
    """The float32 initializer ``name`` of the values ``a``."""
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def weight_drawer(seed):
    """``(inits, w)``: an empty list of initializers and ``w(name, shape, scale)``, which appends
    the float32 initializer ``name`` drawn from N(0, ``scale``) of ``shape`` (one generator seeded
    ``seed``, drawn in call order) and returns ``name``."""
    r = np.random.default_rng(seed)
    inits = []

    def w(name, shape, scale):
        inits.append(f32_init(name, r.normal(0, scale, shape)))
        return name
    return inits, w


def compiled_once(tmp_path_factory, name, build, **compile_kw):
    """``{fmt: path}`` for a module fixture: ``build(tmp/NAME.onnx)`` (returning the path) compiled
    in every format by :func:`compile_each` (``compile_kw`` to it) in a fresh folder ``NAME``."""
    tmp = tmp_path_factory.mktemp(name)
    return compile_each(tmp, name, build(tmp / f"{name}.onnx"), **compile_kw)


def lse_batches(rng, c):
    """The ``radix: lse`` tests' batches of ``c`` x 16 x 16 drawn from ``rng``: ``(x_cal, x)``,
    24 calibration images uniform in [-1, 2) with outliers 16x (a tail the rule lets saturate),
    then 9 images to run."""
    x_cal = rng.uniform(-1, 2, (24, c, 16, 16))
    x_cal[rng.random(x_cal.shape) < 0.004] *= 16            # outliers: a tail the rule lets saturate
    x = rng.uniform(-1, 2, (9, c, 16, 16))
    return x_cal, x


def lse_calibrates_as_the_layer_path(fast, ref, msb, x_cal, x):
    """The ``radix: lse`` tests (tests/deploy/test_radix_lse*.py): the compiled calibration of the
    deployment ``fast`` applies and chooses what the layer path's of ``ref`` (the same format)
    does, every layer's radix points, saturation counts and histograms, and both run the same bits
    on ``x``; ``msb`` (DETERMINE's rule) calibrated on ``x_cal`` too; the output layer ``fc`` alone
    keeps DETERMINE's rule, and no radix is coarser than DETERMINE's. Returns the layers whose
    output radix lse moved (finer)."""
    from hlsnn.deploy.quantize import calibrate as netcal
    from hlsnn.deploy.quantize import radix_lse
    assert netcal.calibrate(fast, x_cal), "the compiled calibration did not apply"
    ref.fast = False
    ref.calibrate(x_cal)
    msb.calibrate(x_cal)
    got = {k: (ex.f_x, ex.f_out, ex.stats.sat_count, list(ex.stats.histogram)) for k, ex in fast.execs.items()}
    assert got == {k: (ex.f_x, ex.f_out, ex.stats.sat_count, list(ex.stats.histogram))
                   for k, ex in ref.execs.items()}
    ref.fast = True
    np.testing.assert_array_equal(fast.run(x).view(np.uint64), ref.run(x).view(np.uint64))
    # the network's output layer keeps DETERMINE's rule (a saturated output is a clamped result)
    assert [k for k, ex in fast.execs.items() if not radix_lse.wanted_out(ex)] == ["fc"]
    finer = [k for k in fast.execs if fast.execs[k].f_out != msb.execs[k].f_out]
    assert all(fast.execs[k].f_out > msb.execs[k].f_out for k in finer)     # never coarser than DETERMINE's
    return finer


def check_emu_network_run(path, fmt, x, lowered=None):
    """The compiled model ``path`` in the emulator's network mode on the batch ``x``: ``fmt``'s
    engine, ``lowered(run)`` (what the test expects of the lowered program), outputs that depend
    on the image (most rows differ from the first), the layer-by-layer path's bits. Returns the
    run."""
    import hlsnn
    net = hlsnn.load(path, "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    if lowered is not None:
        lowered(net)
    want = hlsnn.load(path, "emu", network=False)(x)
    assert (want != want[0]).any(axis=1).mean() > 0.5           # the outputs depend on the image
    np.testing.assert_array_equal(net(x), want)
    return net


def check_refused_runs_layer_by_layer(path, error, match, x):
    """The network mode refuses the compiled model ``path`` with ``error`` matching ``match`` (by
    name); the layer path (``network=None``) runs it on ``x`` to finite outputs."""
    import hlsnn
    import pytest
    with pytest.raises(error, match=match):
        hlsnn.load(path, "emu", network=True)
    net = hlsnn.load(path, "emu")                          # network=None: layer by layer
    assert net.network is None
    assert np.isfinite(net(x)).all()


def check_strict_kernel_run(path, fmt, x):
    """:func:`check_kernel_run` on the strict C-simulation library (it must be the one compiled):
    ``(the csim model, the compiled network.cpp, network.h)``."""
    run = check_kernel_run(path, fmt, x)
    k = run._kernel
    assert k.strict, "the strict C-simulation library"
    cpp, h = ((k.path.parent / f).read_text() for f in ("network.cpp", "network.h"))   # what was compiled
    return run, cpp, h


def compiled_per_format(tmp_path_factory, name, build, **compile_kw):
    """``get(fmt)`` for a module fixture: ``build(tmp/NAME_FMT.onnx, fmt)`` (a model of its own
    per format, returning the path) compiled in ``fmt`` alone (:func:`compile_onnx`; default 2
    check and 16 calibration samples, ``compile_kw`` to it) on its first ``get``, once for the
    module."""
    tmp = tmp_path_factory.mktemp(name)
    compile_kw = dict(dict(check_samples=2, calibration_samples=16), **compile_kw)
    cache = {}

    def get(fmt):
        if fmt not in cache:
            model = build(tmp / f"{name}_{fmt}.onnx", fmt)
            cache[fmt] = compile_onnx(tmp, f"{name}_{fmt}", model, fmt, formats={fmt: FORMATS[fmt]}, **compile_kw)
        return cache[fmt]
    return get


class PerFormat:
    """``paths[fmt]``: the net compiled in ``fmt`` on first use (``get`` of
    :func:`compiled_per_format`)."""

    def __init__(self, get):
        self.get = get

    def __getitem__(self, fmt):
        return self.get(fmt)


@pytest.fixture(scope="module")
def classifier_fixed_defaults():
    """A regression deployment's fixed/sparse ``auto`` fields resolved as a classifier's (``radix:
    lse``, ``weight_scale: auto``, no bias correction, no equalization: what they were before
    hlsnn.deploy.quantize.task_formats), for the tests whose subject is another rule or the network path's
    bits, not the regression defaults (these cost seconds of calibration per deploy; their own
    tests: tests/deploy/test_task_formats.py). Use: ``pytestmark = pytest.mark.usefixtures(
    "classifier_fixed_defaults")`` with the name imported from here."""
    from hlsnn.deploy.quantize import task_formats
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(task_formats, "resolve", lambda formats, task, net=None: formats)
        yield


def check_two_term_map(path, x, kinds, tensor, cols):
    """The compiled model at ``path`` whose layer ``c3`` takes its input in two int8 terms
    (``input_terms: 2``, :mod:`hlsnn.deploy.quantize.twoin`), lowered to the ops ``kinds``: its last two ops
    (the terms' maker and the conv) carry ``terms`` 2 with lo at channel 16 of a 24-channel map,
    and the map's integers on ``x`` are numpy's two terms of the layer path's float64 ``tensor``
    (``cols`` values a channel): ``hi`` rounded at ``F_x``, ``lo`` the residual rounded 7 bits
    finer, both saturated to int8; channels 8-15 zero; lo not all zero. Returns
    ``(c3, the conv op)``."""
    import hlsnn
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.deploy.quantize import twoin
    from hlsnn.network import artifact
    prog, arrays = artifact.read(str(path))
    (c3,) = [j for j in prog["layers"] if j["name"] == "c3"]
    assert c3["in_terms"] == 2
    net = netmode.lower(prog, arrays)
    assert [op.kind for op in net.ops] == kinds
    src, conv = net.ops[-2:]
    assert (src.f["terms"], src.f["lo"], conv.f["terms"], conv.f["lo"], conv.f["c"]) == (2, 16, 2, 16, 8)
    assert net.shapes[src.out][0] == 24
    _, env = hlsnn.load(path, "emu", network=False).run(x, keep=True)
    v, fx, rnd = env[tensor], c3["f_x"], prog["rounding"]
    hi = np.clip(round_array(np.ldexp(v, fx), rnd), -128, 127)
    lo = np.clip(round_array(np.ldexp(v - np.ldexp(hi, -fx), fx + twoin.SHIFT), rnd), -128, 127)
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    got = ints[src.out].reshape(len(x), 24, cols)
    np.testing.assert_array_equal(got[:, :8], hi)
    np.testing.assert_array_equal(got[:, 8:16], 0)
    np.testing.assert_array_equal(got[:, 16:], lo)
    assert (lo != 0).mean() > 0.2
    return c3, conv


#: the keyword arguments of torch's two exporters as the pattern tests call them: TorchScript at
#: opset 17 and dynamo at its default
TORCH_EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


def layer_path_starts(path, x):
    """The kernel starts of one layer-by-layer run of the compiled ``path`` on ``x`` (emu),
    counted at the emulated device: every layer kernel's target on its stream path (``arrays``
    off, as csim and the board), each ``run`` one start (no count the runner keeps)."""
    from hlsnn.network.loader import load
    count = [0]
    with load(str(path), "emu", self_check=False, network=False) as net:
        for t in {id(ex.acc.kernel.target): ex.acc.kernel.target for ex in net._dep.execs.values()}.values():
            t.arrays = False

            def run(*a, _run=t.run):
                count[0] += 1
                return _run(*a)
            t.run = run
        net.run(x)
    return count[0]


def check_layer_starts(path, x, batches=(1, 5)):
    """``hlsnn perf --layer-by-layer``'s start count (:func:`hlsnn.network.latency.model`) ==
    the starts the layer path makes (:func:`layer_path_starts`) at each batch size; returns the
    count at the first."""
    from hlsnn.network import latency
    got = []
    for b in batches:
        made = layer_path_starts(path, x[:b])
        assert latency.model(str(path), network=False, batch=b)["kernel_starts"] == made, b
        got.append(made)
    return got[0]


def torch_export(module, shape, path, how):
    """``torch.onnx.export`` of ``module`` (in eval mode) from a batch-2 example of per-sample
    ``shape`` with a dynamic batch axis, input ``input`` and output ``out``, by the exporter
    ``how`` (:data:`TORCH_EXPORTS`), its warnings silenced. Returns ``path``."""
    import warnings
    import torch
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(2, *shape),), str(path), input_names=["input"],
                          output_names=["out"], dynamic_axes={"input": {0: "batch"}, "out": {0: "batch"}},
                          **TORCH_EXPORTS[how])
    return path
