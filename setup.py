"""Build hook only: the project is described in pyproject.toml.

An installed hlsnn needs the HLS templates and headers (``hls/``) and the shipped board and
accelerator configs (``configs/boards``, ``configs/accel``), which live at the top of the
repository, outside the Python package (the layout is fixed). A non-editable build copies them
into the package as ``hlsnn/_data/`` (``hlsnn.paths`` finds them there with
``importlib.resources``); an editable install reads the repository itself.
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: repository folder -> folder under hlsnn/_data/ in a built wheel
PACKAGE_DATA_DIRS = {"hls": "hls", "configs/boards": "configs/boards", "configs/accel": "configs/accel"}


class BuildPyWithHardware(build_py):
    """build_py that also copies :data:`PACKAGE_DATA_DIRS` into ``hlsnn/_data``."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # editable: hlsnn.paths reads the repository
        for src, dst in PACKAGE_DATA_DIRS.items():
            source = ROOT / src
            if not source.is_dir():
                raise SystemExit(f"hlsnn build: {source} is missing; build from a full checkout or the sdist")
            target = Path(self.build_lib) / "hlsnn" / "_data" / dst
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))


setup(cmdclass={"build_py": BuildPyWithHardware})
