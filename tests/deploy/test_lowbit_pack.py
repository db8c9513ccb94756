"""Low-bit products packed on the fabric (issue 82's second half): sparse_cluster's board-sized
network kernel with ``net_bits: 4`` (:mod:`hlsnn.engines.sparse_cluster.lowbit`) forms four int4 x
uint4 products per DSP48E1 and builds its other products from LUTs at 24 each, so the sizer fits
three read ports per bank on the PYNQ-Z2 where int8 fits two; a residual Add's low-bit ``Quant``
is the Add's clamp (rule add_clip, :mod:`hlsnn.engines.network.joins.addclip`).

References: the products ``w * x`` themselves (the packed quad's split over every operand), qonnx's
executor on the W4A4 ResNet-8 file (``configs/models/resnet8_w4a4_digits32.onnx``, Brevitas
``export_qonnx``), and the layer-by-layer emulator (the network kernel's C-simulation and the
simulated board, slow)."""
from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from hlsnn.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parents[2]
CFG = ROOT / "configs" / "models" / "resnet8_w4a4_digits32.yaml"
ONNX = ROOT / "configs" / "models" / "resnet8_w4a4_digits32.onnx"


def _quad(w, x):
    """The kernel's packed quad on int64 arrays (lowbit.py's rule, as network.cpp.j2 writes it):
    ``A = sum_k w_k 2**(7k)``, ``P = A * x``, ``f_k = {s_k, r_k mod 2**7}``, ``r_(k+1) = (r_k >> 7) + s_k``."""
    a = sum(w[k] << (7 * k) for k in range(4))
    r = a * x
    f = []
    for k in range(3):
        s = ((w[k] < 0) & (x != 0)).astype(np.int64)
        f.append((r & 127) - 128 * s)
        r = (r >> 7) + s
    return a, a * x, f + [r]


def test_the_packed_quad_splits_exactly_for_every_operand():
    """All 15**4 narrow int4 weight quads times all 16 uint4 activations: each field is ``w_k * x``,
    the packed weight fits the DSP48E1's 25-bit A port and the product 30 bits; a weight of -8
    would not fit (why the 4-bit kernel takes narrow weights)."""
    g = np.array(list(itertools.product(range(-7, 8), repeat=4)), np.int64).T          # (4, 50625)
    w = [np.repeat(g[k], 16) for k in range(4)]
    x = np.tile(np.arange(16, dtype=np.int64), g.shape[1])
    a, p, f = _quad(w, x)
    for k in range(4):
        np.testing.assert_array_equal(f[k], w[k] * x)
    assert a.min() >= -(1 << 24) and a.max() < 1 << 24
    assert p.min() >= -(1 << 29) and p.max() < 1 << 29
    assert -8 * sum(1 << (7 * k) for k in range(4)) < -(1 << 24)


def _quad_signed(w, x):
    """The packed quad with signed inputs (lowbit.py's ``s5``, network.cpp.j2's ``lowx``): the sign
    of ``f_k`` is ``w_k != 0 and x != 0 and (w_k < 0) != (x < 0)``."""
    r = sum(w[k] << (7 * k) for k in range(4)) * x
    f = []
    for k in range(3):
        s = ((w[k] != 0) & (x != 0) & ((w[k] < 0) != (x < 0))).astype(np.int64)
        f.append((r & 127) - 128 * s)
        r = (r >> 7) + s
    return f + [r]


def test_the_signed_quad_splits_exactly_for_every_5_bit_input():
    """All narrow int4 weight quads times every input code -16..15 (a sign activation's +-1, a
    nibble of an int8 code): each field is ``w_k * x``; the unsigned rule would not do."""
    g = np.array(list(itertools.product(range(-7, 8), repeat=4)), np.int64).T
    w = [np.repeat(g[k], 32) for k in range(4)]
    x = np.tile(np.arange(-16, 16, dtype=np.int64), g.shape[1])
    f = _quad_signed(w, x)
    for k in range(4):
        np.testing.assert_array_equal(f[k], w[k] * x)
    assert not all(np.array_equal(fu, w[k] * x) for k, fu in enumerate(_quad(w, x)[2]))


