"""Tests of ``hlsnn sweep`` (hlsnn.sweep): the variants (Cartesian product, names, keys),
validation without the fit check, over-budget variants flagged and never compiled, invalid
variants listed with their error, C-simulation in parallel worker processes, the table, the
plot and the command line (exit 0 / 1 / 2, one ``hlsnn: error:`` line).

The C-simulated sweeps use copies of the tiny ``t2_tiny`` test config (1x1 tile, 2-bit
mantissas): two small kernels, compiled once per session into the shared $HLSNN_BUILD.
"""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hlsnn import sweep
from hlsnn.config import load_config
from hlsnn.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parent.parent
T2_TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
BFP16 = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
BFP_KEYS = ("rows, cols, mantissa_bits, exponent_bits, acc_bits, max_k, max_n, max_batch, weight_exponent, "
            "rounding, output_exponent, stats_k, rolling_len, underflow_bits, stream_bits")


@pytest.fixture(autouse=True)
def _no_extra_board_dirs(monkeypatch):
    monkeypatch.delenv("HLSNN_BOARDS", raising=False)


@pytest.fixture
def tiny(tmp_path):
    """A copy of t2_tiny.yaml in tmp_path (its board is found by name in configs/boards)."""
    dst = tmp_path / "t2_tiny.yaml"
    shutil.copy(T2_TINY, dst)
    return dst


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "hlsnn.cli", "sweep", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


# ------------------------------------------------------------------------------- variants

def test_variants_are_the_cartesian_product_named_v0_to_vn(tiny):
    vs = sweep.variants(tiny, ["rows=1,2", "array.cols=1,2,3", "clock_mhz=100,150"])
    assert len(vs) == 12
    assert [v["name"] for v in vs] == [f"t2_tiny_v{i}" for i in range(12)]
    assert [v["index"] for v in vs] == list(range(12))
    # the first key varies slowest
    assert [(v["values"]["rows"], v["values"]["cols"], v["values"]["clock_mhz"]) for v in vs][:4] == \
        [(1, 1, 100), (1, 1, 150), (1, 2, 100), (1, 2, 150)]
    assert list(vs[-1]["values"]) == ["rows", "cols", "clock_mhz"]
    d = vs[5]["data"]
    assert (d["name"], d["bfp_systolic"]["rows"], d["bfp_systolic"]["cols"], d["clock_mhz"]) == \
        ("t2_tiny_v5", 1, 3, 150)
    assert d["bfp_systolic"]["mantissa_bits"] == 2             # the rest of the file is kept
    assert Path(d["board"]).name == "pynq-z2.yaml"              # the board name resolved to its file
    cfg = load_config(d, check_fit=False)
    assert (cfg.name, cfg.board.name, cfg.clock_mhz, cfg.params["cols"]) == ("t2_tiny_v5", "pynq-z2", 150, 3)


def test_keys_with_section_prefix_and_dict_form(tiny):
    a = sweep.variants(tiny, {"bfp_systolic.rows": [1, 2]})
    b = sweep.variants(tiny, ["rows=1,2"])
    c = sweep.variants(tiny, "array.rows=1,2")
    assert [v["data"] for v in a] == [v["data"] for v in b] == [v["data"] for v in c]
    assert [v["values"] for v in a] == [{"rows": 1}, {"rows": 2}]


def test_board_relative_to_the_config_file_is_kept(tmp_path):
    (tmp_path / "boards").mkdir()
    board = yaml.safe_load((ROOT / "configs" / "boards" / "pynq-z2.yaml").read_text())
    board["name"] = "myboard"
    (tmp_path / "boards" / "myboard.yaml").write_text(yaml.safe_dump(board))
    (tmp_path / "accel").mkdir()
    data = yaml.safe_load(T2_TINY.read_text())
    data["board"] = "myboard"
    cfg_path = tmp_path / "accel" / "t2_tiny.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    rep = sweep.run_sweep(cfg_path, ["rows=1,2"], csim=False)
    assert rep["board"] == "myboard"
    assert all(r["valid"] for r in rep["variants"])


