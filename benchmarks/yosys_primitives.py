"""The resource model's per-primitive constants against a real synthesizer (issue 83).

The resource model (``docs/models.md``) counts the LUTs, flip-flops and DSPs of a kernel's logic
with hand-set constants per primitive. This script writes a small Verilog module for each
primitive the model counts, with the widths the kernels use, synthesizes it with yosys
(``synth_xilinx -family xc7``, Zynq-7000, and ``-family xcup``, Zynq UltraScale+) and prints, per
primitive: the model's figure (computed by the model's own functions and constants), yosys's
cells (LUT1..LUT6 and SRL as LUTs, CARRY4/CARRY8, flip-flops, DSP48E1/E2, MUXF7/F8 apart), FINN's
LUT estimate where FINN has one, and the ratios.

Usage (from the repository root)::

    python benchmarks/yosys_primitives.py              # the table
    python benchmarks/yosys_primitives.py --json OUT   # and the figures as JSON
    python benchmarks/yosys_primitives.py --markdown   # the table docs/models.md holds
    python benchmarks/yosys_primitives.py --check      # exit 1 when docs/models.md's table differs
    python benchmarks/yosys_primitives.py --write      # rewrite docs/models.md's table
    python benchmarks/yosys_primitives.py --verilog DIR  # the modules, to read or synthesize by hand

Vivado, which CI cannot run, lies between two references. yosys maps LUT-built multipliers worse
than Vivado (abc's mapping, no multiplier generator): for the 8x8 product it takes 128-182 LUTs
where FINN's estimator, fitted to Vivado's results, counts 80 (``MVAU_hls.lut_estimation`` in
Xilinx/finn ``src/finn/custom_op/fpgadataflow/hls/matrixvectoractivation_hls.py``, from the
FINN-R paper, Blott et al. 2018; its per-layer factor c1 = 1.1 and constant c0 = 300 left out).
So a yosys LUT figure is an upper reference and FINN's (where FINN has one) the Vivado-side
one. The acceptance rule (:func:`within_margin`, checked by ``tests/test_yosys_primitives.py``
and stated in ``docs/models.md``): a model LUT figure is at least ``MARGINS["lut"]`` (the fit share, 0.90) of
the lower of FINN's and yosys's figures where FINN has one (it may under-count Vivado, between
the two, by the LUT share the sizer leaves free), at least
:data:`YOSYS_FLOOR` of yosys's smallest (yosys's excess over FINN on the one primitive both
count), and at most :data:`OVER` times the largest reference (yosys's LUTs plus its carry-chain
bits: Vivado feeds each carry bit from a LUT).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "models.md"
BEGIN = "<!-- yosys-primitives: begin (python benchmarks/yosys_primitives.py --write) -->"
END = "<!-- yosys-primitives: end -->"
#: yosys runs per primitive: (column name, synth_xilinx family, extra options)
RUNS = (("xc7", "xc7", ""), ("xc7 abc9", "xc7", "-abc9"), ("xcup", "xcup", ""))
#: a model LUT figure may over-count the highest reference by at most this factor
OVER = 2.0
#: a model LUT figure is at least this share of yosys's smallest figure: yosys's LUT product is
#: 1.6-2.3 times FINN's Vivado-fitted 80 LUTs, so a yosys figure can be twice what Vivado builds
YOSYS_FLOOR = 0.5

# ------------------------------------------------------------------------- the kernels' widths
#: sparse_cluster's network kernel (hls/engines/sparse_cluster/network.cpp.j2, NetMac):
#: ``act_t`` = ap_int<kActBits>, 8 for the int8 formats; weights ``ap_int<8>``; ``prod_t`` = ap_int<16>
ACT, WGT, PROD = 8, 8, 16
#: the packed pair: ``ap_int<25> wp = (w1 << 16) + w0``, ``ap_int<33> pp = wp * x``,
#: ``lo = pp.range(15, 0)``, ``ap_int<17> hi = (pp >> 16) + (lo < 0)``
PACK_A, PACK_P = 25, 33
#: a lane of the board-sized kernel of resnet8_digits32 fixed8_z2 (sparse8net_pynq-z2): Q = 16
#: banks x 2 replicas = 32 products a cycle into ``sum_t`` = ap_int<kSumBits>, 22 bits
#: (``hlsnn perf``'s logic: trees 11,264 LUTs = 16 lanes x 32 x 22)
TREE_Q, TREE_SUM = 32, 22
#: a lane of the 4-bit kernel (net_bits 4, sparse4net_pynq-z2): Q = 16 banks x 4 replicas = 64 products of
#: 8 bits (|w x| <= 112) a cycle, summed level by level at each level's width (netsize.tree4), into sum_t (18 bits)
TREE4_Q, TREE4_PROD, TREE4_SUM = 64, 8, 18
#: shift_mac (hls/engines/shift_mac/kernel.cpp.j2, ShiftMacStep) as configs/accel/shift8_pynq-z2.yaml
SHIFT_CONFIG = "shift8_pynq-z2"
#: the BFP network kernel (hls/engines/bfp_systolic/network.cpp.j2, ConvExp / ConvMac):
#: exponents ``hlsnn::exp_wide_t`` (12 bits), wide mantissas ``mant_t`` = ap_int<kWideBits> (54)
BFP_X, BFP_E = 12, 54
#: the elements of one exponent block (the max tree's leaves; the cost grows linearly)
BFP_N = 4
#: ``hlsnn::ShiftRoundSat<WI, WO>`` (hls/include/hlsnn/primitives.h) as the BFP network kernel's
#: ConvMac instantiates it (configs/accel/bfp8net_pynq-z2.yaml, nearest-even rounding): a lane's
#: output stage ``<acc_bits, mantissa_bits>`` = <32, 8> (one per write lane) and a bank's (a slot's,
#: with ``net_slots``) patch rounding ``<kElemBits, mantissa_bits>`` = <26, 8>
SRS_OUT, SRS_BANK = (32, 8), (26, 8)


@dataclass
class Primitive:
    """One primitive: its Verilog module (``top``), its yosys options and its model figures."""

    name: str
    what: str
    top: str
    verilog: str
    nodsp: bool = False
    model: dict = field(default_factory=dict)      # {"lut": .., "ff": .., "dsp": ..} (None: not modelled)
    model_src: str = ""
    finn: dict = field(default_factory=dict)       # {"lut": ..} and "src"
    widths: str = ""


# ------------------------------------------------------------------------- the Verilog modules

def v_mul_lut():
    return f"""\
