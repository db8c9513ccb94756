"""notebooks/hlsnn_on_pynq.ipynb runs top to bottom (nbclient, a python3 kernel, cwd notebooks/).

Off a board the notebook picks the ``sim`` target by itself: the unmodified pynq.Overlay and AXI
DMA driver against the simulated device, the kernels served by their C-simulation libraries
(hence g++). The kernel process inherits ``HLSNN_BUILD`` from tests/conftest.py, so the
simulated overlays and csim libraries go to the session's temporary build folder.
"""
import re
import shutil
import warnings
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pynq")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "hlsnn_on_pynq.ipynb"


def _stream_text(nb):
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")


def _on_board():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynq
            return len(pynq.Device.devices) > 0
    except Exception:
        return False


def test_committed_notebook_is_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code), \
        "clear the notebook's outputs before committing it"


@pytest.mark.csim
@pytest.mark.skipif(shutil.which("g++") is None, reason="the sim target serves the kernel by C-simulation (g++)")
def test_notebook_runs_on_sim_with_zero_mismatches(monkeypatch):
    if _on_board():          # pragma: no cover - on a PYNQ board the notebook would pick 'pynq'
        monkeypatch.setenv("HLSNN_TARGET", "sim")
    else:
        monkeypatch.delenv("HLSNN_TARGET", raising=False)   # let the notebook choose by itself
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()         # raises CellExecutionError on the first failing cell

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    text = _stream_text(nb)
    assert re.search(r"^TARGET = sim$", text, re.M), text
    bfp = re.findall(r"BFP GEMM 64x256 @ 256x128 on sim vs emu: mismatches = (\d+)", text)
    sparse = re.findall(r"sparse conv2d .* on sim vs emu: mismatches = (\d+)", text)
    assert bfp == ["0"] and sparse == ["0"], text
    counts = re.findall(r"mismatches = (\d+)", text)
    assert counts and all(c == "0" for c in counts), text
    # the timing table: both layers with their DMA throughput
    assert re.search(r"^BFP GEMM\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+$", text, re.M), text
    assert re.search(r"^sparse conv2d\s+[\d.]+(\s+[\d.]+){5}$", text, re.M), text
