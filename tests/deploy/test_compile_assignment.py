"""`hlsnn compile` without --assignment (docs/tutorials/train.md: `hlsnn compile pot.yaml -o pot.hlsnn`):
a config with one assignment compiles it; one with several is one clear error listing them."""
from pathlib import Path

import pytest

from hlsnn.cli import main
from hlsnn.deploy.config import load_deploy_config
from hlsnn.errors import InputError
from hlsnn.network.build import choose_assignment

MODEL = Path(__file__).resolve().parents[1] / "data" / "torch" / "lenet_ts17.onnx"


def _config(tmp_path, assignments):
    text = (f"name: lenet\nmodel: {MODEL}\ndata: digits\nlayout: nchw\n"
            "formats:\n  f: {type: pot, accel: shift8_pynq-z2}\n  g: {type: twohot, accel: shift8_pynq-z2}\n")
    if assignments:
        text += "assignments:\n" + "".join(f"  {a}: {{default: f}}\n" for a in assignments)
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return path


def test_the_only_assignment_is_chosen(tmp_path):
    cfg = load_deploy_config(_config(tmp_path, ["only"]))
    assert choose_assignment(cfg, None) == "only"
    assert choose_assignment(cfg, "only") == "only"
    with pytest.raises(InputError, match=r"--assignment 'nope': not in .*; it has only"):
        choose_assignment(cfg, "nope")


def test_several_assignments_need_the_option(tmp_path, capsys):
    path = _config(tmp_path, None)          # no assignments: key: one per format, f and g
    with pytest.raises(InputError, match="has 2 assignments: give one with --assignment"):
        choose_assignment(load_deploy_config(path), None)
    assert main(["compile", str(path), "-o", str(tmp_path / "x.hlsnn")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give one with --assignment (f, g)" in err, err
    assert not (tmp_path / "x.hlsnn").exists()


@pytest.mark.slow
def test_cli_compiles_the_only_assignment(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _config(tmp_path, ["only"])
    assert main(["compile", str(path), "--check-samples", "1"]) == 0
    assert "(only)" in capsys.readouterr().out
    assert (tmp_path / "m_only.hlsnn").is_file()    # the default name carries the chosen assignment


def test_data_of_another_shape_is_one_error(tmp_path, capsys):
    """hlsnn deploy said "x_train has samples of shape ...; the model takes ..."; hlsnn compile ended in a
    traceback of the float reference's matmul (or a GEMM shape error) on the same config."""
    import numpy as np
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "seq.npz", x_train=rng.normal(size=(8, 1, 64)), y_train=np.zeros(8, int),
             x_test=rng.normal(size=(4, 1, 64)), y_test=np.zeros(4, int))
    path = tmp_path / "m.yaml"
    path.write_text(f"name: lenet\nmodel: {MODEL}\ndata: {tmp_path / 'seq.npz'}\nformats:\n"
                    "  f: {type: twohot, accel: shift8_pynq-z2}\n")
    assert main(["compile", str(path), "-o", str(tmp_path / "x.hlsnn")]) == 2
    err = capsys.readouterr().err
    want = "x_train has samples of shape (1, 1, 64); the model lenet_ts17 takes (1, 8, 8)"
    assert err.count("\n") == 1 and want in err, err
