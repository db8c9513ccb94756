"""Issue 52's sixth family on the network path (torch_families/variant_sixth.py; the files PyTorch wrote:
``v_k_*`` of the beyond MANIFEST): a WaveNet, InceptionTime and flat features into a ``Conv1d``
run in one network-kernel start in bfp8, two-hot and fixed8.

The rules, each against a reference the code under test does not compute:

* ``hlsnn.deploy.rewrite.catfold``: ``relu(bn(cat(convs)))`` folded into the branch convs; the float
  network is onnxruntime's (and no ``BatchNormalization`` is left on the host).
* rule input_max_pool (``engines/network/inputpool``): InceptionTime's ``MaxPool1d`` of the model input, on
  the input's integers: a numpy max pool of the float input quantized by the rounding written out
  with Fractions.
* rule concat_chain (``engines/network/catsplit``): the four-way concat as three concats of two, each right
  after the next part is made; the result is the layer path's float64 concat quantized at the
  reader's radix (Fractions).
* a fourth activation buffer (``engines/network/kernel.allocate``), an Add of a concat and a conv
  (the conv's output its shortcut): InceptionTime's kernel on C-simulation, the layer path's bits.
* the chained sum made right after its last operand (``engines/network/chain``): the WaveNet's
  skip sum in three buffers, its integers the layer path's float64 sum.
* rule input_view (``engines/network/inview``): the flat input as its first conv's ``1 x 64`` view, on
  the strict C-simulation (every access within its buffer; before, the kernel read past it).
* netbfp rule bfp_gate_odd (``engines/bfp_systolic/network/gatero``): ``tanh(f) * sigmoid(g)`` held
  rounded to odd; rule bfp_conv's patches of it against Fraction roundings of the exact products (a
  plain truncation gives other bits), and the network mode's bits the layer path's.
"""
import itertools
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from netfixtures import (BEYOND as DATA, BEYOND_MANIFEST as MANIFEST, ENGINE, beyond_config,  # noqa: E402
                         check_kernel_run, onnxruntime_rows, round_fraction)

WAVENET, INCEPTION, FLAT = "v_k_wavenet_ts17", "v_k_inception_ts17", "v_k_flat_conv_ts17"
FORMATS = ("bfp8", "twohot", "fixed8")


@pytest.fixture(scope="module")
def sixth(tmp_path_factory):
    """``get(name, fmt)``: the beyond file ``name`` compiled in ``fmt`` once for the module."""
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("sixth")
    cache = {}

    def get(name, fmt):
        if (name, fmt) not in cache:
            cache[name, fmt] = tmp / f"{name}-{fmt}.hlsnn"
            compile_model(beyond_config(tmp, name), fmt, cache[name, fmt], check_samples=2, calibration_samples=16)
        return cache[name, fmt]
    return get


def _x(name, n):
    return datasets.load("digits", layout=MANIFEST["models"][name]["layout"]).x_test[:n]


def _q(v, f, rounding, bits=8):
    """The float ``v`` at radix ``f`` as a ``bits``-bit signed integer, from the definition."""
    return min(max(round_fraction(Fraction(float(v)) * 2 ** f, rounding), -(1 << (bits - 1))), (1 << (bits - 1)) - 1)


def _layer(prog, name):
    return next(j for j in prog["layers"] if j["name"] == name)


def test_bn_after_the_concat_folds_into_the_branch_convs():
    """InceptionTime's ``relu(bn(cat(...)))`` leaves no host ``BatchNormalization`` or ``Relu``; the
    float network is onnxruntime's (there, and in test_torch_variants.py's import test of every
    variant file)."""
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    net = load_onnx(DATA / f"{INCEPTION}.onnx")
    host = [la.op for la in net.layers if la.kind == "host"]
    assert "BatchNormalization" not in host and "Relu" in host and host.count("Concat") == 2   # (the last Relu's
    assert sum(1 for la in net.layers if any("BatchNormalization" in f for f in la.folded)) == 8    # of the Add)
    assert sum(1 for la in net.layers if la.relu and any("its channels" in f for f in la.folded)) == 8
    x = _x(INCEPTION, 4)
    np.testing.assert_allclose(float_forward(net, x), onnxruntime_rows(DATA / f"{INCEPTION}.onnx", x), rtol=1e-4,
                               atol=1e-5)


