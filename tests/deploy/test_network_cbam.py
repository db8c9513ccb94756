"""CBAM's channel attention and a gate of a gate on the network path (issue 52).

``y = h * Sigmoid(mlp(avg(h)) + mlp(max(h)))`` keeps the map ``h`` (waiting for its gate) and the
average-pooled branch's vector (waiting for the max-pooled one's) live while the shared MLP
writes a third tensor, so the network kernels get a third activation buffer
(:func:`hlsnn.engines.network.kernel.allocate`, ``act[3]`` in each engine's ``network.cpp``).
``y * Sigmoid(conv(y))`` then multiplies a gate's product by a third code: rule 10c
(:mod:`hlsnn.engines.network.gatein`) writes ``y`` as codes at a calibrated radix first, in the
layer path and the network modes alike. One small net (:func:`netfixtures.cbam_net`) per engine:
rule 10c's values against a Fraction reference, the network mode's bits the layer path's on emu,
the C-simulation's and the simulated board's in one start, the loops' iterations the perf
model's, and every loop's derived II 1."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from netfixtures import ENGINE, FORMATS, cbam_net, check_kernel_run, compile_onnx, round_fraction  # noqa: E402


@pytest.fixture(scope="module")
def cbam(tmp_path_factory):
    """fmt -> the compiled CBAM-like net, each compiled once for the module."""
    tmp = tmp_path_factory.mktemp("cbam")
    model = cbam_net(tmp / "cbam.onnx", gate_on_gate=True)
    cache = {}

    def get(fmt):
        if fmt not in cache:
            cache[fmt] = compile_onnx(tmp, "cbam", model, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                                      calibration_samples=16)
        return cache[fmt]
    return get


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _tables(net, tmp):
    """The kernel's tables of ``net`` (its engine's ``render`` into ``tmp``, no compile)."""
    from hlsnn.engine_registry import network_part
    return network_part(net.engine, "kernel").render(net, tmp)[2]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_runs_in_the_emu_network_mode_with_three_buffers(cbam, fmt, tmp_path):
    """The channel attention lowers whole (both pools, the shared MLP twice, the Add, the Sigmoid
    table, the gate), needs the third buffer, and gives the layer path's bits."""
    x = _x(32)
    net = hlsnn.load(cbam(fmt), "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    kinds = [op.kind for op in net.network.ops]
    luts = [op.f["fn"] for op in net.network.ops if op.kind == "lut"]
    # bfp: rule 10c's codes of y by the identity table; the integer engines requantize y once, at
    # the radix the conv reading it uses too
    assert luts == ["Sigmoid", "Sigmoid"] + (["Identity"] if fmt == "bfp8" else []), luts
    assert kinds.count("gate") == 2 and kinds.count("maxpool") == 1, kinds
    t = _tables(net.network, tmp_path)
    assert t["act_bufs"] == 3
    slots = {s for s, _ in t["place"].values() if s is not None}
    assert slots == {0, 1, 2}
    want = hlsnn.load(cbam(fmt), "emu", network=False)(x)
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(net(x), want)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_gate_of_a_gates_product_takes_its_codes_first(cbam, fmt):
    """Rule 10c in the layer path against a Fraction reference: the outer product ``y2`` is ``t``
    times ``y`` rounded (the deployment's rounding) to 8-bit signed codes at the radix kept in
    the program's ``gate_in``, chosen by DETERMINE (so the codes reach the range's top)."""
    from hlsnn.network import artifact
    prog, _ = artifact.read(cbam(fmt))
    (j,) = [j for j in prog["layers"] if "gate_in" in j]
    assert j["name"] == "y2" and j["gate_in"]["f_in"][1] is None
    f = j["gate_in"]["f_in"][0]
    run = hlsnn.load(cbam(fmt), "emu", network=False)
    _, env = run._dep.run(_x(4), keep=True)
    y, t, y2 = (np.asarray(env[k], np.float64).reshape(-1) for k in ("y", "t", "y2"))
    codes = np.array([min(max(round_fraction(Fraction(v) * 2 ** f, prog["rounding"]), -128), 127) for v in y])
    assert np.abs(codes).max() >= 64
    np.testing.assert_array_equal(y2, codes * 2.0 ** -f * t)


def _with_radix(path, out, delta):
    """The compiled model ``path`` with rule 10c's radix moved by ``delta``, written to ``out``."""
    from hlsnn.network import artifact
    prog, arrays = artifact.read(path)
    for j in prog["layers"]:
        if "gate_in" in j:
            j["gate_in"]["f_in"] = [None if v is None else v + delta for v in j["gate_in"]["f_in"]]
    return artifact.write(out, prog, arrays)


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_rule_10c_at_another_radix_than_the_convs(cbam, fmt, tmp_path):
    """Where the conv reading ``y`` wants another radix than rule 10c's, the integer network
    modes materialize the inner gate a second time (a ``gate`` op ``y_codes``): the layer path's
    bits still."""
    path = _with_radix(cbam(fmt), tmp_path / "moved.hlsnn", -1)
    net = hlsnn.load(path, "emu", network=True, self_check=False)     # (its compile-time outputs moved too)
    assert [op.name for op in net.network.ops if op.kind == "gate"] == ["y", "y_codes", "y2"]
    x = _x(24)
    want = hlsnn.load(path, "emu", network=False, self_check=False)(x)
    assert not np.array_equal(want, hlsnn.load(cbam(fmt), "emu", network=False)(x))    # another rule-10c radix
    np.testing.assert_array_equal(net(x), want)


@pytest.mark.slow      # the quick csim case of the Gate loop with rule 10c: test_cbam_kernel_on_csim_... (reused y_q)
@pytest.mark.csim
def test_rule_10c_at_another_radix_on_csim(cbam, tmp_path):
    """The second materialization's kernel (two-hot): the layer path's bits in one start."""
    import hlsnn.network.loader as loader
    path = _with_radix(cbam("twohot"), tmp_path / "moved-twohot.hlsnn", -1)
    x = _x(6)
    k_run = loader.CompiledNet(path, "csim", network=True, self_check=False)
    np.testing.assert_array_equal(k_run(x), hlsnn.load(path, "emu", network=False, self_check=False)(x))
    assert k_run.last_kernel_starts == 1 and [op.name for op in k_run.network.ops if op.kind == "gate"] == [
        "y", "y_codes", "y2"]


@pytest.mark.csim
@pytest.mark.strict_csim
# quick on fixed8 only (the README's 5 minutes); bfp8 and two-hot run in the slow suite and .ci/sanitize
@pytest.mark.parametrize("fmt", [pytest.param("bfp8", marks=pytest.mark.slow),
                                 pytest.param("twohot", marks=pytest.mark.slow), "fixed8"])
def test_cbam_kernel_on_csim_and_the_simulated_board_in_one_start(cbam, fmt):
    """The rendered kernel declares three activation buffers (and the resource model counts
    them; bfp: the third at the size of the tensors it holds, an array of its own), and gives
    the layer path's bits on the strict C-simulation (every bank within its ports) and the
    simulated board in one start."""
    board = check_kernel_run(cbam(fmt), fmt, _x(6), board=True)
    k = board._kernel
    assert k.strict, "the strict C-simulation library"
    assert k.tables["act_bufs"] == 3
    cpp = (k.path.parent / "network.cpp").read_text()
    from hlsnn.engine_registry import network_part
    bufs = network_part(board.network.engine, "perf").buffers(board.network, k.tables)
    bufs = bufs[0] if isinstance(bufs, tuple) else bufs
    act = [b for b in bufs if b.name == "act"]
    a3 = k.tables.get("act3_words", 0)
    if a3:               # bfp: the third buffer holds smaller tensors, declared at its own size (bfpkernel._third)
        assert 0 < a3 < k.tables["act_words"]
        assert "act[2][Cfg::" in cpp and f"Mem<elem_t, {a3}> Act3Bank" in cpp and "act[3][Cfg::" not in cpp
        assert len(act) == 1 and act[0].dims[0] == 2
        assert [tuple(b.dims) for b in bufs if b.name == "act3"] == [(k.tables["pc"], a3)]
        return
    assert "act[3][Cfg::" in cpp and "act[2][Cfg::" not in cpp
    assert len(act) == 1 and act[0].dims[0] == 3


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_kernel_loops_stay_at_ii_1(cbam, fmt):
    """The derived II (perf/schedule.py, from the rendered C++) of every loop is 1 with the
    third buffer's run-time choice among three."""
    pytest.importorskip("clang.cindex")
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    from hlsnn.deploy.lower import program as netmode
    prog, arrays = artifact.read(cbam(fmt))
    net = netmode.lower(prog, arrays)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert rows and all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]


