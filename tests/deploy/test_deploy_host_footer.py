"""``hlsnn deploy``'s footer on the layers outside the engines says what ``hlsnn compile`` says
of the same model: a residual ``Add`` (and the ReLU, pool and reshape after it) that the network
kernel runs on the fabric is not listed as a host layer."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from hlsnn.cli import main  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "qdq"


def _config(tmp_path):
    path = tmp_path / "res_pot.yaml"
    path.write_text(f"name: res_pot\nmodel: {DATA / 'res_pot.onnx'}\ndata: digits\nlayout: nchw\n"
                    "rounding: nearest_even\nformats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                    "assignments:\n  fixed8: {default: fixed8}\n")
    return path


def _footer_host_layers(text):
    """The layer names the deploy table lists under 'on the host' (None: it says nothing)."""
    m = re.search(r"^  on the host \(\d+ layer\(s\)[^\n]*\n((?:    \S+ \(\w+\): [^\n]*\n?)*)", text, re.M)
    if m is None:
        return [] if re.search(r"^  on the host: nothing", text, re.M) else None
    return [ln.split()[0] for ln in m.group(1).splitlines()]


@pytest.mark.slow
def test_deploy_footer_agrees_with_compile(tmp_path, capsys):
    """A residual QDQ file: the footer's host layers are compile's, its Add is on the fabric (about 5 CPU-s)."""
    from hlsnn.deploy.reports.evaluate import format_result
    from hlsnn.evaluation.run import deploy
    cfg = _config(tmp_path)
    assert main(["compile", str(cfg), "--assignment", "fixed8", "-o", str(tmp_path / "r.hlsnn"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == "network"
    on_host = [h.split(" (")[0] for h in info["host_before_layers"] + info["host_layers"]]
    res = json.loads(json.dumps(deploy(cfg, test_samples=4)))        # what --json prints
    e2e = res["assignments"]["fixed8"]["end_to_end"]
    assert e2e["host_layers"] == on_host and e2e["fabric_layers"]
    text = format_result(res)                                       # what the table prints
    assert _footer_host_layers(text) == on_host, text
    # the residual Add is on the fabric: the footer names it there, never under 'on the host'
    fabric = re.search(r"^  on the fabric, in the network kernel \((\d+) layer\(s\)[^)]*\): (.*)$", text, re.M)
    assert fabric is not None and "(Add)" in fabric.group(2), text


def _result(groups):
    """A deploy result (the JSON's keys the footer reads) with one host Add and a Softmax after the
    logits; ``groups``: per assignment, the layers its compiled model's network kernel runs on the
    fabric (None: no compiled model)."""
    hosts = [{"layer": "add1", "op": "Add", "precision": "float64 in numpy; the next accelerator layer requantizes"},
             {"layer": "softmax", "op": "Softmax", "precision": "float64 in numpy, after the last engine layer"}]
    A = {}
    for name, fab in groups.items():
        e2e = None if fab is None else {"board": "pynq-z2", "path": "network" if fab else "layers", "kernel_starts": 1,
                                        "kernel_us": 1.0, "host_us": 1.0, "end_to_end_us": 2.0,
                                        "host_layers": [h["layer"] for h in hosts if h["layer"] not in fab],
                                        "fabric_layers": list(fab)}
        A[name] = {"accuracy": 0.9, "images_per_s": 1.0, "layers": {"c1": name}, "end_to_end": e2e,
                   "run": {"path": "layer by layer"}}
    return {"model": "m", "target": "emu", "test_images": 1, "calibration_images": 1, "calibration_mode": "static",
            "float_accuracy": 0.9, "assignments": A, "host_layers": hosts}


def test_footer_splits_host_and_fabric_by_assignment():
    from hlsnn.deploy.reports.evaluate import format_result
    text = format_result(_result({"net": ["add1"]}))
    assert _footer_host_layers(text) == ["softmax"], text
    assert "  on the fabric, in the network kernel (1 layer(s), every assignment): add1 (Add)" in text
    # two assignments that differ: one group each, named
    text = format_result(_result({"net": ["add1"], "lbl": [], "dyn": None}))
    assert "  on the host (1 layer(s), in net):" in text and "  on the host (2 layer(s), in lbl, dyn):" in text
    assert "  on the fabric, in the network kernel (1 layer(s), net): add1 (Add)" in text
    # every layer on the host in every assignment: the footer as it was
    text = format_result(_result({"lbl": []}))
    assert _footer_host_layers(text) == ["add1", "softmax"] and "in every assignment" in text and "fabric" not in text
