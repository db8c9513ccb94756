"""The run-time path a board uses needs numpy, PyYAML and (for target 'pynq') pynq only:
importing hlsnn and running the emulator and the pynq target module must not import Jinja2,
hls4ml or pynq itself (pynq is imported lazily, when a pynq/sim target is made)."""
import subprocess
import sys

from conftest import ROOT

CODE = r"""
import sys, numpy as np
import hlsnn
from hlsnn.runtime import pynq_target, targets   # the board path
for cfg in ("bfp16_pynq-z2", "shift8_pynq-z2", "sparse4_pynq-z2"):
    acc = hlsnn.Accelerator(f"configs/accel/{cfg}.yaml", "emu")
    if cfg.startswith("sparse"):
        acc.conv2d(np.ones((1, 6, 6), np.int8), np.ones((2, 1, 3, 3), np.int8))
    else:
        acc.gemm(np.ones((2, 8)), np.ones((3, 8)))
bad = [m for m in ("jinja2", "hls4ml", "pynq") if m in sys.modules]
print("imported:", bad)
sys.exit(1 if bad else 0)
"""


def test_board_path_imports_no_jinja_hls4ml_or_pynq():
    res = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