@pytest.mark.slow      # the quick csim case of the third buffer: test_cbam_kernel_on_csim_and_the_simulated_board_...
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_torch_cbam_runs_in_one_start_on_csim_and_the_simulated_board(tmp_path, fmt):
    """hfam's CBAM as torch exported it (v_f_dw_cbam_ts17: depthwise-separable blocks, avg + max
    pooled shared MLP of 1x1 convs, the Sigmoid of their Add, the gate): the layer path's bits on
    C-simulation and the simulated board in one start, with the third activation buffer."""
    from pathlib import Path
    model = Path(__file__).resolve().parents[1] / "data" / "torch" / "beyond" / "v_f_dw_cbam_ts17.onnx"
    if not model.exists():
        pytest.skip(f"{model.name}: hfam's fixture")
    path = compile_onnx(tmp_path, "v_f_dw_cbam_ts17", model, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                        calibration_samples=16)
    board = check_kernel_run(path, fmt, _x(4), board=True)
    assert board._kernel.tables["act_bufs"] == 3


@pytest.mark.slow      # as test_network_branches.py's: every header-model check is slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_kernel_compiles_against_both_header_models(cbam, tmp_path, fmt):
    """The three-buffer kernel and bridge under the fallback ap_types and both ap_axi_sdata.h
    models, the __SYNTHESIS__ rule, and the kernel stripped of its sim-only blocks (compile-only)."""
    from test_network_kernel import compiles_against_both_header_models
    kernel = {"bfp8": "bfpkernel", "twohot": "netkernel", "fixed8": "sparsekernel"}[fmt]
    compiles_against_both_header_models(cbam(fmt), kernel, tmp_path)