def test_inception_max_pool_of_the_input_and_the_concat_chain(sixth):
    """fixed8: rule input_max_pool's pool of the input integers is the quantized float pool; rule concat_chain's chain
    (concats of two, each right after the next part) gives the quantized float concat; the emu
    network mode gives the layer path's bits."""
    path = sixth(INCEPTION, "fixed8")
    prog, arrays = artifact.read(path)
    net = netmode.lower(prog, arrays)
    names = [op.name for op in net.ops]
    assert all(len(op.ins) == 2 for op in net.ops if op.kind == "concat")
    assert names[names.index("/i1/convs.2/Conv") + 1] == "/i1/Concat/1"         # after the third part
    assert names[names.index("/i1/mpconv/Conv") + 1] == "/i1/Concat/2"          # after the fourth
    pool, = [op for op in net.ops if op.name == "/i1/mp/MaxPool"]
    assert pool.ins == ["input"]
    x = _x(INCEPTION, 24)
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    rnd, f = prog["rounding"], net.input["f"]
    assert f == _layer(prog, "/i1/mpconv/Conv")["f_x"]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)), constant_values=-np.inf)        # MaxPool1d(3, 1, 1)
    ref = np.max([xp[:, :, k:k + 8] for k in range(3)], axis=0)
    want = np.vectorize(lambda v: _q(v, f, rnd))(ref)
    assert np.abs(want).max() > 32
    np.testing.assert_array_equal(ints[pool.out].reshape(want.shape), want)
    _, env = hlsnn.load(path, "emu", network=False).run(x, keep=True)
    last, = [op for op in net.ops if op.name == "/i1/Concat"]
    f_cat = _layer(prog, "/i2/bottleneck/Conv")["f_x"]
    want = np.vectorize(lambda v: _q(v, f_cat, rnd))(env["/i1/Relu_output_0"])
    np.testing.assert_array_equal(ints[last.out].reshape(want.shape), want)
    run = hlsnn.load(path, "emu", network=True)
    assert run.network is not None
    np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))


# two-hot in the slow suite: its network mode lowers with fixed8's integer rules (the quick case above)
@pytest.mark.parametrize("fmt", ["bfp8", pytest.param("twohot", marks=pytest.mark.slow)])
def test_inception_in_the_emu_network_mode(sixth, fmt):
    """bfp8: rule input_max_pool on the input's pairs, concat_chain's concats of pairs."""
    path = sixth(INCEPTION, fmt)
    run = hlsnn.load(path, "emu", network=True)
    assert run.network is not None and run.network.engine == ENGINE[fmt]
    x = _x(INCEPTION, 6)
    np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))


def test_wavenet_skip_sum_is_made_early_and_three_buffers_hold_it(sixth):
    """fixed8: the skip sum ``s0 + s1`` (read only by ``(s0 + s1) + s2``) is made right after ``s1``;
    the kernel's allocation then needs three activation buffers (four with the sum made at the
    third block); its integers are the layer path's float64 sum."""
    from hlsnn.engines.network.kernel import act_bufs, allocate
    path = sixth(WAVENET, "fixed8")
    prog, arrays = artifact.read(path)
    net = netmode.lower(prog, arrays)
    names = [op.name for op in net.ops]
    assert names.index("/Add/sum") == names.index("/blocks.1/skip/Conv") + 1
    assert act_bufs(allocate(net, 16)[0]) == 3
    x = _x(WAVENET, 24)
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    s, = [op for op in net.ops if op.name == "/Add/sum"]
    _, env = hlsnn.load(path, "emu", network=False).run(x, keep=True)
    want = env["/Add_output_0"]
    np.testing.assert_array_equal(np.ldexp(ints[s.out].astype(np.float64), -s.f["radix"]).reshape(want.shape), want)
    late = netmode.NetProgram(net.name, [op for op in net.ops if op is not s], dict(net.shapes), net.input,
                              net.output, [], net.params, net.accel, dict(net.aliases))
    late.ops.insert(names.index("/Add_1") - 1, s)                          # where it was made before
    from hlsnn.errors import InputError
    with pytest.raises(InputError, match="the chained sum /Add_sum .* is read other than as a residual Add's shortcut"):
        allocate(late, 16)                     # made late, the sum is the Add's later operand: not in sc


@pytest.mark.parametrize("fmt", ["bfp8", pytest.param("twohot", marks=pytest.mark.slow), "fixed8"])
def test_wavenet_in_the_emu_network_mode(sixth, fmt):
    """Every format; bfp8 with rule bfp_gate_odd on its three gates (every batch was NotExact before)."""
    path = sixth(WAVENET, fmt)
    run = hlsnn.load(path, "emu", network=True)
    assert run.network is not None and run.network.engine == ENGINE[fmt]
    if fmt == "bfp8":
        assert [op.f.get("odd") for op in run.network.ops if op.kind == "gate"] == [True] * 3
    x = _x(WAVENET, 24)
    np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))   # (NotExact would raise)