// int8 x int8 signed product built from LUTs (sparse_cluster NetMac's `prod_t f0 = w0 * x[j]`,
// BIND_OP impl = fabric), its result registered (the model's 16 flip-flops a product)
module mul_lut (input clk, input signed [{WGT - 1}:0] w, input signed [{ACT - 1}:0] x,
                output reg signed [{PROD - 1}:0] p);
  always @(posedge clk) p <= w * x;
endmodule
"""


def v_dsp_pair():
    return f"""\
// Two int8 weights times one int8 activation in one DSP (sparse_cluster NetMac, j < kPack):
// wp = (w1 << 16) + w0 (25 bits), pp = wp * x (33 bits), lo = pp[15:0] is w0 * x and
// hi = (pp >>> 16) + (lo < 0) is w1 * x; lo and hi registered
module dsp_pair (input clk, input signed [7:0] w0, input signed [7:0] w1, input signed [{ACT - 1}:0] x,
                 output reg signed [15:0] lo_q, output reg signed [16:0] hi_q);
  wire signed [{PACK_A - 1}:0] wp = {{w1[7], w1, 16'b0}} + {{{{{PACK_A - 8}{{w0[7]}}}}, w0}};
  wire signed [{PACK_P - 1}:0] pp = wp * x;
  wire signed [15:0] lo = pp[15:0];
  wire signed [16:0] hi = pp[{PACK_P - 1}:16] + {{16'b0, lo[15]}};
  always @(posedge clk) begin
    lo_q <= lo;
    hi_q <= hi;
  end
endmodule
"""


def v_mul4_lut():
    return """\
// int4 x uint4 product built from LUTs (sparse_cluster NetMac with net_bits 4, lowbit.py:
// `const ap_int<8> fk = w[k] * xv`, BIND_OP impl = fabric), its result registered (8 flip-flops)
module mul4_lut (input clk, input signed [3:0] w, input [3:0] x, output reg signed [7:0] p);
  always @(posedge clk) p <= w * $signed({1'b0, x});
endmodule
"""


def v_mul4s_lut():
    return """\
// int4 x int5 product built from LUTs (sparse_cluster NetMac with net_bits 4 and signed or nibble
// inputs, lowbit.py's s5/nib: `const ap_int<8> fk = w[k] * xv` with ap_int<5> xv), registered
module mul4s_lut (input clk, input signed [3:0] w, input signed [4:0] x, output reg signed [7:0] p);
  always @(posedge clk) p <= w * x;
endmodule
"""


def v_dsp_quad_signed():
    return """\
// The packed quad with a signed 5-bit input (sparse_cluster NetMac, net_bits 4, lowx; lowbit.py):
// as dsp_quad, pp = wp * x with x in -16..15, and s_k = w_k != 0 and x != 0 and w_k[3] != x[4]
module dsp_quad_s (input clk, input signed [3:0] w0, input signed [3:0] w1, input signed [3:0] w2,
                   input signed [3:0] w3, input signed [4:0] x, output reg signed [7:0] f0_q,
                   output reg signed [7:0] f1_q, output reg signed [7:0] f2_q, output reg signed [7:0] f3_q);
  wire signed [24:0] e0 = {{21{w0[3]}}, w0};
  wire signed [24:0] e1 = {{14{w1[3]}}, w1, 7'b0};
  wire signed [24:0] e2 = {{7{w2[3]}}, w2, 14'b0};
  wire signed [24:0] e3 = {w3, 21'b0};
  wire signed [24:0] wp = e0 + e1 + e2 + e3;
  wire signed [29:0] pp = wp * x;
  wire nz = |x;
  wire s0 = (|w0) & nz & (w0[3] ^ x[4]), s1 = (|w1) & nz & (w1[3] ^ x[4]), s2 = (|w2) & nz & (w2[3] ^ x[4]);
  wire signed [29:0] r1 = (pp >>> 7) + s0;
  wire signed [29:0] r2 = (r1 >>> 7) + s1;
  wire signed [29:0] r3 = (r2 >>> 7) + s2;
  always @(posedge clk) begin
    f0_q <= {s0, pp[6:0]};
    f1_q <= {s1, r1[6:0]};
    f2_q <= {s2, r2[6:0]};
    f3_q <= r3[7:0];
  end
endmodule
"""


def v_dsp_quad():
    return """\
// Four int4 weights times one uint4 activation in one DSP (sparse_cluster NetMac with net_bits 4,
// j < kPack, lowbit.py): wp = w0 + w1 2^7 + w2 2^14 + w3 2^21 (25 bits; |w| <= 7), pp = wp * x
// (30 bits); f_k = {s_k, r_k[6:0]} with s_k = w_k < 0 and x != 0, r_0 = pp, r_(k+1) = (r_k >>> 7)
// + s_k, f_3 = r_3; the four products registered
module dsp_quad (input clk, input signed [3:0] w0, input signed [3:0] w1, input signed [3:0] w2,
                 input signed [3:0] w3, input [3:0] x, output reg signed [7:0] f0_q, output reg signed [7:0] f1_q,
                 output reg signed [7:0] f2_q, output reg signed [7:0] f3_q);
  wire signed [24:0] e0 = {{21{w0[3]}}, w0};
  wire signed [24:0] e1 = {{14{w1[3]}}, w1, 7'b0};
  wire signed [24:0] e2 = {{7{w2[3]}}, w2, 14'b0};
  wire signed [24:0] e3 = {w3, 21'b0};
  wire signed [24:0] wp = e0 + e1 + e2 + e3;
  wire signed [29:0] pp = wp * $signed({1'b0, x});
  wire nz = |x;
  wire s0 = w0[3] & nz, s1 = w1[3] & nz, s2 = w2[3] & nz;
  wire signed [29:0] r1 = (pp >>> 7) + s0;
  wire signed [29:0] r2 = (r1 >>> 7) + s1;
  wire signed [29:0] r3 = (r2 >>> 7) + s2;
  always @(posedge clk) begin
    f0_q <= {s0, pp[6:0]};
    f1_q <= {s1, r1[6:0]};
    f2_q <= {s2, r2[6:0]};
    f3_q <= r3[7:0];
  end
endmodule
"""


def v_dsp_pair_offset():
    return """\
// Two two-hot code values (|w| <= 128, 9 bits) times one int8 activation in one DSP (shift_mac
// network kernel, net_dsp: shift_mac/network/dsp.py): pp = ((w1 << 16) + w0) * x + 2^15, the
// product registered (the DSP's P register); hi = pp[32:16] is w1 * x, lo = pp[15:0] with bit 15
// flipped is w0 * x: no adder outside the DSP
module dsp_pair_offset (input clk, input signed [8:0] w0, input signed [8:0] w1, input signed [7:0] x,
                        output signed [15:0] lo, output signed [16:0] hi);
  wire signed [24:0] wp = {w1, 16'b0} + {{16{w0[8]}}, w0};
  reg signed [33:0] pp;
  always @(posedge clk) pp <= wp * x + 34'sd32768;
  assign lo = {~pp[15], pp[14:0]};
  assign hi = pp[32:16];
endmodule
"""


def v_tree(q=TREE_Q, w=PROD, s=TREE_SUM, name="lane_tree"):
    """A lane's adder tree: ``q`` products of ``w`` bits, a registered level of adders at a time
    (each level one bit wider, at most ``s``), then the accumulator (``s`` bits)."""
    lv = int(math.log2(q))
    assert 1 << lv == q
    out = [f"// A lane's adder tree (sparse_cluster NetMac: `a0 += lo` over the kQ = {q} slots, then acc[l]):",
           f"// {q} products of {w} bits summed a registered level at a time, then the {s}-bit accumulator",
           f"module {name} (input clk, input first, input [{q * w - 1}:0] p, output reg signed [{s - 1}:0] acc);"]
    prev, pw, n = "p", w, q
    for k in range(1, lv + 1):
        n //= 2
        cw = min(w + k, s)
        out.append(f"  reg [{n * cw - 1}:0] l{k};  // {n} sums of {cw} bits")
        out.append("  integer i%d;" % k)
        out.append(f"  always @(posedge clk) for (i{k} = 0; i{k} < {n}; i{k} = i{k} + 1)")
        out.append(f"    l{k}[i{k} * {cw} +: {cw}] <= $signed({prev}[2 * i{k} * {pw} +: {pw}])"
                   f" + $signed({prev}[(2 * i{k} + 1) * {pw} +: {pw}]);")
        prev, pw = f"l{k}", cw
    out.append(f"  always @(posedge clk) acc <= (first ? {s}'sd0 : acc) + $signed({prev});")
    out.append("endmodule")
    return "\n".join(out) + "\n"


def v_split(sub=4, lw=TREE4_PROD + 4, s=TREE4_SUM):
    """The 4-bit kernel's split of a streamed step (network.cpp.j2 with ``stream``, netsize.split_logic):
    the tree's per-read sums ``u[r]`` (level 4, ``lw`` bits), the reads ``r >= split`` masked and summed
    (``nx``), the pixel's sum ``tot - nx`` registered, and the accumulator's next value (``tot``, ``nx`` or 0)."""
    terms = " + ".join(f"((split <= {r}) ? $signed(u[{r * lw} +: {lw}]) : {s}'sd0)" for r in range(1, sub))
    return f"""\
// A lane's split (sparse_cluster NetMac, net_bits 4, streamed blocks): nx = the reads r >= split of
// the step ({sub} per-read sums of {lw} bits), fin = tot - nx (registered), the accumulator's next value
module lane_split (input clk, input last, input rowend, input [2:0] split, input [{sub * lw - 1}:0] u,
                   input signed [{s - 1}:0] tot, output reg signed [{s - 1}:0] fin, output signed [{s - 1}:0] acc_in);
  wire signed [{s - 1}:0] nx = {terms};
  always @(posedge clk) fin <= tot - nx;
  assign acc_in = last ? (rowend ? {s}'sd0 : nx) : tot;
endmodule
"""


def v_twohot(xb, s1b, eb, pb):
    return f"""\
// A two-hot shift-add lane (shift_mac ShiftMacStep, two-hot mode): C = x << s1 (shifter 1, delta
// folded into s1), A = x << e2 (shifter 2), B = s1 sign ? C - A : C + A (adder 34), B registered.
// The add or subtract is one adder, C + (A ^ neg) + neg, the form the model counts; written as the
// kernel's `neg ? C - A : C + A`, yosys builds an adder, a subtractor and a select
module twohot (input clk, input signed [{xb - 1}:0] x, input [{s1b - 1}:0] s1, input [{eb - 1}:0] e2,
               input neg, output reg signed [{pb - 1}:0] b);
  wire signed [{pb - 1}:0] c = $signed(x) <<< s1;
  wire signed [{pb - 1}:0] a = $signed(x) <<< e2;
  always @(posedge clk) b <= c + (a ^ {{{pb}{{neg}}}}) + neg;
endmodule
"""


def v_pot(xb, eb, pb, ab):
    return f"""\
// A power-of-two product into its accumulator (shift_mac ShiftMacStep, PoT mode): x << e (one
// run-time shift), zero flag, and the sign as the accumulator's add or subtract, one adder:
// base + (t ^ neg) + neg, the form the model counts (the kernel writes `neg ? base - t : base + t`)
module pot (input clk, input clear, input signed [{xb - 1}:0] x, input [{eb - 1}:0] e, input z, input neg,
            output reg signed [{ab - 1}:0] acc);
  wire signed [{ab - 1}:0] t = z ? {ab}'sd0 : ($signed(x) <<< e);
  wire signed [{ab - 1}:0] base = clear ? {ab}'sd0 : acc;
  always @(posedge clk) acc <= base + (t ^ {{{ab}{{neg}}}}) + neg;
endmodule
"""


def v_bfp(n=BFP_N, x=BFP_X, e=BFP_E):
    lines = [f"// A BFP exponent block (bfp_systolic network ConvExp / ConvMac): the max of {n} exponents of {x}",
             f"// bits (a tree of compare-selects), then each {e}-bit mantissa aligned to it: m >>> (max - e_i)",
             f"module bfp_align (input clk, input [{n * x - 1}:0] ex, input [{n * e - 1}:0] m,",
             f"                  output reg signed [{x - 1}:0] emax, output reg [{n * e - 1}:0] y);"]
    # the tree: level k has n >> k values
    prev, cnt, k = "ex", n, 0
    while cnt > 1:
        k += 1
        cnt //= 2
        lines.append(f"  wire [{cnt * x - 1}:0] t{k};  // {cnt} maxima")
        for i in range(cnt):
            a, b = f"{prev}[{2 * i * x} +: {x}]", f"{prev}[{(2 * i + 1) * x} +: {x}]"
            lines.append(f"  assign t{k}[{i * x} +: {x}] = $signed({a}) > $signed({b}) ? {a} : {b};")
        prev = f"t{k}"
    lines.append(f"  wire signed [{x - 1}:0] mx = {prev};")
    lines.append(f"  // each element's shift: max - e_i ({x} bits), limited to 63 (a {e}-bit value shifted by 63 is its sign)")
    lines.append(f"  wire [{n * 6 - 1}:0] sh;")
    for i in range(n):
        lines.append(f"  wire [{x - 1}:0] d{i} = mx - ex[{i * x} +: {x}];")
        lines.append(f"  assign sh[{i * 6} +: 6] = |d{i}[{x - 1}:6] ? 6'd63 : d{i}[5:0];")
    lines.append("  integer i;")
    lines.append("  always @(posedge clk) begin")
    lines.append("    emax <= mx;")
    lines.append(f"    for (i = 0; i < {n}; i = i + 1)")
    lines.append(f"      y[i * {e} +: {e}] <= $signed(m[i * {e} +: {e}]) >>> sh[i * 6 +: 6];")
    lines.append("  end")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def v_srs(wi, wo, name):
    """``hlsnn::ShiftRoundSat<wi, wo>`` as written, rounding nearest-even (a constant of the
    kernel): for ``s > 0`` the ``wi + 3``-bit ``v >> min(s, wi + 1)`` rounded by its mask,
    remainder and half, else ``v << min(-s, wo)`` in ``wi + wo + 2`` bits; both saturated to
    ``wo`` bits, the result and ``sat`` registered."""
    t, w = wi + wo + 2, wi + 3
    one = f"{{{{{w - 1}{{1'b0}}}}, 1'b1}}"
    return f"""\
// hlsnn::ShiftRoundSat<{wi}, {wo}> (hls/include/hlsnn/primitives.h), nearest-even rounding: s > 0:
// v >> min(s, {wi + 1}) rounded to nearest even; else v << min(-s, {wo}); saturated to {wo} bits
module {name} (input clk, input signed [{wi - 1}:0] v, input signed [11:0] s,
               output reg signed [{wo - 1}:0] y, output reg sat);
  wire pos = s > 0;
  wire [5:0] sr = (s > {wi + 1}) ? 6'd{wi + 1} : s[5:0];
  wire signed [{w - 1}:0] vw = v;
  wire signed [{w - 1}:0] q = vw >>> sr;
  wire [{w - 1}:0] mask = ({one} << sr) - 1'b1;
  wire [{w - 1}:0] rem = vw & mask;
  wire [{w - 1}:0] half = {one} << (sr - 1'b1);
  wire up = (rem > half) | ((rem == half) & q[0]);
  wire signed [{w - 1}:0] qr = q + up;
  wire signed [12:0] ns = -$signed({{s[11], s}});  // -s in 13 bits, as ap_int's -s is
  wire [5:0] ls = (ns > {wo}) ? 6'd{wo} : ns[5:0];
  wire signed [{t - 1}:0] vl = v;
  wire signed [{t - 1}:0] tl = vl <<< ls;
  wire signed [{t - 1}:0] tt = pos ? {{{{{t - w}{{qr[{w - 1}]}}}}, qr}} : tl;
  wire hi = tt > $signed({t}'d{(1 << (wo - 1)) - 1});
  wire lo = tt < -$signed({t}'d{1 << (wo - 1)});
  always @(posedge clk) begin
    sat <= hi | lo;
    y <= hi ? {wo}'sd{(1 << (wo - 1)) - 1} : lo ? -{wo}'sd{(1 << (wo - 1)) - 1} - 1'b1 : tt[{wo - 1}:0];
  end
endmodule
"""


# ------------------------------------------------------------------------- the model's figures

def finn_mult_luts(w, a):
    """FINN's LUTs of one LUT-built w x a product: ``(2 * ceil((W + A) / 6) - 1) * (W + A)``."""
    return (2 * math.ceil((w + a) / 6) - 1) * (w + a)


def finn_tree_luts(w, a, q, acc_bits):
    """FINN's adder tree of ``q`` products and accumulator: ``(W + A) * (2Q - 1) + acc_bits``."""
    return (w + a) * (2 * q - 1) + acc_bits


FINN_SRC = "FINN MVAU_hls.lut_estimation"


def primitives():
    """The primitives, each with its Verilog and the model's figures from the model's code."""
    sys.path.insert(0, str(ROOT / "host"))
    from hlsnn.config import load_config
    from hlsnn.engines.bfp_systolic.network import perf as bfpnet
    from hlsnn.engines.bfp_systolic.network.resmodel import srs_luts
    from hlsnn.engines.shift_mac import spec as shift
    from hlsnn.engines.shift_mac.network import dsp as shiftdsp
    from hlsnn.engines.sparse_cluster import netsize
    from hlsnn.resources import dsp_per_product

    p = dict(load_config(ROOT / "configs" / "accel" / f"{SHIFT_CONFIG}.yaml").params)
    xb = p["act_bits"] + (0 if p["act_signed"] else 1)
    emax, d = (1 << p["exp_bits"]) - 1, p["max_delta"]
    s1b = max(1, math.ceil(math.log2((1 << p["exp_bits"]) + d)))      # shift_mac spec: shift1_bits
    pb = xb + emax + d + 1                                             # kernel.cpp.j2: prod_t
    parts = shift.unit_luts(p)
    # a lane's tree: netsize.logic's "trees" of one lane pair of a Q-slot kernel, halved
    trees = netsize.logic({"net_lanes": 2, "net_banks": TREE_Q, "net_sub": 1, "net_pack": 0}, TREE_SUM, 16)["trees"]
    trees4 = netsize.logic({"net_lanes": 1, "net_banks": TREE4_Q, "net_sub": 1, "net_pack": 0, "net_bits": 4},
                           TREE4_SUM, 16)["trees"]         # one lane of the 4-bit kernel
    split4 = netsize.split_logic({"net_sub": 4, "net_banks": 16}, TREE4_SUM)   # one lane of the 4-bit kernel
    x = bfpnet.X_BITS
    bfp_lut = (BFP_N - 1) * (bfpnet._cmp(x) + bfpnet._sel(x)) + BFP_N * (x + bfpnet._stages(BFP_E, 63))
    return [
        Primitive("int8 x int8 product, LUTs", "signed 8x8 product built from LUTs (`-nodsp`)", "mul_lut",
                  v_mul_lut(), nodsp=True,
                  model={"lut": netsize.FABRIC_MUL_LUT, "ff": PROD, "dsp": 0},
                  model_src="netsize.FABRIC_MUL_LUT, 16 FF",
                  finn={"lut": finn_mult_luts(WGT, ACT), "src": "(2*ceil((W+A)/6)-1)*(W+A)"},
                  widths="NetMac prod_t f0 = w0 * x[j]: ap_int<8> x ap_int<8> -> ap_int<16>"),
        Primitive("packed DSP pair", "(w1<<16)+w0 times x in one DSP, split: lo, hi + (lo < 0)", "dsp_pair",
                  v_dsp_pair(),
                  model={"lut": netsize.PACK_LUT, "ff": netsize.PACK_FF,
                         "dsp": dsp_per_product(PACK_A, ACT, True, True, "zynq7")},
                  model_src="netsize.PACK_LUT, PACK_FF; 1 DSP",
                  widths="NetMac: ap_int<25> wp, ap_int<33> pp, ap_int<16> lo, ap_int<17> hi"),
        Primitive("int4 x uint4 product, LUTs", "signed 4 x unsigned 4 product built from LUTs (`-nodsp`)",
                  "mul4_lut", v_mul4_lut(), nodsp=True,
                  model={"lut": netsize.FABRIC_MUL4_LUT, "ff": netsize.FABRIC_MUL4_FF, "dsp": 0},
                  model_src="netsize.FABRIC_MUL4_LUT, FABRIC_MUL4_FF",
                  finn={"lut": finn_mult_luts(4, 4), "src": "(2*ceil((W+A)/6)-1)*(W+A)"},
                  widths="NetMac (net_bits 4) fk = w[k] * xv: ap_int<4> x ap_uint<4> -> ap_int<8>"),
        Primitive("packed DSP quad", "w0 + w1 2^7 + w2 2^14 + w3 2^21 times x in one DSP, split by signs",
                  "dsp_quad", v_dsp_quad(),
                  model={"lut": netsize.PACK4_LUT, "ff": netsize.PACK4_FF,
                         "dsp": dsp_per_product(25, 4, True, False, "zynq7")},
                  model_src="netsize.PACK4_LUT, PACK4_FF; 1 DSP",
                  widths="NetMac (net_bits 4): ap_int<25> wp, ap_int<30> pp, four ap_int<8> fields"),
        Primitive("int4 x int5 product, LUTs", "signed 4 x signed 5 product built from LUTs (`-nodsp`)",
                  "mul4s_lut", v_mul4s_lut(), nodsp=True,
                  model={"lut": netsize.FABRIC_MUL4S_LUT, "ff": netsize.FABRIC_MUL4_FF, "dsp": 0},
                  model_src="netsize.FABRIC_MUL4S_LUT, FABRIC_MUL4_FF",
                  finn={"lut": finn_mult_luts(4, 5), "src": "(2*ceil((W+A)/6)-1)*(W+A)"},
                  widths="NetMac (net_bits 4, signed inputs) fk = w[k] * xv: ap_int<4> x ap_int<5> -> ap_int<8>"),
        Primitive("packed DSP quad, signed input", "the quad with x in -16..15, signs from both operands",
                  "dsp_quad_s", v_dsp_quad_signed(),
                  model={"lut": netsize.PACK4S_LUT, "ff": netsize.PACK4_FF,
                         "dsp": dsp_per_product(25, 5, True, True, "zynq7")},
                  model_src="netsize.PACK4S_LUT, PACK4_FF; 1 DSP",
                  widths="NetMac (net_bits 4, lowx): ap_int<25> wp, ap_int<5> xv, ap_int<30> pp, four ap_int<8> fields"),
        Primitive("offset DSP pair (shift_mac net_dsp)", "(w1<<16)+w0 times x plus 2^15 in one DSP, split by wiring",
                  "dsp_pair_offset", v_dsp_pair_offset(),
                  model={"lut": shiftdsp.PACK_LUT, "ff": None, "dsp": dsp_per_product(PACK_A, ACT, True, True, "zynq7")},
                  model_src="shift_mac network.dsp.PACK_LUT; 1 DSP (its P register)",
                  widths="ConvTaps: ap_int<9> w0, w1, ap_int<25> wp, ap_int<34> pp, prod_t lo, hi"),
        Primitive(f"lane adder tree, {TREE_Q} x {PROD} -> {TREE_SUM} bits",
                  "registered tree of the lane's products, then the accumulator", "lane_tree", v_tree(),
                  model={"lut": trees[0] // 2, "ff": trees[1] // 2, "dsp": 0},
                  model_src="netsize.logic trees: Q * sb",
                  finn={"lut": finn_tree_luts(WGT, ACT, TREE_Q, TREE_SUM), "src": "(W+A)*(2Q-1) + acc_bits"},
                  widths=f"kQ = {TREE_Q} (16 banks x 2 replicas), prod_t 16, sum_t kSumBits = {TREE_SUM} (resnet8 fixed8_z2)"),
        Primitive(f"lane adder tree, net_bits 4, {TREE4_Q} x {TREE4_PROD} -> {TREE4_SUM} bits",
                  "the 4-bit kernel's tree, each level at its own width, then the accumulator", "lane_tree4",
                  v_tree(TREE4_Q, TREE4_PROD, TREE4_SUM, name="lane_tree4"),
                  model={"lut": trees4[0], "ff": trees4[1], "dsp": 0},
                  model_src="netsize.logic trees (net_bits 4): tree4 levels + sb",
                  finn={"lut": finn_tree_luts(4, 4, TREE4_Q, TREE4_SUM), "src": "(W+A)*(2Q-1) + acc_bits"},
                  widths=f"kQ = {TREE4_Q} (16 banks x 4 replicas), ap_int<8> products, level k ap_int<8 + k>, "
                         f"sum_t {TREE4_SUM} bits"),
        Primitive("lane split, net_bits 4, streamed steps", "the next pixel's reads masked and summed, the "
                  "pixel's sum, the accumulator's next value", "lane_split", v_split(),
                  model={"lut": split4[0], "ff": split4[1], "dsp": 0},
                  model_src="netsize.split_logic: (S-1) masks + (S-2) adders + 2 sb",
                  widths=f"S = 4 reads, level-4 sums ap_int<{TREE4_PROD + 4}>, sum_t {TREE4_SUM} bits"),
        Primitive("two-hot shift-add lane", "x << s1, x << e2, add or subtract (shift_mac, two-hot)", "twohot",
                  v_twohot(xb, s1b, p["exp_bits"], pb),
                  model={"lut": parts["shifter_1"] + parts["shifter_2"] + parts["adder"], "ff": None, "dsp": 0},
                  model_src="shift_mac unit_luts: shifter_1 + shifter_2 + adder",
                  widths=f"{SHIFT_CONFIG}: x {xb} bits, s1 {s1b} bits (e1 + delta <= {emax + d}), e2 {p['exp_bits']}"
                         f" bits, prod_t {pb}"),
        Primitive("power-of-two product", "x << e with zero flag, sign as the accumulator's add/sub",
                  "pot", v_pot(xb, p["exp_bits"], xb + emax, p["acc_bits"]),
                  model={"lut": shift.shifter_luts(xb, emax) + p["acc_bits"], "ff": p["acc_bits"], "dsp": 0},
                  model_src="shifter_luts(x, emax) + acc (one LUT a bit)",
                  widths=f"{SHIFT_CONFIG}: x {xb} bits, e {p['exp_bits']} bits, acc_t {p['acc_bits']}"),
        Primitive(f"BFP exponent max and align, {BFP_N} elements",
                  f"max of {BFP_N} exponents, then {BFP_N} mantissas shifted to it", "bfp_align", v_bfp(),
                  model={"lut": bfp_lut, "ff": None, "dsp": 0},
                  model_src="bfp network datapath rules: (N-1)(cmp+sel) + N(X + stages(E))",
                  widths=f"exp_wide_t {BFP_X} bits, kWideBits {BFP_E} (lower.WIDE_BITS)"),
        *(Primitive(f"ShiftRoundSat<{wi}, {wo}>, {what}", f"v >> s rounded to nearest even, or v << -s; saturated "
                    f"to {wo} bits", top, v_srs(wi, wo, top),
                    model={"lut": srs_luts(wi, wo, 63, wo), "ff": wo + 1, "dsp": 0},
                    model_src=f"bfp network resmodel.srs_luts({wi}, {wo}, 63, {wo})",
                    widths=f"ConvMac ({where}): ap_int<{wi}> v, exp_wide_t s (12 bits), ap_int<{wo}> out")
          for (wi, wo), what, top, where in ((SRS_OUT, "a lane's output stage", "srs_out",
                                              "the write path, kPz lanes: ap_int<acc_bits> to a mantissa"),
                                             (SRS_BANK, "a bank's patch rounding", "srs_bank",
                                              "kPc banks: an element's kElemBits mantissa at the patch exponent"))),
    ]


# ------------------------------------------------------------------------- yosys

def yosys_version():
    out = subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=True).stdout
    return out.split("(")[0].strip()


def synth(prim: Primitive, family: str, extra: str = "") -> dict:
    """yosys's cell counts of one primitive: {"lut", "carry", "ff", "dsp", "muxf", "bram", "cells"}."""
    with tempfile.TemporaryDirectory(prefix="hlsnn-yosys-") as tmp:
        src = Path(tmp) / f"{prim.top}.v"
        src.write_text(prim.verilog)
        stat = Path(tmp) / "stat.json"
        opts = f"-family {family} -top {prim.top}" + (" -nodsp" if prim.nodsp else "") + (f" {extra}" if extra else "")
        script = f"read_verilog {src.name}; synth_xilinx {opts}; tee -q -o stat.json stat -json"
        r = subprocess.run(["yosys", "-q", "-p", script], cwd=tmp, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"yosys failed on {prim.top} ({opts}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        cells = json.loads(stat.read_text())["design"]["num_cells_by_type"]
    n = lambda pred: sum(v for k, v in cells.items() if pred(k))   # noqa: E731
    return {"lut": n(lambda k: re.fullmatch(r"LUT[1-6]|SRL.*|RAM(32|64)[MX].*", k) is not None),
            "carry": n(lambda k: k.startswith("CARRY")),
            "ff": n(lambda k: k.startswith("FD")),
            "dsp": n(lambda k: k.startswith("DSP48")),
            "muxf": n(lambda k: k.startswith("MUXF")),
            "bram": n(lambda k: k.startswith("RAMB")),
            "cells": {k: v for k, v in sorted(cells.items()) if k not in ("IBUF", "OBUF", "BUFG")}}


def simulate(prim: Primitive, vectors, cycles: int, outputs):
    """The module's outputs after ``cycles`` clock edges with each of ``vectors`` (input name ->
    int, held every cycle) applied, registers starting at 0: yosys's ``sat -seq`` as a simulator
    (every input set, so each call is an evaluation). A list of {output: int, two's complement
    read as signed}, one per vector; to check that the Verilog computes what the kernel does."""
    cmds = []
    for v in vectors:
        sets = " ".join(f"-set {k} {_const(val, prim, k)}" for k, val in v.items())
        cmds.append(f"sat -seq {cycles + 1} -set-init-zero {sets} -show {','.join(outputs)} {prim.top}")
    with tempfile.TemporaryDirectory(prefix="hlsnn-yosys-") as tmp:
        (Path(tmp) / f"{prim.top}.v").write_text(prim.verilog)
        r = subprocess.run(["yosys", "-p", f"read_verilog {prim.top}.v; proc; flatten; opt_clean; " + "; ".join(cmds)],
                           cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"yosys sat failed on {prim.top}:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    rows = re.findall(rf"^\s+{cycles + 1} \\(\w+)\s+\S+\s+\S+\s+([01]+)$", r.stdout, flags=re.M)
    out = []
    for i in range(0, len(rows), len(outputs)):
        got = {}
        for name, bits in rows[i:i + len(outputs)]:
            u = int(bits, 2)
            got[name] = u - (1 << len(bits)) if bits[0] == "1" else u
        out.append(got)
    if len(out) != len(vectors):
        raise RuntimeError(f"yosys sat on {prim.top}: {len(out)} results for {len(vectors)} vectors")
    return out


def _const(val, prim, name):
    """``val`` as a Verilog constant as wide as input ``name`` of ``prim`` (two's complement)."""
    m = re.search(rf"input\s+(?:signed\s+)?(?:\[(\d+):0\]\s+)?{name}\b", prim.verilog)
    width = int(m.group(1)) + 1 if m and m.group(1) else 1
    return f"{width}'h{val & ((1 << width) - 1):x}"


def carry_bits(y):
    """A yosys run's carry-chain bits: 4 a CARRY4, 8 a CARRY8 (``y["cells"]``)."""
    return 4 * y["cells"].get("CARRY4", 0) + 8 * y["cells"].get("CARRY8", 0)


def within_margin(model_lut, runs, finn_lut, lut_margin):
    """The acceptance rule (module docstring) of a model LUT figure against yosys's ``runs``
    (:func:`synth` dicts) and FINN's figure (None where FINN has none):

    * ``model >= lut_margin * min(finn, min(yosys LUTs))`` where FINN has a figure: Vivado lies
      between the two references, so the model under-counts it by at most the sizer's free share
      (FINN's adder tree, ``(W + A)(2Q - 1)``, is above yosys's: then yosys's is the lower one);
    * ``model >= YOSYS_FLOOR * min(yosys LUTs)``;
    * ``model <= OVER * max(references)``, yosys's counted as its LUTs plus its carry-chain bits
      (Vivado feeds each carry bit's S input from its slice's LUT, UG474; yosys feeds some from
      a wire and counts no LUT: the packed pair's 17-bit increment is 1 LUT in yosys xc7).
    """
    upper = [y["lut"] + carry_bits(y) for y in runs] + ([finn_lut] if finn_lut else [])
    low = min(y["lut"] for y in runs)
    return ((finn_lut is None or model_lut >= lut_margin * min(finn_lut, low))
            and model_lut >= YOSYS_FLOOR * low and model_lut <= OVER * max(upper))


def measure(prims=None, runs=RUNS, log=None):
    """Every primitive synthesized in every run: a list of row dicts."""
    rows = []
    for p in prims or primitives():
        row = {"name": p.name, "what": p.what, "top": p.top, "widths": p.widths, "model": p.model,
               "model_src": p.model_src, "finn": p.finn, "yosys": {}}
        for col, fam, extra in runs:
            row["yosys"][col] = synth(p, fam, extra)
            if log:
                y = row["yosys"][col]
                log(f"  {p.top:10s} {col:9s} LUT {y['lut']:5d}  CARRY {y['carry']:3d}  FF {y['ff']:4d}  DSP {y['dsp']}")
        rows.append(row)
    return rows


def _f(v):
    return "—" if v is None else f"{v:,}"


def _ratio(a, b):
    return "—" if not a or not b else f"{a / b:.2f}"


def markdown(rows, version):
    """The table docs/models.md holds (between :data:`BEGIN` and :data:`END`)."""
    from hlsnn.resources import MARGINS
    cols = [c for c, _, _ in RUNS]
    out = [f"Synthesized with {version} (`synth_xilinx -family xc7` / `-family xcup`; the LUT product with "
           "`-nodsp`; `xc7 abc9` adds `-abc9`). yosys LUTs are LUT1-LUT6 cells (MUXF7/F8 not counted); "
           "CARRY counts carry cells (yosys 0.23 builds CARRY4 for xcup too). Ratios are the model's LUTs over the reference's. "
           f"Accepted (`within_margin`): model ≥ {MARGINS['lut']:.2f} × the lower of FINN's and yosys's figures "
           f"(where FINN has one), ≥ {YOSYS_FLOOR:g} × "
           f"yosys's smallest and ≤ {OVER:g} × the largest reference (yosys's: its LUTs plus its carry-chain bits).",
           "",
           "| primitive | model LUT / FF / DSP | " + " | ".join(f"yosys {c} LUT / CARRY / FF / DSP" for c in cols)
           + " | FINN LUT | model / yosys xc7 | model / FINN | accepted |",
           "|---|---|" + "---|" * len(cols) + "---|---|---|---|"]
    for r in rows:
        m = r["model"]
        ys = [r["yosys"][c] for c in cols]
        ok = within_margin(m["lut"], ys, r["finn"].get("lut"), MARGINS["lut"])
        out.append(f"| {r['name']} | {_f(m['lut'])} / {_f(m['ff'])} / {_f(m['dsp'])} | "
                   + " | ".join(f"{y['lut']:,} / {y['carry']} / {y['ff']} / {y['dsp']}" for y in ys)
                   + f" | {_f(r['finn'].get('lut'))} | {_ratio(m['lut'], ys[0]['lut'])} | "
                   f"{_ratio(m['lut'], r['finn'].get('lut'))} | {'yes' if ok else '**no**'} |")
    return "\n".join(out) + "\n"


def page_table(text):
    """The text between the markers of docs/models.md (None without them)."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        return None
    return text[i + len(BEGIN):j].strip("\n") + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="exit 1 when docs/models.md's table differs from yosys's")
    g.add_argument("--write", action="store_true", help="rewrite docs/models.md's table")
    g.add_argument("--markdown", action="store_true", help="print the Markdown table")
    g.add_argument("--verilog", metavar="DIR", help="write the Verilog modules to DIR and stop")
    ap.add_argument("--only", metavar="TOP", action="append", help="only this module (repeatable; not with --check/--write)")
    ap.add_argument("--json", metavar="OUT", help="write the figures as JSON to OUT")
    ap.add_argument("--from", dest="from_json", metavar="JSON",
                    help="--markdown / --write: the figures of an earlier --json run instead of synthesizing")
    args = ap.parse_args(argv)
    prims = primitives()
    if args.only:
        if args.check or args.write:
            ap.error("--only does not go with --check or --write (the page's table has every primitive)")
        prims = [p for p in prims if p.top in args.only]
    if args.verilog:
        d = Path(args.verilog)
        d.mkdir(parents=True, exist_ok=True)
        for p in prims:
            (d / f"{p.top}.v").write_text(p.verilog)
        print(f"{len(prims)} modules written to {d}")
        return 0
    if shutil.which("yosys") is None and not args.from_json:
        print("yosys is not on PATH (Debian/Ubuntu: apt-get install yosys)", file=sys.stderr)
        return 2
    log = (lambda s: print(s, file=sys.stderr)) if (args.markdown or args.check or args.write) else print
    if args.from_json:
        if args.check:
            ap.error("--check synthesizes: --from goes with --markdown or --write")
        saved = json.loads(Path(args.from_json).read_text())
        version, rows = saved["yosys"], saved["rows"]
        now = {p.top: p for p in prims}
        for r in rows:          # the model's figures as the code gives them now
            r.update(model=now[r["top"]].model, finn=now[r["top"]].finn, name=now[r["top"]].name)
    else:
        version = yosys_version()
        log(f"{version}: {len(prims)} primitives x {len(RUNS)} runs")
        rows = measure(prims, log=log)
    table = markdown(rows, version)
    if args.json:
        Path(args.json).write_text(json.dumps({"yosys": version, "rows": rows}, indent=1) + "\n")
    if args.markdown:
        print(table, end="")
    elif args.check or args.write:
        text = DOC.read_text()
        old = page_table(text)
        if old is None:
            print(f"{DOC.relative_to(ROOT)}: no table between the markers {BEGIN!r} and {END!r}")
            return 1
        if args.write:
            DOC.write_text(text.replace(old, table, 1) if old.strip() else
                           text.replace(BEGIN + "\n" + END, BEGIN + "\n" + table + END, 1))
            print(f"{DOC.relative_to(ROOT)}: table {'rewritten' if old != table else 'unchanged'}")
            return 0
        if old != table:
            print(f"MISMATCH: {DOC.relative_to(ROOT)}'s yosys table differs from what {version} gives now; "
                  "python benchmarks/yosys_primitives.py --write rewrites it")
            for a, b in zip(old.splitlines(), table.splitlines()):
                if a != b:
                    print(f"  page:  {a}\n  yosys: {b}")
            return 1
        print(f"{DOC.relative_to(ROOT)}'s yosys table reproduces")
    else:
        print()
        print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
