"""scripts/bias_correction.py: each row's cells sit under its own model's format names (configs/models'
configs have different format lists; the table once printed only the first model's header)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("bias_correction_under_test", ROOT / "scripts" / "bias_correction.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_model_with_other_formats_gets_its_own_header(monkeypatch, capsys):
    mod = _script()
    formats = {"resnet8_digits32": ["bfp8", "bfp8_z2"], "digits_cnn": ["bfp8", "bfp16", "sparse80"],
               "digits_mlp": ["bfp8", "bfp16", "sparse80"]}

    def fake_run(name, cfg, fmts=None):
        return formats[name], [f"{name}:{f}{s}" for f in formats[name] for s in ("", "_bc")]

    monkeypatch.setattr(mod, "run", fake_run)
    assert mod.main(["models", "--only", "resnet8_digits32", "digits_cnn", "digits_mlp"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("|") and "---" not in ln]
    tables, header = {}, None
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[0] == "model":
            header = cells[1:]
            continue
        tables[cells[0]] = dict(zip(header, cells[1:]))
    assert tables["digits_cnn"]["sparse80 + bc"] == "digits_cnn:sparse80_bc"
    assert tables["resnet8_digits32"]["bfp8_z2"] == "resnet8_digits32:bfp8_z2"
    assert tables["digits_mlp"]["bfp16"] == "digits_mlp:bfp16"
    assert sum(1 for ln in lines if ln.startswith("| model |")) == 2     # digits_mlp shares digits_cnn's
