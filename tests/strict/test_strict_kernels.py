"""The kernels under the strict C-simulation (issue 30, docs/strict-csim.md): their wrappers
declare what their pragmas say, the shipped shift and sparse configs pass, and hazards planted
back into a rendered kernel fail with an error naming them."""
import re

import pytest

import hlsnn
from conftest import ROOT, accel_config, planted_csim

pytestmark = pytest.mark.strict_csim

TEMPLATES = sorted((ROOT / "hls" / "engines").glob("*/*.j2"))
SPARSE_CONFIGS = ROOT / "tests" / "engines" / "sparse_cluster" / "configs"


def _includes(p):
    """The template ``p`` includes ``{% include "name" %}`` resolved as the network kernels' loader
    does (:func:`hlsnn.engines.network.kernel.render`): the engine's own folder first, then
    shift_mac's (the shared templates); several includes: the one of each name, as a set's member."""
    names = re.findall(r'\{%-?\s*include\s+"([^"]+)"', p.read_text())
    return {p.parent / n if (p.parent / n).exists() else p.parents[1] / "shift_mac" / n for n in names}


def _checked_arrays(path):
    """The arrays a template declares through ``HLSNN_MEM`` (the strict C-simulation's checked
    memories); for a partial template that others ``{% include %}`` (the shared LayerNorm loops),
    also those every template including it declares, where its arrays live."""
    mem = r"HLSNN_MEM\((\w+), hlsnn::k\w+, "
    own = set(re.findall(mem, path.read_text()))
    including = [set(re.findall(mem, p.read_text())) for p in TEMPLATES
                 if p != path and path in _includes(p)]
    return own | set.intersection(*including) if including else own


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_internal_stream_and_dependence_array_goes_through_a_wrapper(path):
    text = path.read_text()
    pragmas = dict(re.findall(r"#pragma HLS STREAM variable = (\w+) depth = (\{\{.*?\}\}|\d+)", text))
    fifos = dict(re.findall(r"HLSNN_FIFO\((\w+), (\{\{.*?\}\}|\d+)\)", text))
    # the bounded run uses the STREAM pragma's depth (Vitis HLS's default 2 without one)
    assert {k: fifos[k] for k in pragmas} == pragmas
    assert all(fifos[k] == "2" for k in set(fifos) - set(pragmas))
    # internal streams are hlsnn::Fifo; only the top function's AXI-Stream ports stay hls::stream
    assert not re.findall(r"hls::stream<(?!\w+_word_t>)[^>]*>", text)
    declared = {name for line in text.splitlines() if line.lstrip().startswith("hlsnn::Fifo<") and "&" not in line
                for name in re.findall(r"(\w+)(?:\[[^\]]*\])*\s*[,;]", line.rsplit(">", 1)[1])}
    assert bool(declared) == bool(fifos)
    assert declared <= set(fifos)
    # every array the pipeline is told to ignore a dependence on is checked for it
    dependence = set(re.findall(r"#pragma HLS DEPENDENCE variable = (\w+) inter false", text))
    assert dependence <= _checked_arrays(path)


def test_sparse_accumulate_forwards_every_word_the_pipeline_has_not_written_back():
    from hlsnn.engines.sparse_cluster.spec import template_context
    from hlsnn.engines.sparse_cluster.spec import ACC_RAW_DISTANCE, MAC_ACC_READ_STAGE, MAC_ACC_WRITE_STAGE
    # the depth table (perf/sparse_cluster.py): place 1, ebuf read 1 -> acc read issued at stage 2;
    # acc read 2, product and add 2 -> the write at stage 6
    assert (MAC_ACC_READ_STAGE, MAC_ACC_WRITE_STAGE) == (1 + 1, 1 + 1 + 2 + 2)
    ctx = template_context(hlsnn.load_config(accel_config("sparse8_pynq-z2")))
    # a read sees a write 5 iterations later; the bypass covers the 4 before and one more (a
    # stage of margin), and the strict csim holds bank reads to 6
    assert ACC_RAW_DISTANCE == 5 and ctx["acc_forward"] == 5 and ctx["acc_distance"] == 6


def _compare(cfg, target):
    from hlsnn.compare import compare
    return compare(cfg, "csim", target_obj=target, n_random=2)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("name", ["shift8_pynq-z2", "shift8_zcu104", "sparse8_pynq-z2", "sparse20_zcu104"])