def test_int8_codes_in_nibbles_sum_to_the_int8_sums():
    """The nibble rule (lowbit.py): ``hi = x >> 4`` in -8..7, ``lo = x & 15`` in 0..15, and a conv's
    sum over ``x`` is ``16 * sum(w * hi) + sum(w * lo)`` (numpy's int64 dot products)."""
    from hlsnn.engines.sparse_cluster import lowbit
    rng = np.random.default_rng(82)
    x = rng.integers(-128, 128, (500, 72))
    w = rng.integers(-7, 8, (72, 16))
    hi, lo = x >> 4, x & 15
    assert hi.min() >= -8 and hi.max() <= 7 and lo.min() >= 0 and lo.max() <= 15
    np.testing.assert_array_equal((hi @ w) * 16 + lo @ w, x @ w)
    assert [lowbit.mode(r) for r in [(0, 15), (0, 3), (-1, 1), (-16, 15), (0, 16), (-128, 127), (-17, 0)]] == \
        ["u4", "u4", "s5", "s5", "nib", "nib", "nib"]


def _run_row(steps, xp, oy, ow, sh, sw, pc, sub):
    """The 4-bit kernel's conv loop over one output row (network.cpp.j2 with ``stream``), on int64 arrays:
    per step the reads' products summed per read, the reads ``r >= split`` carried to the next pixel, the
    pixel's sum taken at its last step, the table wrapping or restarting at the row's end."""
    acc, s, ox, out = 0, 0, 0, []
    while ox < ow:
        taps, w, last, split, wrap = steps[s]
        u = np.zeros((w.shape[0], sub), np.int64)
        for r in range(sub):
            for b in range(pc):
                tp = taps[r * pc + b]
                if tp is not None:
                    cb, ky, kx = tp
                    u[:, r] += w[:, r * pc + b] * xp[cb * pc + b, oy * sh + ky, ox * sw + kx]
        tot = acc + u.sum(axis=1)
        nx = u[:, split:].sum(axis=1)
        if last:
            out.append(tot - nx)
            ox += 1
            acc = 0 if ox == ow else nx
            s = 0 if wrap or ox == ow else s + 1
        else:
            acc = tot
            s = 0 if wrap else s + 1
    return np.stack(out, axis=1)


@pytest.mark.parametrize("c,ow,sw,density", [(16, 7, 1, 1.0), (16, 8, 2, 0.6), (32, 5, 1, 0.8), (16, 32, 1, 0.9)])
def test_streamed_steps_give_each_pixel_its_conv_sum(c, ow, sw, density):
    """netsize.block_steps streamed (a row's pixels one after another in each bank's reads, a step's reads
    split between two pixels): each pixel's sum is numpy's 3x3 convolution of the zero-padded map, for
    banks of different tap counts (zero weights skipped), strides 1 and 2, rows of any width."""
    from hlsnn.engines.sparse_cluster import netsize
    rng = np.random.default_rng(ow * 7 + c)
    pc, sub, pz = 16, 4, 16
    wb = rng.integers(-7, 8, (pz, c, 3, 3)) * (rng.random((1, c, 3, 3)) < density)
    (wq, lists), = netsize.tap_lists(wb, pc, pz)
    t = netsize.period(lists)
    assert t >= sub
    steps = netsize.block_steps(wq, lists, pc, sub, pz, (ow, sw))
    assert len(steps) == netsize.stream_steps(t, sub, ow) and steps[-1][4] == 1
    h, w_in = 3, (ow - 1) * sw + 1
    x = rng.integers(0, 16, (c, h, w_in))
    xp = np.zeros((c, h + 2, w_in + 2 + 2 * sw + 4), np.int64)
    xp[:, 1:h + 1, 1:w_in + 1] = x
    want = np.einsum("lcyx,cyxo->lo", wb, np.stack([xp[:, 0:3, o * sw:o * sw + 3] for o in range(ow)], axis=-1))
    np.testing.assert_array_equal(_run_row(steps, xp, 0, ow, 1, sw, pc, sub), want)
    plain = netsize.block_steps(wq, lists, pc, sub, pz)
    np.testing.assert_array_equal(_run_row(plain, xp, 0, ow, 1, sw, pc, sub), want)
    assert netsize.row_steps(t, sub, ow, True) <= netsize.row_steps(t, sub, ow, False)


