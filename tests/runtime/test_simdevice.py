"""hlsnn.runtime.sim on the real PYNQ-Z2 resizer design (AXI DMA + HLS resize_accel).

The .hwh is the one that ships in the pynqmetadata wheel (pynqmetadata/tests/hwhs/resizer.hwh);
every test copies it next to a dummy resizer.bit and loads it with the unmodified
``pynq.Overlay`` and ``pynq.lib.dma.DMA``.
"""
import shutil
from pathlib import Path

import numpy as np
import pytest

from hlsnn.runtime.sim.pynq_base import _pynq

if _pynq is None:  # pragma: no cover
    pytest.skip("pynq is not installed", allow_module_level=True)

import pynq  # noqa: E402  (after hlsnn.runtime.sim, which silences pynq's x86 import warning)
import pynq.lib.dma  # noqa: E402
import pynqmetadata  # noqa: E402

from hlsnn.errors import HlsnnError  # noqa: E402
from hlsnn.runtime.sim import (  # noqa: E402
    AxiDmaModel, RegisterFileModel, SimBusError, SimCacheError, SimDeadlock, SimDevice, SimDmaError, SimError,
    SimMetadataError, StreamKernelModel, decode_dmasr,
)

RESIZER_HWH = Path(pynqmetadata.__file__).parent / "tests" / "hwhs" / "resizer.hwh"
SRC = (48, 64)          # rows, cols of the input image
DST = (24, 40)