def test_every_shipped_shift_and_sparse_config_passes_the_strict_csim(name):
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(accel_config(name))
    rep = compare(cfg, "csim", n_random=2)
    assert rep["mismatches"] == 0 and not rep["register_mismatches"]
    st = rep["strict"]
    assert sorted(st) == ["banks", "fifos", "operators", "raw"]
    assert st["fifos"] and all(0 <= f["peak"] <= f["depth"] for f in st["fifos"])
    assert all(r["min_distance"] is None or r["min_distance"] >= r["required"] for r in st["raw"])
    assert all(b["sites"] <= b["ports"] for b in st["banks"])
    if cfg.engine == "sparse_cluster":     # ebuf (and ebuf1 at U = 2): MacLoop loads the next channel
        assert {"acc", "ebuf"} <= {r["array"] for r in st["raw"]} <= {"acc", "ebuf", "ebuf1"}
        # the output loops' acc reads and clears are checked (their DEPENDENCE inter false), one
        # read and one write a bank
        out = [b for b in st["banks"] if b["array"] == "acc" and b["loop"].startswith(("OutPixels", "PoolPixels"))]
        assert {b["loop"].split(".")[0] for b in out} == {"OutPixels", "PoolPixels"}
        assert all((b["reads"], b["writes"]) == (1, 1) for b in out)