def test_the_4_bit_kernel_fits_more_products_on_the_pynq_z2():
    from hlsnn.config import load_config
    from hlsnn.resources import within_margins
    from hlsnn.engines.sparse_cluster import netsize
    p8 = load_config(ROOT / "configs" / "accel" / "sparse8net_pynq-z2.yaml")
    p4 = load_config(ROOT / "configs" / "accel" / "sparse4net_pynq-z2.yaml")
    s8, s4 = p8.params, p4.params
    assert "net_bits" not in s8 and s4["net_bits"] == 4
    q8, q4 = s8["net_banks"] * s8["net_sub"], s4["net_banks"] * s4["net_sub"]
    assert s4["net_lanes"] * q4 >= 2 * s8["net_lanes"] * q8          # four reads a bank against two
    dsp = s4["net_lanes"] // 4 * s4["net_pack"]                      # four lanes a DSP
    assert s8["net_lanes"] // 2 * s8["net_pack"] <= dsp <= 0.9 * p4.board.resources["dsp"]
    # the sizer's own pick for its nominal program (256 steps) is three reads a bank, and it fits; the
    # config's four, with each lane's last weight word in LUT ROMs (net_wlut), holds the ResNet-8's
    # program (hlsnn compile's fit check: the perf test below), not the nominal one
    nominal = netsize.size({k: v for k, v in s4.items() if k != "net_sub"}, p4.board)
    assert nominal["net_sub"] == 3 and s4["net_sub"] == 4 and s4["net_wlut"] == 1
    e = netsize.estimate(nominal, p4.board.ps, netsize.NOMINAL_STEPS, netsize.NOMINAL_WORDS, netsize.NOMINAL_WORDS,
                         netsize.NOMINAL_SUM_BITS4, 24, tap_bits=sum(netsize.nominal_tap_bits(s4)))
    assert within_margins(e, p4.board.resources, ("lut", "ff", "bram36", "dsp"))
    shape = {k: s4[k] for k in ("net_lanes", "net_banks", "net_sub", "net_pack", "net_bits", "net_wlut")}
    assert "four int4 x uint4" in netsize.products(shape)


@pytest.mark.parametrize("extra,match", [("  net_bits: 5\n", "must be 4 or 8"),
                                         ("  net_bits: 4\n  max_z: 18\n", "multiple of 4"),
                                         ("  max_z: 16\n  net_bits: 4\n  net_sub: 4\n  net_wlut: 4\n",
                                          r"net_wlut.*must be below 4, the weight words a lane reads a step")])
def test_a_bad_net_bits_is_refused_by_name(extra, match, tmp_path):
    from hlsnn.config import load_config
    text = (ROOT / "configs" / "accel" / "sparse8net_pynq-z2.yaml").read_text()
    text = text.replace("  max_z: 16\n", "") + extra
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(cfg)


