"""The network path of a compiled sparse_cluster model (fixed8, sparse50; issue 31): the network
mode's sparse rules (``hlsnn.engines.sparse_cluster.network.lower``) and the sparse network kernel.

References: the layer-by-layer compiled network on the emulator (the deployment's own code,
itself tested against a fresh deployment), a plain-Python integer convolution with its own
rounding, and the original taps of a layer for their recovery from the stride-1 rewrite."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.sparse_cluster.network import lower as netsparse  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.engines.convgeom import ConvGeom, as_stride1  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

from conftest import checked_raw  # noqa: E402

CAL = 16
P = {"rounding": "nearest_even"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(model, assignment) -> path of its compiled file, compiled once per module."""
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netsparse", calibration_samples=CAL, check_samples=2)


def _x(model, n=24):
    if model == "resnet8_digits32":
        return datasets.load("digits32", layout="nchw").x_test[:n]
    return datasets.load("digits", layout="flat" if model == "digits_mlp" else "nchw").x_test[:n]


def _same(path, x):
    with hlsnn.load(path, "emu", network=False) as ref:
        y_ref, env_ref = ref.run(x, keep=True)
    with hlsnn.load(path, "emu", network=True) as net:      # the self-check passes too
        y, env = net.run(x, keep=True)
        assert net.last_kernel_starts == 0 and net.network.engine == "sparse_cluster"
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt].view(np.uint64), env_ref[lt].view(np.uint64))
    np.testing.assert_array_equal(y, y_ref)
    return net


@pytest.mark.parametrize("model,assignment", [("digits_mlp", "fixed8"), ("digits_cnn", "fixed8"),
                                              ("digits_cnn", "sparse50")])
def test_network_mode_equals_the_layer_by_layer_emulator(compiled, model, assignment):
    _same(compiled(model, assignment), _x(model))


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["fixed8", "sparse50"])
def test_resnet8_network_mode_equals_the_layer_by_layer_emulator(compiled, assignment):
    """Stride-2 3x3 and 1x1 convolutions (stored in their stride-1 form), residual Adds, the
    global pool: every layer on the fabric, the Softmax on the host."""
    net = _same(compiled("resnet8_digits32", assignment), _x("resnet8_digits32", 16))
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("conv") == 10 and kinds.count("add") == 3
    assert [j["op"] for j in net.network.host_after] == ["Softmax"]


def _round_even(fr):
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    return fl + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else fl


