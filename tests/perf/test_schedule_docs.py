"""hlsnn.perf.schedule against the II Vitis HLS's own documentation states for its examples.

Each case is an example of UG1399 (Vitis High-Level Synthesis User Guide), UG1448 (Vitis HLS
Messaging) or Xilinx's public Vitis-HLS-Introductory-Examples, written as the document writes it
(labels, pragmas, the loop body), with the II the document reports Vitis HLS achieving; the section
is cited at each case. None of the expected values comes from schedule.py's own rules: where the
document gives the II, the test asserts that number."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("clang.cindex")

from hlsnn.perf import schedule  # noqa: E402


def derive(tmp_path, body, **kw):
    f = tmp_path / "k.cpp"
    f.write_text(body)
    return {r["loop"]: r for r in schedule.Kernel(f).schedule(**kw)}


# UG1399, "Partitioning Arrays to Improve Pipelining" (2021.2 ... 2022.1; the same example in
# "Array Accesses and Performance", and Vitis-HLS-Introductory-Examples Interface/Memory/
# memory_bottleneck/original): three reads of mem per iteration on a RAM with two ports ("The
# resource limit of core:RAM:mem:p0 is 1 ... p1 is 1"): "Pipelining result: Target II: 1, Final II: 2".
SUM_LOOP = """
typedef int din_t;
typedef int dout_t;
#define N 128
dout_t array_mem_bottleneck(din_t mem[N]) {
  %s
  dout_t sum = 0;
  int i;
SUM_LOOP:
  for (i = 2; i < N; ++i) {
#pragma HLS PIPELINE II = 1
    sum += mem[i] + mem[i - 1] + mem[i - 2];
  }
  return sum;
}
"""


def test_ug1399_sum_loop_three_reads_of_a_dual_port_ram_is_ii_2(tmp_path):
    r = derive(tmp_path, SUM_LOOP % "")["SUM_LOOP"]
    assert r["ii"] == 2 and r["bound"] == "ports"


def test_ug1399_sum_loop_on_a_single_port_ram_reads_one_a_cycle(tmp_path):
    # UG1399 "Array Accesses and Performance": "If the RAM is specified as a single-port RAM ...
    # only one read (or one write) can be performed in each clock cycle": read mem[i], mem[i-1],
    # mem[i-2] in cycles 1, 2, 3 -> a new iteration every 3 cycles
    r = derive(tmp_path, SUM_LOOP % "#pragma HLS BIND_STORAGE variable = mem type = ram_1p")["SUM_LOOP"]
    assert r["ii"] == 3


def test_memory_bottleneck_resolved_reads_once_and_reaches_ii_1(tmp_path):
    # Vitis-HLS-Introductory-Examples Interface/Memory/memory_bottleneck (README: "modified to
    # achieve II=1 by removing redundant memory accesses"): modified/mem_bottleneck_resolved.cpp
    src = """
