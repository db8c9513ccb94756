"""hlsnn.perf.schedule: each loop's II derived from the C++ (libclang).

Planted bugs, one per class the scheduler bounds the II by: a memory read and written at run-time
addresses with no DEPENDENCE pragma, a long compare chain on a carried register, a conditional
m_axi access, a second access to a single-port bank. Each planted form is checked against its
fixed form: the II must differ, and the expected II is worked by hand from the rules (the
timing constants of hlsnn.perf.timing, the AXI figures of the module)."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("clang.cindex")

from hlsnn.engines import timing  # noqa: E402
from hlsnn.perf import schedule  # noqa: E402

HEAD = """
#define HLSNN_MEM(var, kind, distance)
namespace hlsnn { enum MemKind { kRam1p = 0, kRamS2p = 1, kRamT2p = 2, kRegs = 3 }; }
"""


def derive(tmp_path, body, name="k.cpp", **kw):
    f = tmp_path / name
    f.write_text(HEAD + body)
    rows = schedule.Kernel(f).schedule(**kw)
    return {r["loop"]: r for r in rows}


def test_runtime_address_read_and_write_without_pragma_is_a_recurrence(tmp_path):
    src = """
void k(const int idx[64], int n) {
  static int a[64];
%s
Hist:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
%s
    const int b = idx[i];
    a[b] = a[b] + 1;
  }
}
"""
    bug = derive(tmp_path, src % ("", ""))["Hist"]
    assert bug["ii"] == schedule.DEFAULT_DEPTH == 2 and bug["bound"] == "dependence"
    # the recurrence is the loop's depth where a depth constant names the loop
    assert derive(tmp_path, src % ("", ""), depths={"Hist": 8})["Hist"]["ii"] == 8
    # the pragma without a checked distance: the scheduler believes it, the note says unchecked
    unchecked = derive(tmp_path, src % ("", "#pragma HLS DEPENDENCE variable = a inter false"))["Hist"]
    assert unchecked["ii"] == 1 and any("unchecked" in n for n in unchecked["notes"])
    checked = derive(tmp_path, src % ("  HLSNN_MEM(a, hlsnn::kRamS2p, 3);",
                                      "#pragma HLS DEPENDENCE variable = a inter false"))["Hist"]
    assert checked["ii"] == 1 and any("distance 3 checked" in n for n in checked["notes"])
    # a[i] read and written at the loop counter's own index: no carried dependence
    own = derive(tmp_path, src.replace("a[b] = a[b] + 1;", "a[i] = a[i] + b;") % ("", ""))["Hist"]
    assert own["ii"] == 1


def _chain_ii(steps, bits=32, mhz=100.0, ps="zynq7"):
    # by hand: per step a magnitude compare (a LUT + the carry chain) and the select (a LUT)
    d = timing.FAMILY_DELAYS[ps]
    t = d["reg"] + steps * (d["lut"] + bits * d["carry_bit"] + d["lut"])
    return math.ceil(t / (1e3 / mhz * (1 - timing.UNCERTAINTY)))


@pytest.mark.parametrize("steps", [2, 32])
def test_compare_chain_on_a_carried_register(tmp_path, steps):
    src = f"""
void k(const int v[1024][32], int n, int *out) {{
#pragma HLS ARRAY_PARTITION variable = v dim = 2 complete
  int m = 0;
Max:
  for (int i = 0; i < n; ++i) {{
#pragma HLS PIPELINE II = 1
    for (int j = 0; j < {steps}; ++j) {{
#pragma HLS UNROLL
      m = v[i][j] > m ? v[i][j] : m;
    }}
  }}
  *out = m;
}}
"""
    r = derive(tmp_path, src)["Max"]
    assert r["ii"] == max(1, _chain_ii(steps))
    if steps == 32:
        assert r["ii"] == 10 and r["bound"] == "register"     # 0.75 + 32 x 2.06 ns = 66.7 ns of 7.3
    else:
        assert r["ii"] == 1                                   # 4.87 ns: closes


def test_conditional_m_axi_access_is_no_burst(tmp_path):
    src = """