def test_a_clip_after_an_add_is_taken_only_for_engine_readers():
    from hlsnn.engines.network.joins.addclip import _engine_readers
    layers = [{"kind": "host", "op": "Reshape", "inputs": ["c"], "output": "r"},
              {"kind": "dense", "inputs": ["r"], "output": "y"},
              {"kind": "host", "op": "GlobalAveragePool", "inputs": ["d"], "output": "g"}]
    assert _engine_readers("c", layers) and not _engine_readers("d", layers) and not _engine_readers("z", layers)


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away"])
def test_the_input_clamp_is_the_clip_then_the_quantization(rounding):
    """An input Quant's Clip folded into rule input_quantize (netprefix._fold_clip): the codes of the clipped
    float input, at ties and beyond the bounds, also on the fallback path (a wide radix)."""
    from types import SimpleNamespace
    from hlsnn.deploy.lower import program
    from hlsnn.deploy.quantize.quant import to_fixed
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0.4, 0.8, 2000), np.arange(-40, 40) / 32.0])
    for f in (4, 30):               # 30: |x| 2**54 beyond 2**52, the fallback (to_fixed)
        lo, hi = 0.0, 15 * 2.0 ** -4 if f == 4 else 127 * 2.0 ** -30
        net = SimpleNamespace(engine="sparse_cluster", host_before=[],
                              input=dict(f=f, bits=8, signed=True, rounding=rounding,
                                         clip=(0, int(np.ldexp(hi, f)))))
        want = to_fixed(np.clip(x, lo, hi), f, 8, True, rounding)
        np.testing.assert_array_equal(program.quantize_input(net, x), want)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from hlsnn.network.build import compile_model
    d = tmp_path_factory.mktemp("lowpack")
    return {a: compile_model(CFG, a, d / f"{a}.hlsnn") and d / f"{a}.hlsnn" for a in ("w8", "w4a4")}


def _qonnx(x):
    pytest.importorskip("qonnx")
    spec = importlib.util.spec_from_file_location("qi", Path(__file__).with_name("test_qonnx_import.py"))
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    return t._qonnx(ONNX, x)


