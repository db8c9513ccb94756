"""Per-loop results from Vitis HLS synthesis reports (hlsnn.build.reports.parse_loops) and the
resource comparison `hlsnn build --check` prints, against real-format fixtures
(tests/build/fixtures/csynth/PROVENANCE.md says which public reports they copy)."""
from pathlib import Path

from hlsnn.build import reports

FIX = Path(__file__).resolve().parent / "fixtures" / "csynth"


def by_name(loops):
    return {(lp["module"], lp["name"]): lp for lp in loops}


def test_2023_2_nested_and_outlined_loops():
    loops = reports.parse_loops(FIX / "v2023_2", top="krn_top")
    # the top's loops first (in report order, nesting kept), then the outlined pipeline's;
    # csynth.xml repeats the top's report and is not read twice
    assert [(lp["module"], lp["name"], lp["depth"]) for lp in loops] == [
        ("krn_top", "ROWS", 0), ("krn_top", "LOAD_W", 1), ("krn_top", "DRAIN", 1),
        ("krn_top_Pipeline_MAC", "MAC", 0)]
    d = by_name(loops)
    rows, load, mac = d["krn_top", "ROWS"], d["krn_top", "LOAD_W"], d["krn_top_Pipeline_MAC", "MAC"]
    assert rows["trip_count"] == {"min": 1, "max": 64} and rows["latency"] is None
    assert rows["achieved_ii"] is None and rows["target_ii"] is None and not rows["pipelined"]
    assert load["trip_count"] == 16 and load["latency"] == 32 and load["iteration_latency"] == 2
    assert mac["achieved_ii"] == 2 and mac["target_ii"] == 1 and mac["pipelined"] and mac["pipeline_depth"] == 8
    assert mac["latency"] == {"min": 8, "max": 1032} and mac["trip_count"] == {"min": 1, "max": 512}
    assert mac["issue"] == "II" and rows["issue"] is None


def test_2020_2_flat_loops():
    loops = reports.parse_loops(FIX / "v2020_2")
    assert [(lp["name"], lp["trip_count"], lp["latency"], lp["achieved_ii"], lp["target_ii"], lp["pipeline_depth"])
            for lp in loops] == [("fill", 256, 256, 1, 1, 1), ("rows_cols", 1024, 1027, 1, 1, 4)]
    assert all(lp["module"] == "gauss" and lp["pipelined"] for lp in loops)


def test_without_rpt_the_target_is_unknown(tmp_path):
    for f in (FIX / "v2023_2").glob("*.xml"):
        (tmp_path / f.name).write_text(f.read_text())
    mac = by_name(reports.parse_loops(tmp_path))["krn_top_Pipeline_MAC", "MAC"]
    assert mac["achieved_ii"] == 2 and mac["target_ii"] is None


def test_format_loops():
    text = reports.format_loops(reports.parse_loops(FIX / "v2023_2", top="krn_top"))
    lines = text.splitlines()
    assert lines[0].split() == ["module", "loop", "trips", "latency", "II", "target", "II", "pipelined", "issue"]
    mac = next(x for x in lines if " MAC " in x)
    assert mac.split() == ["krn_top_Pipeline_MAC", "MAC", "1..512", "8..1032", "2", "1", "yes", "II"]
    assert any(x.split()[:3] == ["krn_top", "LOAD_W", "16"] for x in lines)
    assert "    LOAD_W" in text, "inner loops are indented"


def test_compare_resources():
    top = reports.parse_csynth(FIX / "v2023_2" / "krn_top_csynth.xml")
    rows = reports.compare_resources(top["resources"], {"dsp": 6, "bram36": 5, "lut": 3290, "ff": 4012},
                                     top["available"])
    assert rows == [("DSP", 9, 6, 220), ("BRAM_18K", 12, 10, 280), ("URAM", 0, None, 0),
                    ("LUT", 6144, 3290, 53200), ("FF", 5120, 4012, 106400)]
    text = reports.format_resources(rows)
    assert text.splitlines()[2].split() == ["BRAM_18K", "12", "10", "280", "1.20"]
    assert text.splitlines()[3].split() == ["URAM", "0", "-", "0", "-"]