def nn_resize(img, rows, cols):
    """Nearest-neighbour resize, the reference the kernel model must match."""
    src_rows, src_cols = img.shape[:2]
    return img[(np.arange(rows) * src_rows) // rows][:, (np.arange(cols) * src_cols) // cols]


def resize_fn(beats, regs, *, tlast=True):
    """Python model of resize_accel: RGB pixels in (3-byte beats), resized pixels out, TLAST on the
    last output pixel. Registers by name, as in the design's register map."""
    img = beats.reshape(regs["src_rows"], regs["src_cols"], 3)
    out = nn_resize(img, regs["dst_rows"], regs["dst_cols"]).reshape(-1, 3)
    return out, {}, (len(out) - 1 if tlast else None)


def resizer_model(fn=resize_fn):
    return StreamKernelModel(fn, n_in=lambda regs: regs["src_rows"] * regs["src_cols"])


def image(seed=0, shape=SRC):
    return np.random.default_rng(seed).integers(0, 256, (*shape, 3), dtype=np.uint8)


@pytest.fixture
def overlay_dir(tmp_path):
    shutil.copy(RESIZER_HWH, tmp_path / "resizer.hwh")
    (tmp_path / "resizer.bit").write_bytes(b"\x00\x09not a real bitstream")
    return tmp_path


@pytest.fixture
def sim():
    with SimDevice() as device:
        yield device


def load(device, overlay_dir, fn=resize_fn):
    device.add_model("resize_accel_0", resizer_model(fn))
    return pynq.Overlay(str(overlay_dir / "resizer.bit"))


def set_sizes(kernel, src=SRC, dst=DST):
    kernel.register_map.src_rows = src[0]
    kernel.register_map.src_cols = src[1]
    kernel.register_map.dst_rows = dst[0]
    kernel.register_map.dst_cols = dst[1]


# ---------------------------------------------------------------------------------------------
# loading

def test_overlay_loads_offline_with_the_unmodified_dma_driver(sim, overlay_dir):
    ol = pynq.Overlay(str(overlay_dir / "resizer.bit"))
    assert ol.is_loaded() and ol.device is sim
    assert type(ol.axi_dma_0) is pynq.lib.dma.DMA
    assert type(ol.axi_dma_0.sendchannel) is pynq.lib.dma._SDMAChannel
    assert type(ol.axi_dma_0.recvchannel) is pynq.lib.dma._SDMAChannel
    assert sim.bitstream.bitfile == str(overlay_dir / "resizer.bit")
    assert sim.bitstream.design == "resizer" and sim.bitstream.size == 22
    assert sim.arch == "armv7l"
    # Zynq-7000 hwh: pynqmetadata leaves the frequency None, which pynq 4.0.0 cannot program
    assert ol.clock_dict[0]["frequency"] == 100.0
    assert any("PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ" in f for f in sim.fixups)
    assert pynq.Clocks.fclk0_mhz == pytest.approx(100.0)
    assert isinstance(sim.model("axi_dma_0"), AxiDmaModel)


def test_register_map_comes_from_the_hwh(sim, overlay_dir):
    ol = load(sim, overlay_dir)
    regs = ol.ip_dict["resize_accel_0"]["registers"]
    offsets = {name: regs[name]["address_offset"] for name in ("src_rows", "src_cols", "dst_rows", "dst_cols")}
    assert offsets == {"src_rows": 0x10, "src_cols": 0x18, "dst_rows": 0x20, "dst_cols": 0x28}
    kernel = sim.model("resize_accel_0")
    assert kernel.offsets["CTRL"] == 0 and kernel.in_width == 3 and kernel.out_width == 3
    dma = sim.model("axi_dma_0")
    assert (dma.mm2s.width, dma.s2mm.width, dma.addr_width, dma.length_width) == (4, 4, 32, 26)


def test_stream_paths_are_found_in_the_hwh(sim, overlay_dir):
    load(sim, overlay_dir)
    paths = {(l.describe(), l.src_width, l.dst_width) for l in sim.streams}
    assert paths == {
        ("axi_dma_0.M_AXIS_MM2S -> axis_dwidth_converter_0 -> resize_accel_0.src", 4, 3),
        ("resize_accel_0.dst -> axis_dwidth_converter_1 -> axi_dma_0.S_AXIS_S2MM", 3, 4),
    }
    dma, kernel = sim.model("axi_dma_0"), sim.model("resize_accel_0")
    assert dma.mm2s.link.consumer is kernel and dma.s2mm.link.producer is kernel
    assert kernel.in_link is dma.mm2s.link and kernel.out_link is dma.s2mm.link
    # the burst buffer of the DMA (256 beats x 4 bytes) bounds what a stream holds
    assert {l.capacity for l in sim.streams} == {1024}
    assert "resize_accel_0.src" in sim.describe_streams()


def test_overlay_on_an_explicit_device_without_installing(overlay_dir, monkeypatch):
    # Overlay() points pynq.Clocks at its device (pynq's own behaviour): restore it afterwards
    # (pynq 3.0.x has no Clocks.device: raising=False, and undo deletes it again)
    monkeypatch.setattr(pynq.Clocks, "device", getattr(pynq.Clocks, "device", None), raising=False)
    monkeypatch.setattr(pynq.Clocks, "_real_instance", None, raising=False)
    monkeypatch.delattr(pynq.Clocks, "_real_instance")
    sim = SimDevice()
    sim.add_model("resize_accel_0", resizer_model())
    ol = pynq.Overlay(str(overlay_dir / "resizer.bit"), device=sim)
    assert not sim.installed and ol.device is sim
    in_buf = pynq.allocate((*SRC, 3), np.uint8, target=sim)
    out_buf = pynq.allocate((*DST, 3), np.uint8, target=sim)
    in_buf[:] = image(2)
    set_sizes(ol.resize_accel_0)
    ol.resize_accel_0.write(0x00, 0x01)
    ol.axi_dma_0.sendchannel.transfer(in_buf)
    ol.axi_dma_0.recvchannel.transfer(out_buf)
    ol.axi_dma_0.sendchannel.wait()
    ol.axi_dma_0.recvchannel.wait()
    assert np.array_equal(out_buf, nn_resize(image(2), *DST))


@pytest.mark.filterwarnings("ignore:Setting frequency to the closest possible value")   # disabled PL1..3
def test_zynqmp_metadata_selects_the_ultrascale_clocks(tmp_path):
    # the other design in the pynqmetadata wheel is a ZynqMP (RFSoC) one, without AXI DMA
    shutil.copy(RESIZER_HWH.with_name("rfsoc_sam.hwh"), tmp_path / "sam.hwh")
    (tmp_path / "sam.bit").write_bytes(b"bit")
    with SimDevice(unmodeled="ram") as sim:
        ol = pynq.Overlay(str(tmp_path / "sam.bit"))
        assert sim.arch == "aarch64" and sim.fixups == []        # ZU metadata has the frequency
        assert ol.clock_dict[0]["frequency"] == pytest.approx(99.999985)
        assert type(pynq.Clocks._real_instance).__name__ == "_ClocksUltrascale"
        assert pynq.Clocks.fclk0_mhz == pytest.approx(100.0, rel=1e-3)
        assert any(l.describe().startswith("radio/rfdc.") for l in sim.streams)   # hierarchical names


def test_bit_without_matching_hwh_is_a_clear_error(sim, tmp_path):
    # Vivado writes <bd>_wrapper.bit but <bd>.hwh: the stems differ
    shutil.copy(RESIZER_HWH, tmp_path / "design_1.hwh")
    (tmp_path / "design_1_wrapper.bit").write_bytes(b"bit")
    with pytest.raises(SimMetadataError) as err:
        pynq.Overlay(str(tmp_path / "design_1_wrapper.bit"))
    msg = str(err.value)
    assert "design_1_wrapper.hwh" in msg and "design_1.hwh" in msg and "same" in msg
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, HlsnnError)
    with pytest.raises(OSError, match="does not exist"):      # no .bit at all: pynq's own error
        pynq.Overlay(str(tmp_path / "design_1.bit"))


