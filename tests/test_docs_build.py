"""The documentation site builds with warnings as errors (issue 34), as .ci/run builds it: every
page, the generated config and command-line references, and the API reference from the
docstrings (a docstring that is not valid reStructuredText fails here)."""
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("furo")


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                        str(ROOT / "docs"), str(tmp_path / "html")], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-5000:]
    index = (tmp_path / "html" / "index.html").read_text()
    assert "bfp_systolic" in index
    cli = (tmp_path / "html" / "cli.html").read_text()
    assert "--radix-update" in cli                  # generated from the parser
    configs = (tmp_path / "html" / "configs.html").read_text()
    assert "mantissa_bits" in configs and "weight_banks" in configs     # generated from the schemas
    assert (tmp_path / "html" / "api" / "generated" / "hlsnn.formats.bfp.html").is_file()
