"""bfp_systolic's network kernel sized to the board (issue 83, ``net_shape: board``,
:mod:`hlsnn.engines.bfp_systolic.netsize`): the sizer's pick fits its board by the resource
model's own figures and no shape of more products does; the packed DSP pair's split is exact
for every pair of 8-bit mantissas (numpy's products); a shape the kernel cannot run is refused
with the key named."""
from pathlib import Path

import numpy as np
import pytest
import yaml

import hlsnn
from hlsnn.engines.bfp_systolic import netsize
from hlsnn.errors import ConfigError
from hlsnn.resources import within_margins

ROOT = Path(__file__).resolve().parents[3]
KEYS = ("lut", "ff", "bram36", "dsp")


@pytest.mark.parametrize("name", ["bfp8net_pynq-z2", "bfp8_pynq-z2", "bfp16_pynq-z2", "bfp8_zcu104", "bfp8_aup-zu3",
                                  "bfp8_ultra96v2"])
def test_the_sized_shape_fits_and_no_larger_one_does(name, tmp_path):
    d = yaml.safe_load((ROOT / "configs" / "accel" / f"{name}.yaml").read_text())
    d["bfp_systolic"]["net_shape"] = "board"
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(d))
    cfg = hlsnn.load_config(tmp_path / f"{name}.yaml")
    p, board = dict(cfg.params), cfg.board
    pz, pc, pack, sl = p["net_lanes"], p["net_banks"], p["net_pack"], p.get("net_slots", 0)
    assert pack == (p["mantissa_bits"] <= 8)
    e = netsize.estimate(p, pz, pc, pack, board.ps, p["net_add"], p["net_maps"], sl)
    assert within_margins(e, board.resources, KEYS)
    per = lambda z, c, s: z * (3 * c // 2 if s else c)      # noqa: E731  (a lane's products a cycle: banks, or slots)
    assert e["dsp"] == per(pz, pc, sl) // (2 if pack else 1)
    for qz, qc in netsize.shapes():
        for s in ((0, 1) if p.get("net_slots") else (0,)):
            if per(qz, qc, s) > per(pz, pc, sl):       # more products a cycle: no variant of it fits
                assert not any(within_margins(netsize.estimate(p, qz, qc, pack, board.ps, a, m, s), board.resources,
                                              KEYS)
                               for a in (qc, qc // 2, qc // 4) for m in (0, 1) if not s or m), (qz, qc, s)


def test_the_pynq_z2_bfp8_network_kernel_is_16_lanes_by_24_slots_packed():
    """The shipped board-sized config: 16 lanes x 24 (tap, channel) slots over 16 banks (.network.slots),
    384 mantissa products a cycle on 192 DSP48E1s; the residual Add 4 channels a cycle."""
    p = hlsnn.load_config(ROOT / "configs" / "accel" / "bfp8net_pynq-z2.yaml").params
    assert (p["net_lanes"], p["net_banks"], p["net_pack"], p["net_add"], p["net_maps"], p["net_slots"]) == \
        (16, 16, 1, 4, 1, 1)


def test_slots_asked_for_where_they_cannot_run_fall_back_and_leave_the_hash(tmp_path):
    """net_slots: 1 with 16-bit mantissas (no packing, which the slots need): the sizer's pick without
    slots, and no net_slots key left in the params (a config without slots keeps its hash)."""
    d = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8net_pynq-z2.yaml").read_text())
    d["bfp_systolic"].update(mantissa_bits=16, acc_bits=48)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    p = hlsnn.load_config(tmp_path / "s.yaml").params
    assert p["net_pack"] == 0 and "net_slots" not in p


def test_the_packed_pair_splits_exactly():
    """The kernel's split of ``(w1 * 2**16 + w0) * x`` (a 25 x 8-bit DSP48E1 product): the low 16
    bits as signed are ``w0 * x``, the rest plus that field's sign ``w1 * x``, for every 8-bit
    w0, w1, x (numpy's int64 products the reference)."""
    v = np.arange(-128, 128, dtype=np.int64)
    w1, w0, x = (a.reshape(-1) for a in np.meshgrid(v, v, v, indexing="ij"))
    wp = (w1 << 16) + w0
    assert np.all((wp >= -(1 << 24)) & (wp < 1 << 24))          # the A port's 25 bits
    pp = wp * x
    lo = ((pp & 0xFFFF) ^ 0x8000) - 0x8000                     # ap_int<16>(pp.range(15, 0))
    hi = (pp >> 16) + (lo < 0)
    np.testing.assert_array_equal(lo, w0 * x)
    np.testing.assert_array_equal(hi, w1 * x)


@pytest.mark.parametrize("extra,key,says", [
    ({"net_shape": "board", "net_lanes": 16, "net_banks": 8}, "net_banks", "multiple of net_lanes"),
    ({"net_shape": "board", "net_add": 3}, "net_add", "power of two"),
    ({"net_shape": "board", "net_banks": 16, "net_add": 32}, "net_add", "must divide net_banks"),
    ({"net_lanes": 16}, "net_lanes", "only read with net_shape: board"),
    ({"net_shape": "board", "net_pack": 1, "mantissa_bits": 16, "acc_bits": 48}, "net_pack", "8 bits or fewer"),
    ({"net_slots": 1}, "net_slots", "only read with net_shape: board"),
    ({"net_shape": "board", "net_slots": 1, "net_lanes": 16, "net_banks": 16, "net_pack": 1, "net_add": 8,
      "net_maps": 0}, "net_slots", "needs net_pack: 1, net_maps: 1"),
])
def test_a_shape_the_kernel_cannot_run_is_refused(tmp_path, extra, key, says):
    d = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8net_pynq-z2.yaml").read_text())
    for k in ("net_shape", "net_slots"):
        d["bfp_systolic"].pop(k, None)
    d["bfp_systolic"].update(extra)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(d))
    with pytest.raises(ConfigError, match=f"{key}.*{says}"):
        hlsnn.load_config(tmp_path / "bad.yaml")