typedef int din_t;
typedef int dout_t;
#define N 128
dout_t mem_bottleneck_resolved(din_t mem[N]) {
  din_t tmp0, tmp1, tmp2;
  dout_t sum = 0;
  int i;
  tmp0 = mem[0];
  tmp1 = mem[1];
SUM_LOOP:
  for (i = 2; i < N; i++) {
#pragma HLS PIPELINE II = 1
    tmp2 = mem[i];
    sum += tmp2 + tmp1 + tmp0;
    tmp0 = tmp1;
    tmp1 = tmp2;
  }
  return sum;
}
"""
    assert derive(tmp_path, src)["SUM_LOOP"]["ii"] == 1


# UG1399, "Removing False Dependencies to Improve Loop Pipelining" (the same text and code in Kastner,
# Matai, Neuendorffer, "Parallel Programming for FPGAs", chapter "Prefix Sum and Histogram",
# github.com/KastnerRG/pp4fpgas examples/histogram_opt1.cpp): hist[old] written and hist[val] read in
# one iteration at data-dependent addresses; "Vitis HLS assumes that both of these accesses can access
# the same location. As a result, it schedules the read and write operations to the array in
# alternating cycles, resulting in a loop II of 2." They are in the else branch of old == val, so
# "within one iteration (an intra-dependence) a read operation after a write operation (RAW) can never
# occur and hence is a false dependence": the book's histogram_opt1.cpp declares "#pragma HLS
# DEPENDENCE variable=hist intra RAW false", and "we've achieved a design with a loop II of 1".
HISTOGRAM = """
#define INPUT_SIZE 1024
#define VALUE_SIZE 256
void histogram(int in[INPUT_SIZE], int hist[VALUE_SIZE]) {
  int acc = 0;
  int i, val;
  int old = in[0];
  %s
HIST:
  for (i = 0; i < INPUT_SIZE; i++) {
#pragma HLS PIPELINE II = 1
    val = in[i];
    if (old == val) {
      acc = acc + 1;
    } else {
      hist[old] = acc;
      acc = hist[val] + 1;
    }
    old = val;
  }
  hist[old] = acc;
}
"""


def test_ug1399_histogram_false_dependence_is_ii_2(tmp_path):
    r = derive(tmp_path, HISTOGRAM % "")["HIST"]
    assert r["ii"] == 2 and r["bound"] == "dependence"


@pytest.mark.parametrize("pragma", ["#pragma HLS DEPENDENCE variable = hist intra RAW false",
                                    "#pragma HLS DEPENDENCE variable = hist type = intra direction = RAW "
                                    "dependent = false"])
def test_ug1399_histogram_with_the_dependence_pragma_is_ii_1(tmp_path, pragma):
    r = derive(tmp_path, HISTOGRAM % pragma)["HIST"]
    assert r["ii"] == 1 and any("intra" in n for n in r["notes"])


@pytest.mark.parametrize("pragma", ["#pragma HLS DEPENDENCE variable = hist intra WAR false",
                                    "#pragma HLS DEPENDENCE variable = hist type = intra direction = WAW "
                                    "dependent = false",
                                    "#pragma HLS DEPENDENCE variable = hist intra true",
                                    "#pragma HLS DEPENDENCE variable = acc intra RAW false"])
def test_ug1399_histogram_with_a_pragma_on_another_dependence_stays_ii_2(tmp_path, pragma):
    # UG1399 "pragma HLS dependence": direction RAW/WAR/WAW names the one dependence the pragma
    # speaks of, "true" enforces it, variable names the array
    assert derive(tmp_path, HISTOGRAM % pragma)["HIST"]["ii"] == 2


# The plain histogram (pp4fpgas examples/histogramSW.cpp): hist[val] = hist[val] + 1 reads, then writes,
# "so we must alternate between reads and writes" (II 2). examples/histogram_dependence.cpp declares the
# precondition in[x] != in[x+1] as "#pragma HLS DEPENDENCE variable=hist inter RAW distance=2", and
# "II=1 can be achieved" (the figure's caption).
PLAIN = """
#define INPUT_SIZE 1024
#define VALUE_SIZE 256
void histogram(int in[INPUT_SIZE], int hist[VALUE_SIZE]) {
  %s
  int val;
HIST:
  for (int i = 0; i < INPUT_SIZE; i++) {
#pragma HLS PIPELINE
    val = in[i];
    hist[val] = hist[val] + 1;
  }
}
"""


def test_pp4fpgas_plain_histogram_is_ii_2(tmp_path):
    r = derive(tmp_path, PLAIN % "")["HIST"]
    assert r["ii"] == 2 and r["bound"] == "dependence"


@pytest.mark.parametrize("pragma", ["#pragma HLS DEPENDENCE variable=hist inter RAW distance=2",
                                    "#pragma HLS DEPENDENCE variable=hist inter RAW false",
                                    "#pragma HLS DEPENDENCE variable=hist type=inter dependent=false"])
def test_pp4fpgas_plain_histogram_with_the_distance_is_ii_1(tmp_path, pragma):
    assert derive(tmp_path, PLAIN % pragma)["HIST"]["ii"] == 1


@pytest.mark.parametrize("pragma", ["#pragma HLS DEPENDENCE variable=hist intra RAW false",
                                    "#pragma HLS DEPENDENCE variable=hist inter WAR false",
                                    "#pragma HLS DEPENDENCE variable=hist inter true"])
def test_pp4fpgas_plain_histogram_keeps_its_carried_raw(tmp_path, pragma):
    # its read comes before its write in the iteration: no intra RAW for "intra RAW false" to
    # remove; a WAR pragma or "true" leaves the carried RAW (UG1399 "pragma HLS dependence")
    assert derive(tmp_path, PLAIN % pragma)["HIST"]["ii"] == 2


def test_a_carried_distance_divides_the_recurrence(tmp_path):
    # UG1399 "pragma HLS dependence": distance, "the inter-iteration distance for array access",
    # with dependent true; UG1448 HLS 200-880 reports a carried constraint as (II, distance): the
    # recurrence of depth L at distance d needs II >= ceil(L / d)
    src = PLAIN % "#pragma HLS DEPENDENCE variable=hist inter RAW true distance=3"
    assert derive(tmp_path, src, depths={"HIST": 8})["HIST"]["ii"] == 3
    assert derive(tmp_path, PLAIN % "", depths={"HIST": 8})["HIST"]["ii"] == 8


# UG1448 "Performance Pragma - 4" (HLS 214-347): "the minimal achievable II of 2 determined by the
# number of accesses on stream 'c' (2 per iteration)"; UG1448 "Resource Constraints": "Each m_axi
# top pointer, streamed array, and hls::stream has one read and one write port."
def test_ug1448_a_stream_read_twice_per_iteration_is_ii_2(tmp_path):
    src = """
