"""shift_mac's network kernel sized to the PYNQ-Z2 (issue 83): ``shift8net_pynq-z2`` (16 lanes x
16 banks at 166.67 MHz, 3-bit weight exponents) and ResNet-8's ``twohot_z2`` / ``pot_z2``
assignments that use it.

References: the board file's resources and the fit budget's 90%, the PS's PL clock rates
(1,000 MHz / 6, / 5), ResNet-8's layer shapes counted by hand (a 3x3 conv of 16 channels to 16 on
32x32 is 32 * 32 * 9 taps on a 16 x 16 kernel), the LUTs of a unit by the shifter rule worked
out by hand. The layer kernel of the config is covered by
``tests/test_resources.py::test_every_shipped_config_fits_its_board_within_the_margins`` (every
file in configs/accel)."""
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

from conftest import ROOT  # noqa: E402

CONFIG = ROOT / "configs" / "accel" / "shift8net_pynq-z2.yaml"
MODEL = ROOT / "configs" / "models" / "resnet8_digits32.yaml"


def test_the_config_doubles_the_units_at_a_clock_the_ps_gives():
    cfg = hlsnn.load_config(CONFIG)
    old = hlsnn.load_config(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml")
    p = cfg.params
    assert (p["net_lanes"], p["net_banks"]) == (16, 16)
    assert p["net_lanes"] * p["net_banks"] == 2 * old.params["net_lanes"] * old.params["net_banks"]
    assert cfg.board.name == "pynq-z2" and abs(cfg.clock_mhz - 1000 / 6) <= 1e-4 * cfg.clock_mhz


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from hlsnn.network.build import compile_model
    out = {}

    def get(assignment):
        if assignment not in out:
            path = tmp_path_factory.mktemp("shiftsized") / f"r8_{assignment}.hlsnn"
            compile_model(MODEL, assignment, path, calibration_samples=16, check_samples=0)
            out[assignment] = path
        return out[assignment]
    return get


@pytest.mark.parametrize("assignment", ["twohot_z2", "pot_z2"])
def test_resnet8_on_the_sized_kernel_fits_closes_and_counts_by_hand(compiled, assignment):
    """Within 90% of every resource of the XC7Z020 (53,200 LUT, 106,400 FF, 220 DSP, 140 BRAM36),
    every network loop at II 1 at 166.67 MHz (not at the PS's next rate, 1000 / 5: the highest that
    closes), a 16 x 16 conv layer at 9,216 taps plus the pipeline
    depth, and 256 units of 72 LUTs: two left shifters of 8 bits by 0..7 (11 LUTs for the
    4:1 stage, ceil(15 / 2) = 8 for the 2:1 stage, each) and two 17-bit add/negate stages."""
    from hlsnn.network import fit
    from hlsnn.engines.shift_mac.network import kernel, perf
    from hlsnn.network import schedule
    prog, arrays = artifact.read(compiled(assignment))
    got = fit.check_network(prog, arrays)
    assert got["over"] == [] and got["board"] == "pynq-z2"
    for k, avail in {"lut": 53200, "ff": 106400, "dsp": 220, "bram36": 140}.items():
        assert got["resources"][k] <= 0.9 * avail, (k, got["resources"])
    net, cfg = fit.network_kernel(prog, arrays)
    assert abs(cfg.clock_mhz - 1000 / 6) <= 1e-4 * cfg.clock_mhz
    assert [r["loop"] for r in schedule.network_schedule(net, cfg) if r["ii"] != 1] == []
    # at 1000 / 5 the conv's loop-back closes too (one part: no wide store's select on it, 3.4 ns of
    # 3.65); what does not is IsqrtBits of hlsnn/primitives.h (bfp_systolic's statistics), which the
    # schedule lists for every kernel that includes the header
    from dataclasses import replace
    assert [r["loop"] for r in schedule.network_schedule(net, replace(cfg, clock_mhz=200.0)) if r["ii"] > 1] == [
        "IsqrtBits"]
    t = kernel.tables(net, *kernel.lanes(net.params))
    cycles = {name: c for name, _, c in perf.op_cycles(net, t)}
    assert cycles["s1a"] == 32 * 32 * 9 + perf.CONV_DEPTH
    assert cycles["s3b"] == 4 * 8 * 8 * 4 * 9 + perf.CONV_DEPTH        # 64 -> 64 on 8x8: 4 output x 4 input blocks
    r = perf.resources(net, t, cfg.board.ps)
    assert r["logic"]["units"]["lut"] == 256 * (2 * (11 + 8) + 2 * 17)


def test_four_bit_exponents_at_16_x_16_are_refused(tmp_path):
    """Why the sized config takes 3-bit exponents: with shift8_pynq-z2's 4-bit ones (shifts 0..15,
    25-bit products, acc_bits 42) the same 16 x 16 kernel of ResNet-8 two-hot is above 90% of the
    XC7Z020's LUTs (47,880), and ``hlsnn compile`` refuses it in one line naming the LUTs."""
    import shutil
    from hlsnn.errors import InputError
    from hlsnn.network.build import compile_model
    acc = (CONFIG.read_text().replace("exp_bits: 3", "exp_bits: 4").replace("acc_bits: 34", "acc_bits: 42")
           .replace("\n  net_shape: board", "\n  net_lanes: 16\n  net_banks: 16"))      # the sizer would pick 8 x 16
    assert "exp_bits: 4" in acc and "acc_bits: 42" in acc and "net_banks: 16" in acc
    (tmp_path / "wide.yaml").write_text(acc.replace("name: shift8net_pynq_z2", "name: shift8wide"))
    shutil.copy(ROOT / "configs" / "models" / "resnet8_digits32.onnx", tmp_path)
    text = MODEL.read_text().replace("accel: shift8net_pynq-z2", f"accel: {tmp_path / 'wide.yaml'}")
    (tmp_path / "r8.yaml").write_text(text)
    out = tmp_path / "r8.hlsnn"
    with pytest.raises(InputError, match="does not fit pynq-z2: LUT") as e:
        compile_model(tmp_path / "r8.yaml", "twohot_z2", out, calibration_samples=16, check_samples=0)
    assert "\n" not in str(e.value) and not out.exists()


def test_the_sizer_picks_16_x_16_at_3_bit_exponents_and_8_x_16_at_4():
    """``net_shape: board`` (:mod:`hlsnn.engines.shift_mac.netsize`): the shipped config's
    16 x 16 (ResNet-8's compiled kernel: 41,808 LUTs, the next size up, 512 units, models
    ~72k); shift8_pynq-z2's 4-bit exponents (25-bit products, 42-bit sums) at 8 x 16 (16 x 16:
    56.7k, above 47,880). The nominal kernel's units count by hand: 72 LUTs each at 3 bits (the
    docstring of the compile test above), 2 x 34 + 2 x 25 = 118 at 4 bits (two shifters of 8 bits
    by 0..15: 8 + 3 = 11 and 8 + 15 = 23 LUTs for their two 4:1 stages)."""
    from hlsnn.engines.shift_mac import netsize
    cfg = hlsnn.load_config(CONFIG)
    assert cfg.params["net_shape"] == "board" and (cfg.params["net_lanes"], cfg.params["net_banks"]) == (16, 16)
    old = dict(hlsnn.load_config(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml").params)
    assert netsize.size(old, cfg.board) == {"net_lanes": 8, "net_banks": 16}
    assert netsize.estimate(dict(cfg.params), 16, 16, "zynq7")["logic"]["units"]["lut"] == 256 * 72
    assert netsize.estimate(old, 8, 16, "zynq7")["logic"]["units"]["lut"] == 128 * 118
    assert netsize.estimate(old, 16, 16, "zynq7")["lut"] > 0.9 * 53200


def test_net_lanes_without_net_shape_board_keep_the_layer_shape_and_its_hash():
    """The other shift_mac configs are as before: no net_shape key, their 8 x 16 (the hash a
    compiled model records: shift8_pynq-z2's is 1735ea89ef20)."""
    old = hlsnn.load_config(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml")
    assert "net_shape" not in old.params and (old.params["net_lanes"], old.params["net_banks"]) == (8, 16)
    assert old.sha.startswith("1735ea89ef20")


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("assignment", ["twohot_z2", "pot_z2"])
def test_the_16_x_16_kernel_gives_the_emulators_bits_in_one_strict_start(compiled, assignment):
    """The strict C-simulation of the sized kernel: one start for the batch, the layer-by-layer
    emulator's bits, every bank within its ports, the loop counters the cycle model's iterations."""
    from conftest import checked_raw
    from hlsnn.deploy import datasets
    from netfixtures import check_kernel_run
    run = check_kernel_run(compiled(assignment), "twohot", datasets.load("digits32", layout="nchw").x_test[:3])
    k = run._kernel                               # bits, one start, counters and ports: check_kernel_run
    assert k.strict and checked_raw(k.strict_report) == {"act": 8}
    assert (k.tables["pz"], k.tables["pc"]) == (16, 16)


def test_given_lanes_and_banks_win_over_the_sizer(tmp_path):
    """``net_shape: board`` with ``net_lanes`` / ``net_banks`` given keeps them (a compiled model
    records the sizer's pick; ``hlsnn compile``'s refusal names a shape to give)."""
    text = CONFIG.read_text().replace("\n  net_shape: board", "\n  net_shape: board\n  net_lanes: 8\n  net_banks: 16")
    (tmp_path / "given.yaml").write_text(text)
    p = hlsnn.load_config(tmp_path / "given.yaml").params
    assert (p["net_lanes"], p["net_banks"]) == (8, 16) and p["net_shape"] == "board"
