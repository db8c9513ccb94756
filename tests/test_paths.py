"""hlsnn.paths: the repository's hls/ and configs/ in a checkout, the wheel's hlsnn/_data when
installed (`.ci/wheel` checks a real wheel; this test a package copied out of the tree)."""
import shutil
import subprocess
import sys

from conftest import ROOT


def test_checkout_uses_the_repository():
    from hlsnn import paths
    assert paths.ROOT == ROOT and paths.HLS_DIR == ROOT / "hls" and paths.CONFIGS_DIR == ROOT / "configs"


def test_installed_package_uses_its_package_data(tmp_path):
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "host" / "hlsnn", site / "hlsnn", ignore=shutil.ignore_patterns("__pycache__"))
    data = site / "hlsnn" / "_data"
    (data / "hls" / "engines").mkdir(parents=True)
    (data / "configs" / "accel").mkdir(parents=True)
    r = subprocess.run([sys.executable, "-c", "import hlsnn.paths as p; print(p.ROOT); print(p.HLS_INCLUDE)"],
                       capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert r.returncode == 0, r.stderr
    root, include = r.stdout.split()
    assert root == str(data) and include == str(data / "hls" / "include")
