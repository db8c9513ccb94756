"""Where hlsnn finds its templates, hand-written headers and board files.

In a checkout (and an editable install) they are the repository's ``hls/`` and ``configs/``.
An installed wheel carries copies of ``hls/``, ``configs/boards`` and ``configs/accel`` as the
package data ``hlsnn/_data/`` (``setup.py`` copies them at build time); they are found with
:mod:`importlib.resources`.
"""
import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _data_root() -> Path:
    """The folder holding ``hls/`` and ``configs/``: the repository when hlsnn runs from a
    checkout, else the package data of the installed wheel."""
    repo = PACKAGE_DIR.parent.parent
    if (repo / "hls" / "engines").is_dir() and (repo / "configs" / "accel").is_dir():
        return repo
    try:
        from importlib.resources import files  # novermin (Python 3.9+; 3.8 takes the except branch)
    except ImportError:  # Python 3.8 (the board's run-time path)
        return PACKAGE_DIR / "_data"
    return Path(str(files("hlsnn") / "_data"))


#: Repository root in a checkout (host/hlsnn/../..), or hlsnn/_data in an installed wheel:
#: holds hls/ and configs/.
ROOT = _data_root()
HLS_DIR = ROOT / "hls"
HLS_INCLUDE = HLS_DIR / "include"
HARNESS_DIR = HLS_DIR / "harness"
CONFIGS_DIR = ROOT / "configs"


def board_dirs(config_path=None):
    """Directories searched for ``<board>.yaml``, in order."""
    dirs = []
    if os.environ.get("HLSNN_BOARDS"):
        dirs += [Path(p) for p in os.environ["HLSNN_BOARDS"].split(os.pathsep) if p]
    if config_path is not None:
        dirs.append(Path(config_path).resolve().parent.parent / "boards")
    dirs.append(CONFIGS_DIR / "boards")
    return dirs


def out_parent(out, *, folder=False) -> Path:
    """Make sure the folder that will hold ``--out`` exists: it must exist already, except under
    the build root (``build/``, ``$HLSNN_BUILD``) or ``overlays/``, where hlsnn makes it. Never
    creates folders anywhere else (``--out /x/y/z.png`` must not make ``/x/y``). ``folder``:
    ``out`` is itself a folder to be made (``hlsnn render --out``), not a file."""
    from .errors import InputError
    out = Path(out)
    parent = out.parent
    if out.is_dir() and not folder:
        raise InputError(f"--out {out}: is a folder; give a file name")
    if parent.is_dir():
        return parent
    if parent.exists():
        raise InputError(f"--out {out}: {parent} is a file, not a folder")
    here = Path.cwd().resolve()
    allowed = [Path(os.path.abspath(build_root())), here / "overlays"]
    target = Path(os.path.abspath(parent))
    if any(target == a or a in target.parents for a in allowed):
        parent.mkdir(parents=True, exist_ok=True)
        return parent
    raise InputError(f"--out {out}: the folder {parent} does not exist; create it first (hlsnn makes folders "
                     f"only under build/ and overlays/)")


def build_root():
    """Where rendered projects and csim libraries go: ``$HLSNN_BUILD``, or ./build when it is
    unset or empty (an empty one would otherwise put everything in the working folder)."""
    return Path(os.environ.get("HLSNN_BUILD", "").strip() or "build")


#: A build folder's name: no separator, and not ``.``, ``..`` or any other name starting with a dot.
_FOLDER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,127}")


def build_dir(cfg) -> Path:
    """A config's build folder, ``<build root>/<name>``: every file hlsnn writes for the config
    (``hls/``, ``csim/``, ``vivado/``, ``logs/``, ``sim_overlay/``) is under it, and
    ``hlsnn build`` deletes nothing outside it. The name is the config's own ``name`` (a C
    identifier, validated), so a config file named ``...yaml`` (stem ``..``) cannot make the
    working folder its build folder."""
    from .errors import InputError
    name = getattr(cfg, "stem", "") or cfg.name
    if not isinstance(name, str) or not _FOLDER_NAME.fullmatch(name):
        raise InputError(f"config {cfg.name!r}: {name!r} cannot name a build folder (letters, digits, _ . @ + -, "
                         f"not starting with a dot)")
    return build_root() / name