def test_download_false_leaves_the_pl_unprogrammed(sim, overlay_dir):
    sim.add_model("resize_accel_0", resizer_model())
    ol = pynq.Overlay(str(overlay_dir / "resizer.bit"), download=False)
    assert ol.is_loaded()                 # pynq says so, but nothing was programmed
    with pytest.raises(SimBusError, match="not programmed.*ol.download"):
        ol.axi_dma_0
    ol.download()
    assert type(ol.axi_dma_0) is pynq.lib.dma.DMA and len(sim.downloads) == 1


def test_ip_without_model(overlay_dir):
    with SimDevice() as sim:
        ol = pynq.Overlay(str(overlay_dir / "resizer.bit"))
        with pytest.raises(SimBusError, match=r"resize_accel_0 .*no model.*sim.add_model\('resize_accel_0'"):
            ol.resize_accel_0.write(0x10, 48)
    with SimDevice(unmodeled="ram") as sim:
        ol = pynq.Overlay(str(overlay_dir / "resizer.bit"))
        ol.resize_accel_0.write(0x10, 48)
        assert ol.resize_accel_0.read(0x10) == 48
        assert isinstance(sim.model("resize_accel_0"), RegisterFileModel)


# ---------------------------------------------------------------------------------------------
# end to end

@pytest.mark.parametrize("strict_cache", [False, True], ids=["plain", "strict-cache"])
@pytest.mark.parametrize("start", ["register_map", "auto_restart"])
def test_resizer_end_to_end(overlay_dir, strict_cache, start):
    with SimDevice(strict_cache=strict_cache) as sim:
        ol = load(sim, overlay_dir)
        dma, kernel = ol.axi_dma_0, ol.resize_accel_0
        in_buf = pynq.allocate((*SRC, 3), np.uint8)
        out_buf = pynq.allocate((*DST, 3), np.uint8)
        set_sizes(kernel)
        if start == "auto_restart":
            kernel.write(0x00, 0x81)                      # ap_start + auto_restart, as the notebook
        for frame in range(2):
            img = image(frame)
            in_buf[:] = img
            if start == "register_map":
                kernel.register_map.CTRL.AP_START = 1
            dma.sendchannel.transfer(in_buf)
            dma.recvchannel.transfer(out_buf)
            dma.sendchannel.wait()
            dma.recvchannel.wait()
            assert np.array_equal(out_buf, nn_resize(img, *DST))
            assert dma.recvchannel.transferred == out_buf.nbytes == DST[0] * DST[1] * 3
            assert dma.read(0x34) & 0x2                   # S2MM idle
        model = sim.model("resize_accel_0")
        assert [r.beats_in for r in model.runs] == [SRC[0] * SRC[1]] * 2
        assert [r.last_index for r in model.runs] == [DST[0] * DST[1] - 1] * 2
        ops = [(op.op, op.buffer.split()[0]) for op in sim.cache_ops]
        assert ops == [("flush", "'in_buf'"), ("invalidate", "'out_buf'")] * 2