def test_values_are_yaml_scalars():
    got = sweep.parse_vary(["rounding=nearest_even,truncate", "x=8,1.5,true,null,1e3"])
    assert got == {"rounding": ["nearest_even", "truncate"], "x": [8, 1.5, True, None, 1000.0]}
    assert isinstance(got["x"][0], int) and isinstance(got["x"][2], bool)


@pytest.mark.parametrize("spec, needle", [
    (["rows"], "expected KEY=v1,v2,..."),
    (["=1,2"], "expected KEY=v1,v2,..."),
    (["rows=1,,2"], "empty value"),
    (["rows=[1"], "not a YAML scalar"),
    (["rows=[1, 2]"], "not a YAML scalar"),         # values are split at every comma first
    (["rows=1,1.0"], "listed twice"),
    (["rows=1", "rows=2"], "given twice"),
    (["rows=1", "array.rows=2"], "already varied"),
    (["foo=1,2"], "--vary foo: unknown key for engine bfp_systolic; allowed keys: clock_mhz, " + BFP_KEYS),
    (["shift_mac.rows=1"], "allowed keys: clock_mhz, rows"),
    (["bfp_systolic.foo=1"], "--vary bfp_systolic.foo: unknown key"),
    (["name=a,b"], "allowed keys: clock_mhz, rows"),
    (["board=kv260"], "allowed keys: clock_mhz, rows"),
    ([], "at least one --vary"),
    (["rows=1,2,3,4,5,6,7,8", "cols=1,2,3,4,5,6,7,8", "max_k=1,2,3,4,5,6,7,8,9"], "at most 512"),
])
def test_bad_vary_is_one_line_input_error(tiny, spec, needle):
    with pytest.raises(InputError) as exc:
        sweep.variants(tiny, spec)
    msg = str(exc.value)
    assert needle in msg
    assert "\n" not in msg


def test_base_config_errors_are_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nboard: pynq-z2\nengine: nope\n")
    with pytest.raises(ConfigError, match="engine = 'nope'"):
        sweep.variants(bad, ["rows=1"])
    bad.write_text("name: x\nboard: no-such-board\nengine: bfp_systolic\n")
    with pytest.raises(ConfigError, match="unknown board"):
        sweep.variants(bad, ["rows=1"])
    with pytest.raises(ConfigError, match="no such config file"):
        sweep.variants(tmp_path / "missing.yaml", ["rows=1"])


# ------------------------------------------------------------------------------- check_fit

def test_check_fit_false_skips_only_the_fit_check():
    data = yaml.safe_load(BFP16.read_text())
    data["bfp_systolic"].update(rows=64, cols=64)
    with pytest.raises(ConfigError, match="needs about 8205 DSP but board pynq-z2 has 220"):
        load_config(data)
    cfg = load_config(data, check_fit=False)
    assert cfg.estimates["resources"]["dsp"] == 8205         # 2 per tile + 13 of the rolling unit (no statistics unit: per-row exponents)
    data["bfp_systolic"]["acc_bits"] = 20                        # every other rule still holds
    with pytest.raises(ConfigError, match="acc_bits = 20: must be at least"):
        load_config(data, check_fit=False)


def test_every_engine_estimates_a_throughput():
    for path in sorted((ROOT / "configs" / "accel").glob("*.yaml")):
        cfg = load_config(path)
        est = cfg.estimates
        tp = est["throughput"]
        assert set(tp) == {"value", "unit", "what"} and isinstance(tp["value"], float) and tp["value"] > 0
        assert isinstance(tp["what"], str) and "\n" not in tp["what"]
        mhz = cfg.clock_mhz
        if cfg.engine == "bfp_systolic":
            assert (tp["value"], tp["unit"]) == (pytest.approx(est["peak_gmacs"]), "GMAC/s")
        elif cfg.engine == "shift_mac":
            mode = cfg.params["default_mode"]
            assert tp["value"] == pytest.approx(est["products_per_cycle"][mode] * mhz / 1e3)
            assert tp["unit"] == "G products/s" and mode in tp["what"]
        else:
            assert tp["value"] == pytest.approx(cfg.params["units"] * cfg.params["tile_w"] * mhz / 1e3)
            assert tp["unit"] == "G multiplies/s"


# ------------------------------------------------------------------------------- run_sweep

