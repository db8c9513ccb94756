"""Sphinx configuration of the hlsnn documentation.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs build/docs

Pages are MyST Markdown; the API reference comes from the docstrings (autodoc, autosummary and
napoleon, all part of Sphinx); the config and command-line references are generated from the
code by ``_ext/hlsnn_docs.py``.
"""
import importlib.util
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))          # document this checkout, not an installed copy
sys.path.insert(0, str(Path(__file__).parent / "_ext"))
os.environ.setdefault("MPLBACKEND", "Agg")

import hlsnn  # noqa: E402

# autosummary writes one stub page per module into api/generated/ (not committed); start from an
# empty folder so that a module that was removed or renamed leaves no stale page behind
shutil.rmtree(Path(__file__).parent / "api" / "generated", ignore_errors=True)

project = "hlsnn"
author = "the hlsnn developers"
copyright = "2026, the hlsnn developers"
release = version = hlsnn.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "hlsnn_docs",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "api/_templates"]
templates_path = ["api/_templates"]

myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True, "ignore-module-all": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# hlsnn.train needs torch (the train extra, several hundred MB); the README's docs command installs only
# the docs extra, so where torch is missing autodoc imports hlsnn.train against a stand-in of it
# (its docstrings are the reference; nothing of torch runs at import)
autodoc_mock_imports = [] if importlib.util.find_spec("torch") else ["torch"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False

html_theme = "furo"
html_title = f"hlsnn {release}"
