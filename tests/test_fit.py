"""Nothing that does not fit (issue 83): a kernel above 90% of any of its board's resources is
refused by ``hlsnn info`` / ``render`` / ``build`` (a layer config) and ``hlsnn compile`` / ``build
NAME.hlsnn`` (a network kernel) in one line naming the resource, its figure, the board's budget and
a shape that fits; ``--allow-overfit`` goes on, and then ``info`` / ``perf`` still say so."""
import json

import pytest
import yaml

from conftest import ROOT
from hlsnn.cli import main

pytestmark = pytest.mark.fit_budget      # compiled models held to the fit budget (tests/conftest.py)

ACCEL = ROOT / "configs" / "accel"
MODELS = ROOT / "configs" / "models"
#: the XC7Z020's resources (AMD DS190) and 90% of each: the budgets, by hand
Z2 = {"lut": 53200, "ff": 106400, "dsp": 220, "bram36": 140}
BUDGET = {k: 0.9 * v for k, v in Z2.items()}


def _variant(tmp_path, stem, section, key, value):
    raw = yaml.safe_load((ACCEL / f"{stem}.yaml").read_text())
    raw[section][key] = value
    raw["name"] = f"{raw['name']}_{key}{value}"
    path = tmp_path / f"{stem}_{key}{value}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _one_line_error(capsys):
    err = capsys.readouterr().err.strip()
    lines = [ln for ln in err.splitlines() if not ln.startswith("hlsnn: compiling")]   # a first use's C helper
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("hlsnn: error: "), err
    return lines[0]


# sparse8_pynq-z2 with 9 units: 9 x (16 accumulator banks + 2 FIFOs of 2 RAMB18) + ... = 127 BRAM36 by
# the model, above 126 (90% of 140); 8 units (the shipped config) fit. bfp8_pynq-z2 with 9 rows:
# 9 x 11 tiles x 2 DSPs + 13 = 211 DSPs, above 198 (90% of 220).
@pytest.mark.parametrize("stem,section,key,value,resource,budget,fix", [
    ("sparse8_pynq-z2", "sparse_cluster", "units", 9, "BRAM36", "budget 126", "sparse_cluster.units: 8 fits"),
    ("bfp8_pynq-z2", "bfp_systolic", "rows", 9, "DSP", "budget 198", "bfp_systolic.rows: 8 fits"),
])
@pytest.mark.parametrize("command", [["info"], ["render", "--out", "OUT"], ["build", "--dry-run"]])
def test_a_config_over_the_budget_is_refused_in_one_line(tmp_path, capsys, monkeypatch, stem, section, key, value,
                                                         resource, budget, fix, command):
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    path = _variant(tmp_path, stem, section, key, value)
    argv = [command[0], str(path)] + [str(tmp_path / "r") if a == "OUT" else a for a in command[1:]]
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert f" {resource} " in err and budget in err and ("of 140" in err or "of 220" in err), err
    assert fix in err and "--allow-overfit" in err and "pynq-z2" in err, err
    assert not (tmp_path / "r").exists()                    # render wrote nothing