def test_over_budget_variants_are_flagged_and_not_compiled(tmp_path, monkeypatch):
    build = tmp_path / "build"
    monkeypatch.setenv("HLSNN_BUILD", str(build))
    rep = sweep.run_sweep(BFP16, ["rows=32,64", "cols=64"], csim=True, jobs=2)
    assert [r["name"] for r in rep["variants"]] == ["bfp16_pynq_z2_v0", "bfp16_pynq_z2_v1"]
    for r in rep["variants"]:
        assert r["valid"] and r["fits"] is False
        assert r["csim"] is None and r["csim_skipped"] == "over budget"
        assert r["utilization"]["dsp"] > 1
    dsp = next(o for o in rep["variants"][1]["over_budget"] if o["resource"] == "dsp")
    used = 64 * 64 * 2 + 13                               # two per tile and the rolling unit's 13
    assert dsp == {"resource": "dsp", "used": used, "available": 220, "over": used - 220}
    assert rep["summary"]["over_budget"] == 2 and rep["summary"]["csim_run"] == 0
    assert rep["status"] == 0 and rep["jobs"] == 0
    assert not build.exists()                          # nothing was rendered or compiled
    table = sweep.format_table(rep)
    assert "NO: DSP 8205/220 (+7985)" in table and "not compiled" in table
    # rows 32, 64 columns, by hand: a weight step is 2 * 32 lanes = 16 beats, so the stores hold
    # 16 groups. ybuf: 64 x 4 = 256 banks of 16 * 1024 / 4 = 4096 x 48 bits (twelve 4K x 4
    # RAMB18 each = 6 BRAM36); xstore: 64 banks of 16 * 256 = 4096 x 64 bits (16 RAMB18 = 8)
    assert "bfp16_pynq_z2_v0: ybuf 1536 BRAM36, xstore 512 BRAM36" in table


def test_invalid_variant_is_listed_with_its_error(tiny):
    # mantissa_bits 8 needs acc_bits >= 2*8 - 1 + log2(16) = 19 > 8
    rep = sweep.run_sweep(tiny, ["mantissa_bits=2,8"], csim=False)
    ok, bad = rep["variants"]
    assert ok["valid"] and ok["fits"] and ok["error"] is None and ok["csim_skipped"] == "--no-csim"
    assert not bad["valid"] and bad["resources"] is None and bad["csim"] is None
    assert bad["error"].startswith("bfp_systolic.acc_bits = 8: must be at least 2*mantissa_bits - 1")
    assert "\n" not in bad["error"]
    assert rep["summary"] == {"variants": 2, "invalid": 1, "over_budget": 0, "fit": 1, "csim_run": 0,
                              "csim_failed": 0, "mismatches": 0}
    table = sweep.format_table(rep)
    assert "t2_tiny_v1" in table and "invalid: bfp_systolic.acc_bits = 8" in table
    json.dumps(rep)                                     # the report is plain JSON


def test_a_mismatch_makes_status_1(tiny, monkeypatch):
    import hlsnn.compare

    def fake_compare(cfg, target, *, seed=0, n_random=8, **kw):
        bad = cfg.params["rows"] == 2
        return {"cases": 3, "outputs": 10, "mismatches": 4 if bad else 0, "first_mismatch": None,
                "register_mismatches": [], "setup_s": 0.0, "run_s": 0.0}

    monkeypatch.setattr(hlsnn.compare, "compare", fake_compare)
    monkeypatch.setattr(sweep, "_check_csim_tools", lambda: None)
    rep = sweep.run_sweep(tiny, ["rows=1,2"], jobs=1)
    assert rep["status"] == 1
    assert [r["csim"]["mismatches"] for r in rep["variants"]] == [0, 4]
    assert rep["summary"]["csim_failed"] == 1
    assert "MISMATCH: 4 mismatches" in sweep.format_table(rep)


