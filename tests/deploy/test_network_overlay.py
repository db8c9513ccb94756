"""The network overlay (issue 31): the network kernel's s_axilite register map as Vitis HLS lays
it out, its block design (``hlsnn.network.hwh``) read by pynq's own parser, and the network
kernel on the simulated board and on the pynq target through that overlay.

References: the register offsets are written out by hand from the Vitis HLS convention (the
``xkernel_hw.h`` header a Vitis HLS export writes: CTRL/GIER/IER/ISR at 0x00..0x0C, each
argument from 0x10 in 32-bit data words followed by one reserved or ap_vld word; a 64-bit
pointer of an ``m_axi`` port with ``offset = slave`` takes lo, hi, reserved); the bits come from
the emulator (the layer-by-layer compiled network)."""
import numpy as np
import pytest

from hlsnn import regmap
from hlsnn.engines.network import kernel as netkernel

#: hand-written from the Vitis HLS convention for ``void top(const word_t *in, word_t *out, int batch)``
NET_MAP = {"CTRL": 0x00, "GIER": 0x04, "IP_IER": 0x08, "IP_ISR": 0x0C, "in_r_1": 0x10, "in_r_2": 0x14,
           "out_r_1": 0x1C, "out_r_2": 0x20, "batch": 0x28}


def test_vitis_hls_register_rule_by_hand():
    """32-bit input: data + reserved; 64-bit: lo, hi, reserved; 32-bit output: data + ap_vld."""
    regs, offs = regmap.layout([("a", 32, False), ("p", 64, False), ("r", 32, True), ("q", 64, False)])
    assert offs == {"a": (0x10,), "p": (0x18, 0x1C), "r": (0x24,), "q": (0x2C, 0x30)}
    assert {r[0]: r[1] for r in regs} == {"CTRL": 0, "GIER": 4, "IP_IER": 8, "IP_ISR": 12, "a": 0x10, "p_1": 0x18,
                                          "p_2": 0x1C, "r": 0x24, "r_ctrl": 0x28, "q_1": 0x2C, "q_2": 0x30}
    assert regmap.rtl_name("in") == "in_r" and regmap.rtl_name("batch") == "batch"
    with pytest.raises(ValueError, match="32 or 64"):
        regmap.layout([("x", 16, False)])


@pytest.mark.parametrize("engine", ["shift_mac", "sparse_cluster"])
def test_network_register_map_from_the_template(engine):
    regs, offs, m_axi = netkernel.layout(engine)
    assert {r[0]: r[1] for r in regs} == NET_MAP
    assert offs == {"in": (0x10, 0x14), "out": (0x1C, 0x20), "batch": (0x28,)}
    assert m_axi == {"in": "gmem0", "out": "gmem1"}
    # the board's copy (no templates installed) is the template's
    fallback = regmap.layout([(regmap.rtl_name(c), b, False) for c, b in netkernel.TOP_ARGUMENTS])[0]
    assert fallback == regs and netkernel.M_AXI == m_axi


def test_top_function_parse_refuses_what_it_cannot_map():
    with pytest.raises(ValueError, match="no definition of the top function"):
        regmap.top_arguments("void other(int a) {}", "top")
    with pytest.raises(ValueError, match="only pointers and 32-bit integers"):
        regmap.top_arguments("void top(float a) {", "top")


def test_a_64_bit_address_is_written_in_both_halves():
    """A ZCU104 buffer above 4 GB reaches the kernel whole, and a later low address clears the
    high word an earlier run left (the register keeps its value across starts)."""
    from hlsnn.runtime.sim.axi_master import MasterKernelModel
    from hlsnn.runtime.sim.memory import SimMemory
    seen = []
    ip = MasterKernelModel(lambda regs, ports: seen.append(dict(regs)) or 0, netkernel.REGISTERS, {},
                           memory=SimMemory(0x10000000, 1 << 12, False))
    netkernel.write_registers(ip, netkernel.REGISTERS, {"in": 0x8_0000_1000, "out": 0x8_7000_0000, "batch": 3})
    ip.write(0x00, 1)
    netkernel.write_registers(ip, netkernel.REGISTERS, {"in": 0x1000, "out": 0x2000, "batch": 1})
    ip.write(0x00, 1)
    assert seen == [{"in": 0x8_0000_1000, "out": 0x8_7000_0000, "batch": 3}, {"in": 0x1000, "out": 0x2000, "batch": 1}]
    assert ip.values[0x14] == 0 and ip.values[0x20] == 0
    with pytest.raises(ValueError, match="does not fit 32 bits"):
        netkernel.write_registers(ip, netkernel.REGISTERS, {"batch": 1 << 32})