#include <hls_stream.h>
void top(int a[1000], int b[1000], hls::stream<int> &c) {
  int j;
  int b_buf[1000];
  int a_buf[1000];
  for (j = 0; j < 1000; j++) b_buf[j] = b[j];
LOOP:
  for (j = 0; j < 100; j++) {
#pragma HLS PIPELINE II = 1
    a_buf[j] = b_buf[j] + c.read() + c.read();
  }
  for (j = 0; j < 1000; j++) a[j] = a_buf[j];
}
"""
    r = derive(tmp_path, src)["LOOP"]
    assert r["ii"] == 2 and r["bound"] == "ports"
    assert derive(tmp_path, src.replace(" + c.read() + c.read()", " + c.read()"))["LOOP"]["ii"] == 1


def test_ug1448_sixteen_reads_of_a_stream_in_an_unrolled_loop_is_ii_16(tmp_path):
    # UG1448 "Stream Port Resource Constraint (HLS 200-2199)": 16 fifo reads of port in_15 in one
    # iteration, "Pipelining result : Target II = 1, Final II = 16"
    src = """
#include <hls_stream.h>
void pad(hls::stream<unsigned short> &in_15, unsigned short out[64][16]) {
PAD:
  for (int i = 0; i < 64; i++) {
#pragma HLS PIPELINE II = 1
    for (int k = 0; k < 16; k++) {
#pragma HLS UNROLL
      out[i][k] = in_15.read();
    }
  }
}
"""
    assert derive(tmp_path, src)["PAD"]["ii"] == 16


# UG1448 "Resource Constraints": "RAM_1P has one port, which can be used either for reading or
# for writing in a given cycle. RAM_2P has two ports, one supporting one read or write per cycle
# and one supporting one read per cycle. RAM_S2P has two ports, one for reading and one for
# writing. RAM_T2P has two ports, both supporting one operation [read or write] per cycle."
RAM = """
void k(const int in[64], int out[64]) {
  static int b[64];
#pragma HLS BIND_STORAGE variable = b type = %s impl = bram
PORTS:
  for (int i = 0; i < 64; ++i) {
#pragma HLS PIPELINE II = 1
    %s
  }
}
"""
# affine addresses of the loop's counter, so no carried dependence (b[i] read, then written)
TWO_READS = "out[i] = b[i] + b[63 - i];"
READ_WRITE = "out[i] = b[i]; b[i] = in[i];"
TWO_WRITES = "b[i] = in[i]; b[63 - i] = in[63 - i];"


@pytest.mark.parametrize("ram,body,ii", [
    ("ram_1p", TWO_READS, 2), ("ram_1p", READ_WRITE, 2), ("ram_1p", TWO_WRITES, 2),
    ("ram_2p", TWO_READS, 1), ("ram_2p", READ_WRITE, 1), ("ram_2p", TWO_WRITES, 2),
    ("ram_s2p", TWO_READS, 2), ("ram_s2p", READ_WRITE, 1), ("ram_s2p", TWO_WRITES, 2),
    ("ram_t2p", TWO_READS, 1), ("ram_t2p", READ_WRITE, 1), ("ram_t2p", TWO_WRITES, 1),
])
def test_ug1448_ports_of_each_ram_type(tmp_path, ram, body, ii):
    assert derive(tmp_path, RAM % (ram, body))["PORTS"]["ii"] == ii


def test_m_axi_reads_at_a_data_dependent_address_are_single_transactions(tmp_path):
    # UG1399 "Optimizing Burst Transfers" (preconditions of automatic burst inference: the
    # accesses are in increasing, consecutive order): in[idx[i]] cannot be a burst, each read is
    # its own transaction; UG1399 "pragma HLS interface": num_read_outstanding, "how many read
    # requests can be made to the AXI4 bus, without a response, before the design stalls",
    # default 16. A read of DDR_LATENCY cycles then gives a new iteration every
    # ceil(DDR_LATENCY / 16) cycles at best.
    from hlsnn.engines.network.perf import DDR_LATENCY
    src = """