void k(const long long *in, int n, long long buf[64]) {
#pragma HLS INTERFACE m_axi port = in
  long long w = 0;
Load:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    %s
    buf[i & 63] = w;
  }
}
"""
    from hlsnn.engines.network.perf import DDR_LATENCY
    bug = derive(tmp_path, src % "if ((i & 7) == 0) w = in[i >> 3];")["Load"]
    assert bug["bound"] == "m_axi" and bug["ii"] == math.ceil(DDR_LATENCY / schedule.AXI_OUTSTANDING) == 3
    assert any("no burst" in n for n in bug["notes"])
    fixed = derive(tmp_path, src % "w = in[i];")["Load"]
    assert fixed["ii"] == 1


@pytest.mark.parametrize("storage,ii", [("ram_1p", 2), ("ram_t2p", 1), ("ram_s2p", 2)])
def test_second_port_on_a_bank(tmp_path, storage, ii):
    src = f"""
void k(int n, int out[64]) {{
  static int b[64];
#pragma HLS BIND_STORAGE variable = b type = {storage} impl = bram
Two:
  for (int i = 0; i < n; ++i) {{
#pragma HLS PIPELINE II = 1
    out[i & 63] = b[i & 63] + b[(i + 7) & 63];
  }}
}}
"""
    r = derive(tmp_path, src)["Two"]
    assert r["ii"] == ii                       # two reads: one port (1p, s2p's one read port) -> 2
    one = derive(tmp_path, src.replace(" + b[(i + 7) & 63]", ""))["Two"]
    assert one["ii"] == 1


def test_partitioned_bank_spreads_the_copies(tmp_path):
    src = """
void k(int n, int out[64]) {
  static int b[8][64];
#pragma HLS ARRAY_PARTITION variable = b dim = 1 complete
#pragma HLS BIND_STORAGE variable = b type = ram_1p impl = bram
Spread:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    int s = 0;
    for (int j = 0; j < 8; ++j) {
#pragma HLS UNROLL
      s += b[%s][i & 63];
    }
    out[i & 63] = s;
  }
}
"""
    assert derive(tmp_path, src % "j")["Spread"]["ii"] == 1          # a bank per copy
    assert derive(tmp_path, src % "(j + i) & 7")["Spread"]["ii"] == 8  # a run-time bank: every copy may hit it
    # cyclic F: copy j in bank j % F, 8 / F reads a bank (ram_1p: one port; no storage: two)
    cyc = src.replace("dim = 1 complete", "dim = 1 cyclic factor = %d") % (2, "j")
    assert derive(tmp_path, cyc)["Spread"]["ii"] == 4
    assert derive(tmp_path, cyc.replace("type = ram_1p", "type = ram_t2p"))["Spread"]["ii"] == 2
    two = src.replace("dim = 1 complete", "dim = 1 cyclic factor = 4").replace("type = ram_1p", "type = ram_t2p")
    assert derive(tmp_path, two % "j")["Spread"]["ii"] == 1


def test_a_complete_reshape_makes_the_copies_one_word(tmp_path):
    """ARRAY_RESHAPE complete of a dimension (the shift_mac network kernel's weight ROMs with
    net_dsp): the 8 unrolled reads of one index of the other dimension are one read of a word, II 1
    on one port; the same reads unreshaped are 8 on one port, II 8; a cyclic reshape is not merged."""
    src = """