def test_the_override_goes_on_and_info_still_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    path = _variant(tmp_path, "sparse8_pynq-z2", "sparse_cluster", "units", 9)
    assert main(["info", str(path), "--allow-overfit"]) == 0
    out = capsys.readouterr().out
    assert "OVER the budget (126)" in out and "note: BRAM36" in out
    assert main(["info", str(path), "--allow-overfit", "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)["fit"]
    assert fit["fits"] is False and [o["resource"] for o in fit["over"]] == ["bram36"]
    assert fit["over"][0]["budget"] == pytest.approx(BUDGET["bram36"])
    assert main(["render", str(path), "--out", str(tmp_path / "r"), "--allow-overfit"]) == 0
    assert (tmp_path / "r").is_dir()


def test_info_shows_ff_with_its_margin(capsys):
    assert main(["info", "sparse8_pynq-z2"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("ff "))
    assert "of   106400" in line and "margin" in line and "to the budget" in line, line
    assert main(["info", "sparse8_pynq-z2", "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    ff = js["estimates"]["resources"]["ff"]
    assert f"margin {BUDGET['ff'] - ff:,.0f} to the budget" in line
    assert js["fit"]["fits"] is True and ff <= BUDGET["ff"]


def test_sparse8_bypass_registers_by_hand():
    """The FFs that put sparse8_pynq-z2 at 92% of the XC7Z020's (issue 83): each of the 8 x 16
    multipliers' read-add-write bypass keeps 5 (address, sum) pairs; an address is a word of a
    16 x 16-word bank or -1, so 9 signed bits (was a 32-bit int), a sum 32: 128 x 5 x 41 FFs."""
    from hlsnn.config import load_config
    est = load_config(ACCEL / "sparse8_pynq-z2.yaml").estimates
    fwd = next(r for r in est["buffers"] if r["name"] == "fwd")
    assert fwd["ff"] == 8 * 16 * 5 * (9 + 32)
    assert est["resources"]["ff"] <= BUDGET["ff"]


def test_every_shipped_config_passes_info_without_the_override(capsys):
    for path in sorted(ACCEL.glob("*.yaml")):
        assert main(["info", str(path)]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------------- network kernels

@pytest.fixture(scope="module")
def mlp_cfg(tmp_path_factory):
    """digits_mlp in two-hot on shift8_pynq-z2 widened to 32 x 32 network lanes and banks: about 200k
    LUTs by the model, far above the PYNQ-Z2's 47,880 (90% of 53,200); the shipped 8 x 16 fits."""
    tmp = tmp_path_factory.mktemp("fit")
    raw = yaml.safe_load((ACCEL / "shift8_pynq-z2.yaml").read_text())
    raw["shift_mac"].update(net_lanes=32, net_banks=32)
    raw["name"] = "shift8_wide"
    (tmp / "wide.yaml").write_text(yaml.safe_dump(raw))
    dep = yaml.safe_load((MODELS / "digits_mlp.yaml").read_text())
    dep["model"] = str(MODELS / "digits_mlp.onnx")
    dep["formats"] = {"wide": {"type": "twohot", "accel": str(tmp / "wide.yaml")}}
    dep["assignments"] = {"wide": {"default": "wide"}}
    (tmp / "mlp.yaml").write_text(yaml.safe_dump(dep))
    return tmp / "mlp.yaml"


def test_compile_refuses_a_network_kernel_over_the_budget(mlp_cfg, tmp_path, capsys):
    out = tmp_path / "m.hlsnn"
    assert main(["compile", str(mlp_cfg), "--assignment", "wide", "-o", str(out), "--check-samples", "0"]) == 2
    err = _one_line_error(capsys)
    assert "does not fit pynq-z2" in err and " LUT " in err and "of 53,200" in err, err
    assert f"budget {BUDGET['lut']:,.0f}" in err, err
    assert "fits" in err and "--allow-overfit" in err, err        # a shape that fits, by name
    assert "net_lanes: " in err.split("--allow-overfit")[0], err
    assert not out.exists()
    from hlsnn.errors import InputError
    from hlsnn.network.build import compile_model
    with pytest.raises(InputError, match="does not fit pynq-z2: LUT"):       # the API the command wraps
        compile_model(mlp_cfg, "wide", out, check_samples=0)
    assert not out.exists()


def test_the_override_compiles_and_perf_still_says_so(mlp_cfg, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    out = tmp_path / "m.hlsnn"
    assert main(["compile", str(mlp_cfg), "--assignment", "wide", "-o", str(out), "--check-samples", "0",
                 "--allow-overfit"]) == 0
    assert out.is_file()
    capsys.readouterr()
    assert main(["perf", str(out)]) == 0
    assert "OVER the budget of 90% of the board: LUT" in capsys.readouterr().out
    assert main(["perf", str(out), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["kernel_resources"]
    assert r["fits"] is False and r["lut"] > BUDGET["lut"]
    # hlsnn build NAME.hlsnn refuses it the same way
    assert main(["build", str(out), "--dry-run", "--out", str(tmp_path / "ov")]) == 2
    assert "does not fit pynq-z2" in _one_line_error(capsys)


def test_a_network_kernel_that_fits_compiles_as_before(mlp_cfg, tmp_path):
    from hlsnn.network import fit
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    out = tmp_path / "t.hlsnn"
    compile_model(MODELS / "digits_mlp.yaml", "twohot", out, check_samples=0)   # the shipped 8 x 16
    r = fit.check_network(*artifact.read(out))
    assert r["over"] == [] and r["board"] == "pynq-z2" and r["resources"]["lut"] <= BUDGET["lut"]


def test_the_shift_mac_shape_named_fits_and_one_more_bank_would_not(mlp_cfg, tmp_path):
    """On a board too small for digits_mlp's two-hot kernel (the PYNQ-Z2 with 80% of its LUTs
    made the budget's 90%), the refusal names net_lanes / net_banks whose kernel is within the
    budget, and the next larger bank count of those lanes is not (the largest, as it says)."""
    import re
    from dataclasses import replace
    from hlsnn.network import fit
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    from hlsnn.resources import over_budget
    out = tmp_path / "t.hlsnn"
    compile_model(MODELS / "digits_mlp.yaml", "twohot", out, check_samples=0)
    net, cfg = fit.network_kernel(*artifact.read(out))
    lut = fit.network_resources(net, cfg.board.ps)["lut"]
    small = replace(cfg.board, resources={**cfg.board.resources, "lut": int(lut / 0.9 * 0.8)})
    fix = fit.network_fix(net, replace(cfg, board=small))
    m = re.fullmatch(r"net_lanes: (\d+), net_banks: (\d+) fits \(the largest lanes x banks that does\)", fix)
    assert m, fix
    pz, pc = int(m[1]), int(m[2])
    assert pz * pc < 8 * 16
    assert not over_budget(fit.network_resources(net, small.ps, (pz, pc)), small.resources)
    bigger = fit.network_resources(net, small.ps, (pz, pc + pz))
    assert bigger is None or over_budget(bigger, small.resources)
