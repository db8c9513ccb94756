"""Finding a board's Vivado board files without Vivado (hlsnn.blockdesign.boardfiles), and the
warning `hlsnn build` and `--dry-run` print when they are missing or cannot be checked.

The board.xml fixtures follow the layout of real board repositories: the folder is the board
revision (e.g. Digilent's ``zybo-z7-20/A.0/board.xml``), and the board part's last field is the
``<file_version>`` inside, not the folder name."""
import os
import shutil
from pathlib import Path

import pytest

import hlsnn.cli
from hlsnn.blockdesign import boardfiles

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FAKE_TOOLS = HERE / "fake_tools"
Z2 = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"


def board_xml(folder, vendor, name, version):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "board.xml").write_text(
        f'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        f'<board schema_version="2.1" vendor="{vendor}" name="{name}" display_name="{name}" preset_file="preset.xml">\n'
        f'  <images><image name="{name}.jpg" display_name="{name}" sub_type="board"/></images>\n'
        f'  <compatible_board_revisions><revision id="0">A.0</revision></compatible_board_revisions>\n'
        f'  <file_version>{version}</file_version>\n  <description>{name}</description>\n</board>\n')
    return folder / "board.xml"


@pytest.fixture
def vivado(tmp_path, monkeypatch):
    """An empty Vivado 2023.2 install tree and a home folder."""
    root = tmp_path / "Xilinx" / "Vivado" / "2023.2"
    (root / "data" / "boards" / "board_files").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "vivado").symlink_to(FAKE_TOOLS / "vivado")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XILINX_VIVADO", raising=False)
    return root, home


def test_board_shipped_with_vivado(vivado):
    root, home = vivado
    xml = board_xml(root / "data" / "xhub" / "boards" / "XilinxBoardStore" / "boards" / "Xilinx" / "zcu104" / "1.1",
                    "xilinx.com", "zcu104", "1.1")
    f = boardfiles.find("xilinx.com:zcu104:part0:1.1", root, home)
    assert f.status == "installed" and f.path == str(xml)
    assert f.warning("xczu7ev-ffvc1156-2-e", False) is None
    # another file version is another board part
    assert boardfiles.find("xilinx.com:zcu104:part0:1.0", root, home).status == "missing"


def test_board_from_the_vivado_store(vivado):
    root, home = vivado
    store = home / ".Xilinx" / "Vivado" / "2023.2" / "xhub" / "board_store" / "xilinx_board_store"
    board_xml(store / "XilinxBoardStore" / "Vivado" / "2023.2" / "boards" / "Xilinx" / "kv260_som" / "1.3",
              "xilinx.com", "kv260_som", "1.3")
    assert boardfiles.find("xilinx.com:kv260_som:part0:1.3", root, home).status == "installed"
    # the store of another Vivado version is not this one's
    assert boardfiles.find("xilinx.com:kv260_som:part0:1.3", root.parent / "2022.2", home).status == "missing"


@pytest.mark.parametrize("value", ["{REPO}", "[list REPO /nowhere]", '"REPO"', "{/nowhere REPO}"])
def test_third_party_boards_on_board_repo_paths(vivado, tmp_path, value):
    root, home = vivado
    repo = tmp_path / "tul" / "board_files"
    board_xml(repo / "pynq-z2" / "A.0", "tul.com.tw", "pynq-z2", "1.0")
    init = home / ".Xilinx" / "Vivado" / "Vivado_init.tcl"
    init.parent.mkdir(parents=True)
    init.write_text(f"# my boards\nset_param board.repoPaths {value.replace('REPO', str(repo))}\n")
    f = boardfiles.find("tul.com.tw:pynq-z2:part0:1.0", root, home)
    assert f.status == "installed", f.searched
    assert str(repo) in f.searched
    # commented out, it does not count
    init.write_text(f"# set_param board.repoPaths {value.replace('REPO', str(repo))}\n")
    assert boardfiles.find("tul.com.tw:pynq-z2:part0:1.0", root, home).status == "missing"


