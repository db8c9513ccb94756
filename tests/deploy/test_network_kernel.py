"""The network path of a compiled shift_mac model (issue 31, design B): the network mode
(``hlsnn.deploy.lower.program``, the spec) and the network kernel (one kernel start per batch).

References: the layer-by-layer compiled network on the emulator (today's path, itself tested
against a fresh deployment), a plain-Python integer convolution with its own rounding, and the
deployment's float host glue (``hostops`` + ``to_fixed``) for the residual Add's rule."""
import json
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT, checked_raw  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.shift_mac.network import perf as netperf  # noqa: E402
from hlsnn.engines.network.kernel import act_bufs, allocate  # noqa: E402
from hlsnn.deploy import datasets
from hlsnn.deploy.run import hostops  # noqa: E402
from hlsnn.deploy.quantize.quant import to_fixed  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

CAL = 16
P = {"acc_bits": 42, "act_bits": 8, "act_signed": True, "rounding": "nearest_even"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(model, assignment) -> path of its compiled file, compiled once per module."""
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netk", calibration_samples=CAL, check_samples=2)


def _x(model, n=24):
    ds = datasets.load("digits", layout="flat" if model == "digits_mlp" else "nchw")
    return ds.x_test[:n]


@pytest.mark.parametrize("model,assignment", [("digits_mlp", "twohot"), ("digits_cnn", "twohot"),
                                              pytest.param("digits_cnn", "pot", marks=pytest.mark.slow)])
def test_network_mode_equals_the_layer_by_layer_emulator(compiled, model, assignment):
    path = compiled(model, assignment)
    x = _x(model)
    with hlsnn.load(path, "emu", network=False) as ref:
        y_ref, env_ref = ref.run(x, keep=True)
    with hlsnn.load(path, "emu", network=True) as net:      # the self-check passes too
        y, env = net.run(x, keep=True)
        assert net.last_kernel_starts == 0 and net.network is not None
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt].view(np.uint64), env_ref[lt].view(np.uint64))
    np.testing.assert_array_equal(y, y_ref)


def _round(fr, rounding):
    """Round a Fraction to an integer: half to even, or half away from zero."""
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and (rounding == "nearest_away" and fr > 0
                                                          or rounding == "nearest_even" and fl % 2)):
        return fl + 1
    return fl


def test_conv_rule_against_plain_python():
    """Stride 2, asymmetric padding, two groups, per-channel shifts (one negative), ReLU on."""
    rng = np.random.default_rng(3)
    c, h, w, z, g, kh, kw = 4, 7, 6, 4, 2, 3, 2
    pads, (sh, sw) = (1, 0, 2, 1), (2, 1)
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    x = rng.integers(-128, 128, (2, c, h, w))
    codes = rng.choice([-48, -6, -1, 0, 3, 5, 96, 1 << 12], (z, c // g, kh, kw))
    bias = rng.integers(-3000, 3000, z)
    shift = np.array([5, 9, 0, -1])
    f = dict(c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, group=g, codes=codes,
             bias=bias, shift=shift, relu=True)
    got = netmode.conv_ints(x, f, P)
    for b in range(2):
        for zz in range(z):
            j = zz // (z // g)
            for oy in range(oh):
                for ox in range(ow):
                    acc = 0
                    for ci in range(c // g):
                        for ky in range(kh):
                            for kx in range(kw):
                                iy, ix = oy * sh + ky - pads[0], ox * sw + kx - pads[1]
                                if 0 <= iy < h and 0 <= ix < w:
                                    acc += int(x[b, j * (c // g) + ci, iy, ix]) * int(codes[zz, ci, ky, kx])
                    v = max(acc + int(bias[zz]), 0)
                    y = max(-128, min(127, _round(Fraction(v, 1) / Fraction(2) ** int(shift[zz]), "nearest_even")))
                    assert got[b, zz, oy, ox] == y, (b, zz, oy, ox)


@pytest.mark.parametrize("fa,fb,fx,gap", [(3, 5, 3, False), (5, 3, 4, False), (2, 2, 6, False), (1, 3, 1, True),
                                          (3, 3, -2, True)])
def test_add_rule_equals_the_float_host_glue(fa, fb, fx, gap):
    """Rule 4 against today's glue: float Add, Relu, GlobalAveragePool, to_fixed(nearest_away)."""
    rng = np.random.default_rng(fa * 7 + fb + fx)
    a, b = rng.integers(-128, 128, (2, 3, 4, 4)), rng.integers(-128, 128, (2, 3, 4, 4))
    a[0, 0, 0, :2], b[0, 0, 0, :2] = [1, -1], [0, 0]           # ties at the rounding point
    fm = max(fa, fb)
    vals = hostops.run(_Host("Add"), [np.ldexp(a * 1.0, -fa), np.ldexp(b * 1.0, -fb)])
    vals = np.maximum(vals, 0)
    if gap:
        vals = hostops.run(_Host("GlobalAveragePool"), [vals])
    ref = to_fixed(vals, fx, 8, True, "nearest_away")
    f = dict(sa=fm - fa, sb=fm - fb, relu=True, gap=gap, shift=fm + (4 if gap else 0) - fx, rounding="nearest_away")
    got = netmode.add_ints(a.reshape(2, 3, 16), b.reshape(2, 3, 16), f, 8)
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)


