"""The slot schedule of a board-sized bfp_systolic kernel (issue 83, ``net_slots``,
:mod:`hlsnn.engines.bfp_systolic.network.slots`): a lane's products over (tap, channel) slots, two
adjacent taps of a half of the banks read in one cycle from a bank's even and odd words. The sums
are the same exact integer sums, so the bits stay the layer-by-layer emulator's.

Net (digits, 1 x 8 x 8), every conv's channel blocks and windows a case of the schedule: c1 3x3
pad 1 (1 -> 21; one channel: half 0's first bank alone); c2 2x2 (21 -> 13; channel blocks of 16
and 5, a pair a row, 7 x 7 out: an odd row width, so the pairs' parity changes row to row and a
pair's second tap falls off the row's end); c3 5x5 pad 2 stride 2 (13 -> 7; halves of 8 and 5
channels, two pairs and a single a row); c4 3x3 dilation 2 pad 2 (7 -> 16; fewer than 8 channels,
taps two apart: singles); c5 1x1 (16 -> 21); c6 4x4 (21 -> 10), Flatten. References: the layer-by-layer
emulator (the bits), an enumeration of every (channel block, tap, half) (the schedule)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_onnx, save_net, weight_drawer  # noqa: E402


def _net(path):
    from onnx import helper
    inits, w = weight_drawer(84)
    conv = lambda i, o, c, n, k=3, p=1, **kw: helper.make_node(                    # noqa: E731
        "Conv", [i, w(n + "_w", (o, c, k, k), 0.3), w(n + "_b", o, 0.05)], [n], pads=[p] * 4, **kw)
    relu = lambda n: helper.make_node("Relu", [n], [n + "r"])                        # noqa: E731
    nodes = [conv("x", 21, 1, "c1"), relu("c1"),
             conv("c1r", 13, 21, "c2", k=2, p=0), relu("c2"),
             conv("c2r", 7, 13, "c3", k=5, p=2, strides=[2, 2]), relu("c3"),
             conv("c3r", 16, 7, "c4", p=2, dilations=[2, 2]), relu("c4"),
             conv("c4r", 21, 16, "c5", k=1, p=0), relu("c5"),
             conv("c5r", 10, 21, "c6", k=4, p=0), helper.make_node("Flatten", ["c6"], ["y"])]
    return save_net(path, nodes, inits, "slots", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def slotted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slots")
    return compile_onnx(tmp, "slots", _net(tmp / "slots.onnx"), "bfp8",
                        formats={"bfp8": "{type: bfp, accel: bfp8net_pynq-z2}"}, check_samples=2,
                        calibration_samples=32)


def _tables(path):
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    from hlsnn.network import artifact
    net = netmode.lower(*artifact.read(path))
    return net, bfpkernel.tables(net, *bfpkernel.shape(net.params))


def _geom(c, kh, kw, dw=1):
    """A conv's geometry as .slots reads it (16 banks: channel blocks of 16, halves of 8)."""
    return dict(ncg=-(-c // 16), cend=c, kh=kh, kw=kw, dh=1, dw=dw, pairs=dw == 1)


@pytest.mark.parametrize("c,kh,kw,dw,cycles", [
    (16, 3, 3, 1, 6), (32, 3, 3, 1, 12), (64, 3, 3, 1, 24),     # ResNet-8's 3x3 convs: 9, 18, 36 today
    (9, 3, 1, 1, 3),                                            # the unfolded stem: taps down, no pairs
    (16, 1, 1, 1, 1), (32, 1, 1, 1, 2),                        # 1x1: nothing to pair
    (8, 3, 3, 1, 6), (5, 3, 3, 2, 9),
    (21, 5, 5, 1, 30),                                          # half 0's 2 x 5 x 3 reads: one a cycle
    (13, 5, 5, 1, 17)])                                         # 50 units three a cycle: pairs split
def test_the_schedule_reads_every_tap_of_every_channel_once(c, kh, kw, dw, cycles):
    """Every (channel block, ky, kx, half) that holds channels is read exactly once (an enumeration),
    at most one read of each half and at most one pair a cycle, in the fewest cycles: a half's reads
    one a cycle, three taps a cycle."""
    from hlsnn.engines.bfp_systolic.network import slots
    sched = slots.schedule(_geom(c, kh, kw, dw), 8)
    seen = []
    for a0, a1 in sched:
        assert not (a0 and a0[3] and a1 and a1[3])              # unit 2 takes one pair
        for h, a in enumerate((a0, a1)):
            if a:
                cb, ky, kx, pair = a
                seen += [(cb, ky, kx + i, h) for i in range(1 + pair)]
    want = [(cb, ky, kx, h) for cb in range(-(-c // 16)) for h in (0, 1) if c - cb * 16 - h * 8 > 0
            for ky in range(kh) for kx in range(kw)]
    assert sorted(seen) == sorted(want)
    assert len(sched) == cycles


def test_every_conv_runs_on_the_slot_schedule(slotted):
    """The shipped board config's kernel takes the slot schedule for this program; each block's cycles
    are the larger of its half-0 or half-1 reads and the exponent side's map taps (a pair and the
    rest a row) over its blocks."""
    _, t = _tables(slotted)
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    assert t["units"] is not None
    steps = [dict(zip(bfpkernel.FIELDS, r["vals"]))["steps"] for r in t["rows"]]
    # c1, the unfolded stem (its 3 columns in banks 0..2, 3 taps down): 3; c2: half 0 holds both
    # blocks' channels, 2 rows of a pair: 4; c3: 5 rows of (2 pairs + single) in each half, 50 taps of
    # 8 banks three a cycle: 17; c4: singles of half 0: 9; c5: 1x1, one read a half, but a block's
    # 16 outputs are written 8 a cycle (resmodel.WRITE_LANES): 2; c6: 4 rows of 2 pairs, two channel
    # blocks in half 0: 16
    assert steps == [3, 4, 17, 9, 2, 16]


@pytest.mark.csim
@pytest.mark.strict_csim
def test_the_slot_schedule_keeps_the_bits(slotted):
    """Strict C-simulation and the simulated board: the layer-by-layer emulator's bits in one start,
    the cycle model's iterations, every bank (a bank's even and odd memories) within its ports."""
    from hlsnn.deploy.datasets import load
    x = load("digits", layout="nchw").x_test[:5]
    k_run = check_kernel_run(slotted, "bfp8", x, board=True)
    y = np.asarray(k_run(x))
    assert len({tuple(r) for r in y}) == len(x)


def test_the_resource_model_counts_what_the_slot_kernel_declares(slotted, tmp_path):
    """The slot kernel's arrays as the resource model counts them are the ones the rendered C++
    declares: the unit and map-tap tables, two slots' weights a 32-bit ROM word (kWQuads), a bank's
    even and odd words two simple dual-port memories (act, lmap: half the words each); and its
    multipliers are the DSPs the C++ declares (HLSNN_OPS: 8 lane pairs x 24 slots)."""
    import re
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel, perf as bfpperf
    net, t = _tables(slotted)
    bfpkernel.render(net, tmp_path)
    cpp = "".join((tmp_path / f).read_text() for f in ("network.cpp", "network.h", "network_data.h"))
    bufs, muls = bfpperf.buffers(net, t)
    by = {b.name: b for b in bufs}
    for name in ("kWQuads", "kUOff", "kUKy", "kUKx", "kUN", "kUPair", "kMOff", "kMKy", "kMKx", "kMPair"):
        dims = "".join(f"[{d}]" for d in by[name].dims)
        assert re.search(rf"\b{name}{re.escape(dims)} = ", cpp), (name, dims)
    assert "kWPairs" not in by and not re.search(r"\bkWPairs\[", cpp)
    assert by["kWQuads"].width == 32 and "static const uint32_t kWQuads" in cpp
    half = int(re.search(r"kActHalf = (\d+);", cpp).group(1))
    assert by["act"].dims == (2, 16, 2, half) and by["act"].storage == "ram_s2p"
    assert "static ActHalf act[2][Cfg::kPc][2];" in cpp and "type = ram_s2p impl = bram" in cpp
    words = int(re.search(r"kMapWords = (\d+);", cpp).group(1))
    assert by["lmap"].dims == (2, 2, (words + 1) // 2) and "static MapHalf lmap[2][2];" in cpp
    (mac,) = [m for m in muls if m.function == "ConvMac"]
    assert mac.count == 8 * 24 and "HLSNN_OPS(ConvMac, Cfg::kPz / 2 * Cfg::kSlots" in cpp