void k(int n, int out[64]) {
  static int b[8][64];
#pragma HLS ARRAY_RESHAPE variable = b dim = 1 %s
#pragma HLS BIND_STORAGE variable = b type = ram_1p impl = bram
Word:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    int s = 0;
    for (int j = 0; j < 8; ++j) {
#pragma HLS UNROLL
      s += b[j][i & 63];
    }
    out[i & 63] = s;
  }
}
"""
    assert derive(tmp_path, src % "complete")["Word"]["ii"] == 1
    assert derive(tmp_path, src % "cyclic factor = 2")["Word"]["ii"] == 8
    assert derive(tmp_path, src.replace("#pragma HLS ARRAY_RESHAPE variable = b dim = 1 %s\n", ""))["Word"]["ii"] == 8


@pytest.mark.parametrize("form", ["if (b < 32) a[b] = i;", "if (b < 32) { a[b] = i; }",
                                  "if (b >= 32) { } else a[b] = i;"])
def test_a_branch_that_is_one_expression_writes(tmp_path, form):
    """An if's branch written without braces is still one statement: ``if (c) a[b] = v;`` writes
    ``a`` (the GEMV sample store of the bfp kernel, ``if (xr < xw) xstore[c][xr] = word;``, was
    read as two reads of ``a`` and no write, so its carried dependence went unseen). By hand:
    ``a`` read and written at the run-time index ``b``, no pragma: II = DEFAULT_DEPTH = 2; one
    read and one write of the one bank (no storage: two ports)."""
    src = """
void k(const int idx[64], int n, int out[64]) {
  static int a[64];
Store:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    const int b = idx[i];
    %s
    out[i & 63] = a[(b + 1) & 63];
  }
}
"""
    r = derive(tmp_path, src % form)["Store"]
    assert r["ii"] == schedule.DEFAULT_DEPTH == 2 and r["bound"] == "dependence", r
    assert r["bounds"]["ports"] == 1
    assert any(n.startswith("a: read and written at run-time indices") for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("form", ["else if (j == 1) s += b[0][(i + j) & 63];",
                                  "else if (j == 1) { s += b[0][(i + j) & 63]; }",
                                  "else { if (j == 1) { s += b[0][(i + j) & 63]; } }"])
def test_else_if_conditions_its_branches(tmp_path, form):
    """``else if (c) X`` is ``else { if (c) X }``: X runs under c. Only the unrolled copy j = 1
    reads bank 0 of ``b`` (ram_1p, one port): one read, II 1; the other copies' conditions are
    false and they are dropped (counted without c, copies 1, 2, 3 read three words: II 3)."""
    src = """
