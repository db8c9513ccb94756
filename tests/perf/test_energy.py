"""Energy per inference beside latency (issue 83): whole-board power x end-to-end time, as MLPerf
Tiny measures it, in ``hlsnn perf NAME.hlsnn`` (text and ``--json``), labelled an estimate."""
import json

import pytest

from conftest import ROOT
from hlsnn.cli import main

#: MLPerf Tiny v1.x PYNQ-Z2 entries: (energy uJ, latency ms) per inference, as published
MLPERF_Z2 = {"hls4ml RN08": (12266, 7.64), "FINN CNV": (2530, 1.51)}


@pytest.mark.parametrize("entry", MLPERF_Z2)
def test_board_power_x_time_reproduces_the_mlperf_entries(entry):
    """The PYNQ-Z2's power_w times each entry's latency gives its published energy within 3%
    (the board file states the range: 1.61 W and 1.68 W implied)."""
    from hlsnn.network.latency import energy
    uj, ms = MLPERF_Z2[entry]
    e = energy("pynq-z2", ms * 1e3, 1)
    assert e["uj_per_image"] == pytest.approx(uj, rel=0.03)
    assert "estimate" in e["basis"]


def test_every_shipped_board_has_a_power_figure_and_x86_sim_none():
    from hlsnn.config import load_board
    from hlsnn.network.latency import energy
    for p in sorted((ROOT / "configs" / "boards").glob("*.yaml")):
        b = load_board(p.stem)
        assert b.power_w and 0.5 < b.power_w < 50, p
        text = p.read_text()
        assert "power_w:" in text and ("Source" in text or "ASSUMPTION" in text), p   # its source, or said plainly
    assert energy("x86-sim", 100.0, 1) is None


def test_power_is_not_in_the_config_hash():
    """The board's power is a modelling figure: the configs' hashes (ID registers, compiled models,
    overlays) stay what they were."""
    from hlsnn.config import load_config
    cfg = load_config("bfp16_pynq-z2")
    assert "power_w" not in cfg.as_dict()["board"] and cfg.board.power_w == 1.65


def test_perf_reports_energy_per_image(tmp_path, capsys):
    from hlsnn.network.build import compile_model
    out = tmp_path / "m.hlsnn"
    compile_model(ROOT / "configs" / "models" / "digits_mlp.yaml", "twohot", out, check_samples=0)
    capsys.readouterr()
    assert main(["perf", str(out), "--json", "--batch", "4"]) == 0
    r = json.loads(capsys.readouterr().out)
    e = r["energy"]
    assert e["board_power_w"] == 1.65                      # pynq-z2's, from its board file
    assert e["uj_per_batch"] == pytest.approx(1.65 * r["end_to_end_us"])       # W x us = uJ
    assert e["uj_per_image"] == pytest.approx(1.65 * r["end_to_end_us"] / 4)
    assert main(["perf", str(out), "--batch", "4"]) == 0
    text = capsys.readouterr().out
    assert f"energy (estimate, board power x time): {e['uj_per_image']:,.0f} uJ per image" in text
    assert main(["perf", str(out), "--json", "--layer-by-layer"]) == 0        # the layer path too
    r = json.loads(capsys.readouterr().out)
    assert r["path"] == "layers" and r["energy"]["uj_per_image"] == pytest.approx(1.65 * r["end_to_end_us"])
    assert main(["perf", str(out), "--json", "--board", "x86-sim"]) == 0      # no board file: no figure
    assert json.loads(capsys.readouterr().out)["energy"] is None
