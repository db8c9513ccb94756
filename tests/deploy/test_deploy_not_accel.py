"""An accelerator config given where a deployment config belongs (a new user's `hlsnn deploy
bfp16_pynq-z2`) is one error saying which kind of config it is and what deploy takes, not "no such
config file" (the bare name of a shipped config) or "board: unknown key" (its file)."""
import shutil

import pytest

from hlsnn.cli import main
from hlsnn.paths import CONFIGS_DIR

SAYS = "is an accelerator config"
TAKES = "deploy and compile take one with model:, data:, formats: and assignments:"


@pytest.mark.parametrize("command", [["deploy"], ["compile", "-o", "x.hlsnn"]])
@pytest.mark.parametrize("given", ["bfp16_pynq-z2", "file"])
def test_an_accel_config_is_named_as_such(tmp_path, monkeypatch, capsys, command, given):
    monkeypatch.chdir(tmp_path)
    if given == "file":
        shutil.copy(CONFIGS_DIR / "accel" / "shift8_pynq-z2.yaml", tmp_path / "mine.yaml")
        given = "mine.yaml"
    assert main([command[0], given, *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hlsnn: error: {given}: {SAYS}") and TAKES in err, err
    assert "unknown key" not in err and "no such" not in err


def test_a_missing_name_is_still_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["deploy", "no_such_model"]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_the_example_configs_outside_a_checkout(tmp_path, monkeypatch, capsys):
    """The README's `hlsnn deploy configs/models/digits_cnn.yaml` typed where the wheel is installed, not in a
    checkout: the message says where those configs are."""
    monkeypatch.chdir(tmp_path)
    assert main(["deploy", "configs/models/digits_cnn.yaml"]) == 2
    err = capsys.readouterr().err
    assert "no such config file; the example deployment configs (configs/models) come with a checkout" in err, err


def test_report_of_a_non_sparse_accel_config_says_what_report_takes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "bfp16_pynq-z2"]) == 2
    err = capsys.readouterr().err
    assert "also takes a deployment config (MODEL.yaml) or a compiled model (NAME.hlsnn)" in err, err
    assert "configs/accel/" not in err.split("error:", 1)[1].split(":", 1)[1], err   # the example by name
