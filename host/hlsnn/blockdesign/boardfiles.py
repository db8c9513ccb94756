"""Are a board's Vivado board files installed? Answered without running Vivado.

``bd.tcl`` asks Vivado itself (``get_board_parts``) and prints an ``HLSNN-WARNING`` when the
board part is missing; the flow warns earlier, before any tool runs, by looking where Vivado
keeps board files:

- ``$XILINX_VIVADO/data/boards/board_files`` (boards shipped with Vivado, up to 2020.x);
- ``$XILINX_VIVADO/data/xhub/boards/XilinxBoardStore`` (the board store shipped with 2020.2+);
- ``~/.Xilinx/Vivado/<version>/xhub/board_store`` (boards installed from the Vivado Store);
- every folder a ``Vivado_init.tcl`` adds with ``set_param board.repoPaths`` (the usual way to
  add third-party board files such as TUL's PYNQ-Z2 or Avnet's Ultra96-V2).

A board part ``vendor:board:part0:file_version`` matches a ``board.xml`` whose ``<board>``
element has that vendor and name and whose ``<file_version>`` is that version.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# Where each board's files come from when a Vivado install lacks them.
_SOURCES = {
    # FINN's fetch-repos.sh fetches the same three: pynq-z2.zip from the PYNQ downloads,
    # github.com/Avnet/bdf and github.com/Xilinx/XilinxBoardStore
    "tul.com.tw": "third-party TUL files: pynq-z2.zip from the PYNQ downloads, added with set_param board.repoPaths",
    "avnet.com": "third-party Avnet files: github.com/Avnet/bdf, added with set_param board.repoPaths",
    "realdigital.org": "third-party Real Digital files: github.com/RealDigitalOrg/aup-zu3-bsp (board-files/), "
                       "added with set_param board.repoPaths",
    "xilinx.com:kv260": "the Xilinx board store: Vivado Tools > Vivado Store > Boards, or github.com/Xilinx/XilinxBoardStore",
    "xilinx.com": "shipped with Vivado, or the Xilinx board store (Vivado Tools > Vivado Store > Boards)",
}

_BOARD_TAG = re.compile(r"<board\b([^>]*)>", re.S)
_ATTR = re.compile(r'(\w+)\s*=\s*"([^"]*)"')
_FILE_VERSION = re.compile(r"<file_version>\s*([^<\s]+)\s*</file_version>")
_REPO_PATHS = re.compile(r"set_param\s+board\.repoPaths\s+(.+)")


def where_to_get(board_part: str) -> str:
    """Where the files of ``board_part`` come from (a sentence fragment), or ''."""
    vendor, _, rest = board_part.partition(":")
    board = rest.split(":", 1)[0]
    return _SOURCES.get(f"{vendor}:{board.split('_')[0]}") or _SOURCES.get(vendor, "")


@dataclass
class BoardFiles:
    """The answer for one board part: ``status`` is ``installed`` (``path`` is its board.xml),
    ``missing`` (none of ``searched`` has it) or ``unknown`` (no Vivado install to look in)."""

    board_part: str
    status: str
    path: str | None = None
    searched: list = field(default_factory=list)

    def warning(self, part: str, ps_config: bool) -> str | None:
        """The warning to print, or None when the board files are installed."""
        if self.status == "installed":
            return None
        src = where_to_get(self.board_part)
        effect = (f"the PS would run on the defaults of part {part}"
                  + (" plus the board file's ps_config" if ps_config else "")
                  + ", not the board preset (DDR, MIO, clocks)")
        get = f" Install them ({src})." if src else " Install them."
        if self.status == "missing":
            where = ", ".join(self.searched) or "nowhere"
            return (f"hlsnn: WARNING: board files for {self.board_part} are not installed (looked in {where}): "
                    f"{effect}.{get}")
        return (f"hlsnn: WARNING: could not check the board files for {self.board_part} (no Vivado install found: "
                f"set XILINX_VIVADO): bd.tcl checks again in Vivado; if they are missing, {effect}.{get}")


def _vivado_version(root: Path) -> str | None:
    m = re.search(r"(\d{4}\.\d)", str(root))
    return m.group(1) if m else None


def _tcl_words(text: str) -> list:
    """The folder names in a ``board.repoPaths`` value: ``{a b}``, ``[list a b]``, ``"a"`` or ``a``."""
    text = text.split(";")[0].strip()
    m = re.fullmatch(r"\[\s*list\s+(.*)\]", text)
    if m:
        text = m.group(1)
    elif text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    words = re.findall(r'\{([^}]*)\}|"([^"]*)"|(\S+)', text)
    return [next(w for w in ws if w) for ws in words if any(ws)]


def init_repo_paths(init_files) -> list:
    """The folders ``set_param board.repoPaths`` adds in these ``Vivado_init.tcl`` files
    (``$env(HOME)`` and ``~`` expanded; a value that needs Tcl to evaluate is skipped)."""
    out = []
    for f in init_files:
        try:
            text = Path(f).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("#"):
                continue
            m = _REPO_PATHS.search(line)
            if not m:
                continue
            for w in _tcl_words(m.group(1)):
                w = w.replace("$env(HOME)", str(Path.home())).replace("$::env(HOME)", str(Path.home()))
                if "$" in w or "[" in w:
                    continue
                out.append(str(Path(w).expanduser()))
    return out


def search_dirs(vivado_root, home=None) -> list:
    """The folders Vivado looks in for board files, for the install at ``vivado_root``."""
    home = Path(home) if home else Path.home()
    root = Path(vivado_root)
    ver = _vivado_version(root)
    dirs = [root / "data" / "boards" / "board_files", root / "data" / "xhub" / "boards" / "XilinxBoardStore"]
    xil = home / ".Xilinx" / "Vivado"
    if ver:
        dirs.append(xil / ver / "xhub" / "board_store")
    inits = [root / "scripts" / "Vivado_init.tcl", xil / "Vivado_init.tcl"]
    if ver:
        inits.append(xil / ver / "Vivado_init.tcl")
    dirs += [Path(p) for p in init_repo_paths(inits)]
    return [str(d) for d in dict.fromkeys(dirs)]


def _board_xmls(top: Path, max_depth: int = 9):
    top = Path(top)
    if not top.is_dir():
        return
    base = len(top.parts)
    for dirpath, dirnames, filenames in os.walk(top):
        if "board.xml" in filenames:
            yield Path(dirpath) / "board.xml"
            dirnames[:] = []
        elif len(Path(dirpath).parts) - base >= max_depth:
            dirnames[:] = []


def _matches(xml: Path, vendor: str, name: str, version: str) -> bool:
    try:
        with open(xml, errors="replace") as fh:
            head = fh.read(8192)
    except OSError:
        return False
    m = _BOARD_TAG.search(head)
    if not m:
        return False
    attrs = dict(_ATTR.findall(m.group(1)))
    fv = _FILE_VERSION.search(head)
    return (attrs.get("vendor") == vendor and attrs.get("name") == name
            and (not version or (fv is not None and fv.group(1) == version)))


def find(board_part: str, vivado_root=None, home=None) -> BoardFiles:
    """Look for ``board_part`` (``vendor:board:part0:version``) where the Vivado install at
    ``vivado_root`` would. Without a root, the answer is ``unknown``."""
    if not vivado_root:
        return BoardFiles(board_part, "unknown")
    parts = board_part.split(":")
    vendor, name = parts[0], parts[1] if len(parts) > 1 else ""
    version = parts[3] if len(parts) > 3 else ""
    dirs = search_dirs(vivado_root, home)
    for d in dirs:
        for xml in _board_xmls(Path(d)):
            if _matches(xml, vendor, name, version):
                return BoardFiles(board_part, "installed", str(xml), dirs)
    return BoardFiles(board_part, "missing", None, dirs)


def vivado_root(vivado_tool=None):
    """The Vivado install folder: ``XILINX_VIVADO``, else the folder above the found
    ``bin/vivado``; None when neither is known."""
    env = os.environ.get("XILINX_VIVADO")
    if env and Path(env).is_dir():
        return env
    if vivado_tool is not None:
        for p in (Path(vivado_tool.path), Path(vivado_tool.path).resolve()):
            if p.parent.name == "bin" and (p.parent.parent / "data").is_dir():
                return str(p.parent.parent)
    return None
