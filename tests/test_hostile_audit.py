"""Hostile input, round four (session 31's audit): strings and files from users and third parties
that the earlier rounds (test_hostile_cli, deploy/test_hostile_compiled, deploy/test_rewrite_names,
build/test_quoted_commands, test_fuzz_*) did not reach. Each case ends in one clear hlsnn error
naming what is wrong and what is allowed, or in text where the string cannot act (no TCL command,
no C++ line), and leaves nothing half-written."""
import pytest

from hlsnn.cli import main
from hlsnn.errors import ConfigError
from conftest import ROOT

BOARD = (ROOT / "configs" / "boards" / "pynq-z2.yaml").read_text()
ACCEL = (ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml").read_text()


def _hostile_board(tmp_path, name):
    """A board file named ``<name>.yaml`` whose ``name`` is ``name`` (as load_board wants), and an
    accelerator config that gives it by path."""
    board = tmp_path / f"{name}.yaml"
    board.write_text(BOARD.replace("name: pynq-z2", "name: " + __import__("json").dumps(name)))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(ACCEL.replace("board: pynq-z2", "board: " + __import__("json").dumps(str(board))))
    return board, cfg


@pytest.mark.parametrize("name", ["x\nexec touch PWNED\n#", "a b", "x[exec id]", "a;b", "-rf"])
def test_a_board_file_name_is_a_board_name(tmp_path, monkeypatch, capsys, name):
    """A board given by path (``board: /path/<name>.yaml``, ``--board``) had any name equal to its
    file's stem: a newline in it put a line of its own in bd.tcl, which Vivado runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    board, cfg = _hostile_board(tmp_path, name)
    from hlsnn.config import load_board, load_config
    with pytest.raises(ConfigError, match="board name"):
        load_board(board)
    with pytest.raises(ConfigError, match="board name"):
        load_config(cfg)
    assert main(["build", str(cfg), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hlsnn: error:") and "letters, digits" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "build").exists() and not list(tmp_path.rglob("PWNED"))


def test_a_board_file_with_a_plain_name_still_loads(tmp_path):
    from hlsnn.config import load_config
    _, cfg = _hostile_board(tmp_path, "my-board_2.1")
    assert load_config(cfg).board.name == "my-board_2.1"