void gather(const int *in, const int idx[256], int out[256]) {
#pragma HLS INTERFACE m_axi port = in
GATHER:
  for (int i = 0; i < 256; ++i) {
#pragma HLS PIPELINE II = 1
    out[i] = in[%s];
  }
}
"""
    r = derive(tmp_path, src % "idx[i]")["GATHER"]
    assert r["bound"] == "m_axi" and r["ii"] == math.ceil(DDR_LATENCY / 16)
    assert derive(tmp_path, src % "i")["GATHER"]["ii"] == 1        # consecutive: a burst


# UG1399 "pragma HLS array_partition", Example 1: "block partitioning to partition the 13-element
# array AB[13] into four arrays ... three of the new arrays have three elements each, and one array
# has four elements (AB[9:12])"; block: "smaller arrays from consecutive blocks of the original
# array". Two reads of one of those arrays on a single-port RAM take two cycles; reads of two of
# them, one each.
BLOCK = """
void k(int out[64]) {
  static int AB[13];
#pragma HLS ARRAY_PARTITION variable = AB type = block factor = 4
#pragma HLS BIND_STORAGE variable = AB type = ram_1p impl = bram
BLOCK:
  for (int i = 0; i < 64; ++i) {
#pragma HLS PIPELINE II = 1
    for (int j = 0; j < 2; ++j) {
#pragma HLS UNROLL
      out[i] += AB[%s];
    }
  }
}
"""


@pytest.mark.parametrize("index,ii", [("9 + 3 * j", 2),    # AB[9], AB[12]: both in AB[9:12]
                                      ("8 + j", 1),        # AB[8] (the third array), AB[9] (the fourth)
                                      ("3 * j", 1),        # AB[0], AB[3]: the first and the second
                                      ("1 + j", 2)])       # AB[1], AB[2]: both in the first
def test_ug1399_block_partition_puts_consecutive_elements_in_one_bank(tmp_path, index, ii):
    assert derive(tmp_path, BLOCK % index)["BLOCK"]["ii"] == ii


def test_ug1399_cyclic_partition_interleaves(tmp_path):
    # the same page, cyclic: "if factor=3 is used: element 0 is assigned to the first new array,
    # element 1 to the second, element 2 to the third, element 3 to the first again"
    src = BLOCK.replace("type = block factor = 4", "type = cyclic factor = 3")
    assert derive(tmp_path, src % "3 * j")["BLOCK"]["ii"] == 2      # AB[0], AB[3]: both in the first
    assert derive(tmp_path, src % "8 + j")["BLOCK"]["ii"] == 1      # AB[8] (third), AB[9] (first)


def test_a_down_counting_unrolled_loop_is_as_many_copies(tmp_path):
    # an unrolled loop is its trip count's copies whichever way it counts (UG1399 "pragma HLS
    # unroll": a fully unrolled loop is one copy of the body per iteration): four reads of one
    # single-port bank either way
    src = """