def test_kernel_registers_outputs_and_control_bits(sim, overlay_dir):
    def checksum_fn(beats, regs):
        out, _, last = resize_fn(beats, regs)
        return out, {0x30: int(out.sum())}, last

    ol = load(sim, overlay_dir, checksum_fn)
    dma, kernel = ol.axi_dma_0, ol.resize_accel_0
    assert kernel.read(0x00) == 0x4                       # ap_idle
    in_buf, out_buf = pynq.allocate((*SRC, 3), np.uint8), pynq.allocate((*DST, 3), np.uint8)
    in_buf[:] = image(3)
    set_sizes(kernel)
    kernel.write(0x00, 0x01)
    assert kernel.read(0x00) & 0x1                        # ap_start held until the input is read
    dma.recvchannel.transfer(out_buf)
    dma.sendchannel.transfer(in_buf)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    ctrl = kernel.read(0x00)
    assert ctrl & 0x2 and ctrl & 0x4 and ctrl & 0x8       # ap_done, ap_idle, ap_ready
    assert kernel.read(0x00) == 0x4                       # ap_done / ap_ready clear on read
    assert kernel.read(0x30) == int(nn_resize(image(3), *DST).sum()) & 0xFFFFFFFF


def test_kernel_output_width_is_checked(sim, overlay_dir):
    ol = load(sim, overlay_dir, lambda beats, regs: (np.zeros((4, 4), np.uint8), {}, 3))
    in_buf = pynq.allocate((*SRC, 3), np.uint8)
    set_sizes(ol.resize_accel_0)
    ol.resize_accel_0.write(0x00, 1)
    with pytest.raises(SimError, match=r"resize_accel_0.dst is 3 bytes wide"):
        ol.axi_dma_0.sendchannel.transfer(in_buf)


# ---------------------------------------------------------------------------------------------
# the classic failures

def started_resizer(sim, overlay_dir, fn=resize_fn, out_shape=(*DST, 3)):
    ol = load(sim, overlay_dir, fn)
    in_buf = pynq.allocate((*SRC, 3), np.uint8)
    out_buf = pynq.allocate(out_shape, np.uint8)
    in_buf[:] = image(1)
    set_sizes(ol.resize_accel_0)
    ol.resize_accel_0.write(0x00, 0x01)
    return ol, in_buf, out_buf


def test_missing_tlast_raises_instead_of_hanging(sim, overlay_dir):
    ol, in_buf, out_buf = started_resizer(sim, overlay_dir, lambda b, r: resize_fn(b, r, tlast=False))
    dma = ol.axi_dma_0
    dma.sendchannel.transfer(in_buf)
    dma.recvchannel.transfer(out_buf)
    dma.sendchannel.wait()                                # MM2S completes normally
    with pytest.raises(SimDeadlock) as err:
        dma.recvchannel.wait()
    msg = str(err.value)
    assert "axi_dma_0 S2MM (recvchannel)" in msg and "TLAST never arrived" in msg
    assert "resize_accel_0 is done" in msg and "last_index=None" in msg
    assert f"received {out_buf.nbytes} of the {out_buf.nbytes} bytes" in msg