void k(int n, int out[64]) {
  static int b[4][64];
#pragma HLS ARRAY_PARTITION variable = b dim = 1 complete
#pragma HLS BIND_STORAGE variable = b type = ram_1p impl = bram
Sel:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    int s = 0;
    for (int j = 0; j < 4; ++j) {
#pragma HLS UNROLL
      if (j == 0) s += 1;
      %s
    }
    out[i & 63] = s;
  }
}
"""
    r = derive(tmp_path, src % form)["Sel"]
    assert r["ii"] == 1 and r["bounds"]["ports"] == 1, r


def test_missing_libclang_is_one_line(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("clang"):
            raise ImportError("No module named 'clang'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)
    from hlsnn.errors import MissingDependency
    with pytest.raises(MissingDependency) as e:
        schedule.cindex()
    assert "pip install libclang" in str(e.value) and "\n" not in str(e.value)


CONFIGS = ["bfp12_ultra96v2-stats", "bfp16_pynq-z2", "bfp8_pynq-z2", "bfp8_ultra96v2", "bfp8_zcu104",
           "shift8_pynq-z2", "shift8_zcu104", "sparse20_zcu104", "sparse8_pynq-z2"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_every_pipelined_loop_of_every_shipped_config_has_a_derived_ii(name, tmp_path):
    import re
    from pathlib import Path
    from hlsnn.codegen import render
    from hlsnn.config import load_config
    from hlsnn.paths import CONFIGS_DIR
    cfg = load_config(str(CONFIGS_DIR / "accel" / f"{name}.yaml"))
    r = render(cfg, tmp_path / "hls")
    k = schedule.Kernel(r.dir / f"{cfg.engine}.cpp", name=cfg.engine)
    rows = k.schedule(depths=schedule.layer_depths(cfg), clock_mhz=cfg.clock_mhz, ps=cfg.board.ps)
    # one row per PIPELINE pragma (not "off") in the files the kernel's translation unit reads
    n = sum(len(re.findall(r"^\s*#pragma HLS PIPELINE(?!.*\boff\b)", Path(f).read_text(), re.M)) for f in k.files)
    # but the loops of functions the top does not call (schedule.reached: not synthesized)
    live = schedule.reached(k.funcs, k.pragmas)
    assert live
    dead = [lp for lp in k.loops if lp.pipeline is not None and lp.func.spelling not in live]
    assert len(rows) == n - len(dead) > 0
    for row in rows:
        assert row["ii"] >= max(1, row["target_ii"]) and row["bound"] in row["bounds"]
    # the cycle model takes them (the config's schedule, cached)
    assert {x["loop"] for x in schedule.config_schedule(cfg)} == {x["loop"] for x in rows}


SUM = """
void k(const int v[1024][32], int n, int *out) {{
#pragma HLS ARRAY_PARTITION variable = v dim = 2 complete
  int m = 0;
Sum:
  for (int i = 0; i < n; ++i) {{
#pragma HLS PIPELINE II = 1
{body}
  }}
  *out = m;
}}
"""


@pytest.mark.parametrize("steps", [2, 32])
def test_a_sum_on_a_carried_register_is_timed_as_written(tmp_path, steps):
    """Issue 83 (review finding 1): the model does not assume that Vitis reassociates a sum. ``m +=
    v[j]`` under a condition, unrolled, is a chain of adders and selects on ``m``'s loop-back (by
    hand: per term a 32-bit adder and the select, as the compare chain); the same terms summed
    first and added to ``m`` last are one adder, whatever the number of terms."""
    as_written = derive(tmp_path, SUM.format(body=f"""
    for (int j = 0; j < {steps}; ++j) {{
#pragma HLS UNROLL
      if (v[i][j] > 0) m += v[i][j];
    }}"""))["Sum"]
    assert as_written["ii"] == max(1, _chain_ii(steps))
    if steps == 32:
        assert as_written["ii"] == 10 and as_written["bound"] == "register"
        assert any(n.startswith("register m: 64 operators") for n in as_written["notes"]), as_written["notes"]
    last = derive(tmp_path, SUM.format(body=f"""
    int p = 0;
    for (int j = 0; j < {steps}; ++j) {{
#pragma HLS UNROLL
      if (v[i][j] > 0) p += v[i][j];
    }}
    m += p;"""))["Sum"]
    assert last["ii"] == 1


def test_a_temporary_stored_back_to_a_register_array_carries_its_chain(tmp_path):
    """A loop-local temporary read from an element of a completely partitioned array,
    read-modify-written and stored back is that element's loop-back (each unrolled copy its own
    element: two adders per element, not eight)."""
    src = """