# ------------------------------------------------------------------ the network overlay's .hwh
@pytest.mark.parametrize("config", ["shift8_pynq-z2", "shift8_zcu104", "sparse8_pynq-z2"])
def test_network_hwh_parses_with_pynq(config, tmp_path):
    """pynq 4.0's parser (pynqmetadata) reads the network design: the kernel IP at the config's
    kernel address with the register map above; its two 64-bit m_axi ports go through the
    SmartConnect to the PS's HP port, the control port hangs off the GP master; no DMA."""
    pytest.importorskip("pynqmetadata")
    from conftest import ROOT
    from hlsnn.blockdesign import bd_context, hwh_read
    from hlsnn.network import hwh as hwh_net
    from hlsnn.config import load_config
    cfg = load_config(ROOT / "configs" / "accel" / f"{config}.yaml")
    path = hwh_net.render_net_hwh(cfg, tmp_path / "net.hwh")
    parser = hwh_read.parse_hwh(path)
    name = f"{cfg.name}_net"
    assert set(parser.ip_dict) == {"ps", name}
    ip = parser.ip_dict[name]
    ctx = bd_context(cfg)
    assert ip["type"] == f"hlsnn.org:hls:{name}:1.0" and ip["mem_id"] == "s_axi_control"
    assert ip["phys_addr"] == int(ctx["kernel_base"], 16) and ip["addr_range"] == 0x10000
    assert {n: v["address_offset"] for n, v in ip["registers"].items()} == NET_MAP
    assert ip["registers"]["in_r_2"]["fields"]["in_r"]["bit_width"] == 32
    assert int(ip["parameters"]["C_M_AXI_GMEM0_DATA_WIDTH"]) == 64 == int(ip["parameters"]["C_M_AXI_GMEM1_DATA_WIDTH"])
    md = parser.systemgraph

    def peer(block, port):
        (d,) = md.blocks[block].ports[port].destinations().values()
        return d.parent().name, d.name
    assert peer(name, "m_axi_gmem0") == ("axi_smc", "S00_AXI") and peer(name, "m_axi_gmem1") == ("axi_smc", "S01_AXI")
    assert peer("axi_smc", "M00_AXI") == ("ps", ctx["hp_port"])
    assert peer("ps_axi_periph", "M00_AXI") == (name, "s_axi_control")
    assert hwh_net.net_masters(path, name) == {"m_axi_gmem0": 64, "m_axi_gmem1": 64}
    # the layer kernel's design has none: its data go through the DMA's streams
    from hlsnn.blockdesign import hwh
    layer = hwh.render_hwh(cfg, tmp_path / "layer.hwh")
    assert hwh_net.net_masters(layer, cfg.name) == {} and hwh_net.net_masters(layer, name) == {}


# ------------------------------------------------------------------ the sim board and the pynq target
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netov", calibration_samples=16, check_samples=2)