def test_sparse_conv_rule_against_plain_python():
    """Stride (2, 1), asymmetric padding, two groups, int8 taps with zeros, per-channel shifts
    (one negative: a saturating left shift), ReLU on one run and off on the other; the sum plus
    bias is never saturated (the engine's accumulators are exact)."""
    rng = np.random.default_rng(5)
    c, h, w, z, g, kh, kw = 4, 7, 6, 4, 2, 3, 2
    pads, (sh, sw) = (1, 0, 2, 1), (2, 1)
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    x = rng.integers(-128, 128, (2, c, h, w))
    taps = rng.integers(-128, 128, (z, c // g, kh, kw)) * (rng.random((z, c // g, kh, kw)) < 0.5)
    bias = rng.integers(-(1 << 29), 1 << 29, z) >> rng.integers(0, 20, z)
    shift = np.array([9, 14, 0, -1])
    for relu in (True, False):
        f = dict(c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, group=g, codes=taps,
                 bias=bias, shift=shift, relu=relu, engine="sparse_cluster")
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
                                        acc += int(x[b, j * (c // g) + ci, iy, ix]) * int(taps[zz, ci, ky, kx])
                        v = acc + int(bias[zz])
                        v = max(v, 0) if relu else v
                        y = max(-128, min(127, _round_even(Fraction(v) / Fraction(2) ** int(shift[zz]))))
                        assert got[b, zz, oy, ox] == y, (relu, b, zz, oy, ox)


@pytest.mark.parametrize("geom", [ConvGeom(3, 3, 2, 2, (1, 1, 1, 1)), ConvGeom(1, 1, 2, 2),
                                  ConvGeom(3, 2, 1, 2, (0, 1, 2, 0), group=2), ConvGeom(2, 2, group=4)])
def test_taps_come_back_from_the_stride1_form(geom):
    """The compiled model stores a general convolution's weight as the engine runs it (its
    stride-1 square form); the layer's own taps come back exactly."""
    rng = np.random.default_rng(geom.kh * 10 + geom.group)
    z, cg = 8, 2
    w = rng.integers(-128, 128, (z, cg, geom.kh, geom.kw))
    w1, _, _ = as_stride1(w, geom)
    j = {"name": "L", "kind": "conv", "w_shape": list(w.shape), "general": True, "blocks": None,
         "geom": {"kh": geom.kh, "kw": geom.kw, "dilations": [1, 1], "group": geom.group}}
    np.testing.assert_array_equal(netsparse.taps(j, {"L/wq": w1.astype(np.int8)}, None, InputError), w)
    bad = w1.copy()
    bad[0, -1, -1, -1] = 5 if geom.group > 1 or geom.kh != geom.kw else bad[0, -1, -1, -1]
    if geom.group > 1 or geom.kh != geom.kw:         # an entry the rewrite leaves zero
        with pytest.raises(InputError, match="non-zero entries outside the layer's taps"):
            netsparse.taps(j, {"L/wq": bad.astype(np.int8)}, None, InputError)


def test_lower_names_the_engine_without_a_network_mode(compiled):
    from hlsnn.network import artifact
    prog, arrays = artifact.read(compiled("digits_cnn", "fixed8"))
    acc = dict(next(iter(prog["accels"].values())), engine="no_such_engine")
    with pytest.raises(InputError, match="engine no_such_engine of .*: only shift_mac, sparse_cluster and "
                                         "bfp_systolic have a network mode so far"):
        netmode.lower(dict(prog, accels={"a": acc}), arrays)


# ------------------------------------------------------------------ the sparse network kernel

def test_schedule_by_hand():
    """Two lanes, M = 2 multipliers, Q = 4 banks, a 1x2 kernel: lane 0 has channel 0 at tap
    (0, 0) and channel 1 at tap (0, 1), lane 1 channel 1 at tap (0, 1). Bank 0 reads tap (0, 0)
    and bank 1 tap (0, 1) in the same step: one step (one tap per step would take two)."""
    from hlsnn.engines.sparse_cluster.network.kernel import schedule
    w = np.zeros((2, 4, 1, 2), np.int64)
    w[0, 0, 0, 0], w[0, 1, 0, 1], w[1, 1, 0, 1] = 5, -7, 3
    assert schedule(w, 4, 2, 2) == [[([(0, 0, 0), (0, 0, 1), None, None], [[(5, 0), (-7, 1)], [(3, 1)]])]]
    # an all-zero block keeps one empty step (its outputs: the output rule of the bias)
    assert schedule(np.zeros((2, 4, 1, 2), np.int64), 4, 2, 2) == [[([None] * 4, [[], []])]]


def _check_schedule(codes, blocks, pz, pc, pm):
    """Every non-zero weight in exactly one slot, at its own bank and tap; no lane over M slots;
    each block at least its bounds: a lane's ceil(non-zeros / M), a bank's taps. Returns the
    steps (each at least 1 a block)."""
    z, cg, kh, kw = codes.shape
    back = np.zeros_like(codes)
    total = 0
    for b, steps in enumerate(blocks):
        wb = codes[b * pz:(b + 1) * pz]
        nnz = (wb != 0).reshape(wb.shape[0], -1).sum(axis=1)
        taps_of_bank = [len({(c // pc, ky, kx) for c in range(cg) if c % pc == j for ky in range(kh) for kx in range(kw)
                             if (wb[:, c, ky, kx] != 0).any()}) for j in range(pc)]
        assert len(steps) >= max(int(np.ceil(nnz.max(initial=0) / pm)), max(taps_of_bank), 1)
        for taps, lanes in steps:
            for lane, slots in enumerate(lanes):
                assert len(slots) <= pm and len({j for _, j in slots}) == len(slots)
                for wv, j in slots:
                    cb, ky, kx = taps[j]
                    c = cb * pc + j
                    assert back[b * pz + lane, c, ky, kx] == 0 and wv != 0
                    back[b * pz + lane, c, ky, kx] = wv
        total += len(steps)
    np.testing.assert_array_equal(back, codes)
    return total


@pytest.mark.parametrize("density", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("z,cg,k,pz,pc,pm", [(20, 5, 3, 8, 8, 4), (16, 40, 1, 16, 16, 8), (3, 16, 2, 4, 8, 1)])
def test_schedule_places_every_non_zero_once(density, z, cg, k, pz, pc, pm):
    """Random int8 weights, a partial last block and a partial channel block: every non-zero
    in one slot at its own bank and tap, the bounds kept; dense weights cost no more than one
    tap per step would (ceil(Q / M) steps a tap), and pruning never costs steps."""
    from hlsnn.engines.sparse_cluster.network.kernel import schedule
    rng = np.random.default_rng(z + cg + k)
    w = rng.integers(-128, 128, (z, cg, k, k))
    w[w == 0] = 1
    mask = rng.random(w.shape) < density
    steps = _check_schedule(w * mask, schedule(w * mask, pc, pm, pz), pz, pc, pm)
    dense = _check_schedule(w, schedule(w, pc, pm, pz), pz, pc, pm)
    assert dense <= -(-z // pz) * -(-cg // pc) * k * k * -(-min(cg, pc) // pm)
    assert steps <= dense


@pytest.mark.parametrize("assignment", ["fixed8", "sparse50"])
def test_perf_cycles_follow_the_non_zeros(compiled, assignment, capsys):
    """`hlsnn perf --json`: one kernel start per batch, the totals the rows' sums, each conv
    op's cycles OH * OW * (its blocks' steps) + the depth, the schedule checked here against
    the weights (every non-zero once, at its bank and tap; no block below its bounds)."""
    import json
    from hlsnn.cli import main
    from hlsnn.network import artifact
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel, perf as sparseperf
    path = compiled("digits_cnn", assignment)
    assert main(["perf", str(path), "--json", "--batch", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["path"] == "network" and res["kernel_starts"] == 1 and res["board"] == "pynq-z2"
    for k in ("kernel_starts", "kernel_us", "host_us", "end_to_end_us", "host_bytes", "dma_bytes"):
        assert res[k] == pytest.approx(sum(r[k] for r in res["layers"])), k
    net = netmode.lower(*artifact.read(path))
    pz, pc, pm = sparsekernel.shape(net.params)
    assert (pz, pc, pm) == (16, 16, 8)                # sparse8_pynq-z2: max_z 16, 8 x 16 multipliers
    unfold = sparsekernel.tables(net, pz, pc, pm)["unfold"]
    assert unfold["op"] == "conv1" and (unfold["c"], unfold["kw"]) == (1, 3)     # the stem: 3 taps in 3 banks
    for op in net.ops:
        if op.kind == "conv":
            row = next(r for r in res["layers"] if r["name"] == op.name)
            codes = op.f["codes"]
            if op.name == "conv1":                    # bank kx*C + c holds channel c shifted by kx columns
                z, c, kh, kw = codes.shape
                codes = np.stack([codes[:, :, :, kx] for kx in range(kw)], axis=1).reshape(z, kw * c, kh, 1)
            steps = _check_schedule(codes, sparsekernel.schedule(codes, pc, pm, pz), pz, pc, pm)
            assert row["kernel_cycles"] == 2 * (op.f["oh"] * op.f["ow"] * steps + sparseperf.CONV_DEPTH), op.name
    kr = res["kernel_resources"]
    assert kr["dsp"] == pz * pm and kr["fits"]


def test_pruning_cuts_the_modelled_conv_cycles(compiled):
    """With one lane of one multiplier a step is one non-zero weight: a conv takes OH * OW
    times its non-zero weights (an output channel without any: one empty step) cycles, plus
    the depth; half the weights pruned, every layer of more than one input channel is cheaper
    (the first layer's few taps keep most weights)."""
    from hlsnn.network import artifact
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel, perf as sparseperf
    cyc = {}
    for a in ("fixed8", "sparse50"):
        net = netmode.lower(*artifact.read(compiled("digits_cnn", a)))
        t = sparsekernel.tables(net, 1, 1, 1)
        cyc[a] = {n: c for n, k, c in sparseperf.op_cycles(net, t) if k == "conv"}
        for op in net.ops:
            if op.kind == "conv":
                nnz = np.maximum((op.f["codes"] != 0).reshape(op.f["z"], -1).sum(axis=1), 1).sum()
                assert cyc[a][op.name] == op.f["oh"] * op.f["ow"] * nnz + sparseperf.CONV_DEPTH, (a, op.name)
    assert all(cyc["sparse50"][n] < 0.6 * cyc["fixed8"][n] for n in ("conv2", "fc")), cyc


def test_loop_operators_and_bank_sites_of_the_rendered_kernel(compiled, tmp_path):
    """Counted from the rendered C++ (tests/loop_operators.py): NetMac has P x M run-time
    products (the declared HLSNN_OPS and the resource model's multipliers), no other loop
    multiplies or divides, and every bank of every checked array is within its ports."""
    from loop_operators import bank_sites, loop_operators, over_ports
    from hlsnn.network import artifact
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel, perf as sparseperf
    net = netmode.lower(*artifact.read(compiled("digits_cnn", "sparse50")))
    _, _, t = sparsekernel.render(net, tmp_path)
    ops = loop_operators(tmp_path, "network.cpp", "network.h", with_declared=True)
    assert ops["NetMac"]["mul"] == t["pz"] * t["pm"] == 128 and ops["NetMac"]["declared"][:2] == (128, 0)
    assert all(c["mul"] == 0 and c["div"] == 0 for k, c in ops.items() if k != "NetMac"), ops
    _, muls = sparseperf.buffers(net, t)
    assert sum(m.count for m in muls if m.function == "NetMac") == ops["NetMac"]["mul"]
    rows = bank_sites(tmp_path, "network.cpp", "network.h")
    assert rows and over_ports(rows) == []
    # planted: the epilogue writing lane l to bank obank + l (a run-time bank): every bank of
    # the destination buffers gets all P lanes' write sites
    src = tmp_path / "network.cpp"
    text = src.read_text()
    old = "HLSNN_STORE_AT(act[d.dst][j], obase + pix, y[l], j);"
    assert text.count(old) == 1
    src.write_text(text.replace(old, "HLSNN_STORE_AT(act[d.dst][oblk * Cfg::kPz + l], obase + pix, y[l], j);"))
    bad = over_ports(bank_sites(tmp_path, "network.cpp", "network.h"))
    assert {(x["loop"], x["array"], x["writes"]) for x in bad} == {("NetMac", "act", t["pc"])}


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim           # the kernel is born under the strict rules: it runs on the strict library
@pytest.mark.parametrize("model,assignment", [("digits_mlp", "fixed8"), ("digits_cnn", "fixed8"),
                                              ("digits_cnn", "sparse50"), ("resnet8_digits32", "fixed8"),
                                              ("resnet8_digits32", "sparse50")])
def test_network_kernel_one_start_bit_exact(compiled, model, assignment):
    """The strict C-simulation of the sparse network kernel: one call for the batch, the
    layer-by-layer emulator's bits; its loop counters are the cycle model's iterations."""
    from hlsnn.engines.sparse_cluster.network import perf as sparseperf
    path = compiled(model, assignment)
    n = 3 if model.startswith("resnet") else 6
    x = _x(model, n)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "csim", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 1
        k = net._kernel
        assert k.strict and checked_raw(k.strict_report) == {"act": 12}
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        assert k.strict_report["operators"] == [{"loop": "NetMac", "mul": 128, "div": 0, "dsp": 128}]
        assert {m: it for m, (it, _) in k.counters.items()} == {
            m: n * v for m, v in sparseperf.iterations(net.network, k.tables).items()}
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("model,assignment", [("digits_cnn", "sparse50"), ("resnet8_digits32", "fixed8")])
def test_network_kernel_on_the_sim_board_through_pynq(compiled, model, assignment):
    """pynq.allocate, flush, the IP's register writes, ap_start, ap_done, invalidate (strict
    cache checks on): one start per batch, the emulator's bits, the cycle model's cycles."""
    from hlsnn.engines.sparse_cluster.network import perf as sparseperf
    path = compiled(model, assignment)
    x = _x(model, 7)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim") as net:                       # the self-check runs on the board too
        got = net.logits(x)
        board = net._kernel
        assert net.last_kernel_starts == 1 and board.starts == 2 and board.sim.strict_cache
        (regs, cycles, bursts, beats), = board.model.runs[-1:]
        words = -(-int(np.prod(net.input_shape)) // 8) + 2              # 10 logits: two 64-bit words
        assert regs["batch"] == 7 and beats == 7 * words
        assert cycles == 7 * sum(c for _, _, c in sparseperf.op_cycles(net.network, board.tables))
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
def test_resnet8_perf_one_start_and_pruning_pays(compiled, capsys):
    """`hlsnn perf` on the compiled ResNet-8: one kernel start per image, the kernel within the
    PYNQ-Z2's margins, and sparse50's kernel faster than fixed8's (the same network, half the
    weights pruned: fewer steps in every conv of 16 or more input channels)."""
    import json
    from hlsnn.cli import main
    res = {}
    for a in ("fixed8", "sparse50"):
        assert main(["perf", str(compiled("resnet8_digits32", a)), "--json"]) == 0
        res[a] = json.loads(capsys.readouterr().out)
        assert res[a]["path"] == "network" and res[a]["kernel_starts"] == 1
        assert res[a]["kernel_resources"]["fits"] and res[a]["kernel_resources"]["dsp"] == 128
    conv = {a: {r["name"]: r["kernel_cycles"] for r in res[a]["layers"] if r["kind"] == "conv"} for a in res}
    assert conv["sparse50"]["stem"] <= conv["fixed8"]["stem"]
    assert all(conv["sparse50"][n] < 0.8 * conv["fixed8"][n] for n in ("s1a", "s2b", "s3a", "s3b"))
    assert res["sparse50"]["kernel_us"] < res["fixed8"]["kernel_us"]


@pytest.mark.slow
@pytest.mark.csim               # the layer kernel's C-simulation library (a compile)
def test_a_network_the_kernel_refuses_runs_layer_by_layer_on_csim(compiled, monkeypatch):
    """The kernel's refusal (here: its tables refuse every network) keeps network=None on the
    layer-by-layer path on csim and in `hlsnn perf`, and network=True names the reason."""
    from hlsnn.network import latency
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel

    def refuse(*a, **k):
        raise InputError("network kernel: planted refusal")
    monkeypatch.setattr(sparsekernel, "tables", refuse)
    path = compiled("digits_mlp", "fixed8")
    with pytest.raises(InputError, match="planted refusal"):
        hlsnn.load(path, "csim", network=True, self_check=False)
    assert latency.network_model(path) is None
    with hlsnn.load(path, "csim", self_check=False) as net:
        assert net.network is None
