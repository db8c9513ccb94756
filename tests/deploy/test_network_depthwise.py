"""Depthwise and grouped convolutions and ReLU6 on the network path (issues 31/32): the tiny
DS-CNN and MobileNets of tests/data/torch/tiny run in one kernel start, groups as such (each
block of output channels reads only its groups' input channels), not as block-diagonal GEMMs.

References: the layer-by-layer compiled network on the emulator (the deployment's code: groups
packed into block-diagonal GEMMs, ReLU6 a host Clip in float64, the global pool a host mean), a
plain-Python integer convolution with its own rounding, and schedules counted by hand."""
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
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

TINY = ROOT / "tests" / "data" / "torch" / "tiny"
CAL = 16
CASES = [("dscnn_ts17", "twohot"), ("dscnn_ts17", "fixed8"), ("mobilenet_relu6_ts17", "twohot"),
         ("mobilenet_relu6_ts17", "fixed8"), ("mobilenet_relu_ts17", "twohot")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(model, assignment) -> path of the tiny model's compiled file, compiled once per module."""
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netdw", models=TINY, calibration_samples=CAL, check_samples=2)


def _x(n):
    return datasets.load("digits32", layout="nchw").x_test[:n]


def _depthwise(net):
    return [op for op in net.ops if op.kind == "conv" and op.f["group"] == op.f["c"] == op.f["z"] > 1]


@pytest.mark.parametrize("model,assignment", CASES)
def test_network_mode_equals_the_layer_by_layer_emulator(compiled, model, assignment):
    path = compiled(model, assignment)
    x = _x(40)
    with hlsnn.load(path, "emu", network=False) as ref:
        y_ref, env_ref = ref.run(x, keep=True)
    with hlsnn.load(path, "emu", network=True) as net:      # the self-check passes too
        y, env = net.run(x, keep=True)
        assert len(_depthwise(net.network)) >= 3
        assert net.network.ops[-2].kind == "add" and net.network.ops[-2].f["single"]     # the global pool
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt].view(np.uint64), env_ref[lt].view(np.uint64))
    np.testing.assert_array_equal(y.view(np.uint64), y_ref.view(np.uint64))


def _round(fr):
    """A Fraction rounded to an integer, half to even."""
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    return fl + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else fl


def test_depthwise_conv_rule_with_a_clamp_against_plain_python():
    """Depthwise (groups = C = Z), stride 2, asymmetric padding, ReLU and a clamp [-128, 40]."""
    rng = np.random.default_rng(5)
    c, h, w, kh, kw = 5, 7, 6, 3, 3
    pads, s = (0, 1, 2, 1), 2
    oh, ow = (h + pads[0] + pads[2] - kh) // s + 1, (w + pads[1] + pads[3] - kw) // s + 1
    x = rng.integers(-128, 128, (2, c, h, w))
    codes = rng.choice([-48, -6, -1, 0, 3, 5, 96], (c, 1, kh, kw))
    bias, shift = rng.integers(-300, 300, c), np.array([3, 5, 4, 6, 2])
    f = dict(c=c, h=h, w=w, z=c, oh=oh, ow=ow, kh=kh, kw=kw, sh=s, sw=s, pads=pads, group=c, codes=codes,
             bias=bias, shift=shift, relu=True, clip=(-128, 40))
    got = netmode.conv_ints(x, f, {"acc_bits": 42, "act_bits": 8, "act_signed": True, "rounding": "nearest_even"})
    clamped = 0
    for b in range(2):
        for z in range(c):
            for oy in range(oh):
                for ox in range(ow):
                    acc = 0
                    for ky in range(kh):
                        for kx in range(kw):
                            iy, ix = oy * s + ky - pads[0], ox * s + kx - pads[1]
                            if 0 <= iy < h and 0 <= ix < w:
                                acc += int(x[b, z, iy, ix]) * int(codes[z, 0, ky, kx])
                    y = max(-128, min(127, _round(Fraction(max(acc + int(bias[z]), 0), 2 ** int(shift[z])))))
                    clamped += y > 40
                    assert got[b, z, oy, ox] == min(y, 40), (b, z, oy, ox)
    assert clamped > 0


