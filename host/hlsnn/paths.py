"""Where hlsnn finds its templates, hand-written headers and board files."""
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: Repository root (host/hlsnn/.. /..): holds hls/ and configs/.
ROOT = PACKAGE_DIR.parent.parent
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


def build_root():
    """Where rendered projects and csim libraries go (``$HLSNN_BUILD`` or ./build)."""
    return Path(os.environ.get("HLSNN_BUILD", "build"))