def test_the_w4a4_resnet_is_qonnx_bit_for_bit_in_one_start_on_both_kernels(compiled):
    """Both assignments of the file run as one network (the Adds' clamps fused, rule add_clip) and give
    qonnx's outputs; the 4-bit one's codes are int4 weights and uint4 inputs (lowbit.modes), the
    8-bit one's are not (the int8 kernel's finer weight radix)."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.engines.sparse_cluster import lowbit
    x = datasets.load("digits32", layout="nchw").x_test[:16]
    want = _qonnx(x)
    for a, path in compiled.items():
        net = hlsnn.load(path, "emu", network=True)
        assert np.array_equal(net(x), want), a
        assert any(op.kind == "add" and op.f.get("clip") == (0, 15) for op in net.network.ops)
        assert net.network.host_before == [] and net.network.input["clip"] == (0, 15)     # the input Quant's Clip
    four = hlsnn.load(compiled["w4a4"], "emu", network=True).network
    lowbit.check(four)
    assert set(lowbit.modes(four).values()) == {"u4"}                  # the unsigned quad, as before
    with pytest.raises(InputError, match=r"node_conv2d: weights -?\d+\.\.\d+ .* takes weights -7\.\.7"):
        lowbit.check(hlsnn.load(compiled["w8"], "emu", network=True).network)


@pytest.mark.parametrize("assignment", ["w8", "w4a4"])
def test_the_python_api_path_is_qonnx_bit_for_bit(assignment):
    """open_deployment -> calibrate -> run (the tutorial's path): every layer exact, qonnx's bits."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.reports.evaluate import open_deployment
    ds = datasets.load("digits32", layout="nchw")
    x = ds.x_test[:8]
    with open_deployment(CFG, assignment) as dep:
        dep.calibrate(ds.x_train[:32])
        y, layers = dep.run(x), dep.imported
    assert len(layers) == 10 and all(v["mapping"] == "exact" for v in layers.values()), layers
    assert np.array_equal(y, _qonnx(x))


def test_hlsnn_perf_shows_the_packing_and_the_4_bit_kernel_is_faster(compiled):
    from hlsnn.network.latency import model
    res = {a: model(p) for a, p in compiled.items()}
    k = {a: r["kernel_resources"] for a, r in res.items()}
    assert "four int4 x uint4" in k["w4a4"]["products"] and "two int8 x int8" in k["w8"]["products"]
    assert k["w8"]["dsp"] <= k["w4a4"]["dsp"] <= 0.9 * 220 and k["w4a4"]["fits"] and k["w8"]["fits"]
    assert res["w8"]["kernel_us"] >= 1.6 * res["w4a4"]["kernel_us"]
    # issue 82's target: end to end, host included, batch 1, at least 1.5x the int8 kernel's
    assert res["w8"]["end_to_end_us"] >= 1.5 * res["w4a4"]["end_to_end_us"]
    rows = {r["name"]: r for r in res["w4a4"]["layers"]}
    assert not any(r["kind"] == "add" for r in rows.values())          # every Add in its conv's epilogue (fuseadd)
    assert sum(r["kind"] == "conv + add" for r in rows.values()) == 3


def test_the_manifest_records_the_file():
    m = json.loads((ROOT / "configs" / "models" / "resnet8_w4a4_digits32.MANIFEST.json").read_text())
    e = m["files"][ONNX.name]
    assert e["weight_bits"] == 4 and e["act_bits"] == 4 and e["qonnx_accuracy"] > 0.5


@pytest.mark.slow
@pytest.mark.csim
def test_the_4_bit_kernel_on_csim_and_the_sim_board(compiled):
    """The packed quads in C-simulation: the layer path's bits, one start, the perf model's loop
    counts (the Add's two instances together), the strict ports; the simulated board the same."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = datasets.load("digits32", layout="nchw").x_test[:8]
    k_run = hlsnn.load(compiled["w4a4"], "csim", network=True)
    got = k_run(x)
    np.testing.assert_array_equal(got, hlsnn.load(compiled["w4a4"], "emu", network=False)(x))
    assert k_run.last_kernel_starts == 1
    k = k_run._kernel
    counted = {}
    for c, (it, _) in k.counters.items():          # the Add's instances: NetAdd.0, NetAdd.1
        counted[c.split(".")[0]] = counted.get(c.split(".")[0], 0) + it
    assert counted == {c: len(x) * v for c, v in netperf.iterations(k_run.network, k.tables).items()}
    if k.strict:
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    with hlsnn.load(compiled["w4a4"], "sim", network=True) as sim:
        np.testing.assert_array_equal(sim(x), got)
        assert sim.last_kernel_starts == 1
    assert np.array_equal(got, _qonnx(x))


@pytest.mark.slow
@pytest.mark.csim
def test_a_program_with_fused_and_unfused_adds_on_csim(compiled, monkeypatch):
    """Only the first Add fused (network/fuseadd.py's candidates cut to one): the kernel renders both the
    fused epilogue and the two-pixel Add loop, and its C-simulation gives the layer path's bits, with the
    perf model's loop counts (the fused Add's pixels in NetMac, the others' in NetAdd)."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.engines.shift_mac.network import perf as netperf
    from hlsnn.engines.sparse_cluster.network import fuseadd
    whole = fuseadd.candidates
    monkeypatch.setattr(fuseadd, "candidates", lambda net, wide=(): dict(list(whole(net, wide).items())[:1]))
    x = datasets.load("digits32", layout="nchw").x_test[:4]
    k_run = hlsnn.load(compiled["w4a4"], "csim", network=True)
    np.testing.assert_array_equal(k_run(x), hlsnn.load(compiled["w4a4"], "emu", network=False)(x))
    k = k_run._kernel
    assert sum(r[0] for r in k.tables["fuse_rows"]) == 1 and k.tables["has_add"]
    counted = {}
    for c, (it, _) in k.counters.items():
        counted[c.split(".")[0]] = counted.get(c.split(".")[0], 0) + it
    assert counted == {c: len(x) * v for c, v in netperf.iterations(k_run.network, k.tables).items()}
    assert "NetAdd" in counted
    assert not k.strict or all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
