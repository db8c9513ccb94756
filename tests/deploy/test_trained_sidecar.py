"""hlsnn.deploy.importer.trained (issue 84): a model hlsnn.train exported is deployed with the settings its
sidecar says training evaluated with. A config field left ``auto`` takes training's value; a field,
a calibration setting or the rounding set otherwise is kept and named in one warning line (the
key, the config's value, training's). The sidecars here are written by hand, as the module's
docstring specifies them (no torch): the expected values are the sidecar's and the config's own."""
import json
import shutil
from pathlib import Path

import pytest

from hlsnn.cli import main
from hlsnn.deploy.importer import trained
from hlsnn.deploy.config import load_deploy_config
from hlsnn.errors import InputError

MODELS = Path(__file__).resolve().parents[2] / "configs" / "models"

POT = {"type": "pot", "delta": 0, "prune": 0.0, "weight_scale": "tensor", "weight_fit": "nearest", "weight_terms": 1,
       "bias_correction": "none", "input_terms": 1, "radix": "msb", "equalize": "none", "accel": "shift8_pynq-z2",
       "accel_params": {"exp_bits": 4, "act_bits": 8, "act_signed": True, "rounding": "nearest_even"}}
CAL = {"mode": "static", "samples": 128, "overflow_ratio": 0.0, "strided_stats": "all", "clip_stats": "off"}


def _setup(tmp_path, fmt="{type: pot, accel: shift8_pynq-z2}", calibration="{samples: 128, mode: static}",
           extra="", sidecar=None, name="f"):
    shutil.copy(MODELS / "digits_mlp.onnx", tmp_path / "m.onnx")
    side = {"layers": {}, "training": {"formats": {"f": POT}, "calibration": CAL, "rounding": "nearest_away"}}
    if sidecar is not None:
        side = sidecar
    if side is not False:
        (tmp_path / ("m.onnx" + trained.SIDECAR)).write_text(side if isinstance(side, str) else json.dumps(side))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: c\nmodel: m.onnx\ndata: digits\ncalibration: {calibration}\n{extra}"
                   f"formats:\n  {name}: {fmt}\n")
    return load_deploy_config(cfg)


def _follow(cfg):
    lines = []
    return trained.follow(cfg, warn=lines.append), lines


def test_auto_fields_take_training_settings(tmp_path):
    """radix and weight_fit left out of a pot format (auto: hlsnn.deploy.quantize.shift_auto would choose at
    calibration) are training's msb and nearest; nothing to warn of."""
    cfg = _setup(tmp_path)
    assert (cfg.formats["f"].radix, cfg.formats["f"].weight_fit) == ("auto", "auto")
    formats, lines = _follow(cfg)
    assert (formats["f"].radix, formats["f"].weight_fit, formats["f"].bias_correction) == ("msb", "nearest", "none")
    assert lines == []


def test_one_format_matched_by_type_when_its_name_differs(tmp_path):
    formats, lines = _follow(_setup(tmp_path, name="p"))
    assert formats["p"].radix == "msb" and lines == []


@pytest.mark.parametrize("fmt, calibration, extra, key, mine, theirs", [
    ("{type: pot, accel: shift8_pynq-z2, radix: lse}", None, "", "formats.f.radix", "lse", "msb"),
    ("{type: pot, accel: shift8_pynq-z2, weight_fit: output}", None, "", "formats.f.weight_fit", "output", "nearest"),
    ("{type: pot, accel: shift8_pynq-z2, weight_scale: channel}", None, "", "formats.f.weight_scale", "channel",
     "tensor"),
    ("{type: pot, accel: shift8_pynq-z2, bias_correction: empirical}", None, "", "formats.f.bias_correction",
     "empirical", "none"),
    ("{type: pot, accel: shift8_pynq-z2, weight_terms: 2}", None, "", "formats.f.weight_terms", "2", "1"),
    ("{type: twohot, accel: shift8_pynq-z2}", None, "", "formats.f.type", "twohot", "pot"),
    (None, "{samples: 64, mode: static}", "", "calibration.samples", "64", "128"),
    (None, "{samples: 128, mode: dynamic}", "", "calibration.mode", "dynamic", "static"),
    (None, "{samples: 128, mode: static, overflow_ratio: 0.01}", "", "calibration.overflow_ratio", "0.01", "0.0"),
    (None, "{samples: 128, mode: static, clip_stats: clipped}", "", "calibration.clip_stats", "clipped", "off"),
    (None, None, "rounding: nearest_even\n", "rounding", "nearest_even", "nearest_away"),
])
def test_each_disagreement_is_one_line(tmp_path, fmt, calibration, extra, key, mine, theirs):
    kw = {k: v for k, v in (("fmt", fmt), ("calibration", calibration)) if v is not None}
    cfg = _setup(tmp_path, extra=extra, **kw)
    before = dict(vars(cfg.formats["f"]))
    formats, lines = _follow(cfg)
    assert len(lines) == 1, lines
    assert f"{key} is {mine}, training evaluated with {theirs} (m.onnx.hlsnn-train.json)" in lines[0]
    assert "\n" not in lines[0]
    if key.startswith("formats.f.") and key != "formats.f.type":
        assert getattr(formats["f"], key.split(".")[-1]) == before[key.split(".")[-1]]    # the config's value kept


def test_accel_parameter_disagreement(tmp_path):
    side = {"training": {"formats": {"f": dict(POT, accel_params=dict(POT["accel_params"], act_bits=6))},
                         "calibration": CAL, "rounding": "nearest_away"}}
    _, lines = _follow(_setup(tmp_path, sidecar=side))
    assert len(lines) == 1 and "formats.f.accel (act_bits) is 8, training evaluated with 6" in lines[0]


def test_without_sidecar_or_training_section_nothing_changes(tmp_path):
    cfg = _setup(tmp_path, sidecar=False)
    formats, lines = _follow(cfg)
    assert formats["f"].radix == "auto" and lines == []
    cfg = _setup(tmp_path, sidecar={"layers": {}})          # an export before the training section
    formats, lines = _follow(cfg)
    assert formats["f"].radix == "auto" and lines == []


@pytest.mark.parametrize("text", ["{not json", json.dumps({"training": {"formats": 3}})])
def test_a_broken_sidecar_is_one_clear_error(tmp_path, text):
    cfg = _setup(tmp_path, sidecar=text)
    with pytest.raises(InputError, match=r"m\.onnx\.hlsnn-train\.json: .*export the model again"):
        _follow(cfg)


def test_compile_warns_on_stderr_in_one_line(tmp_path, monkeypatch, capsys):
    """``hlsnn compile`` of a config that sets radix lse for a model trained with msb: it compiles (the
    config is obeyed) and says so in one ``hlsnn: warning:`` line."""
    _setup(tmp_path, fmt="{type: pot, accel: shift8_pynq-z2, radix: lse}")
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "c.yaml", "-o", "c.hlsnn", "--check-samples", "1"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("hlsnn: warning:")]
    assert len(err) == 1 and "c.yaml: formats.f.radix is lse, training evaluated with msb" in err[0]
