"""The strict C-simulation's runtime (hlsnn/csim_strict.h) on planted hazards: each one, built
into a small program (scenarios.cpp), fails with an error that names the FIFO, array or bank;
the same program passes where the hazard is absent, and the fast build (hls::stream, plain
arrays, sequential calls) does not see the hazards at all."""
import json
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.csim

SCENARIOS = ROOT / "tests" / "strict" / "scenarios.cpp"


def _build(tmp_path_factory, strict):
    from hlsnn import csim
    exe = tmp_path_factory.mktemp("strict") / ("strict" if strict else "fast")
    argv = [csim.compiler(), "-std=c++14", "-O1", "-Wall", "-Wno-unknown-pragmas",
            *(["-DHLSNN_STRICT_CSIM", "-pthread"] if strict else []),
            f"-I{ROOT / 'hls' / 'include'}", f"-isystem{csim.ap_types_dir()}", str(SCENARIOS), "-o", str(exe)]
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


@pytest.fixture(scope="module")
def strict_exe(tmp_path_factory):
    return _build(tmp_path_factory, True)


@pytest.fixture(scope="module")
def fast_exe(tmp_path_factory):
    return _build(tmp_path_factory, False)


def run(exe, *args):
    r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    status, _, rest = r.stdout.strip().partition(" ")
    if status == "ok":
        value, _, report = rest.partition(" ")
        return int(value), json.loads(report)
    assert status == "error", r.stdout
    return None, rest


def test_a_bounded_fifo_passes_a_stream_and_reports_its_peak(strict_exe):
    value, rep = run(strict_exe, "pipe", 1)           # depth 1: the processes run concurrently
    assert value == sum(range(100))
    assert {"name": "a", "depth": 1, "peak": 1} in rep["fifos"]


def test_a_fifo_too_shallow_for_its_occupancy_deadlocks_and_is_named(strict_exe, fast_exe):
    # the producer writes 8 words into a before any into b; the consumer reads b first
    _, msg = run(strict_exe, "pairs", 2)
    assert msg.startswith("deadlock") and "'a' (depth 2)" in msg and "'b'" in msg
    assert "ProduceTwo waits to write full 'a'" in msg and "ConsumePairs waits to read empty 'b'" in msg
    value, rep = run(strict_exe, "pairs", 8)          # deep enough: passes, and the peak says why
    assert value == 2 * sum(range(8)) and {"name": "a", "depth": 8, "peak": 8} in rep["fifos"]
    assert run(fast_exe, "pairs", 2)[0] == 2 * sum(range(8))     # the sequential csim never sees it


def test_a_second_reader_of_a_fifo_is_an_error(strict_exe):
    _, msg = run(strict_exe, "second_reader", 16)
    assert "FIFO 'a' is read by two processes" in msg and "Consume" in msg and "Consume#2" in msg


def test_reading_an_empty_fifo_after_its_producer_finished_is_an_error(strict_exe, fast_exe):
    _, msg = run(strict_exe, "overread", 16)
    assert msg == "read of empty FIFO 'a' by Consume after its producer Produce finished"


def test_words_left_in_a_fifo_when_the_call_ends_are_an_error(strict_exe):
    _, msg = run(strict_exe, "leftover", 16)
    assert msg.startswith("FIFO 'a' holds 1 entries when the call ends")


@pytest.mark.parametrize("period,required,ok", [(1, 2, False), (2, 2, True), (2, 3, False), (4, 5, False),
                                                (5, 5, True)])
def test_a_read_closer_to_its_write_than_the_pipeline_allows_is_an_error(strict_exe, fast_exe, period, required,
                                                                         ok):
    # iteration i adds 1 to word i % period of both banks: the same word comes back every
    # `period` iterations; the pipeline makes a write visible `required` iterations later
    value, rep = run(strict_exe, f"acc_{period}", required)
    if ok:
        assert value == -(-64 // period)   # word 0: hit at i = 0, period, 2 period, ...
        assert rep["raw"] == [{"array": "acc", "min_distance": period, "required": required}]
    else:
        assert rep == (f"array 'acc[0]': word 0 read {period} iteration(s) after its write in loop AccLoop; "
                       f"the pipeline needs {required} (DEPENDENCE inter false: the read would see the old value)")
    assert run(fast_exe, f"acc_{period}", required)[0] == -(-64 // period)


def test_a_run_time_bank_index_counts_against_every_bank_it_reaches(strict_exe):
    value, rep = run(strict_exe, "acc_8", 1)    # constant bank per site: one read, one write per bank
    assert value is not None
    assert {(b["bank"], b["sites"], b["ports"]) for b in rep["banks"]} == {("[0]", 2, 2), ("[1]", 2, 2)}
    _, msg = run(strict_exe, "runtime_bank", 1)  # each site reaches both banks: 2 reads on 1 read port
    assert msg.startswith("loop AccLoop: bank 'acc[0]' has 2 read site(s) and 2 write site(s), more than its "
                          "ports (1 read, 1 write)")


def test_a_memory_a_loop_reads_and_writes_with_no_checked_distance_is_an_error(strict_exe, fast_exe):
    # the planted "unchecked DEPENDENCE false": HLSNN_MEM(acc, kind, 0) on an array the loop both
    # reads and writes (a pragma would let the pipeline reorder them, with nothing checking it)
    value, rep = run(strict_exe, "acc_8", 0)
    assert value is None
    assert rep == ("loop AccLoop: bank 'acc[0]' is read and written in the loop with no checked read-after-write "
                   "distance (HLSNN_MEM(acc, kind, 0)): declare #pragma HLS DEPENDENCE variable = acc inter false "
                   "and its distance")
    assert run(strict_exe, "acc_8", 8)[0] == 8      # the same loop with its distance declared (and held)
    assert run(fast_exe, "acc_8", 0)[0] == 8
