"""Activation tables and the channel gate in integers (issue 52, hlsnn.engines.network.gate):
HardSwish, HardSigmoid and Sigmoid on a fixed-point tensor as a table of its 2**b codes (rule 9)
and a squeeze-excite block's Mul of a map by a per-channel vector (rule 10), so se_cnn of
tests/data/torch/beyond runs in one network kernel start in two-hot and fixed8.

References: the activations' definitions (PyTorch's Hardswish, Hardsigmoid, Sigmoid) evaluated
in numpy's extended precision and rounded there, a product rounded in float64, and the
layer-by-layer compiled network on the emulator."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.engines.network import gate as netgate  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _config, _data, compile_beyond  # noqa: E402
from netfixtures import round_array  # noqa: E402

SE = ["se_cnn_ts17", "se_cnn_dynamo"]
LD = np.longdouble


def _reference(op, attrs, f_in, bits, f_out, rounding):
    """The table written from the definitions, in extended precision."""
    q = np.arange(-(1 << (bits - 1)), 1 << (bits - 1))
    x = q.astype(LD) * LD(2.0) ** -f_in
    if op == "HardSwish":                       # x * relu6(x + 3) / 6
        v = x * np.minimum(np.maximum(x + 3, 0), 6) / 6
    elif op == "HardSigmoid":                   # max(0, min(1, alpha * x + beta))
        v = np.clip(LD(attrs["alpha"]) * x + LD(attrs["beta"]), 0, 1)
    else:                                       # 1 / (1 + e^-x)
        v = 1 / (1 + np.exp(-x))
    w = v * LD(2.0) ** f_out
    return round_array(w, rounding).astype(np.int64), w


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even", "truncate"])
@pytest.mark.parametrize("op,attrs", [("HardSwish", {}), ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}),
                                      ("Sigmoid", {})])
def test_tables_equal_the_definitions(op, attrs, rounding):
    for f_in in (-1, 0, 3, 4, 5, 7):
        for bits in (4, 8):
            f_out, t = netgate.table(op, attrs, (f_in, bits, True), rounding)
            ref, w = _reference(op, attrs, f_in, bits, f_out, rounding)
            assert t.shape == (1 << bits,)
            # where extended precision decides the rounding (a sigmoid within 1e-12 of a step, as
            # 1 - e^-254 is, is a boundary it cannot tell): the exact tie values of HardSwish and
            # HardSigmoid are exact in it
            frac = np.abs(w - np.floor(w) - (0 if rounding == "truncate" else 0.5))
            clear = (frac > 1e-12) & (np.abs(frac - 1) > 1e-12) if op == "Sigmoid" else np.ones(w.shape, bool)
            assert clear.sum() >= 8
            np.testing.assert_array_equal(t[clear], ref[clear], err_msg=f"{op} F={f_in} b={bits}")
            # and elsewhere a step next to it
            assert (np.abs(t[~clear] - w[~clear]) <= 1).all()
            # F_o: the largest radix at which every entry fits b signed bits (at most F + b)
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            assert lo <= t.min() and t.max() <= hi
            if f_out < f_in + bits:
                above, _ = _reference(op, attrs, f_in, bits, f_out + 1, rounding)
                assert above.min() < lo or above.max() > hi, (op, f_in, bits, f_out)
    # a worked example: HardSwish of code 10 at radix 2 (x = 2.5): 2.5 * 5.5 / 6 = 2.291666..
    f_out, t = netgate.table("HardSwish", {}, (2, 8, True), "nearest_away")
    assert f_out == 2 and t[10 + 128] == 9                   # 2.2916 * 4 = 9.17 -> 9
    assert t[-128 + 128] == 0 and t[-6 + 128] == round(-1.5 * 1.5 / 6 * 4)   # -3 and below: 0; x = -1.5


def test_gate_rule_is_the_product_requantized():
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (4, 3, 10))
    g = rng.integers(-128, 128, (4, 3, 1))
    for shift in (-2, 0, 3, 9):
        f = dict(c=3, hw=10, shift=shift, rounding="nearest_away")
        got = netgate.gate_ints(a, g, f, 8)
        p = (a * g).astype(np.float64) * 2.0 ** -shift      # exact: |a g| < 2**15
        want = np.clip(np.sign(p) * np.floor(np.abs(p) + 0.5), -128, 127)
        np.testing.assert_array_equal(got, want)
    op = netmode.Op("gate", "g", ["a", "v"], "o", dict(c=3, hw=10, shift=4, rounding="nearest_even"))
    env = {"a": a.reshape(4, 3, 2, 5), "v": g.reshape(4, 3)}
    np.testing.assert_array_equal(netgate.run(op, env.get, 4, 8).reshape(4, 3, 10),
                                  netgate.gate_ints(a, g, op.f, 8))


def test_damaged_table_fields_are_refused_by_name():
    bad = netmode.Op("lut", "t", ["x"], "o", dict(c=2, hw=4, lo=-128, table=np.zeros(100, np.int64)))
    net = netmode.NetProgram("n", [bad], {}, {}, {}, [], {}, "a", {})
    with pytest.raises(InputError, match=r"op t \(lut\).*100 entries"):
        netmode.check_ops(net)


@pytest.fixture(scope="module")
def se(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netgate", SE)


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
@pytest.mark.parametrize("name", SE)
def test_se_cnn_runs_as_one_network_program_with_the_layer_paths_bits(se, name, fmt):
    """Before: layer by layer, 6 engine starts a batch with HardSwish, Sigmoid and the gate on
    the host; now one network program (three tables, the gate, two global pools) with the layer
    path's bits, and the layer path's HardSwish outputs are the table's codes."""
    x = _data(name).x_test[:24]
    layers = hlsnn.load(se[name, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want, env = layers.run(x, keep=True)
    assert _kernel_calls(layers) - before == 6
    net = hlsnn.load(se[name, fmt], "emu", network=True)
    kinds = [op.kind for op in net.network.ops]
    assert kinds == ["conv", "lut", "conv", "lut", "add", "conv", "conv", "lut", "gate", "conv", "add", "conv"], kinds
    assert [op.f["fn"] for op in net.network.ops if op.kind == "lut"] == ["HardSwish", "HardSwish", "Sigmoid"]
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before
    # the layer path's HardSwish: the table's values, within half a step of the float definition
    conv, lut = net.network.ops[0], net.network.ops[1]
    src = env[layers.program["layers"][0]["output"]]
    got = env[layers.program["layers"][1]["output"]]
    f_in, f_out = lut.f["f_in"], lut.f["f_out"]
    q = np.rint(np.ldexp(src, f_in)).astype(np.int64)
    np.testing.assert_array_equal(np.ldexp(got, f_out), lut.f["table"][q + 128])
    hs = src * np.clip(src + 3, 0, 6) / 6
    assert np.abs(got - hs).max() <= 2.0 ** -(f_out + 1) + 1e-12
    assert conv.kind == "conv"


def test_bfp_runs_the_tables_in_the_network_mode(se):
    """bfp8: rules 9b and 10b (hlsnn.engines.bfp_systolic.network.gate; tests in
    test_network_bfp_gate.py): the network mode takes se_cnn (before: refused by name)."""
    with hlsnn.load(se["se_cnn_ts17", "bfp8"], "emu") as net:
        assert net.network is not None


@pytest.mark.csim
@pytest.mark.slow      # the quick suite's test_se_cnn_runs_as_one_network_program_with_the_layer_paths_bits covers the rules
@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
@pytest.mark.parametrize("name", SE)
def test_se_cnn_runs_in_one_start_of_the_network_kernel(se, name, fmt):
    """shift_mac (two-hot) and sparse_cluster (fixed8) network kernels on C-simulation and the
    simulated board: one start per batch, the layer path's bits; the Lut and Gate loops'
    iterations are the perf model's (ceil(C/Q) * H * W each)."""
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = _data(name).x_test[:8]
    board = hlsnn.load(se[name, fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(se[name, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in netperf.iterations(board.network, k.tables).items()}
    pc = k.tables["pc"]
    want = sum(-(-op.f["c"] // pc) * op.f["hw"] for op in board.network.ops if op.kind == "lut")
    assert k.counters["NetLut"][0] == 8 * want == 8 * (2 * -(-8 // pc) * 64 + -(-8 // pc))
    assert k.counters["NetGate"][0] == 8 * -(-8 // pc) * 64
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    with hlsnn.load(se[name, fmt], "sim", network=True) as sim:       # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_gate_loop_products_are_declared_and_modelled(se, fmt, tmp_path):
    """Counted from the rendered C++ (tests/loop_operators.py): the Gate loop has Q run-time
    products (its HLSNN_OPS and the resource model's multipliers), the Lut loop none; a kernel
    of a program without tables or gates renders neither loop (its C++ and figures unchanged)."""
    from loop_operators import bank_sites, loop_operators, over_ports
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    from hlsnn.engines.shift_mac.network import perf as shiftperf
    net, _ = kernel_network(*artifact.read(se["se_cnn_ts17", fmt]))
    if fmt == "twohot":
        from hlsnn.engines.shift_mac.network.kernel import render
    else:
        from hlsnn.engines.sparse_cluster.network.kernel import render
    _, _, t = render(net, tmp_path)
    ops = loop_operators(tmp_path, "network.cpp", "network.h", with_declared=True)
    assert ops["GatePixels"]["mul"] == t["pc"] and ops["GatePixels"]["declared"] == (t["pc"], 0, t["pc"])
    assert ops["LutPixels"]["mul"] == 0
    assert sum(m.count for m in shiftperf.multipliers(net, t)) == t["pc"]
    assert over_ports(bank_sites(tmp_path, "network.cpp", "network.h")) == []
    plain = netmode.NetProgram(net.name, [op for op in net.ops if op.kind == "conv"][:1], net.shapes, net.input,
                               dict(net.output, tensor=net.ops[0].out, shape=net.shapes[net.ops[0].out]), [],
                               net.params, net.accel, {}, net.engine)
    render(plain, tmp_path / "plain")
    text = (tmp_path / "plain" / "network.cpp").read_text()
    assert "GatePixels" not in text and "LutPixels" not in text and "kLut" not in text


@pytest.mark.csim
@pytest.mark.slow      # test_se_cnn_runs_in_one_start_of_the_network_kernel covers the loops on the plain sparse kernel
def test_se_cnn_on_the_board_sized_sparse_kernel(tmp_path):
    """The board-sized sparse_cluster kernel (net_shape: board, every bank copy written):
    one start, the layer path's bits."""
    from hlsnn.network.build import compile_model
    from test_torch_beyond import DATA
    name = "se_cnn_dynamo"
    cfg = tmp_path / "sized.yaml"
    cfg.write_text(f"name: {name}\nmodel: {DATA / (name + '.onnx')}\ndata: digits\nlayout: auto\nformats:\n"
                   "  sized: {type: fixed, accel: sparse8net_pynq-z2}\nassignments:\n  sized: {default: sized}\n")
    out = tmp_path / "sized.hlsnn"
    compile_model(cfg, "sized", out)
    x = _data(name).x_test[:8]
    board = hlsnn.load(out, "csim", network=True)
    assert board._kernel.tables.get("sized") is not None
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    if k.strict:
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])


@pytest.mark.parametrize("name", ["hardswish_ts17", "hardswish_dynamo"])
def test_torch_hardswish_and_hardsigmoid_pattern_runs_as_one_program(tmp_path, name):
    """tests/data/torch/patterns' conv, HardSwish, conv, HardSigmoid, conv, Sigmoid: the first
    two activations as tables between the convs, the final Sigmoid (after the logits) on the host
    in float64, the layer path's bits, in two-hot and fixed8."""
    from hlsnn.network.build import compile_model
    model = ROOT / "tests" / "data" / "torch" / "patterns" / f"{name}.onnx"
    cfg = _config(tmp_path, name, model=model)
    x = _data("se_cnn_ts17").x_test[:16]
    for fmt in ("twohot", "fixed8"):
        out = tmp_path / f"{fmt}.hlsnn"
        compile_model(cfg, fmt, out)
        net = hlsnn.load(out, "emu", network=True)
        assert [op.f["fn"] for op in net.network.ops if op.kind == "lut"] == ["HardSwish", "HardSigmoid"]
        assert [j["op"] for j in net.network.host_after] == ["Sigmoid"]
        np.testing.assert_array_equal(net(x), hlsnn.load(out, "emu", network=False)(x))


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_the_compiled_emu_path_runs_tables_and_the_gate(se, fmt):
    """netfast (the emu network mode compiled; tables and gates in numpy on its NHWC maps) gives
    run_ints' integers, and a calibrated Deployment on emu takes it with the layer path's bits."""
    from hlsnn.deploy.run import fast as netfast
    x = _data("se_cnn_ts17").x_test[:40]
    net = hlsnn.load(se["se_cnn_ts17", fmt], "emu", network=True)
    fn = netfast.build(net.network)
    if fn is None:
        pytest.skip("the native helpers are off (HLSNN_NATIVE=0 or no C compiler)")
    xq = netmode.quantize_input(net.network, x)
    np.testing.assert_array_equal(fn.run(xq)[0], netmode.run_ints(net.network, xq))
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_deploy_config(_config(Path(tmp), "se_cnn_ts17"))
        accs = open_accelerators(cfg, "emu")
        try:
            dep = Deployment(load_onnx(cfg.model), cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
            dep.calibrate(_data("se_cnn_ts17").x_train[:64])
            assert dep.fast_network() is not None
            fast = dep.run(x)
            dep.fast = False
            np.testing.assert_array_equal(fast, dep.run(x))
        finally:
            for a in accs.values():
                a.close()


def test_hardswish_of_a_lse_shift_layer_takes_the_least_squared_error_radix(tmp_path):
    """A HardSwish table after a two-hot layer with ``radix: lse`` gets DETERMINE's radix on the
    op's values or up to 3 bits finer, the least sum of squared errors (entries saturating at 8
    bits, rounding half away from zero; a tie keeps the coarser), written here in numpy; with
    ``radix: msb`` and in ``pot`` it keeps the radix where every entry fits (no calibrated
    radix recorded, not even one an earlier calibration with another format left, as
    ``shift_auto``'s candidates do)."""
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.quantize.quant import host_radix
    from hlsnn.deploy.run.runner import Deployment
    model = ROOT / "tests" / "data" / "torch" / "beyond" / "se_cnn_ts17.onnx"
    p = tmp_path / "c.yaml"
    p.write_text(f"name: se\nmodel: {model}\ndata: digits\nlayout: nchw\ntask: classification\nformats:\n"
                 "  lse: {type: twohot, accel: shift8_pynq-z2, radix: lse, weight_fit: nearest}\n"
                 "  msb: {type: twohot, accel: shift8_pynq-z2, radix: msb, weight_fit: nearest}\n"
                 "  pot: {type: pot, accel: shift8_pynq-z2, radix: lse, weight_fit: nearest}\n")
    cfg = load_deploy_config(p)
    net = load_onnx(cfg.model)
    x = np.random.default_rng(0).random((16,) + tuple(net.input_shape[1:]))     # pixels in [0, 1)
    hsw = [la for la in net.layers if la.op == "HardSwish"]
    assert len(hsw) == 2
    accs = open_accelerators(cfg, "emu")
    try:
        for name in ("lse", "msb", "pot"):
            dep = Deployment(net, cfg.assignments[name], cfg.formats, accs, rounding=cfg.rounding)
            dep.table_radix = {la.name: 2 for la in hsw}      # as a calibration with another format left them
            dep.calibrate(x)
            radix = dep.table_radix
            if name != "lse":
                assert not any(la.name in radix for la in hsw), name
                continue
            _, env = dep.run(x, keep=True)
            env_fmt = {}
            for la in hsw:
                prod = next(p for p in net.layers if p.output == la.inputs[0])
                env_fmt[la.name] = (dep.execs[prod.name].f_out, 8, True)
                src = env[la.inputs[0]]
                v = src * np.clip(src + 3, 0, 6) / 6            # the op's float64 values on the codes
                d = host_radix(v, 8, True)

                def sse(f):
                    w = np.ldexp(v, f)
                    q = np.clip(np.sign(w) * np.floor(np.abs(w) + 0.5), -128, 127)
                    return float(np.sum((np.ldexp(q, -f) - v) ** 2))
                errs = [sse(f) for f in range(d, d + 4)]
                assert radix[la.name] == d + int(np.argmin(errs)), (la.name, d, errs)
            before = {la.name: netgate.table("HardSwish", {}, env_fmt[la.name], cfg.rounding)[0] for la in hsw}
            assert any(radix[k] != before[k] for k in before), (radix, before)   # not the max-fit radix: the rule bites
    finally:
        for a in accs.values():
            a.close()