@pytest.mark.slow   # two variant libraries no other test uses (two g++ runs, ~25 CPU-s); the quick
@pytest.mark.csim   # suite covers the csim report path with a stand-in compare (test_a_mismatch_makes_status_1)
def test_csim_runs_in_parallel_with_no_mismatches(tiny):
    lines = []
    rep = sweep.run_sweep(tiny, ["rows=1,2"], jobs=2, cases=2, progress=lines.append)
    assert rep["jobs"] == 2 and rep["status"] == 0
    for r in rep["variants"]:
        c = r["csim"]
        assert c["mismatches"] == 0 and c["register_mismatches"] == [] and c["cases"] >= 10
        assert c["time_s"] > 0 and c["setup_s"] >= 0
    assert lines[0].startswith("csim: 2 variant(s) on 2 worker process(es)")
    assert sorted(line.split(":")[0].strip() for line in lines[1:]) == ["t2_tiny_v0", "t2_tiny_v1"]
    assert "ok: 0 mismatches" in sweep.format_table(rep)


# ------------------------------------------------------------------------------- plot

@pytest.mark.skipif(not HAVE_MPL, reason="matplotlib is not installed")
def test_plot_marks_over_budget_and_invalid(tmp_path):
    rep = sweep.run_sweep(BFP16, ["rows=8,64", "acc_bits=20,48"], csim=False)
    assert rep["summary"] == {"variants": 4, "invalid": 2, "over_budget": 1, "fit": 1, "csim_run": 0,
                              "csim_failed": 0, "mismatches": 0}
    (tmp_path / "sub").mkdir()                      # --out makes no folders outside build/ and overlays/
    out = sweep.plot_sweep(rep, tmp_path / "sub" / "s.png")
    assert Path(out).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_output_must_be_an_image_file(tmp_path):
    with pytest.raises(InputError, match="must end in .png"):
        sweep.check_out(tmp_path / "s.txt")


# ------------------------------------------------------------------------------- command line

@pytest.mark.slow   # the two variant libraries of test_csim_runs_in_parallel_with_no_mismatches (slow too);
@pytest.mark.csim   # quick: the command's table in test_cli_json, the plot in test_plot_marks_over_budget_and_invalid,
#                     the csim column in test_a_mismatch_makes_status_1
def test_cli_prints_table_and_writes_plot(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))      # the default --out goes under the build root
    p = run_cli(tiny, "--vary", "rows=1,2", "--jobs", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "variant" in out and "DSP%" in out and "GMAC/s" in out and "fits?" in out
    for name in ("t2_tiny_v0", "t2_tiny_v1"):
        assert any(line.startswith(name) and "ok: 0 mismatches" in line for line in out.splitlines())
    if HAVE_MPL:
        png = tmp_path / "build" / "t2_tiny_sweep.png"                # under build/, named in the output
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"wrote {png}" in out


def test_cli_json(tiny, tmp_path):
    p = run_cli(tiny, "--vary", "rows=1,2", "--vary", "mantissa_bits=2,8", "--no-csim", "--no-plot", "--json",
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["keys"] == ["rows", "mantissa_bits"] and rep["vary"] == {"rows": [1, 2], "mantissa_bits": [2, 8]}
    assert (rep["engine"], rep["board"], rep["csim"], rep["status"], rep["out"]) == \
        ("bfp_systolic", "pynq-z2", False, 0, None)
    assert rep["throughput_unit"] == "GMAC/s"
    assert len(rep["variants"]) == 4 and rep["summary"]["invalid"] == 2
    v = rep["variants"][0]
    assert set(v["utilization"]) == {"dsp", "bram36", "uram", "lut", "ff"} and v["throughput"]["unit"] == "GMAC/s"
    assert {b["name"] for b in v["buffers"]} >= {"xstore", "ybuf", "wstore", "acc"} and v["multipliers"][0]["name"] == "w*x"
    table = sweep.format_table(rep)
    assert "block memory by buffer" in table and "t2_tiny_v0: no block memory" in table, table  # 16-deep: LUTRAM
    assert "URAM%" not in table                           # the PYNQ-Z2 has no URAM
    assert v["fits"] is True and v["csim"] is None
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("args", [["--vary", "rows"], ["--vary", "nope=1,2"], [],
                                  ["--vary", "rows=1", "--jobs", "0"], ["--vary", "rows=1", "--out", "x.txt"]])
def test_cli_user_errors_exit_2_with_one_line(tiny, tmp_path, args):
    p = run_cli(tiny, *args, "--no-csim", cwd=tmp_path)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hlsnn: error: ")
    if "nope=1,2" in args:
        assert "nope" in lines[0] and "allowed keys: clock_mhz, rows" in lines[0]