void k(const int v[1024][8], int n, int out[4]) {
#pragma HLS ARRAY_PARTITION variable = v dim = 2 complete
  int acc[4];
#pragma HLS ARRAY_PARTITION variable = acc complete
  for (int l = 0; l < 4; ++l) acc[l] = 0;
Acc:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    for (int l = 0; l < 4; ++l) {
#pragma HLS UNROLL
      int a = acc[l];
      %s
      acc[l] = a;
    }
  }
  for (int l = 0; l < 4; ++l) out[l] = acc[l];
}
"""
    d = timing.FAMILY_DELAYS["zynq7"]
    budget = timing.budget_ns(300.0)        # 2.43 ns: two 32-bit adders (0.75 + 2 x 1.51 ns) do not close
    two = math.ceil((d["reg"] + 2 * (d["lut"] + 32 * d["carry_bit"])) / budget)
    assert two == 2
    r = derive(tmp_path, src % "a += v[i][2 * l]; a += v[i][2 * l + 1];", clock_mhz=300.0)["Acc"]
    assert (r["ii"], r["bound"]) == (two, "register") and any(n.startswith("register acc[") for n in r["notes"])
    # the two terms summed first, the element added last: one adder (0.75 + 1.51 ns)
    assert derive(tmp_path, src % "a += v[i][2 * l] + v[i][2 * l + 1];", clock_mhz=300.0)["Acc"]["ii"] == 1
    # an integer multiplication on it: no II 1 even at 100 MHz
    r = derive(tmp_path, src % "a = a * v[i][l] + 1;")["Acc"]
    assert r["ii"] > 1 and r["bound"] == "register"
    # the element itself read-modify-written in place
    r = derive(tmp_path, src.replace("acc[l] = a;", "acc[l] = a; acc[l] = acc[l] * a;") % "")["Acc"]
    assert r["ii"] > 1 and r["bound"] == "register"


def test_exclusive_branches_are_not_chained(tmp_path):
    """``if (c)`` and ``if (!c)`` (as ``if``/``else``) of the same condition never both run: an
    adder in each is one adder on the loop-back; two independent conditions chain both. By hand on
    a Zynq UltraScale+ at 300 MHz (2.43 ns): one adder and its select 0.40 + 0.83 + 0.35 = 1.58 ns,
    two 2.76 ns."""
    src = """
void k(const int v[1024], const bool c[1024], const bool e[1024], int n, int *out) {
  int m = 0;
Two:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    const int a = v[i];
    %s
  }
  *out = m;
}
"""
    kw = dict(clock_mhz=300.0, ps="zynqmp")
    assert derive(tmp_path, src % "if (c[i]) m += a; if (!c[i]) m += 7;", **kw)["Two"]["ii"] == 1
    assert derive(tmp_path, src % "if (c[i]) m += a; else m += 7;", **kw)["Two"]["ii"] == 1
    r = derive(tmp_path, src % "if (c[i]) m += a; if (e[i]) m += 7;", **kw)["Two"]
    assert (r["ii"], r["bound"]) == (2, "register")


def _multiply_ii(bits, narrow, mhz, ps="zynq7"):
    # by hand, the array multiplier of the module's rule: a LUT level of partial products, then
    # ceil(log2 narrow) carry chains of twice the width; then the + 1 (a bits-wide adder)
    d = timing.FAMILY_DELAYS[ps]
    t = (d["reg"] + d["lut"] + math.ceil(math.log2(narrow)) * (d["lut"] + 2 * bits * d["carry_bit"])
         + d["lut"] + bits * d["carry_bit"])
    return math.ceil(t / timing.budget_ns(mhz))


@pytest.mark.parametrize("typ", ["ap_int<32>", "int"])
def test_an_integer_multiplication_on_a_carried_scalar_is_not_ii_1(tmp_path, typ):
    """Issue 83 (review finding 2): ``s = s * in[k] + 1`` at 142.86 MHz. On an ap_int the ``*`` is a
    call of ``operator*``, which the chain must follow as the built-in one."""
    src = f"""
