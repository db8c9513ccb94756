"""Commands that `hlsnn build` prints (--dry-run, and "finish the build" when the tools are
missing) quote every path: pasting them runs exactly what they say, even for a config file
named `$(touch X).yaml`."""
import shutil
import subprocess

from hlsnn.build.flow import shell_line
from hlsnn.cli import main
from conftest import accel_config


def test_shell_line_quotes_every_word(tmp_path):
    evil = tmp_path / "a b $(touch PWNED) `touch PWNED2` 'q'"
    line = shell_line(evil, ["echo", "x; touch PWNED3", evil / "f.tcl"])
    r = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert evil.is_dir() and r.stdout.split("\n")[0].startswith("x; touch PWNED3 ")
    assert not list(tmp_path.glob("PWNED*")) and not list(evil.glob("PWNED*"))


def test_dry_run_lines_of_a_hostile_file_name_are_safe_to_paste(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    cfg = tmp_path / "$(touch PWNED).yaml"
    shutil.copy(accel_config("bfp16_pynq-z2"), cfg)
    assert main(["build", str(cfg), "--dry-run"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("mkdir -p ")]
    assert lines
    for ln in lines:                       # run the mkdir/cd part as pasted, not the tool itself
        prefix = ln.split(" && ")[:2]
        r = subprocess.run(["bash", "-c", " && ".join(prefix)], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert not list(tmp_path.rglob("PWNED"))


def test_the_rerun_command_names_a_shipped_config_by_name(tmp_path):
    """`hlsnn build bfp16_pynq-z2` without the tools printed `hlsnn build /.../site-packages/hlsnn/_data/
    configs/accel/bfp16_pynq-z2.yaml` to run on the machine that has them, a path only this install has;
    a shipped config is named by its name, any other config by its path."""
    from hlsnn.build.flow import rerun_name
    from hlsnn.config import load_config
    from hlsnn.paths import CONFIGS_DIR
    assert rerun_name(load_config("bfp16_pynq-z2")) == "bfp16_pynq-z2"
    mine = tmp_path / "mine.yaml"
    mine.write_text((CONFIGS_DIR / "accel" / "bfp16_pynq-z2.yaml").read_text())
    assert rerun_name(load_config(mine)) == str(mine)