def _x(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


def _lowered(path):
    from hlsnn.network import artifact
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(path)
    net = netmode.lower(prog, arrays)
    return prog, net, config_of(prog["accels"][net.accel], str(path))


@pytest.mark.slow
@pytest.mark.csim
def test_the_sim_board_runs_the_network_overlay(compiled):
    """The sim board opens the network overlay's .hwh (no DMA; the kernel IP with its m_axi
    ports and pynq's register map of it), prepared once per config and network."""
    import hlsnn
    from hlsnn.network.board import net_masters
    path = compiled("digits_cnn", "twohot")
    x = _x(5)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim") as net:
        board = net._kernel
        name = f"{board.cfg.name}_net"
        assert set(board.board.overlay.ip_dict) == {"ps", name}
        hwh = board.folder / f"{name}.hwh"
        assert net_masters(hwh, name) == {"m_axi_gmem0": 64, "m_axi_gmem1": 64}
        rm = board.ip.register_map
        assert (rm.in_r_1.address, rm.in_r_2.address, rm.out_r_1.address, rm.out_r_2.address,
                rm.batch.address) == (0x10, 0x14, 0x1C, 0x20, 0x28)
        got = net.logits(x)
        stamp = hwh.stat().st_mtime_ns
    with hlsnn.load(path, "sim", self_check=False) as again:     # the same folder, not rendered again
        assert again._kernel.folder == board.folder and hwh.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_a_stalled_kernel_times_out_and_frees_its_buffers(compiled):
    import hlsnn
    from hlsnn.runtime.pynq_target import DeviceTimeout
    path = compiled("digits_cnn", "twohot")
    x = _x(3)
    with hlsnn.load(path, "sim", self_check=False, timeout=0.05) as net:
        board = net._kernel
        model = board.model
        write = model.write

        def stalled(offset, value):               # ap_start is taken, the kernel never finishes
            if offset == 0 and value & 1:
                model.idle = False
                return
            write(offset, value)
        model.write = stalled
        with pytest.raises(DeviceTimeout, match=r"network kernel \w+_net did not finish within 0.05 s"):
            net.logits(x)
        assert board.board.inb is None and board.sim.memory.allocations == []
        model.write, model.idle = write, True
        got = net.logits(x)                       # new buffers, their addresses written again
    with hlsnn.load(path, "emu", network=False) as ref:
        np.testing.assert_array_equal(got.view(np.uint64), ref.logits(x).view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_the_pynq_target_runs_the_network_overlay(compiled, tmp_path):
    """target="pynq" with the network overlay folder: the driver code of a board (pynq's active
    device, here the simulated one with its DDR above 4 GB, as on a ZCU104), one start per
    batch, the emulator's bits; both halves of each 64-bit buffer address reach the kernel."""
    import hlsnn
    from hlsnn.network.board import NetBoard
    from hlsnn.engines.network.kernel import NetKernel
    from hlsnn.network.simboard import ip_model
    from hlsnn.network.simboard import prepare_net_overlay
    from hlsnn.runtime.sim import SimDevice
    path = compiled("digits_cnn", "twohot")
    prog, net, cfg = _lowered(path)
    folder = prepare_net_overlay(cfg, net, out_dir=tmp_path / f"{cfg.name}_net")
    x = _x(6)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    sim = SimDevice(strict_cache=True, memory_base=0x8_0000_0000)
    model = sim.add_model(f"{cfg.name}_net", ip_model(NetKernel(net)))
    with sim:
        with hlsnn.load(path, "pynq", overlays={net.accel: folder}) as board_net:   # network=None: its overlay
            assert isinstance(board_net._kernel, NetBoard) and board_net.target_name == "pynq"
            got = board_net.logits(x)
            assert board_net.last_kernel_starts == 1
    regs = model.runs[-1][0]
    assert regs["batch"] == 6 and regs["in"] >> 32 == 8 and regs["out"] >> 32 == 8
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_network_true_refuses_a_layer_overlay_by_name(compiled, tmp_path):
    """The layer kernel's overlay folder (AXI DMA, stream ports) is refused by name on pynq and
    on sim before anything is built or downloaded; without network=True it runs layer by layer."""
    import hlsnn
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.pynq_target import OverlayMismatch
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    path = compiled("digits_cnn", "twohot")
    _, net, cfg = _lowered(path)
    layer = prepare_sim_overlay(cfg, ENGINES[cfg.engine], out_dir=tmp_path / cfg.name)
    msg = (rf"overlay .*{cfg.name}: {cfg.name}.hwh is the layer kernel's overlay \(IP {cfg.name}: an AXI DMA and "
           rf"stream ports, no m_axi port\); network=True needs the network overlay")
    for target in ("pynq", "sim"):
        with pytest.raises(OverlayMismatch, match=msg):
            hlsnn.load(path, target, overlays={net.accel: layer}, network=True)
    from hlsnn.network.board import is_network_overlay
    assert not is_network_overlay(layer) and not is_network_overlay(tmp_path / "nothing")


def test_a_network_overlay_of_another_network_or_config_is_refused(compiled, tmp_path):
    import json

    import hlsnn
    from hlsnn.network.simboard import prepare_net_overlay
    from hlsnn.runtime.pynq_target import OverlayMismatch
    path = compiled("digits_cnn", "twohot")
    _, net, cfg = _lowered(path)
    folder = prepare_net_overlay(cfg, net, out_dir=tmp_path / f"{cfg.name}_net")
    js = folder / f"{cfg.name}_net.json"
    man = json.loads(js.read_text())
    for key, value, msg in (("network_sha256", "0" * 64, r"holds the network 'digits_cnn' \(sha256 000000000000\), "
                             r"not this compiled model's digits_cnn"),
                            ("config_hash32", 7, r"was built from config hash 0x00000007, but config"),
                            ("kernel", "layer", r"not a network overlay's manifest")):
        js.write_text(json.dumps(dict(man, **{key: value})))
        with pytest.raises(OverlayMismatch, match=msg):
            hlsnn.load(path, "pynq", overlays={net.accel: folder}, network=True)