@pytest.fixture
def sparse_small(tmp_path):
    # a fresh rendering per test: planted_csim edits the rendered file in place
    from hlsnn import codegen
    cfg = hlsnn.load_config(SPARSE_CONFIGS / "sp_u2.yaml")
    return cfg, codegen.render(cfg, tmp_path / "hls")


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("forward,seen", [(2, "[3-5]"), (4, "5")])
def test_sparse_accumulate_forwarding_short_of_its_margin_fails(sparse_small, forward, seen):
    # 2: the old two-word forwarding; 4: exactly the depth table's distance (5 of 5), no margin
    from hlsnn.errors import StrictCsimError
    cfg, rendered = sparse_small
    target = planted_csim(cfg, rendered, "sparse_cluster.cpp", "constexpr int kAccForward = 5;",
                          f"constexpr int kAccForward = {forward};")
    with pytest.raises(StrictCsimError, match=rf"array 'acc\[\d\]': word \d+ read {seen} iteration\(s\) after its "
                                              r"write in loop MacLoop\.\d; the pipeline needs 6"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_a_run_time_column_index_on_the_sparse_column_memories_fails(sparse_small):
    # multiplier l reads its column l + kx itself (the old MacLoop's form): a site per multiplier
    # whose bank is a run-time value, so a column memory gets several read sites
    from hlsnn.errors import StrictCsimError
    cfg, rendered = sparse_small
    target = planted_csim(cfg, rendered, "sparse_cluster.cpp", "                  e0 = col0[l + d];",
                          "                  e0 = t0[l] < n0[l + d] ? HLSNN_LOAD_AT(ebuf[b][l + d], st0[l + d] + t0[l], l)"
                          " : (ap_uint<16>)0;")
    with pytest.raises(StrictCsimError, match=r"loop MacLoop\.\d: bank 'ebuf\[\d\]\[\d+\]' has [2-9] read "
                                              r"site\(s\) and \d write site\(s\), more than its ports"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_a_pooled_bottom_row_read_where_the_top_row_was_cleared_fails(sparse_small):
    # PoolPixels reads a window's bottom row (word + 1) the iteration after its top row; planted:
    # the bottom read at the top row's words, which the iteration before cleared. DEPENDENCE
    # inter false would let that read see the word before the clear, so the strict run stops
    # (the planted read is 1 iteration after the write; acc's distance is 6)
    from hlsnn.errors import StrictCsimError
    cfg, rendered = sparse_small
    target = planted_csim(cfg, rendered, "sparse_cluster.cpp", "hrow = atop + 1;", "hrow = atop;")
    with pytest.raises(StrictCsimError, match=r"array 'acc\[\d\]': word \d+ read 1 iteration\(s\) after its "
                                              r"write in loop PoolPixels\.\d; the pipeline needs 6"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_a_pooled_window_read_in_two_branches_is_over_the_ports(sparse_small):
    # PoolBanks reads bank l once, at the top row's or the held window's bottom row's address
    # (a select before one read); planted: the two reads in branches of their own. In C-simulation
    # the same values (the branches never both hold), but each is a read site of every bank, and
    # a simple-dual-port bank has one read port: II 2
    from hlsnn.errors import StrictCsimError
    cfg, rendered = sparse_small
    from sparse_pool_edits import POOL_ONE_READ as old, POOL_READS_IN_BRANCHES as new
    target = planted_csim(cfg, rendered, "sparse_cluster.cpp", old, new)
    with pytest.raises(StrictCsimError, match=r"loop PoolPixels\.\d: bank 'acc\[\d\]' has 2 read site\(s\) and 2 "
                                              r"write site\(s\), more than its ports"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_a_second_reader_of_a_sparse_fifo_fails(sparse_small):
    from hlsnn.errors import StrictCsimError
    cfg, rendered = sparse_small
    # unit 1 is handed unit 0's job FIFO: job_q[0] has two readers
    target = planted_csim(cfg, rendered, "sparse_cluster.cpp", "HLSNN_PROCESS(Unit<1>(job_q[1],",
                          "HLSNN_PROCESS(Unit<1>(job_q[0],")
    with pytest.raises(StrictCsimError, match=r"FIFO 'job_q\[0\]' is read by two processes, Unit<[01]> and Unit<[01]>"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_fast_is_the_plain_library_without_a_strict_report(sparse_small, capsys):
    from hlsnn import cli
    from hlsnn import csim
    cfg, rendered = sparse_small
    before = csim.strict_default()
    assert cli.main(["compare", str(SPARSE_CONFIGS / "sp_u2.yaml"), "--target", "csim", "--cases", "0",
                     "--json"]) == 0
    strict = __import__("json").loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert sorted(strict["strict"]) == ["banks", "fifos", "operators", "raw"]
    try:
        assert cli.main(["compare", str(SPARSE_CONFIGS / "sp_u2.yaml"), "--target", "csim", "--cases", "0",
                         "--json", "--fast"]) == 0
        fast = __import__("json").loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert "strict" not in fast and fast["mismatches"] == 0
    finally:
        csim.set_strict_default(before)


SHIFT_CONFIGS = ROOT / "tests" / "engines" / "shift_mac" / "configs"


@pytest.mark.csim
def test_shift_weight_store_and_line_buffer_are_checked_stores():
    """shift_mac's two stores that its pipelined loops both write and read, the weight store and
    the convolution's line buffer, are checked like bfp's (perf/shift_mac.py RAW_DISTANCE: 2
    and 3): compare's cases (GEMMs, convolutions) pass, and in Steps each line-buffer bank has
    one read site (the window) and at most one write site (the next input row; a small run may
    not write the last bank, the static count in test_loop_operators.py counts it), within its
    two ports."""
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(SHIFT_CONFIGS / "s_tiny.yaml")
    assert cfg.params["conv"]
    rep = compare(cfg, "csim", n_random=1)
    assert rep["mismatches"] == 0
    raw = {r["array"]: r for r in rep["strict"]["raw"]}
    assert (raw["wstore"]["required"], raw["lbuf"]["required"]) == (2, 3)
    assert all(r["min_distance"] is None or r["min_distance"] >= r["required"] for r in raw.values())
    steps = [b for b in rep["strict"]["banks"] if b["loop"] == "Steps" and b["array"] == "lbuf"]
    assert steps and all(b["reads"] == 1 and b["writes"] <= 1 and b["sites"] <= b["ports"] for b in steps), steps
    assert sum(b["writes"] for b in steps) >= len(steps) - 1


@pytest.mark.slow   # compiles a kernel with a planted hazard
@pytest.mark.csim
def test_a_shift_weight_read_right_after_its_write_fails(tmp_path):
    """A tile's first pass writes each step into the weight store and later passes read it. Planted:
    the first pass writes only step 0 and reads the other steps, step 1 reading word 0 (written
    one iteration before; the pipeline needs 2). The strict run stops naming the array."""
    from hlsnn import codegen
    from hlsnn.errors import StrictCsimError
    cfg = hlsnn.load_config(SHIFT_CONFIGS / "s_tiny.yaml")
    rendered = codegen.render(cfg, tmp_path / "hls")
    src = rendered.dir / "shift_mac.cpp"
    text = src.read_text()
    old = "          if (live && first_pass) {"
    assert text.count(old) == 1
    src.write_text(text.replace(old, "          if (live && first_pass && k == 0) {"))
    target = planted_csim(cfg, rendered, "shift_mac.cpp", "st = HLSNN_LOAD(wstore, wofs + k);",
                          "st = HLSNN_LOAD(wstore, (ap_uint<32>)(k == 1 ? wofs : ap_uint<32>(wofs + k)));")
    with pytest.raises(StrictCsimError, match=r"array 'wstore': word \d+ read 1 iteration\(s\) after its write "
                                              r"in loop Steps; the pipeline needs 2"):
        _compare(cfg, target)


@pytest.mark.slow
@pytest.mark.csim
def test_a_kernel_with_more_than_256_loop_counters_counts_every_loop_the_same_on_every_load():
    # sparse20_zcu104 at weights_per_round 1: 20 units x their loops (CountWindows per unit at
    # U = 1) register 272 counters. The table had 256 slots and the ones after the 256th were
    # added into the last; the strict C-simulation's threads reach them in a different order on
    # each load of the library (each Accelerator loads its own copy), so one call's modelled
    # cycles changed from load to load (192,888 / 187,958 / 216,344 on the 64x56x56 layer).
    import numpy as np
    from hlsnn.config import load_config, read_yaml
    data = read_yaml(accel_config("sparse20_zcu104"))
    data["sparse_cluster"]["weights_per_round"] = 1
    data["name"] += "_u1"
    cfg = load_config(data, source="sparse20_zcu104 at weights_per_round 1", check_fit=False)
    rng = np.random.default_rng(7)
    # 64 x 80 = 4 x 5 tiles of 16 x 16: a tile for every one of the 20 units
    x = np.where(rng.random((4, 64, 80)) < 0.5, rng.integers(-128, 128, (4, 64, 80)), 0).astype(np.int8)
    w = np.where(rng.random((8, 4, 3, 3)) < 0.5, rng.integers(-128, 128, (8, 4, 3, 3)), 0).astype(np.int8)
    runs = []
    for _ in range(2):                  # two loads of the library, two calls on each
        with hlsnn.Accelerator(cfg, "csim") as acc:
            for _ in range(2):
                y = acc.kernel.conv2d(x, w, padding="same")
                kc = acc.kernel.last_cycles
                runs.append((np.asarray(y), kc.cycles, dict(kc.counts)))
    with hlsnn.Accelerator(cfg, "emu") as emu:
        ref = np.asarray(emu.kernel.conv2d(x, w, padding="same"))
    y0, cycles0, counts0 = runs[0]
    np.testing.assert_array_equal(y0, ref)
    # every unit's loops are counted under their own names (none lost to a shared slot) ...
    per_unit = {f"{loop}.{m}" for loop in ("CountWindows", "MacLoop", "OutPixels", "LoadFirst") for m in range(20)}
    assert per_unit <= set(counts0) and len(counts0) > 256
    # ... and the same call gives the same outputs, counts and cycles every time
    for y, cycles, counts in runs[1:]:
        np.testing.assert_array_equal(y, y0)
        assert (cycles, counts) == (cycles0, counts0)


def test_a_full_loop_counter_table_is_an_error_not_a_wrong_cycle_count():
    from hlsnn.csim import check_counter_table
    from hlsnn.errors import CsimError

    class Lib:                           # a loaded library whose table a counter found full
        def __init__(self, full):
            self.hlsnn_counter_full = lambda: full
    check_counter_table(Lib(0), "libx.so")
    check_counter_table(object(), "libold.so")          # a library built before the check
    with pytest.raises(CsimError, match=r"libx\.so: the kernel has more loop counters than the table has slots "
                                        r"\(kMaxCounters in hls/include/hlsnn/csim_counters\.h\)"):
        check_counter_table(Lib(1), "libx.so")
    # the header's table: room for the largest kernel's counters (272 above) with a margin
    text = (ROOT / "hls" / "include" / "hlsnn" / "csim_counters.h").read_text()
    assert int(re.search(r"const int kMaxCounters = (\d+);", text).group(1)) >= 512