void k(int out[64]) {
  static int b[64];
#pragma HLS BIND_STORAGE variable = b type = ram_1p impl = bram
DOWN:
  for (int i = 0; i < 16; ++i) {
#pragma HLS PIPELINE II = 1
    int s = 0;
    for (%s) {
#pragma HLS UNROLL
      s += b[4 * i + j];
    }
    out[i] = s;
  }
}
"""
    assert derive(tmp_path, src % "int j = 0; j < 4; ++j")["DOWN"]["ii"] == 4
    assert derive(tmp_path, src % "int j = 3; j >= 0; --j")["DOWN"]["ii"] == 4
    assert derive(tmp_path, src % "int j = 4; j > 0; --j")["DOWN"]["ii"] == 4


# UG1393 "Eliminate Loop-Carried Dependencies" (2022.1; UG1700 2026.1 the same): "In the case of
# scalar dependencies, there is usually a feedback path with a computation scheduled over multiple
# clock cycles. Complex arithmetic operations such as multiplications, divisions, or modulus are
# often found on these feedback paths. The number of cycles in the feedback path directly limits the
# potential II". A division by a run-time divisor on a carried register: no II 1.
DIVIDE = """
void k(const int d[256], int n, int *out) {
  int q = 1 << 30;
DIV:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    %s;
  }
  *out = q;
}
"""


def _divider_ii(bits=32, mhz=100.0, ps="zynq7"):
    # by hand, the lower bound the model takes: a restoring array divider, one stage per quotient
    # bit, each a bits-wide subtract (a LUT + the carry chain) and the select of the remainder
    from hlsnn.engines import timing
    t = timing.FAMILY_DELAYS[ps]
    delay = t["reg"] + bits * (t["lut"] + bits * t["carry_bit"] + t["lut"])
    return math.ceil(delay / timing.budget_ns(mhz))


@pytest.mark.parametrize("expr", ["q = q / (d[i & 255] | 1)", "q = q % (d[i & 255] | 1) + 7",
                                  "q = (q + d[i & 255]) / n", "q /= (d[i & 255] | 1)"])
def test_a_division_by_a_run_time_value_on_a_carried_register_is_not_ii_1(tmp_path, expr):
    r = derive(tmp_path, DIVIDE % expr)["DIV"]
    assert r["bound"] == "register" and r["ii"] >= _divider_ii() > 1
    assert any("division" in n for n in r["notes"])


@pytest.mark.parametrize("expr", ["q = q / 4", "q = q % 64 + d[i & 255]", "q = (q >> 1) + d[i & 255]", "q /= 8"])
def test_a_division_by_a_power_of_two_is_a_shift(tmp_path, expr):
    # a constant power-of-two divisor is a shift and a mask, no divider
    assert derive(tmp_path, DIVIDE % expr)["DIV"]["ii"] == 1


def test_a_floating_point_accumulation_is_not_ii_1(tmp_path):
    # Xilinx AR# 62859 "Vivado HLS - How to achieve PIPELINE II=1 of floating point accumulation?":
    # sum += din[i] on a float: "Unable to enforce a carried constraint (II = 9) between 'fadd'
    # operation ('sum') and 'fadd' operation ('sum')", "the latency of fadd in this case is 11 clock
    # cycles". The model does not know Vitis's operator latencies: it gives a float add's
    # combinational path as a lower bound and says so
    src = """
float ybd(float din[1024]) {
  float sum = 0;
LOOP:
  for (int i = 0; i < 1024; i++) {
#pragma HLS PIPELINE II = 1
    sum += din[i];
  }
  return sum;
}
"""
    r = derive(tmp_path, src)["LOOP"]
    assert r["ii"] > 1 and r["bound"] == "register"
    assert any("floating-point" in n and "lower bound" in n for n in r["notes"])
    # the same accumulation on an integer closes at II 1 (one 32-bit adder)
    assert derive(tmp_path, src.replace("float", "int"))["LOOP"]["ii"] == 1


# UG1399 "M_AXI Bundles": "The m_axi interface has independent READ and WRITE channels, so a single
# interface can read and write simultaneously, though only at one location", the example's three
# pointers bundled into one adapter (bundle=BUS_A); UG1448 "Resource Constraints": "Each m_axi top
# pointer ... has one read and one write port"; UG1399 "MAXI" (2021.1): "Any ports without the
# bundle specified are grouped into the default interface gmem0".
VADD = """
void vadd(const unsigned int *in1, const unsigned int *in2, unsigned int *out, int size) {
#pragma HLS INTERFACE mode = m_axi bundle = %s port = out
#pragma HLS INTERFACE mode = m_axi bundle = %s port = in1
#pragma HLS INTERFACE mode = m_axi bundle = %s port = in2
VADD:
  for (int i = 0; i < size; ++i) {
#pragma HLS PIPELINE II = 1
    out[i] = in1[i] + in2[i];
  }
}
"""


def test_two_reads_through_one_m_axi_bundle_take_two_cycles(tmp_path):
    r = derive(tmp_path, VADD % ("BUS_A", "BUS_A", "BUS_A"))["VADD"]
    assert r["ii"] == 2 and r["bound"] == "ports"           # in1[i], in2[i]: one read channel
    assert derive(tmp_path, VADD % ("BUS_A", "BUS_B", "BUS_C"))["VADD"]["ii"] == 1
    assert derive(tmp_path, VADD % ("BUS_A", "BUS_B", "BUS_B"))["VADD"]["ii"] == 2
    # a read and a write on one bundle: its independent channels
    assert derive(tmp_path, VADD.replace(" + in2[i]", "") % ("BUS_A", "BUS_A", "BUS_A"))["VADD"]["ii"] == 1
    # no bundle named: both in the default one
    nob = VADD.replace("bundle = %s ", "")
    assert derive(tmp_path, nob)["VADD"]["ii"] == 2


def test_an_unrolled_m_axi_read_is_a_read_per_copy(tmp_path):
    src = """
