"""CLI inputs of issue 33 (findings 8 and the smaller things): one clear line or the right result."""
import json
import shutil

from hlsnn.cli import main
from conftest import ROOT


def test_perf_refuses_an_operation_beyond_its_size_bound(capsys):
    assert main(["perf", "bfp8_zcu104", "--gemm", "100000000,65536,8192"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hlsnn: error: --gemm 100000000,65536,8192:") and "at most" in err
    assert len(err.splitlines()) == 1


def test_board_given_as_a_file_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    assert main(["build", "bfp16_pynq-z2", "--dry-run", "--board", str(ROOT / "configs/boards/zcu104.yaml")]) == 0
    assert "bfp16_pynq_z2_zcu104" in capsys.readouterr().out
    assert main(["build", "bfp8_zcu104", "--dry-run", "--board", "nope/zcu104.yaml"]) == 2
    assert "no such board file" in capsys.readouterr().err


def test_info_says_which_file_it_read_and_what_it_shadows(tmp_path, monkeypatch, capsys):
    shutil.copy(ROOT / "configs/accel/bfp8_zcu104.yaml", tmp_path / "bfp8_zcu104.yaml")
    monkeypatch.setenv("HLSNN_CONFIG_PATH", str(tmp_path))
    assert main(["info", "bfp8_zcu104"]) == 0
    out = capsys.readouterr().out
    assert f"read from {tmp_path / 'bfp8_zcu104.yaml'} (found in HLSNN_CONFIG_PATH; it shadows the shipped" in out
    assert main(["info", "bfp8_zcu104", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / "bfp8_zcu104.yaml")
    monkeypatch.delenv("HLSNN_CONFIG_PATH")
    assert main(["info", "bfp8_zcu104"]) == 0
    out = capsys.readouterr().out
    assert "read from " in out and "shadows" not in out