def test_relu6_is_the_convs_output_clamp(compiled):
    """Each Clip(0, 6) after a conv is that conv's clamp [-128, min(127, 6 * 2**F_out)], and it
    changes values on real images (so the bit-exact comparison above would see it missing)."""
    path = compiled("mobilenet_relu6_ts17", "twohot")
    prog, arrays = artifact.read(path)
    net = netmode.lower(prog, arrays)
    f_out = {j["output"]: j["f_out"] for j in prog["layers"] if j["kind"] != "host"}
    clipped = {j["inputs"][0] for j in prog["layers"] if j.get("op") == "Clip"}
    convs = [op for op in net.ops if op.kind == "conv"]
    assert sum(op.out in clipped for op in convs) == 9
    for op in convs:
        want = (-128, min(127, 6 << f_out[op.out])) if op.out in clipped else (-128, 127)
        assert op.f["clip"] == want, op.name
    xq = netmode.quantize_input(net, _x(16))
    _, env = netmode.run_ints(net, xq, keep=True)
    for op in convs:
        op.f["clip"] = (-128, 127)
    _, env2 = netmode.run_ints(net, xq, keep=True)
    assert any(not np.array_equal(env[op.out], env2[op.out]) for op in convs)


def test_lower_refuses_a_clip_it_cannot_fuse(compiled):
    prog, arrays = artifact.read(compiled("mobilenet_relu6_ts17", "twohot"))
    # a bound inside the conv's range that is not a value of its format at any radix up to 7
    # (0.51 * 2**F is no integer; 6.01 was above the range once two-hot chose a finer radix)
    bad = dict(prog, layers=[dict(j, attrs={"lo": None, "hi": 0.51}) if j["name"] == "/5/Clip" else j
                             for j in prog["layers"]])
    with pytest.raises(InputError, match=r"/5/Clip \(Clip\): bounds None, 0.51 are not values of the input's"):
        netmode.lower(bad, arrays)
    # the conv's unclipped output read by another layer too
    raw = next(j for j in prog["layers"] if j["name"] == "/3/Conv")["output"]
    bad = dict(prog, layers=[dict(j, inputs=[raw]) if j["name"] == "/6/Conv" else j for j in prog["layers"]])
    with pytest.raises(InputError, match=r"/5/Clip \(Clip\): a Clip runs in the output stage of the conv whose"):
        netmode.lower(bad, arrays)


def test_group_windows():
    """Blocks of P outputs and their input channel blocks of Q (by hand): dense, depthwise, wide
    groups, narrow groups; the windows' bases in a bank of 4x4 pixels."""
    from hlsnn.engines.network.kernel import group_windows
    f = lambda z, c, g: dict(z=z, c=c, group=g, h=4, w=4)      # noqa: E731
    assert group_windows(f(24, 40, 1), 8, 16) == dict(ncb=3, cb0=[0, 0, 0], bases=[0, 0, 0])
    # depthwise: blocks 2k and 2k+1 read channel block k
    assert group_windows(f(48, 48, 48), 8, 16) == dict(ncb=1, cb0=[0, 0, 1, 1, 2, 2], bases=[0, 0, 16, 16, 32, 32])
    # groups of 32 inputs and 16 outputs: blocks 2k, 2k+1 read group k's two channel blocks
    assert group_windows(f(32, 64, 2), 8, 16) == dict(ncb=2, cb0=[0, 0, 2, 2], bases=[0, 0, 32, 32])
    # groups of 4 inputs and 6 outputs: block 0 reads groups 0-1 (channels 0-7), block 2 groups 2-3
    assert group_windows(f(24, 16, 4), 8, 16)["cb0"] == [0, 0, 0]
    # groups of 4 inputs and 3 outputs: block 1 (outputs 8-15) spans groups 2-5, channels 8-23
    assert group_windows(f(27, 36, 9), 8, 16) == dict(ncb=2, cb0=[0, 0, 1, 2], bases=[0, 0, 16, 32])


def _two_hot(rng, shape):
    zero = (rng.random(shape) < 0.2).astype(np.int64)
    ea, eb = rng.integers(0, 6, shape) * (1 - zero), rng.integers(0, 6, shape)
    so, sb = rng.integers(0, 2, shape) * (1 - zero), rng.integers(0, 2, shape)
    hb = 1 - zero
    v = (1 - 2 * so) * ((1 << ea) + hb * (1 - 2 * sb) * (1 << eb))
    return np.where(zero == 1, 0, v), dict(ea=ea, eb=eb, so=so, hb=hb, sb=sb, zero=zero)


