"""The resource model's per-primitive LUT constants against yosys and FINN (issue 83).

``benchmarks/yosys_primitives.py`` writes a Verilog module per primitive the model counts and
synthesizes it with yosys; these tests run it when yosys is on PATH (CI installs it) and check
properties, never a copy of the figures: the model's LUT figure lies within the margin
``docs/models.md`` states (``within_margin``: at least 0.85 of the lower of FINN's Vivado-fitted
estimate and yosys's figure, at least half of yosys's best mapping, at most twice the largest
reference), the packed DSP
pair maps to a DSP48 and the LUT product to none, and each module computes what the kernel's
C++ computes (simulated by yosys's ``sat``, against Python integers), so the figures are those
of the right logic.
"""
import importlib.util
import itertools
import random
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("yosys") is None,
                                reason="yosys is not on PATH (apt-get install yosys; .ci/run installs it)")


def _script():
    spec = importlib.util.spec_from_file_location("yosys_primitives", ROOT / "benchmarks" / "yosys_primitives.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def yp():
    return _script()


def _prim(yp, top):
    return next(p for p in yp.primitives() if p.top == top)


def test_dsp_pair_uses_one_dsp_and_the_lut_product_none(yp):
    """The packed pair's Verilog maps to one DSP48E1 (what the model's one DSP a pair assumes;
    the slow test below checks the DSP48E2 of xcup), and the LUT-built product (``-nodsp``) to
    none, with LUTs instead. Two syntheses, about 8 CPU-seconds."""
    y = yp.synth(_prim(yp, "dsp_pair"), "xc7")
    assert y["cells"].get("DSP48E1") == 1 and y["dsp"] == 1, y["cells"]
    y = yp.synth(_prim(yp, "mul_lut"), "xc7")
    assert y["dsp"] == 0 and y["lut"] > 0, y["cells"]


@pytest.mark.slow
@pytest.mark.parametrize("top", ["mul_lut", "dsp_pair", "dsp_pair_offset", "lane_tree", "twohot", "pot", "bfp_align",
                                 "mul4_lut", "dsp_quad", "mul4s_lut", "dsp_quad_s", "lane_tree4", "lane_split",
                                 "srs_out", "srs_bank"])
def test_model_constant_within_the_stated_margin(yp, top):
    """Each primitive synthesized in every run of the table (xc7, xc7 -abc9, xcup): the model's
    LUT figure is within ``within_margin`` of the references; its flip-flops, where the model
    counts them, are what the registered Verilog has, and its DSPs what yosys maps."""
    from hlsnn.resources import MARGINS
    p = _prim(yp, top)
    runs = [yp.synth(p, fam, extra) for _, fam, extra in yp.RUNS]
    assert yp.within_margin(p.model["lut"], runs, p.finn.get("lut"), MARGINS["lut"]), \
        (top, p.model, p.finn, [(y["lut"], yp.carry_bits(y)) for y in runs])
    for (_, fam, _), y in zip(yp.RUNS, runs):
        assert y["dsp"] == p.model["dsp"], (top, y["cells"])
        if p.model["dsp"]:
            assert y["cells"].get({"xc7": "DSP48E1", "xcup": "DSP48E2"}[fam]) == p.model["dsp"], (top, fam, y["cells"])
        if p.model["ff"] is not None and top != "lane_tree":
            assert y["ff"] == p.model["ff"], (top, y["cells"])


def test_margin_rule_can_fail(yp):
    """The rule rejects a figure below 0.85 of the lower of FINN's and yosys's, below half of
    yosys's best or above twice the largest reference (carry bits included), and accepts one
    inside."""
    run = {"lut": 100, "cells": {"CARRY4": 5}}
    assert yp.within_margin(80, [run], 80, 0.85)
    assert not yp.within_margin(67, [run], 80, 0.85)         # < 0.85 x FINN, the lower
    assert yp.within_margin(85, [run], 300, 0.85)            # FINN above yosys: yosys is the lower
    assert not yp.within_margin(84, [run], 300, 0.85)
    assert not yp.within_margin(49, [run], None, 0.85)       # < half of yosys
    assert yp.within_margin(240, [run], None, 0.85)          # 2 x (100 + 20 carry bits)
    assert not yp.within_margin(241, [run], None, 0.85)


def test_dsp_pair_verilog_splits_exactly(yp):
    """The packed pair's Verilog gives lo = w0 * x and hi = w1 * x (the split's sign correction)
    at the int8 corners, about 3 CPU-seconds."""
    vals = (-128, -1, 0, 127)
    vecs = [{"w0": a, "w1": b, "x": x} for a, b in itertools.product(vals, vals) for x in (-128, 127)]
    got = yp.simulate(_prim(yp, "dsp_pair"), vecs, 1, ["lo_q", "hi_q"])
    assert [(g["lo_q"], g["hi_q"]) for g in got] == [(v["w0"] * v["x"], v["w1"] * v["x"]) for v in vecs]


def test_dsp_quad_verilog_splits_exactly_and_uses_one_dsp(yp):
    """The packed quad (net_bits 4): one DSP48E1, and f_k = w_k * x at the narrow int4 and uint4
    corners (the split by the products' signs); the int4 x uint4 LUT product is w * x."""
    p = _prim(yp, "dsp_quad")
    y = yp.synth(p, "xc7")
    assert y["cells"].get("DSP48E1") == 1 and y["dsp"] == 1, y["cells"]
    rng = random.Random(82)
    vecs = [{"w0": a, "w1": b, "w2": c, "w3": d, "x": x} for a, b, c, d in
            [(-7, 7, -7, 7), (7, -7, 7, -7), (-7, -7, -7, -7), (7, 7, 7, 7), (0, -1, 1, 0)] for x in (0, 1, 15)]
    vecs += [{"w0": rng.randint(-7, 7), "w1": rng.randint(-7, 7), "w2": rng.randint(-7, 7), "w3": rng.randint(-7, 7),
              "x": rng.randint(0, 15)} for _ in range(10)]
    got = yp.simulate(p, vecs, 1, ["f0_q", "f1_q", "f2_q", "f3_q"])
    assert [tuple(g[f"f{k}_q"] for k in range(4)) for g in got] == \
        [tuple(v[f"w{k}"] * v["x"] for k in range(4)) for v in vecs]
    vecs = [{"w": w, "x": x} for w in (-8, -7, -1, 0, 7) for x in (0, 1, 15)]
    got = yp.simulate(_prim(yp, "mul4_lut"), vecs, 1, ["p"])
    assert [g["p"] for g in got] == [v["w"] * v["x"] for v in vecs]


def test_signed_dsp_quad_verilog_splits_exactly(yp):
    """The quad with signed inputs (net_bits 4, lowbit.py's s5 and nibbles): f_k = w_k * x at the
    narrow int4 and int5 corners and at random operands; the int4 x int5 LUT product is w * x."""
    rng = random.Random(83)
    vecs = [{"w0": a, "w1": b, "w2": c, "w3": d, "x": x} for a, b, c, d in
            [(-7, 7, -7, 7), (7, -7, 7, -7), (-7, -7, -7, -7), (7, 7, 7, 7), (0, -1, 1, 0)] for x in (-16, -1, 0, 1, 15)]
    vecs += [{"w0": rng.randint(-7, 7), "w1": rng.randint(-7, 7), "w2": rng.randint(-7, 7), "w3": rng.randint(-7, 7),
              "x": rng.randint(-16, 15)} for _ in range(12)]
    got = yp.simulate(_prim(yp, "dsp_quad_s"), vecs, 1, ["f0_q", "f1_q", "f2_q", "f3_q"])
    assert [tuple(g[f"f{k}_q"] for k in range(4)) for g in got] == \
        [tuple(v[f"w{k}"] * v["x"] for k in range(4)) for v in vecs]
    vecs = [{"w": w, "x": x} for w in (-7, -1, 0, 7) for x in (-16, -1, 0, 1, 15)]     # narrow weights
    got = yp.simulate(_prim(yp, "mul4s_lut"), vecs, 1, ["p"])
    assert [g["p"] for g in got] == [v["w"] * v["x"] for v in vecs]


def test_offset_dsp_pair_maps_to_one_dsp_and_no_lut_and_splits_exactly(yp):
    """shift_mac's net_dsp pair (``(w1 * 2^16 + w0) * x + 2^15``): one DSP48E1 and no LUT on xc7
    (the PYNQ-Z2's family: the model's ``PACK_LUT`` 0 a DSP), and ``lo = w0 * x``, ``hi = w1 * x``
    at the corners of ``|w| <= 128`` and int8 ``x``, about 5 CPU-seconds."""
    y = yp.synth(_prim(yp, "dsp_pair_offset"), "xc7")
    assert y["cells"].get("DSP48E1") == 1 and y["lut"] == 0 and y["ff"] == 0, y["cells"]
    vals = (-128, -1, 0, 127, 128)
    vecs = [{"w0": a, "w1": b, "x": x} for a, b in itertools.product(vals, vals) for x in (-128, 127)]
    got = yp.simulate(_prim(yp, "dsp_pair_offset"), vecs, 1, ["lo", "hi"])
    assert [(g["lo"], g["hi"]) for g in got] == [(v["w0"] * v["x"], v["w1"] * v["x"]) for v in vecs]


def _pack(vals, bits):
    return sum((v & ((1 << bits) - 1)) << (i * bits) for i, v in enumerate(vals))


def _unpack(u, bits, n):
    out = []
    for i in range(n):
        f = (u >> (i * bits)) & ((1 << bits) - 1)
        out.append(f - (1 << bits) if f >> (bits - 1) else f)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("top", ["mul_lut", "twohot", "pot", "lane_tree", "bfp_align", "lane_tree4", "lane_split"])
def test_verilog_computes_what_the_kernel_does(yp, top):
    """Each module against Python integers, at corners and seeded random operands: the LUT
    product w * x; the two-hot lane (x << s1) +/- (x << e2); the PoT product +/-(x << e) or 0
    into a cleared accumulator; the lane tree's sum of its 32 products after its 6 registered
    stages (the 4-bit kernel's: of its 64 8-bit products after 7); the BFP block's max exponent and each mantissa shifted right by min(max - e, 63)."""
    rng = random.Random(83)
    p = _prim(yp, top)
    i8 = lambda: rng.choice((-128, 127, -1, 0, rng.randint(-128, 127)))   # noqa: E731
    if top == "mul_lut":
        vecs = [{"w": i8(), "x": i8()} for _ in range(16)]
        want = [{"p": v["w"] * v["x"]} for v in vecs]
        got = yp.simulate(p, vecs, 1, ["p"])
    elif top == "twohot":
        vecs = [{"x": i8(), "s1": rng.randint(0, 22), "e2": rng.randint(0, 15), "neg": rng.randint(0, 1)}
                for _ in range(16)]
        want = [{"b": (v["x"] << v["s1"]) + (-1) ** v["neg"] * (v["x"] << v["e2"])} for v in vecs]
        got = yp.simulate(p, vecs, 1, ["b"])
    elif top == "pot":
        vecs = [{"clear": 1, "x": i8(), "e": rng.randint(0, 15), "z": int(rng.random() < 0.2), "neg": rng.randint(0, 1)}
                for _ in range(16)]
        want = [{"acc": 0 if v["z"] else (-1) ** v["neg"] * (v["x"] << v["e"])} for v in vecs]
        got = yp.simulate(p, vecs, 1, ["acc"])
    elif top == "lane_tree":
        prods = [[rng.choice((-16384, 16384, rng.randint(-16384, 16384))) for _ in range(32)] for _ in range(6)]
        vecs = [{"first": 1, "p": _pack(ps, 16)} for ps in prods]
        want = [{"acc": sum(ps)} for ps in prods]
        got = yp.simulate(p, vecs, 6, ["acc"])
    elif top == "lane_tree4":     # net_bits 4: 64 products |w x| <= 112, each level at its own width
        prods = [[rng.choice((-112, 112, rng.randint(-112, 112))) for _ in range(64)] for _ in range(6)]
        prods[0] = [-112] * 64                        # the extremes: every level's width is reached
        prods[1] = [112] * 64
        vecs = [{"first": 1, "p": _pack(ps, 8)} for ps in prods]
        want = [{"acc": sum(ps)} for ps in prods]
        got = yp.simulate(p, vecs, 7, ["acc"])
    elif top == "lane_split":     # net_bits 4, streamed: the reads r >= split carried to the next pixel
        vecs = [{"last": rng.randint(0, 1), "rowend": rng.randint(0, 1), "split": rng.randint(1, 4),
                 "u": _pack(us, 12), "tot": rng.randint(-(1 << 16), 1 << 16)}
                for us in ([rng.choice((-2048, 2047, rng.randint(-1792, 1792))) for _ in range(4)] for _ in range(16))]
        want = []
        for v in vecs:
            us = _unpack(v["u"], 12, 4)
            nx = sum(us[r] for r in range(v["split"], 4))
            want.append({"fin": v["tot"] - nx, "acc_in": (0 if v["rowend"] else nx) if v["last"] else v["tot"]})
        got = yp.simulate(p, vecs, 1, ["fin", "acc_in"])
    else:
        blocks = [([rng.randint(-2048, 2047) if rng.random() < 0.7 else rng.randint(-10, 10) for _ in range(4)],
                   [rng.randint(-(1 << 53), (1 << 53) - 1) for _ in range(4)]) for _ in range(12)]
        vecs = [{"ex": _pack(e, 12), "m": _pack(m, 54)} for e, m in blocks]
        want = [{"emax": max(e), "y": [mi >> min(max(e) - ei, 63) for ei, mi in zip(e, m)]} for e, m in blocks]
        got = [{"emax": g["emax"], "y": _unpack(g["y"] % (1 << 216), 54, 4)}
               for g in yp.simulate(p, vecs, 1, ["emax", "y"])]
    assert got == want


@pytest.mark.parametrize("top", ["srs_out", "srs_bank"])
def test_shift_round_sat_verilog_rounds_to_nearest_even_and_saturates(yp, top):
    """The ShiftRoundSat modules give ``v * 2**-s`` rounded half to even (Python's ``round`` of a
    Fraction) and clamped to the output's range, with ``sat`` where it clamped: at the input's
    corners, the ties, shifts past the caps (``wi + 1`` right, ``wo`` left) and random operands,
    about 3 CPU-seconds each."""
    from fractions import Fraction
    p = _prim(yp, top)
    wi, wo = {"srs_out": yp.SRS_OUT, "srs_bank": yp.SRS_BANK}[top]
    lo, hi = -(1 << (wi - 1)), (1 << (wi - 1)) - 1
    rng = random.Random(wi)
    vs = [lo, lo + 1, -6, -5, -3, -2, -1, 0, 1, 2, 3, 5, 6, 127, 128, hi] + [rng.randint(lo, hi) for _ in range(6)]
    ss = [-2048, -9, -8, -7, -1, 0, 1, 2, 3, wi - 8, wi, wi + 1, wi + 2, 63, 2047]
    vecs = [{"v": v, "s": sh} for v in vs for sh in ss]
    got = yp.simulate(p, vecs, 1, ["y", "sat"])
    top_, bot = (1 << (wo - 1)) - 1, -(1 << (wo - 1))
    for v, g in zip(vecs, got):
        r = round(Fraction(v["v"]) * Fraction(2) ** -v["s"])
        want = min(max(r, bot), top_)
        assert (g["y"], g["sat"] != 0) == (want, r != want), (v, g, want)