void k(const int *in, int out[64][4]) {
#pragma HLS INTERFACE m_axi port = in bundle = gmem0
#pragma HLS ARRAY_PARTITION variable = out dim = 2 complete
WIDE:
  for (int i = 0; i < 64; ++i) {
#pragma HLS PIPELINE II = 1
    for (int j = 0; j < 4; ++j) {
#pragma HLS UNROLL
      out[i][j] = in[4 * i + j];
    }
  }
}
"""
    assert derive(tmp_path, src)["WIDE"]["ii"] == 4


def test_a_template_helper_unrolls_its_template_arguments_copies(tmp_path):
    # UG1399 "Function Pipelining" (2023.2): "similar to loops, when a function is pipelined, all
    # the loops in the function body and in the hierarchy below are automatically unrolled": the
    # loop of a helper the pipelined loop calls is unrolled into it, a bound that is a template
    # parameter taking the call's argument
    src = """
template <int N>
int Sum(const int b[64], int base) {
#pragma HLS INLINE
  int s = 0;
  for (int j = 0; j < N; ++j) {
#pragma HLS UNROLL
    s += b[base + j];
  }
  return s;
}
void k(int out[16]) {
  static int b[64];
#pragma HLS BIND_STORAGE variable = b type = ram_1p impl = bram
TPL:
  for (int i = 0; i < 16; ++i) {
#pragma HLS PIPELINE II = 1
    out[i] = Sum<%d>(b, 4 * i);
  }
}
"""
    assert derive(tmp_path, src % 4)["TPL"]["ii"] == 4
    assert derive(tmp_path, src % 1)["TPL"]["ii"] == 1
    # the same page: "If a loop has variable bounds and it cannot be unrolled then this will prevent
    # the function from being pipelined": a run-time bound the model cannot count, and says so
    r = derive(tmp_path, src.replace("int base) {", "int base, int n) {").replace("j < N", "j < n")
               .replace("4 * i)", "4 * i, i)") % 4)["TPL"]
    assert any("trip count not known" in n for n in r["notes"])


def test_a_reference_to_an_array_counts_against_the_array(tmp_path):
    # a C++ reference is another name of the same object: row[j] is buf[i & 7][j], the same RAM
    # bank (UG1448 "Resource Constraints": ram_1p, one access a cycle)
    src = """
void k(int out[64]) {
  static int buf[8][64];
#pragma HLS BIND_STORAGE variable = buf type = ram_1p impl = bram
ALIAS:
  for (int i = 0; i < 64; ++i) {
#pragma HLS PIPELINE II = 1
    int (&row)[64] = buf[i & 7];
    const int *p = buf[(i + 1) & 7];
    out[i] = row[i] + %s;
  }
}
"""
    assert derive(tmp_path, src % "buf[i & 7][(i + 3) & 63]")["ALIAS"]["ii"] == 2   # the array's own name
    assert derive(tmp_path, src % "row[(i + 3) & 63]")["ALIAS"]["ii"] == 2          # through the reference
    assert derive(tmp_path, src % "p[(i + 3) & 63]")["ALIAS"]["ii"] == 2            # through a pointer