#include <ap_int.h>
void k(const {typ} in[256], int n, {typ} *out) {{
  {typ} s = 1;
Mul:
  for (int k = 0; k < n; ++k) {{
#pragma HLS PIPELINE II = 1
    s = s * in[k & 255] + 1;
  }}
  *out = s;
}}
"""
    r = derive(tmp_path, src, clock_mhz=142.86)["Mul"]
    assert r["ii"] == _multiply_ii(32, 32, 142.86) == 3 and r["bound"] == "register", r
    # by a constant: one carry chain of twice the width, and the + 1 (0.75 + 2.47 + 1.51 ns): II 1
    assert derive(tmp_path, src.replace("s * in[k & 255]", "s * 3"), clock_mhz=142.86)["Mul"]["ii"] == 1


MEMREAD = """
void k(const int tbl[256], int n, int *out) {
%s
  int s = 0;
Walk:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    %s;
  }
  *out = s;
}
"""


@pytest.mark.parametrize("expr", ["s = tbl[s & 255]", "s = s + tbl[s & 255]", "s = tbl[(s + i) & 255] ^ i"])
def test_a_memory_read_on_a_loop_back_takes_its_cycle(tmp_path, expr):
    """Issue 83 (review finding 3): a RAM read at an address computed from the register is a cycle of
    latency on its loop-back (the address is registered in the RAM): II 2 at 100 MHz, where the
    logic alone closes in one cycle."""
    r = derive(tmp_path, MEMREAD % ("", expr))["Walk"]
    assert (r["ii"], r["bound"]) == (2, "register"), r
    assert any("memory read" in n for n in r["notes"])
    # the read at the loop counter's address is not on the loop-back
    assert derive(tmp_path, MEMREAD % ("", "s = s + tbl[i & 255]"))["Walk"]["ii"] == 1
    # the table in registers (completely partitioned): a multiplexer, no read latency
    regs = derive(tmp_path, MEMREAD % ("#pragma HLS ARRAY_PARTITION variable = tbl complete", expr))["Walk"]
    assert regs["ii"] == 1


@pytest.mark.parametrize("name", ["sparse8_pynq-z2", pytest.param("sparse20_zcu104", marks=pytest.mark.slow)])
def test_sparse_output_loops_run_at_ii_1(name):
    """sparse_cluster's OutPixels and PoolPixels read every ``acc`` word once and clear it in
    the same iteration (no iteration reads a word another wrote: ``DEPENDENCE inter false``, its
    distance held by the strict csim), and PoolPixels reads a 2x2 window's two rows in two
    iterations, so each bank has at most one read and one write an iteration (a simple dual
    port's): II 1 by every bound. Until session 33 the template had no pragma on either loop
    (OutPixels II 6, the read-clear recurrence at the loop's depth) and read a window's both rows
    in one iteration (PoolPixels: 4 reads and 4 writes on ``acc[*]`` -> ports 4, and the depth 7)."""
    from hlsnn.config import load_config
    cfg = load_config(name, check_fit=False)
    rows = {r["loop"]: r for r in schedule.config_schedule(cfg)}
    for loop in ("OutPixels", "PoolPixels"):
        r = rows[loop]
        assert (r["ii"], r["bounds"]["ports"], r["bounds"]["dependence"]) == (1, 1, 1), r
        assert any(n.startswith("acc: DEPENDENCE inter false") and "checked by the strict csim" in n
                   for n in r["notes"]), r["notes"]


@pytest.mark.slow
def test_sparse_pooled_window_read_in_two_branches_is_ii_2(tmp_path):
    """The planted form of tests/strict's two-branch test: PoolBanks' top-row and bottom-row
    reads in branches of their own (never both true, the same values) are two read sites of
    each bank, and a simple-dual-port bank has one read port: ports II 2 (UG1448; the model's
    exclusive-branch rule)."""
    from hlsnn.codegen import render
    from hlsnn.config import load_config
    cfg = load_config("sparse8_pynq-z2", check_fit=False)
    f = render(cfg, tmp_path / "hls").dir / "sparse_cluster.cpp"
    from sparse_pool_edits import POOL_ONE_READ as old, POOL_READS_IN_BRANCHES as new
    text = f.read_text()
    assert text.count(old) == 1
    f.write_text(text.replace(old, new))
    rows = {r["loop"]: r for r in schedule.Kernel(f, name=cfg.engine).schedule(
        depths=schedule.layer_depths(cfg), clock_mhz=cfg.clock_mhz, ps=cfg.board.ps)}
    assert (rows["PoolPixels"]["ii"], rows["PoolPixels"]["bound"]) == (2, "ports")


POOL = """
#include <ap_int.h>
typedef ap_int<17> wide_t;
inline wide_t Twice(wide_t v) { return v << 1; }
void k(const ap_int<8> in[256], int n, wide_t *out) {
  wide_t pool[4];
#pragma HLS ARRAY_PARTITION variable = pool complete
  ap_uint<3> p = 0;  // a 3-bit counter: its own loop-back (a 3-bit adder) well within the clock
Pool:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    for (int j = 0; j < 4; ++j) {
#pragma HLS UNROLL
      const wide_t s = wide_t(in[i & 255]) << 2;
      const wide_t pooled = (p == 0) ? s : %s;
      pool[j] = pooled;
    }
    p = p + 1;
  }
  *out = pool[0];
}
"""


TOPPED = """
static int Slow(const int v[1024][32], int n) {
#pragma HLS ARRAY_PARTITION variable = v dim = 2 complete
  int m = 0;
SlowMax:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    for (int j = 0; j < 32; ++j) {
#pragma HLS UNROLL
      m = v[i][j] > m ? v[i][j] : m;
    }
  }
  return m;
}