def test_missing_and_unknown_warnings(vivado):
    root, home = vivado
    f = boardfiles.find("avnet.com:ultra96v2:part0:1.2", root, home)
    assert f.status == "missing"
    w = f.warning("xczu3eg-sbva484-1-i", True)
    assert "board files for avnet.com:ultra96v2:part0:1.2 are not installed" in w
    assert str(root / "data" / "boards" / "board_files") in w and "ps_config" in w and "Avnet/bdf" in w
    u = boardfiles.find("tul.com.tw:pynq-z2:part0:1.0", None)
    assert u.status == "unknown"
    w = u.warning("xc7z020clg400-1", False)
    assert "could not check" in w and "XILINX_VIVADO" in w and "pynq-z2.zip" in w and "ps_config" not in w


def test_where_to_get():
    assert "TUL" in boardfiles.where_to_get("tul.com.tw:pynq-z2:part0:1.0")
    assert "Avnet" in boardfiles.where_to_get("avnet.com:ultra96v2:part0:1.2")
    assert "board store" in boardfiles.where_to_get("xilinx.com:kv260_som:part0:1.3")
    assert boardfiles.where_to_get("example.org:x:part0:1.0") == ""


def test_vivado_root(vivado, monkeypatch):
    root, _ = vivado
    from hlsnn.build.tools import Tool
    tool = Tool("vivado", (str(root / "bin" / "vivado"),), str(root / "bin" / "vivado"), "2023.2")
    assert boardfiles.vivado_root(tool) == str(root)
    assert boardfiles.vivado_root(None) is None
    monkeypatch.setenv("XILINX_VIVADO", str(root))
    assert boardfiles.vivado_root(None) == str(root)


# ------------------------------------------------------------------ the build prints it
@pytest.mark.skipif(shutil.which("g++") is None, reason="the build renders through codegen")
@pytest.mark.parametrize("installed", [False, True])
def test_dry_run_warns(vivado, tmp_path, monkeypatch, capsys, installed):
    root, home = vivado
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    if installed:
        board_xml(root / "data" / "boards" / "board_files" / "pynq-z2" / "A.0", "tul.com.tw", "pynq-z2", "1.0")
    rc = hlsnn.cli.main(["build", str(Z2), "--dry-run", "--out", str(tmp_path / "ov")])
    cap = capsys.readouterr()
    assert rc == 0
    if installed:
        assert "WARNING" not in cap.err
    else:
        assert "hlsnn: WARNING: board files for tul.com.tw:pynq-z2:part0:1.0 are not installed" in cap.err
    # without any Vivado, it says it could not check
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    rc = hlsnn.cli.main(["build", str(Z2), "--dry-run", "--out", str(tmp_path / "ov")])
    assert rc == 0 and "could not check the board files for tul.com.tw:pynq-z2" in capsys.readouterr().err


def test_multiline_board_tag_and_a_renamed_vendor(vivado, tmp_path):
    """Avnet's bdf repository writes the <board> attributes one per line; its 2024 release
    (commit 3b8414a6 of github.com/Avnet/bdf, ultra96v2/1.3/board.xml) renamed vendor
    avnet.com -> Avnet-tria and name ultra96v2 -> Ultra96v2, so the board part
    avnet.com:ultra96v2:part0:1.2 (bdf commit 2d49cfc2, the one FINN's fetch-repos.sh pins) is
    not among them."""
    root, home = vivado
    repo = tmp_path / "bdf"
    for folder, vendor, name, version in (("ultra96v2/1.2", "avnet.com", "ultra96v2", "1.2"),
                                          ("ultra96v2/1.3", "Avnet-tria", "Ultra96v2", "1.3")):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "board.xml").write_text(
            f'<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!-- licence -->\n<board \n'
            f'\tschema_version="2.2" \n\tvendor="{vendor}" \n\tname="{name}" \n\tpreset_file="preset.xml">\n'
            f'<compatible_board_revisions>\n  <revision id="0">Rev 1</revision>\n</compatible_board_revisions>\n\n'
            f'<file_version>{version}</file_version>\n</board>\n')
    init = home / ".Xilinx" / "Vivado" / "2023.2" / "Vivado_init.tcl"
    init.parent.mkdir(parents=True)
    init.write_text(f"set_param board.repoPaths [list {repo}]\n")
    assert boardfiles.find("avnet.com:ultra96v2:part0:1.2", root, home).status == "installed"
    (repo / "ultra96v2" / "1.2" / "board.xml").unlink()
    assert boardfiles.find("avnet.com:ultra96v2:part0:1.2", root, home).status == "missing"
    assert boardfiles.find("Avnet-tria:Ultra96v2:part0:1.3", root, home).status == "installed"
