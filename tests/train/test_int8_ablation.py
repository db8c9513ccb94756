"""scripts/int8_ablation.py: its all-int8 variant is the int8 step's post-training model and its
reference the pruned float model, as scripts/train_qat.py measures them on the same validation
images (two code paths); a file that is not a sparse model's checkpoint is refused in one line."""
import importlib.util
import json

import pytest

pytest.importorskip("torch")

from .test_smoothing import ROOT, run_train_qat  # noqa: E402


def _ablation(monkeypatch, argv):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("int8_ablation_t", ROOT / "scripts" / "int8_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(argv)


@pytest.mark.parametrize("val_seed", [[], ["--val-seed", "7"], ["--fold", "1/5"]], ids=["val seed 0", "val seed 7", "fold 1/5"])
def test_ablation_matches_the_int8_step(monkeypatch, capsys, tmp_path, val_seed):
    """(With --val-seed or --fold, the ablation holds out the checkpoint's images: the same accuracies.)"""
    ck = str(tmp_path / "p.pt")
    run_train_qat(monkeypatch, "train_qat_ablation", ["--val", "60", "--weight-scale", "channel", "--save-pruned", ck]
                  + val_seed)
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    _ablation(monkeypatch, [ck, "--weight-scale", "channel", "--unsigned", "--json"])
    rows = {r["variant"]: r for r in json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]}
    assert rows["float (reference)"]["val_acc"] == round(100 * run["val"]["pruned_float_acc"], 2)
    assert rows["int8 (weights and activations)"]["val_acc"] == round(100 * run["val"]["ptq_acc"], 2)
    assert sum(k.startswith("boundary after layer") for k in rows) == sum(k.endswith("'s weights float") for k in rows) > 3
    assert "unsigned 8-bit non-negative activations (not an engine format)" in rows
    for r in rows.values():
        assert 0 <= r["disagree_pct"] <= 100 and r["rel_err"] >= 0


@pytest.mark.parametrize("content", ["text", "tensor", "dict", "pot"])
def test_ablation_refuses_a_file_that_is_not_a_checkpoint(monkeypatch, capsys, tmp_path, content):
    import torch
    bad = tmp_path / "x.pt"
    if content == "text":
        bad.write_text("root:x:0:0:root:/root:/bin/bash\n")
    else:
        torch.save({"tensor": torch.zeros(3),
                    "dict": {"args": {"model": "vgg"}, "model": {}},
                    "pot": {"args": {"model": "dscnn", "format": "pot"}, "model": {"w": torch.zeros(1)}}}[content], bad)
    with pytest.raises(SystemExit):
        _ablation(monkeypatch, [str(bad)])
    err = capsys.readouterr().err
    assert ("a --format sparse checkpoint" if content == "pot" else "not a scripts/train_qat.py --save-pruned checkpoint") \
        in err and "Traceback" not in err