static void Fast(const int *in, int *out, int n) {
Copy:
  for (int i = 0; i < n; ++i) {
#pragma HLS PIPELINE II = 1
    out[i] = in[i] + 1;
  }
}

void top(const int in[1024], int out[1024], const int v[1024][32], int n, int *m) {
#pragma HLS INTERFACE s_axilite port = return bundle = control
  Fast(in, out, n);
%s
}
"""


def _chain_ns(ops, ps="zynq7"):
    """By hand: a register's clock-to-out, then each operator of ``ops`` (``("lut", 1)`` a LUT
    level, ``("carry", n)`` an n-bit carry chain: a LUT and n carry bits)."""
    d = timing.FAMILY_DELAYS[ps]
    return d["reg"] + sum(d["lut"] if k == "lut" else d["lut"] + n * d["carry_bit"] for k, n in ops)


def test_a_construction_in_a_select_costs_nothing_a_call_a_lut_level(tmp_path):
    """A carried pool ``(p == 0) ? s : wide_t(pool[j] + s)``: the ``wide_t(...)`` around the sum
    (clang's implicit construction, a call without a name) and the select's operand conversions
    are wiring, so the loop-back is one 17-bit adder and one select; they had counted a LUT level
    each (5 operators, II 2 at 200 MHz). A call of a function of the kernel (``Twice``) is a LUT
    level: at 275 MHz (2.65 ns) the adder and the select fit (2.36 ns) and one more level does not."""
    ops = [("carry", 17), ("lut", 1)]
    budget = timing.budget_ns(275)
    assert _chain_ns(ops) <= budget < _chain_ns(ops + [("lut", 1)])
    r = derive(tmp_path, POOL % "wide_t(pool[j] + s)", clock_mhz=275)["Pool"]
    assert r["ii"] == 1, r
    r = derive(tmp_path, POOL % "Twice(pool[j] + s)", clock_mhz=275)["Pool"]
    assert r["ii"] == 2 and r["bound"] == "register", r


def test_only_functions_the_top_calls_are_scheduled(tmp_path):
    # a function no top calls is not synthesized: its slow loop sets no II (and gets no row)
    unc = derive(tmp_path, TOPPED % "")
    assert set(unc) == {"Copy"} and unc["Copy"]["ii"] == 1
    # called by the top, the same loop is derived, and its carried compare chain is above II 1
    called = derive(tmp_path, TOPPED % "  *m = Slow(v, n);")
    assert set(called) == {"Copy", "SlowMax"}
    assert called["SlowMax"]["ii"] == _chain_ii(32) > 1 and called["SlowMax"]["bound"] == "register"
    # through another function: reached too
    via = TOPPED.replace("out[i] = in[i] + 1;",
                         "out[i] = in[i] + 1;\n  }\n  if (n < 0) {\n    out[0] = Slow((const int (*)[32])in, n);")
    assert set(derive(tmp_path, via % "")) == {"Copy", "SlowMax"}
    # a source without a top: every function's loops
    assert set(derive(tmp_path, TOPPED.replace("#pragma HLS INTERFACE", "// ") % "")) == {"Copy", "SlowMax"}