class _Host:
    def __init__(self, op):
        self.op, self.attrs = op, {}


def test_lower_refuses_what_it_cannot_run(compiled, tmp_path):
    prog, arrays = artifact.read(compiled("digits_cnn", "twohot"))
    bad = dict(prog, layers=[dict(j, attrs={"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2]})
                             if j.get("op") == "MaxPool" else j for j in prog["layers"]])
    with pytest.raises(InputError, match=r"layer pool1 \(MaxPool\): a dilated MaxPool; .*network=False"):
        netmode.lower(bad, arrays)
    bad = dict(prog, layers=[dict(j, op="LogSoftmax") if j.get("op") == "MaxPool" else j for j in prog["layers"]])
    with pytest.raises(InputError, match="no integer rule for this host op"):
        netmode.lower(bad, arrays)
    two = dict(prog, accels={**prog["accels"], "other": next(iter(prog["accels"].values()))})
    with pytest.raises(InputError, match="uses 2 accelerators; the network kernel runs a network on one"):
        netmode.lower(two, arrays)
    with pytest.raises(InputError, match=r"network=True on pynq: give overlays=\{'\w+': the network overlay folder"):
        hlsnn.load(compiled("digits_cnn", "twohot"), "pynq", network=True)


def _net(ops, shapes, out):
    return netmode.NetProgram("t", ops, shapes, dict(name="x"), dict(tensor=out), [], {}, "a", {})


def test_buffers_ping_pong_and_shortcut():
    """An identity shortcut (written to a ping-pong buffer and the shortcut buffer) and a
    projection shortcut (the shortcut buffer only)."""
    O = netmode.Op
    s = (4, 2, 2)
    ops = [O("conv", "c0", ["x"], "t0"), O("conv", "c1", ["t0"], "t1"), O("add", "a1", ["t1", "t0"], "u1"),
           O("conv", "c2", ["u1"], "t2"), O("conv", "p2", ["u1"], "s2"), O("conv", "c3", ["t2"], "t3"),
           O("add", "a2", ["t3", "s2"], "u2")]
    place, act, sc = allocate(_net(ops, dict.fromkeys(["x", "t0", "t1", "u1", "t2", "s2", "t3", "u2"], s), "u2"))
    assert place["t0"] == (1, True) and place["s2"] == (None, True) and place["u2"][1] is False
    assert place["t1"][0] == 0 and place["u1"][0] == 1 and place["t3"][0] == 1 and (act, sc) == (16, 16)
    assert ops[2].f["short"] == "t0" and ops[6].f["short"] == "s2"      # the operand computed earlier
    assert act_bufs(place) == 2
    # three tensors alive at once on the main path: a third buffer (x and t0 are still to be read
    # when t2 is written; t3 reuses t0's once it is read; u, read by no op, is written nowhere)
    ops = [O("conv", "c0", ["x"], "t0"), O("conv", "c1", ["x"], "t1"), O("conv", "c2", ["t0"], "t2"),
           O("add", "a", ["t2", "t1"], "u"), O("conv", "c3", ["x"], "t3")]
    place, act, sc = allocate(_net(ops, dict.fromkeys(["x", "t0", "t1", "t2", "u", "t3"], s), "t3"))
    assert [place[t] for t in ("x", "t0", "t1", "t2", "u", "t3")] == [
        (0, False), (1, False), (None, True), (2, False), (None, False), (1, False)]
    assert act_bufs(place) == 3 and (act, sc) == (16, 16)
    # four: x, t0 and t1 are still to be read when t2 is written (InceptionTime's second block)
    ops = [O("conv", "c0", ["x"], "t0"), O("conv", "c1", ["x"], "t1"), O("conv", "c2", ["t0"], "t2"),
           O("conv", "c3", ["t2"], "t3"), O("conv", "c4", ["t1"], "t4"), O("add", "a", ["t4", "t3"], "u"),
           O("conv", "c5", ["x"], "t5")]
    names = ["x", "t0", "t1", "t2", "t3", "t4", "u", "t5"]
    place, act, sc = allocate(_net(ops, dict.fromkeys(names, s), "t5"))
    assert [place[t] for t in names] == [(0, False), (1, False), (2, False), (3, False), (None, True), (1, False),
                                         (None, False), (1, False)]
    assert act_bufs(place) == 4 and (act, sc) == (16, 16)
    # five (t3 written while x, t0, t1 and t2 are still to be read): a fifth buffer (up to eight, for
    # an unrolled recurrent cell's input, state and gates: hlsnn.deploy.rewrite.rnnunroll)
    ops = [O("conv", "c0", ["x"], "t0"), O("conv", "c1", ["x"], "t1"), O("conv", "c2", ["t0"], "t2"),
           O("conv", "c3", ["t0"], "t3"), O("conv", "c4", ["t3"], "t4"), O("conv", "c5", ["t2"], "t5"),
           O("conv", "c6", ["t1"], "t6"), O("add", "a", ["t6", "t5"], "u"), O("add", "b", ["u", "t4"], "v"),
           O("conv", "c7", ["x"], "t7")]
    place, _, _ = allocate(_net(ops, dict.fromkeys(["x", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "u", "v", "t7"],
                                                   s), "t7"))
    assert act_bufs(place) == 5
    # nine: refused with the tensor's name (t7 written while x and t0 .. t6 are still to be read)
    ops = [O("conv", f"c{i}", ["x"], f"t{i}") for i in range(8)] + [O("conv", "cx", ["x"], "tx")] + \
        [O("conv", f"r{i}", [f"t{i}"], f"u{i}") for i in range(8)]
    names = ["x", "tx"] + [f"t{i}" for i in range(8)] + [f"u{i}" for i in range(8)]
    with pytest.raises(InputError, match=r"t7 needs a ninth activation buffer \(x, t0, t1, t2, t3, t4, t5 and t6 "
                                         r"are still to be read\)"):
        allocate(_net(ops, dict.fromkeys(names, s), "u7"))


def test_perf_of_the_network_path(compiled, capsys):
    """One kernel start per batch; totals are the rows' sums; the conv cycles are the static
    schedule's (hand counts on shift8_pynq-z2, 8 output lanes x 16 channel banks: conv1, 8x8
    pixels, 8 outputs in one block, its 1 channel's 3 columns of taps unfolded into 3 banks, so
    3 taps (ky); fc, 10 outputs in two blocks, a 16x2x2 map: one channel block, 2x2 taps)."""
    from hlsnn.cli import main
    from hlsnn.engines.shift_mac.network import perf as npf
    assert main(["perf", str(compiled("digits_cnn", "twohot")), "--json", "--batch", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["path"] == "network" and res["kernel_starts"] == 1 and res["board"] == "pynq-z2"
    for k in ("kernel_starts", "kernel_us", "host_us", "end_to_end_us", "host_bytes", "dma_bytes"):
        assert res[k] == pytest.approx(sum(r[k] for r in res["layers"])), k
    conv1 = next(r for r in res["layers"] if r["name"] == "conv1")
    assert conv1["kernel_cycles"] == 2 * (64 * 3 + npf.CONV_DEPTH)
    fc = next(r for r in res["layers"] if r["name"] == "fc")
    assert fc["kernel_cycles"] == 2 * (2 * 1 * 4 + npf.CONV_DEPTH)
    # the host touches the input (float32 images as stored, read by the C host path) and the int8
    # it writes, the int8 outputs and the float64 logits, and the Softmax's float64 in and out
    n_in, n_out = 2 * 64, 2 * 10
    assert res["host_bytes"] == 5 * n_in + 9 * n_out + 16 * n_out
    assert res["logits_out_us"] == pytest.approx(res["end_to_end_us"] - next(
        r["host_us"] for r in res["layers"] if r["name"] == "softmax"))
    assert res["mlperf_window_us"] == pytest.approx(res["fabric_us"] + next(
        r["host_us"] for r in res["layers"] if r["name"] == "softmax"))
    assert res["dma_bytes"] == 2 * 8 * (8 + 2)
    kr = res["kernel_resources"]                  # small banks: LUTRAM, not BRAM
    assert kr["dsp"] == 0 and kr["lut"] > 0 and kr["fits"]


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim           # the kernel is born under the strict rules: it runs on the strict library
@pytest.mark.parametrize("model,assignment", [("digits_mlp", "twohot"), ("digits_cnn", "twohot"),
                                              ("digits_cnn", "pot")])
def test_network_kernel_one_start_bit_exact(compiled, model, assignment):
    """The strict C-simulation of the network kernel: one call for the batch, the emulator's bits."""
    path = compiled(model, assignment)
    x = _x(model, 6)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "csim", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 1
        k = net._kernel
        assert k.strict and checked_raw(k.strict_report) == {"act": 8}
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        assert k.counters["NetLoad"] == (6 * int(np.prod(net.input_shape)), 6)
        # the cycle model's iteration counts are the kernel's loop counters
        assert {n: it for n, (it, _) in k.counters.items()} == {
            n: 6 * v for n, v in netperf.iterations(net.network, k.tables).items()}
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_network_kernel_on_the_sim_board_through_pynq(compiled):
    """pynq.allocate, flush, the IP's register writes, ap_start, ap_done, invalidate (strict
    cache checks on): one start per batch, the emulator's bits."""
    path = compiled("digits_cnn", "twohot")
    x = _x("digits_cnn", 7)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim") as net:                       # the self-check runs on the board too
        got = net.logits(x)
        board = net._kernel
        assert net.last_kernel_starts == 1 and board.starts == 2 and board.sim.strict_cache
        (regs, _, bursts, beats), = board.model.runs[-1:]
        assert regs["batch"] == 7 and beats == 7 * (8 + 2)
        # a smaller batch reuses the buffers: only the batch register is written again
        got3 = net.logits(x[2:5])
        (regs3, _, _, beats3), = board.model.runs[-1:]
        assert regs3["batch"] == 3 and beats3 == 3 * (8 + 2) and regs3["in"] == regs["in"]
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(got3.view(np.uint64), want[2:5].view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("assignment,kernel", [("twohot", "netkernel"), ("sparse50", "sparsekernel")])
def test_network_kernel_compiles_against_both_header_models(compiled, tmp_path, assignment, kernel):
    """The rendered kernel (shift_mac's, sparse_cluster's) and bridge under the fallback
    ap_types and both ap_axi_sdata.h models, the __SYNTHESIS__ rule (tests/synthesis_guards.py),
    and the kernel stripped of its sim-only blocks (what the tool compiles)."""
    compiles_against_both_header_models(compiled("digits_cnn", assignment), kernel, tmp_path)


def compiles_against_both_header_models(path, kernel, tmp_path):
    """Assert that the network kernel ``kernel`` (the module's name) of the compiled model at
    ``path`` compiles as the test above states (tests/deploy/test_network_depthwise.py too)."""
    import importlib
    import synthesis_guards as guards
    from test_header_models import TARGETS, syntax_check
    module = {"netkernel": "shift_mac", "sparsekernel": "sparse_cluster", "bfpkernel": "bfp_systolic"}[kernel]
    render = importlib.import_module(f"hlsnn.engines.{module}.network.kernel").render
    prog, arrays = artifact.read(path)
    files, _, _ = render(netmode.lower(prog, arrays), tmp_path / "net")
    kernel_side = {f: (tmp_path / "net" / f).read_text() for f in files if f != "bridge.cpp"}
    assert guards.violations(kernel_side) == []
    sim_only = guards.sim_only_headers(kernel_side)
    for f, text in kernel_side.items():
        if f.split("/")[-1] not in sim_only:
            dest = tmp_path / "stripped" / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(guards.strip_sim_only(text, f))
    for f in sim_only:
        (tmp_path / "stripped" / "include" / "hlsnn" / f).write_text(kernel_side[f"include/hlsnn/{f}"])
    for target in TARGETS:
        proc = syntax_check(tmp_path / "net", target, ["network.cpp", "bridge.cpp"])
        assert proc.returncode == 0, f"{target}:\n{proc.stderr[-3000:]}"
        proc = syntax_check(tmp_path / "stripped", target, ["network.cpp"])
        assert proc.returncode == 0, f"stripped, {target}:\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("f,rounding", [(6, "nearest_away"), (-3, "nearest_away"), (0, "nearest_even"),
                                        (-30, "nearest_away"), (-30, "nearest_even"), (20, "nearest_even"),
                                        (29, "nearest_away"), (3, "truncate")])
def test_fast_input_quantization_is_to_fixed(f, rounding):
    """Rule 1's float64 shortcut against the deployment's to_fixed, ties and near-ties included."""
    rng = np.random.default_rng(f + 40)
    k = rng.integers(-300, 300, 400).astype(np.float64)
    x = np.concatenate([np.ldexp(k + 0.5, -f), np.ldexp(k + 0.5 - 2.0 ** -30, -f), np.ldexp(k + 0.5 + 2.0 ** -26, -f),
                        rng.normal(0, 2.0 ** -f * 60, 400), rng.normal(0, 2.0 ** -f * 1e9, 50),  # saturating
                        np.ldexp([127.5, -128.5, 128.5, -129.5, 127.4999], -f), [0.0, -0.0, 1e-300, -1e-300]])
    net = netmode.NetProgram("t", [], {}, dict(f=f, bits=8, signed=True, rounding=rounding), {}, [], {}, "a", {})
    np.testing.assert_array_equal(netmode.quantize_input(net, x), to_fixed(x, f, 8, True, rounding))


def test_axi_master_bursts():
    """Bursts of at most 64 beats that never cross 4 KB; misaligned addresses refused."""
    from hlsnn.runtime.sim.axi_master import LATENCY, AxiMaster
    from hlsnn.runtime.sim.errors import SimBusError
    from hlsnn.runtime.sim.memory import SimMemory
    mem = SimMemory(0x10000000, 1 << 16, False)
    port = AxiMaster(mem, "gmem0", width_bits=64, max_burst=64)
    assert port.plan(0x10000FC0, 1024) == [(0x10000FC0, 8), (0x10001000, 64), (0x10001200, 56)]
    data = np.arange(20, dtype=np.uint8)
    port.write(0x10000010, data)                      # 20 bytes: 3 beats, one burst
    assert (port.bursts, port.beats, port.cycles) == (1, 3, LATENCY + 3)
    np.testing.assert_array_equal(port.read(0x10000010, 20), data)
    with pytest.raises(SimBusError, match="0x10000004 is not aligned to the port's 8 bytes"):
        port.read(0x10000004, 8)


@pytest.mark.slow
@pytest.mark.csim
def test_network_kernel_as_an_ip_on_the_simulated_ddr(compiled):
    """Register writes (the DDR addresses, the batch, ap_start), one start for the batch, the
    input read and the logits written through the m_axi ports: the emulator's bits."""
    from hlsnn.engines.network.kernel import REGISTERS, NetKernel, write_registers
    from hlsnn.network.simboard import ip_model
    from hlsnn.engines.shift_mac.network.kernel import lanes, tables
    from hlsnn.runtime.sim.memory import SimMemory
    prog, arrays = artifact.read(compiled("digits_cnn", "twohot"))
    net = netmode.lower(prog, arrays)
    x = _x("digits_cnn", 5)
    xq = netmode.quantize_input(net, x)
    mem = SimMemory(0x10000000, 1 << 16, False)
    ip = ip_model(NetKernel(net), memory=mem)
    mem.write(0x10000000, np.asarray(xq, np.int8).view(np.uint8).reshape(-1))     # 64 values: 8 words
    write_registers(ip, REGISTERS, {"in": 0x10000000, "out": 0x10002000, "batch": 5})   # both address halves
    ip.write(0x00, 1)
    assert ip.read(0x00) & 2 and not ip.read(0x00) & 2            # ap_done, cleared on read
    got = mem.read(0x10002000, 5 * 16).view(np.int8).reshape(5, 16)[:, :10]
    np.testing.assert_array_equal(got, netmode.run_ints(net, xq))
    (regs, cycles, bursts, beats), = ip.runs
    assert regs["batch"] == 5 and bursts == 2 and beats == 5 * 8 + 5 * 2
    assert cycles == 5 * sum(c for _, _, c in netperf.op_cycles(net, tables(net, *lanes(net.params))))


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("pz,pc", [(3, 6), (16, 16)])
def test_network_kernel_sized_by_net_lanes_and_banks(compiled, pz, pc):
    """Any ``net_lanes x net_banks`` gives the spec's bits and the static schedule's loop counts
    (3 x 6: odd lanes, one code per weight ROM word; 16 x 16: two codes per word)."""
    from hlsnn.engines.network.kernel import NetKernel
    prog, arrays = artifact.read(compiled("digits_cnn", "twohot"))
    net = netmode.lower(prog, arrays)
    net.params = dict(net.params, net_lanes=pz, net_banks=pc)
    xq = netmode.quantize_input(net, np.asarray(_x("digits_cnn", 3), np.float64))
    want = netmode.run_ints(net, xq).reshape(3, -1)
    k = NetKernel(net)
    np.testing.assert_array_equal(k.run(xq), want)
    assert (k.tables["pz"], k.tables["pc"], k.tables["pack"]) == (pz, pc, 1 if pz % 2 else 2)
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 3 * v for n, v in netperf.iterations(net, k.tables).items()}


def test_network_datapath_model_hand_count():
    """The datapath model's rules (netperf.datapath's docstring) counted by hand for 8 lanes x
    16 banks, 8-bit activations, 25-bit products, 42-bit sums and accumulator, 18-bit residual
    sums: a unit is two shifters of 8 bits by 0..15 (a 4:1 stage of 11 bits, then one of 23:
    34 LUTs each) plus the add/subtract and the negation (25 each): 118 LUTs; a lane's tree of
    16 products level by level, each level a bit wider (8 adders of 26 bits, 4 of 27, 2 of 28, one
    of 29), and the accumulator's adder of 42 bits; an epilogue the bias add (44), the saturation (3 x 42), the rounding
    shifter, its increment (42), the output clamp (16) and a fused Clip's clamp (16); the AXI
    allowances as stated."""
    from types import SimpleNamespace
    from hlsnn.engines.shift_mac.spec import shifter_luts
    net = SimpleNamespace(input={"bits": 8}, params={"acc_bits": 42})
    t = dict(pz=8, pc=16, prod_bits=25, sum_bits=42, add_bits=18)
    d = netperf.datapath(net, t)
    assert shifter_luts(8, 15) == 11 + 23
    assert d["units"] == (128 * 118, 128 * 25)
    assert d["trees"] == (8 * (8 * 26 + 4 * 27 + 2 * 28 + 29 + 42), 8 * (8 * 26 + 4 * 27 + 2 * 28 + 29 + 42))
    assert d["epilogues"][0] == 8 * (44 + 3 * 42 + shifter_luts(42, 60) + 42 + 16 + 16)
    assert d["axi"] == (2 * 1200 + 300, 2 * 1600 + 400)
    # twice the lanes: twice the units, trees and epilogues, the same banks
    d2 = netperf.datapath(net, dict(t, pz=16))
    assert d2["units"][0] == 2 * d["units"][0] and d2["trees"][0] == 2 * d["trees"][0]
    assert d2["epilogues"] == tuple(2 * v for v in d["epilogues"])
    assert d2["banks"] == d["banks"]            # a 2:1 or 3:1 write select: one LUT6 per bit either way


def test_net_lanes_and_banks_in_the_config(tmp_path):
    """Defaults: rows banks and the largest divisor of them not above cols (8 x 16 on
    shift8_pynq-z2; 16 x 32 on shift8_zcu104, whose 19 cols do not divide 32); banks must be
    a multiple of lanes."""
    import yaml
    from hlsnn.config import load_config
    from hlsnn.errors import ConfigError
    src = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"
    data = yaml.safe_load(src.read_text())
    cfg = load_config(src)
    assert (cfg.params["net_lanes"], cfg.params["net_banks"]) == (8, 16)
    z = load_config(ROOT / "configs" / "accel" / "shift8_zcu104.yaml")
    assert (z.params["cols"], z.params["rows"], z.params["net_lanes"], z.params["net_banks"]) == (19, 32, 16, 32)
    data["shift_mac"].update(net_lanes=6, net_banks=16)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"net_banks.*multiple of net_lanes = 6"):
        load_config(bad)