def test_kernel_waiting_for_input_nobody_sends(sim, overlay_dir):
    ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
    dma = ol.axi_dma_0
    dma.recvchannel.transfer(out_buf)
    dma.sendchannel.transfer(in_buf, nbytes=in_buf.nbytes // 2)   # half the image
    dma.sendchannel.wait()
    with pytest.raises(SimDeadlock) as err:
        dma.recvchannel.wait()
    msg = str(err.value)
    assert "S2MM (recvchannel) will never complete" in msg
    assert "resize_accel_0 is waiting for input on resize_accel_0.src" in msg
    assert f"{SRC[0] * SRC[1] // 2} of {SRC[0] * SRC[1]} beats" in msg
    assert "MM2S (sendchannel) is idle" in msg


def test_polling_ap_done_of_a_kernel_without_input(sim, overlay_dir):
    ol, _, _ = started_resizer(sim, overlay_dir)
    with pytest.raises(SimDeadlock, match=r"resize_accel_0 will never finish.*waiting for input.*"
                                          r"0 of 3072 beats.*MM2S \(sendchannel\) is halted.*ol.axi_dma_0"):
        while not ol.resize_accel_0.read(0x00) & 0x2:      # the DMA driver was never even created
            pass
    ol.axi_dma_0
    with pytest.raises(SimDeadlock, match=r"MM2S \(sendchannel\) has no transfer started"):
        while not ol.resize_accel_0.read(0x00) & 0x2:
            pass


def test_send_wait_before_starting_the_kernel(sim, overlay_dir):
    ol = load(sim, overlay_dir)
    in_buf = pynq.allocate((*SRC, 3), np.uint8)
    ol.axi_dma_0.sendchannel.transfer(in_buf)
    with pytest.raises(SimDeadlock) as err:
        ol.axi_dma_0.sendchannel.wait()
    msg = str(err.value)
    assert "axi_dma_0 MM2S (sendchannel) will never complete" in msg
    assert "sent 1024 of 9216 bytes" in msg and "resize_accel_0 is not started" in msg


def test_wait_without_transfer(sim, overlay_dir):
    ol = load(sim, overlay_dir)
    with pytest.raises(SimDeadlock, match=r"S2MM \(recvchannel\) will never complete: no transfer was started"):
        ol.axi_dma_0.recvchannel.wait()


def test_transfer_twice_without_wait(sim, overlay_dir):
    ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
    dma = ol.axi_dma_0
    dma.recvchannel.transfer(out_buf)
    with pytest.raises(RuntimeError, match="DMA channel not idle") as err:   # the pynq driver's own check
        dma.recvchannel.transfer(out_buf)
    assert not isinstance(err.value, HlsnnError)
    # bypassing the driver: LENGTH written while the channel is busy
    with pytest.raises(SimDmaError, match=r"S2MM_LENGTH written while the channel is busy"):
        dma.write(0x58, out_buf.nbytes)
    # the first transfer is still intact
    dma.sendchannel.transfer(in_buf)
    dma.sendchannel.wait()
    dma.recvchannel.wait()
    assert np.array_equal(out_buf, nn_resize(image(1), *DST))


def test_receive_buffer_smaller_than_the_packet(sim, overlay_dir):
    small = (DST[0] - 1, DST[1], 3)
    ol, in_buf, out_buf = started_resizer(sim, overlay_dir, out_shape=small)
    dma = ol.axi_dma_0
    dma.sendchannel.transfer(in_buf)
    dma.recvchannel.transfer(out_buf)
    dma.sendchannel.wait()
    with pytest.raises(SimDmaError) as err:
        dma.recvchannel.wait()
    msg = str(err.value)
    assert "axi_dma_0 S2MM (recvchannel)" in msg and "DMASR=0x00004011" in msg
    assert "Halted | DMAIntErr | Err_Irq" in msg
    assert f"longer than the {out_buf.nbytes} bytes armed in S2MM_LENGTH" in msg
    assert f"the packet is {DST[0] * DST[1] * 3} bytes" in msg
    # the raw register keeps the error; the driver now sees a halted channel
    assert dma.read(0x34) == 0x4011 and decode_dmasr(dma.read(0x34)) == "Halted | DMAIntErr | Err_Irq"
    with pytest.raises(RuntimeError, match="DMA channel not started"):
        dma.recvchannel.transfer(out_buf)
    dma.write(0x30, 0x4)                                  # soft reset recovers
    assert dma.read(0x34) == 0x1 and dma.read(0x04) == 0x1


def test_receive_buffer_too_small_without_decoding(overlay_dir):
    with SimDevice(raise_on_dma_error=False) as sim:
        ol, in_buf, out_buf = started_resizer(sim, overlay_dir, out_shape=(10, 10, 3))
        ol.axi_dma_0.sendchannel.transfer(in_buf)
        ol.axi_dma_0.recvchannel.transfer(out_buf)
        with pytest.raises(RuntimeError, match="DMA channel not started"):   # what pynq says on a board
            ol.axi_dma_0.recvchannel.wait()
        assert ol.axi_dma_0.read(0x34) & 0x10


def test_64bit_buffer_with_a_32bit_dma(overlay_dir):
    with SimDevice(memory_base=0x8_0000_0000) as sim:
        ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
        assert in_buf.physical_address >= 1 << 32
        ol.axi_dma_0.sendchannel.transfer(in_buf)
        with pytest.raises(SimDmaError, match=r"DMADecErr.*upper address word 0x8 was dropped.*c_addr_width=32"):
            ol.axi_dma_0.sendchannel.wait()


# ---------------------------------------------------------------------------------------------
# cache coherence

def test_strict_cache_catches_a_missing_flush(overlay_dir):
    with SimDevice(strict_cache=True) as sim:
        ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
        dma = ol.axi_dma_0
        dma.recvchannel.transfer(out_buf)
        # programming MM2S by hand, without in_buf.flush()
        dma.write(0x18, in_buf.physical_address)
        with pytest.raises(SimCacheError) as err:
            dma.write(0x28, in_buf.nbytes)
        msg = str(err.value)
        assert "axi_dma_0 MM2S (sendchannel) reads buffer 'in_buf'" in msg and "flush()" in msg
        assert f"the CPU changed {np.count_nonzero(image(1))} bytes" in msg
        assert "test_simdevice.py" in msg
        in_buf.flush()                                    # nothing was started: fixing it works
        dma.write(0x28, in_buf.nbytes)
        dma.recvchannel.wait()
        assert np.array_equal(out_buf, nn_resize(image(1), *DST))


def test_strict_cache_catches_a_missing_invalidate(overlay_dir):
    for strict in (True, False):
        with SimDevice(strict_cache=strict) as sim:
            ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
            dma, kernel = ol.axi_dma_0, ol.resize_accel_0
            dma.sendchannel.transfer(in_buf)
            dma.recvchannel.transfer(out_buf)
            dma.sendchannel.wait()
            while not kernel.read(0x00) & 0x2:           # waits for ap_done, not for recvchannel.wait()
                pass
            expected = nn_resize(image(1), *DST)
            if strict:
                with pytest.raises(SimCacheError, match=r"CPU read of buffer 'out_buf'.*invalidate\(\)"):
                    np.array_equal(out_buf, expected)
                with pytest.raises(SimCacheError):
                    out_buf[0, 0, 0]
                out_buf.invalidate()
            assert np.array_equal(out_buf, expected)


def test_strict_cache_buffers_behave_like_arrays(overlay_dir):
    with SimDevice(strict_cache=True) as sim:
        buf = pynq.allocate((4, 4), np.uint16, name="scratch")
        buf[:] = np.arange(16).reshape(4, 4)
        assert int(buf.sum()) == 120 and buf[1, 2] == 6 and buf[::2].tolist()[1][0] == 8
        assert isinstance(buf[1:], pynq.buffer.PynqBuffer) and buf[1:].physical_address == buf.physical_address + 8
        # not flushed: a bus master sees the old DDR contents and the strict check refuses it
        with pytest.raises(SimCacheError, match="scratch"):
            sim.memory.read(buf.physical_address, buf.nbytes, master="test master")
        buf.flush()
        assert sim.memory.read(buf.physical_address, 4).tolist() == [0, 0, 1, 0]
        sim.memory.write(buf.physical_address, np.array([7, 0], np.uint8), master="test master")
        with pytest.raises(SimCacheError, match="test master wrote 2 bytes"):
            buf.tobytes()
        buf.invalidate()
        assert buf[0, 0] == 7
        buf += 1                                           # in-place ops keep the PynqBuffer
        assert isinstance(buf, pynq.buffer.PynqBuffer) and buf[0, 0] == 8 and buf.physical_address


# ---------------------------------------------------------------------------------------------
# the device itself

def test_install_uninstall_restores_pynq_state():
    Device, Clocks = pynq.Device, pynq.Clocks
    before = (Device.__dict__.get("_active_device", "absent"), Clocks.__dict__.get("_real_instance", "absent"),
              Clocks.__dict__.get("device", "absent"))
    sim, other = SimDevice(), SimDevice()
    assert not sim.installed
    sim.install()
    try:
        assert Device.active_device is sim and sim.installed and Clocks.device is sim
        assert pynq.Clocks.fclk0_mhz == pytest.approx(100.0)          # binds a Clocks instance to sim
        with other:
            assert Device.active_device is other and not sim.installed
            inst = Clocks.__dict__.get("_real_instance")           # the sim-bound one was dropped
            # (pynq 3.0.x: SimDevice builds the instance for `other` at once, see _bind_clocks)
            assert inst is None or inst._slcr_mmio.device is other
        assert Device.active_device is sim
        assert Clocks.__dict__["_real_instance"]._slcr_mmio.device is sim
    finally:
        sim.uninstall()
    after = (Device.__dict__.get("_active_device", "absent"), Clocks.__dict__.get("_real_instance", "absent"),
             Clocks.__dict__.get("device", "absent"))
    assert after == before
    sim.uninstall()                                        # not installed: a no-op
    assert Device.__dict__.get("_active_device", "absent") == before[0]
    # never auto-enumerated: SimDevice has no _probe_
    assert SimDevice not in type(Device)._subclasses.values()


def test_allocate_places_buffers_in_simulated_ddr(sim):
    a = pynq.allocate((3, 5), np.int32)
    b = pynq.allocate(100, np.uint8)
    assert isinstance(a, pynq.buffer.PynqBuffer) and a.shape == (3, 5) and a.dtype == np.int32
    assert a.physical_address == 0x1000_0000 and b.physical_address == 0x1000_1000
    a[:] = np.arange(15).reshape(3, 5)
    assert sim.memory.read(a.physical_address + 4, 4).view(np.int32)[0] == 1   # same bytes, no strict mode
    assert a[1:].physical_address == a.physical_address + 20
    a.flush()
    a[2:].invalidate()
    assert [(op.op, op.address, op.nbytes) for op in sim.cache_ops] == [
        ("flush", a.physical_address, 60), ("invalidate", a.physical_address + 40, 20)]
    assert sim.memory.find(b.physical_address + 50).name.startswith("'b'")
    del a
    c = pynq.allocate(10, np.uint8)                        # the freed page is reused
    assert c.physical_address == 0x1000_0000
    coherent = pynq.allocate(8, np.uint8, cacheable=False)
    coherent.flush()                                       # coherent: pynq skips the device call
    assert len(sim.cache_ops) == 2
    with pytest.raises(TypeError, match="cachable"):
        pynq.allocate(8, np.uint8, cachable=False)


def test_dma_status_register_bits(sim, overlay_dir):
    ol, in_buf, out_buf = started_resizer(sim, overlay_dir)
    dma = ol.axi_dma_0
    assert dma.read(0x04) == 0x0 and dma.read(0x00) & 0x1      # running, not idle before a transfer
    dma.sendchannel.transfer(in_buf)
    dma.sendchannel.wait()
    assert dma.read(0x04) == 0x1002                          # idle + IOC_Irq
    dma.write(0x04, 0x1000)                                  # write 1 to clear
    assert dma.read(0x04) == 0x2
    dma.write(0x00, 0x0)                                     # stop
    assert dma.read(0x04) == 0x1
    dma.write(0x00, 0x4)                                     # soft reset: both channels halted
    assert (dma.read(0x00), dma.read(0x04), dma.read(0x30), dma.read(0x34)) == (0x10000, 0x1, 0x10000, 0x1)