@pytest.mark.parametrize("M", [8, 24])
def test_rule_10r_patches_round_as_the_exact_products(M):
    """Rule bfp_conv's patches (every rounding; M = 8, and M = 24, the widest the rule takes, where ties
    are frequent) of products of two 16-bit table entries held rounded to odd at 25 bits are the
    Fraction roundings of the exact products; at M = 24 truncating them instead (no sticky bit)
    gives other bits."""
    from hlsnn.engines.bfp_systolic.network.lower import _round_patches
    from hlsnn.engines.bfp_systolic.network.reduce import round_odd
    from hlsnn.primitives import msb_index
    rng = np.random.default_rng(52)
    n, k = 2000, 4
    hi = (1 << (M - 1)) - 1
    ma, mg = rng.integers(-(1 << 15) + 1, 1 << 15, (2, n, k))
    ma[:, 0] |= 1 << 14                                   # wide products in every patch
    ea, eg = rng.integers(-16, -13, (2, n, k))
    m, e = ma * mg, ea + eg
    mo, eo = round_odd(m, e)
    assert (np.abs(m) >= 1 << 25).mean() > 0.2 and (np.abs(mo) < 1 << 25).all()
    lop = np.where(m != 0, msb_index(np.abs(m)) + e, -10 ** 6).max(axis=1, keepdims=True)
    xe = lop - (M - 2)
    trunc_s = np.maximum(msb_index(np.abs(m)) - 24, 0)
    mt, et = (np.abs(m) >> trunc_s) * np.sign(m), e + trunc_s
    differs = False
    for rnd in ("nearest_even", "nearest_away", "truncate"):
        got = _round_patches(mo, eo - xe, M, rnd)
        want = np.array([[min(max(round_fraction(Fraction(int(a)) * Fraction(2) ** int(b - c), rnd), -hi - 1), hi)
                          for a, b, c in zip(ra, rb, itertools.repeat(int(rc[0])))]
                         for ra, rb, rc in zip(m, e, xe)])
        np.testing.assert_array_equal(got, want)
        differs |= not np.array_equal(_round_patches(mt, et - xe, M, rnd), want)
    assert differs == (M == 24)


def test_flat_input_read_as_one_channel_takes_the_convs_view(sixth):
    """Rule input_view: the (64,) input is the kernel's ``1 x 64 x 1`` map (one channel of 64 pixels, as the
    conv reads it; the image's words unchanged), in every format; the emu network mode gives the
    layer path's bits."""
    x = _x(FLAT, 24)
    for fmt in FORMATS:
        path = sixth(FLAT, fmt)
        run = hlsnn.load(path, "emu", network=True)
        assert run.network is not None and run.network.engine == ENGINE[fmt]
        assert tuple(run.network.input["shape"]) == (1, 64, 1) == run.network.shapes["input"]
        assert run.network.ops[0].f["c"] == 1 and run.network.ops[0].f["h"] == 64
        np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))


def _kernel_case(name, fmt):
    quick = (name, fmt) == (INCEPTION, "fixed8")
    marks = [pytest.mark.csim, pytest.mark.strict_csim] + ([] if quick else [pytest.mark.slow])
    return pytest.param(name, fmt, marks=marks, id=f"{name}-{fmt}")


# quick: InceptionTime in fixed8 (rules input_max_pool, concat_chain, the fourth buffer, the Add of a concat in the kernel);
# the other eight in the slow suite (about 5 CPU-s each to build)
@pytest.mark.parametrize("name,fmt", [_kernel_case(n, f) for n in (INCEPTION, WAVENET, FLAT) for f in FORMATS])
def test_the_kernel_runs_it_in_one_start_on_the_strict_csim(sixth, name, fmt):
    """The layer path's bits in one kernel start on the strict C-simulation (every access within
    its buffer and port; the slow cases on the simulated board too), the loops' iterations the
    perf model's; InceptionTime with four
    activation buffers, declared and counted by the resource model; bfp8's WaveNet with the Gate
    loop's RoundOdd and its resource row."""
    run = check_kernel_run(sixth(name, fmt), fmt, _x(name, 6), board=(name, fmt) != (INCEPTION, "fixed8"))
    k = run._kernel
    assert k.strict, "the strict C-simulation library"
    cpp = (k.path.parent / "network.cpp").read_text()
    from hlsnn.engine_registry import network_part
    perf = network_part(run.network.engine, "perf")
    bufs = perf.buffers(run.network, k.tables)
    bufs = bufs[0] if isinstance(bufs, tuple) else bufs
    act, = [b for b in bufs if b.name == "act"]
    want = {INCEPTION: 4, WAVENET: 3, FLAT: 2}[name]
    assert k.tables["act_bufs"] == want and act.dims[0] == want and f"act[{want}][Cfg::" in cpp
    if fmt == "bfp8":
        assert ("RoundOdd(mant_t(m)" in cpp) == (name == WAVENET)
        if name == WAVENET:
            logic = perf.datapath(run.network, k.tables)
            assert "oddgate" in logic and logic["oddgate"][0] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name,fmt", [(INCEPTION, "twohot"), (WAVENET, "bfp8")])
def test_the_kernel_loops_stay_at_ii_1(sixth, name, fmt):
    """The derived II (perf/schedule.py, from the rendered C++) of every loop is 1 with four buffers
    (InceptionTime) and with the Gate loop's RoundOdd (bfp8's WaveNet)."""
    pytest.importorskip("clang.cindex")
    from hlsnn.network import schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(sixth(name, fmt))
    net = netmode.lower(prog, arrays)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert rows and all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]
