"""An overlay of several kernel instances of one config (the circuits 4A-4D of one accelerator):
the Vivado block design (hls/tcl/bd.tcl.j2 with more_instances), the hardware handoff that
describes it, and the simulated board that serves it. Quick: renders and parses, no compile; the
C-simulation behind each instance is in test_seed002_sim.py (slow) and the check below marked
slow."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from hlsnn import codegen
from hlsnn.blockdesign import hwh, hwh_read
from hlsnn.blockdesign.design import bd_context
from hlsnn.blockdesign.instances import instances_context
from hlsnn.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))
from test_tcl_vocabulary import commands, violations  # noqa: E402

CONFIGS = ["configs/accel/sparse8_pynq-z2.yaml", "configs/accel/shift8_zcu104.yaml"]


@pytest.mark.parametrize("path", CONFIGS)
def test_four_instances_in_the_block_design_and_its_handoff(path, tmp_path):
    cfg = load_config(path)
    ctx = instances_context(cfg, 4)
    tcl = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "bd.tcl", ctx).read_text()
    assert violations(tcl, "vivado") == []
    cells = [w for c, w in commands(tcl) if c == "create_bd_cell"]
    names = [hwh.instance_names(cfg, i) for i in range(4)]
    assert [w[-1] for w in cells if "axi_dma" in " ".join(w)] == [d for d, _ in names]
    assert [w[-1] for w in cells if ctx["vlnv"] in w] == [k for _, k in names]
    # the addresses bd.tcl fixes are the handoff's, and every DMA streams to its own kernel
    fixed = {cell: int(base, 16) for base, cell in
             re.findall(r"-offset (0x[0-9A-Fa-f]+) -range 64K \[get_bd_addr_segs ([^/\]]+)/", tcl)}
    parser = hwh_read.parse_hwh(hwh.render_hwh(cfg, tmp_path / f"{cfg.name}.hwh", instances=4))
    ip = parser.ip_dict
    md = parser.systemgraph
    for d, k in names:
        assert ip[d]["phys_addr"] == fixed[d] and ip[k]["phys_addr"] == fixed[k], (d, k)
        assert ip[k]["type"] == ctx["vlnv"] and ip[d]["type"].startswith("xilinx.com:ip:axi_dma:")
        assert hwh_read.stream_peer(md, d, "M_AXIS_MM2S") == (k, "in_r")
        assert hwh_read.stream_peer(md, k, "out_r") == (d, "S_AXIS_S2MM")
    bases = sorted(fixed.values())
    assert len(bases) == 8 and all(b - a >= hwh.CONTROL_RANGE for a, b in zip(bases, bases[1:]))   # no overlap


def test_one_instance_is_the_overlay_as_before(tmp_path):
    """instances=1 renders exactly the single-kernel design (bd.tcl and .hwh)."""
    cfg = load_config(CONFIGS[0])
    a = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "a.tcl", bd_context(cfg)).read_text()
    b = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "b.tcl", instances_context(cfg, 1)).read_text()
    assert a == b and "dma_1" not in a
    one = hwh.render_hwh(cfg, tmp_path / "one.hwh").read_bytes()
    assert hwh.render_hwh(cfg, tmp_path / "also.hwh", instances=1).read_bytes() == one


@pytest.mark.slow
def test_a_simulated_board_serves_each_instance_through_its_own_dma():
    """Four Accelerators on one SimBoard, each through its own DMA and C-simulation copy, give
    the emulator's bits, and a call on one leaves another's resident weights alone."""
    from hlsnn.engines import ENGINES
    from hlsnn.runtime import Accelerator
    from hlsnn.runtime.sim_target import SimBoard
    cfg = load_config(CONFIGS[0])
    board = SimBoard(cfg, ENGINES[cfg.engine], 4)
    accs = [Accelerator(cfg, "sim", board=board, instance=i) for i in range(4)]
    try:
        rng = np.random.default_rng(1)
        emu = Accelerator(cfg, "emu")
        for i, acc in enumerate(accs):
            x = rng.integers(-20, 20, size=(2, 3, 8, 8))
            w = rng.integers(-3, 4, size=(4, 3, 3, 3))
            want = emu.kernel.conv2d_batch_int(x, w, bias=np.zeros(4, np.int64), shift=2, stats=True)
            assert np.array_equal(acc.kernel.conv2d_batch_int(x, w, bias=np.zeros(4, np.int64), shift=2,
                                                              stats=True), want)
            assert np.array_equal(acc.kernel.last_stats, emu.kernel.last_stats)
        assert len({id(a.target.dma) for a in accs}) == 4 and len({a.target.overlay for a in accs}) == 1
        assert sorted(board.sim.models) == sorted(n for i in range(4) for n in hwh.instance_names(cfg, i))
        assert (board.overlay / "bd.tcl").is_file()
    finally:
        for acc in accs:
            acc.close()
        board.close()