def _grouped_net(engine, pz, pc):
    """A hand-made network: a dense 3x3 stem, a conv of 8 groups of 2 channels with a clamp, a
    depthwise stride-2 conv with asymmetric padding, a 1x1 conv of 4 groups of 4 inputs and 6
    outputs, the global pool of one tensor, a dense layer."""
    rng = np.random.default_rng(11)
    ops, shapes = [], {"x": (3, 8, 8)}

    def conv(name, src, z, g, k, s, pads, clip=(-128, 127), relu=True, dense=False):
        c, h, w = shapes[src] if len(shapes[src]) == 3 else (shapes[src][0], 1, 1)
        kh, kw = (h, w) if dense else (k, k)
        oh, ow = (h + pads[0] + pads[2] - kh) // s + 1, (w + pads[1] + pads[3] - kw) // s + 1
        shape = (z, c // g, kh, kw)
        if engine == "shift_mac":
            codes, fields = _two_hot(rng, shape)
            extra = dict(mode="twohot", fields=fields)
        else:
            codes, extra = rng.integers(-128, 128, shape) * (rng.random(shape) < 0.7), {}
        ops.append(netmode.Op("conv", name, [src], name, dict(
            c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=s, sw=s, pads=pads, group=g, clip=clip,
            codes=codes, bias=rng.integers(-500, 500, z), shift=rng.integers(4, 8, z), relu=relu, dense=dense,
            engine=engine, **extra)))
        shapes[name] = (z,) if dense else (z, oh, ow)
    conv("c0", "x", 16, 1, 3, 1, (1, 1, 1, 1))
    conv("c1", "c0", 16, 8, 3, 1, (1, 1, 1, 1), clip=(-128, 40))
    conv("c2", "c1", 16, 16, 3, 2, (0, 1, 1, 0))
    conv("c3", "c2", 24, 4, 1, 1, (0, 0, 0, 0))
    ops.append(netmode.Op("add", "gap", ["c3"], "gap", dict(c=24, hw=16, sa=0, sb=0, relu=False, gap=True, shift=5,
                                                          rounding="nearest_even", single=True)))
    shapes["gap"] = (24, 1, 1)
    conv("fc", "gap", 10, 1, 1, 1, (0, 0, 0, 0), relu=False, dense=True)
    params = dict(acc_bits=24, act_bits=8, act_signed=True, rounding="nearest_even", net_lanes=pz, net_banks=pc,
                  max_z=pz, units=pz, tile_w=2)
    return netmode.NetProgram("grouped", ops, shapes, dict(name="x", shape=(3, 8, 8), f=0, bits=8, signed=True,
                                                           rounding="nearest_even"),
                              dict(tensor="fc", f=0, name="fc", shape=(10,)), [], params, "t", {}, engine)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("engine,pz,pc", [("shift_mac", 8, 16), ("shift_mac", 4, 8), ("shift_mac", 3, 6),
                                          ("sparse_cluster", 8, 8)])
def test_network_kernel_runs_narrow_groups_as_such(engine, pz, pc):
    """Narrow groups, depthwise, a clamp and the single-tensor pool: the kernel's strict
    C-simulation gives the spec's bits, its loop counters the model's iterations; a depthwise
    conv takes ceil(C/Q) * OH * OW * kh * kw cycles on the shift kernel (wide blocks of Q
    channels, Q/P parts per lane; the other convs of the program on part 0)."""
    from hlsnn.engines.network.kernel import NetKernel
    from hlsnn.engines.sparse_cluster.network.kernel import SparseNetKernel
    from hlsnn.engines.network.kernel import group_windows
    net = _grouped_net(engine, pz, pc)
    if pc == 6:          # c3's blocks of 3 outputs read windows at no fixed step: each its own base
        assert group_windows(net.ops[3].f, pz, pc)["cb0"] == [0, 0, 0, 0, 1, 1, 2, 2]
    xq = np.random.default_rng(2).integers(-128, 128, (3, 3, 8, 8))
    want, env = netmode.run_ints(net, xq, keep=True)
    assert (env["c1"] == 40).any() and (env["c2"] != 0).any() and len(set(want.reshape(-1).tolist())) > 5
    k = NetKernel(net) if engine == "shift_mac" else SparseNetKernel(net)
    np.testing.assert_array_equal(k.run(xq), want.reshape(3, -1))
    assert k.strict and checked_raw(k.strict_report) == {"act": 8 if engine == "shift_mac" else 12}
    assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    model = netperf.iterations(net, k.tables)
    assert {n: it for n, (it, _) in k.counters.items()} == {n: 3 * v for n, v in model.items()}
    if engine == "shift_mac":
        from hlsnn.engines.network.kernel import FIELDS
        n_iter = {r["comment"].split(":")[0]: r["vals"][FIELDS.index("n_iter")] for r in k.tables["rows"]}
        assert n_iter["c2"] == -(-16 // pc) * 4 * 4 * 9 and k.tables["parts"] == pc // pz


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("model,assignment", CASES[:4])
def test_network_kernel_one_start_bit_exact(compiled, model, assignment):
    """The strict C-simulation of the tiny models' network kernel: one call for the batch, the
    layer-by-layer emulator's bits; a depthwise conv costs its own MACs over the Q banks:
    ceil(C/Q) * OH * OW * kh * kw iterations on shift_mac (wide blocks), its taps' most
    non-zeros per channel on sparse_cluster (P = Q lanes; a bank reads one tap a step)."""
    from hlsnn.engines.network.kernel import FIELDS
    path = compiled(model, assignment)
    x = _x(4)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "csim", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 1
        k = net._kernel
        assert k.strict and checked_raw(k.strict_report) == {"act": 8 if net.network.engine == "shift_mac" else 12}
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        assert {n: it for n, (it, _) in k.counters.items()} == {
            n: 4 * v for n, v in netperf.iterations(net.network, k.tables).items()}
        rows = dict(zip([op.name for op in net.network.ops], k.tables["rows"]))
        pz = k.tables["pz"]
        for op in _depthwise(net.network):
            f = op.f
            n_iter = rows[op.name]["vals"][FIELDS.index("n_iter")]
            if assignment == "twohot":
                assert n_iter == -(-f["c"] // k.tables["pc"]) * f["oh"] * f["ow"] * f["kh"] * f["kw"], op.name
            else:
                nnz = (np.asarray(f["codes"]).reshape(f["z"], -1) != 0).sum(axis=1)
                steps = sum(int(nnz[b:b + pz].max()) for b in range(0, f["z"], pz))
                assert n_iter == f["oh"] * f["ow"] * steps, op.name
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_perf_costs_depthwise_as_such(compiled, capsys):
    """`hlsnn perf`: one start; DS-CNN two-hot's depthwise convs (16 channels, 16x16, 3x3) take
    one wide block of 16 banks (8 lanes x 2 parts) x 256 pixels x 9 taps, not 16 groups' worth
    (the packed GEMM's K of 16 x 9), and the network kernel's total is below the layer-by-layer
    path's."""
    from hlsnn.cli import main
    path = str(compiled("dscnn_ts17", "twohot"))
    assert main(["perf", path, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["path"] == "network" and res["kernel_starts"] == 1
    dw = [r for r in res["layers"] if r["name"] in ("/3/Conv", "/9/Conv", "/15/Conv")]
    assert [r["kernel_cycles"] for r in dw] == [256 * 9 + netperf.CONV_DEPTH] * 3
    assert main(["perf", path, "--json", "--layer-by-layer"]) == 0
    lbl = json.loads(capsys.readouterr().out)
    assert lbl["kernel_starts"] == 8 and res["kernel_us"] < lbl["kernel_us"]


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("assignment,kernel", [("twohot", "netkernel"), ("fixed8", "sparsekernel")])
def test_depthwise_kernel_compiles_against_both_header_models(compiled, tmp_path, assignment, kernel):
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(compiled("mobilenet_relu6_ts17", assignment), kernel, tmp_path)


def test_depthwise_kernel_bank_sites_within_ports(compiled, tmp_path):
    """The rendered sparse kernel of a network with depthwise convs and clamps, counted from its
    C++ (tests/loop_operators.py, which reads the sparse kernel's declarations; the shift
    kernel's banks are checked in its strict run above): every bank of every checked array
    within its ports (groups as such add no run-time bank index)."""
    from loop_operators import bank_sites, over_ports
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel
    sparsekernel.render(netmode.lower(*artifact.read(compiled("mobilenet_relu6_ts17", "fixed8"))), tmp_path)
    rows = bank_sites(tmp_path, "network.cpp", "network.h")
    assert rows and over_ports(rows) == []


def test_the_weight_roms_pair_two_multipliers_where_that_halves_their_block_rams(compiled, tmp_path):
    """MobileNet-ReLU6 fixed8's 95 steps: each of the 128 weight ROMs (95 x 16 bits = 1,520 > the
    model's 1,024-bit LUTRAM bound) took a RAMB18 that holds 1K x 18; two multipliers' weights in
    one dual-port ROM (``cyclic 4`` on the multiplier dimension: its two reads a cycle on two
    ports) take 64 RAMB18 (190 x 16 each), and the C++ declares what the model counts."""
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel, perf as sparseperf
    from hlsnn.resources import map_buffer
    net = netmode.lower(*artifact.read(compiled("mobilenet_relu6_ts17", "fixed8")))
    t = sparsekernel.render(net, tmp_path)[2]
    assert (t["pz"], t["pm"], len(t["steps"])) == (16, 8, 95)
    assert "#pragma HLS ARRAY_PARTITION variable = kW dim = 2 cyclic factor = 4" in (tmp_path / "network.cpp").read_text()
    kw, = [b for b in sparseperf.buffers(net, t)[0] if b.name == "kW"]
    assert kw.partition == ((1, "complete"), (2, "cyclic 4"))
    assert (map_buffer(kw).bram18, map_buffer(kw).copies) == (64, 64)
    # where pairing saves nothing: LUTRAM ROMs (50 x 16 bits), ROMs past half a RAMB18 (600 steps:
    # 1,200 deep takes two), an odd number of multipliers, the board-sized kernel (rom_1p)
    for steps, pm, sized in ((50, 8, None), (600, 8, None), (95, 7, None), (95, 8, {"net_pack": 1})):
        assert sparseperf.w_cyclic(dict(pz=16, pm=pm, steps=[0] * steps, sized=sized)) == 0
    assert sparseperf.w_cyclic(dict(pz=16, pm=8, steps=[0] * 512, sized=None)) == 4


def test_datapath_model_of_the_wide_depthwise_blocks():
    """Two parts per lane (8 lanes x 16 banks with a depthwise conv): twice the epilogues; per
    lane the tree stops at the parts (its last adder, 25 + 4 = 29 bits, not built), and the parts'
    sum and one more accumulator adder of 42 bits each take its place (one more accumulator
    register); a 4:1 write select per bank (one LUT6 per bit, as the 3:1 was); the units
    unchanged (netperf.datapath's docstring)."""
    from types import SimpleNamespace
    net = SimpleNamespace(input={"bits": 8}, params={"acc_bits": 42})
    t = dict(pz=8, pc=16, prod_bits=25, sum_bits=42, add_bits=18)
    one, two = netperf.datapath(net, dict(t, parts=1)), netperf.datapath(net, dict(t, parts=2))
    assert one == netperf.datapath(net, t)
    assert two["epilogues"] == tuple(2 * v for v in one["epilogues"])
    assert two["trees"] == (one["trees"][0] + 8 * (2 * 42 - 29), one["trees"][1] + 8 * (42 - 29))
    assert two["units"] == one["units"] and two["banks"] == one["banks"]


@pytest.mark.parametrize("lo,hi,f,want", [(0.0, 6.0, 4, (0, 96)), (0.0, 6.0, 5, (0, 127)), (None, 6.0, 3, (-128, 48)),
                                          (-1.5, None, 1, (-3, 127)), (-100.0, 0.5, 2, (-128, 2)),
                                          (-1.25, 6.0, 1, None), (0.0, 6.1, 3, None)])
def test_clip_bounds_at_the_outputs_radix(lo, hi, f, want):
    """A Clip's clamp on int8 at radix f, by hand: bounds beyond the range change nothing; a
    bound inside it that is not a multiple of 2**-f is refused."""
    j = dict(name="c", op="Clip", attrs={"lo": lo, "hi": hi})
    why = lambda what: InputError(what)          # noqa: E731
    if want is None:
        with pytest.raises(InputError, match="not values of the input's format"):
            netmode._clamp(j, f, 8, None, why)
    else:
        assert netmode._clamp(j, f, 8, None, why) == want


@pytest.mark.slow
@pytest.mark.csim
def test_depthwise_network_on_the_sim_board_through_pynq(compiled):
    """DS-CNN two-hot (wide depthwise blocks) on the simulated board through pynq: one start
    per batch, the layer-by-layer emulator's bits."""
    path = compiled("dscnn_ts17", "twohot")
    x = _x(3)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim") as net:
        got = net.logits(x)
        assert net.network is not None and net.last_kernel_starts == 1
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
