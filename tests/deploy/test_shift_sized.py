"""shift_mac's network kernel sized to the PYNQ-Z2 (issue 83): ``shift8net_pynq-z2`` (two-hot: 16
lanes x 32 banks with tap pairs, the upper 16 banks on DSP48s, two lanes a DSP, codes limited to 128:
:mod:`hlsnn.engines.shift_mac.network.dsp`) and ``shift8net_pot_pynq-z2`` (power of two: 16 x 32
one-shifter units with tap pairs), both at 200 MHz with 3-bit weight exponents, and ResNet-8's ``twohot_z2`` / ``pot_z2``
assignments that use them.

References: the board file's resources and the fit budget's 90%, the PS's PL clock rates
(1,000 MHz / 5), ResNet-8's layer shapes counted by hand (a 3x3 conv of 16 channels to 16 on
32x32 is 32 * 32 * 9 taps on a 16 x 16 kernel, 32 * 32 * ceil(9 / 2) with tap pairs on 16 x 32),
the LUTs of a unit by the shifter rule worked out by hand. The layer kernel of the configs is
covered by ``tests/test_resources.py::test_every_shipped_config_fits_its_board_within_the_margins``
(every file in configs/accel)."""
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

from conftest import ROOT  # noqa: E402

pytestmark = pytest.mark.fit_budget      # compiled models held to the fit budget (tests/conftest.py)

CONFIG = ROOT / "configs" / "accel" / "shift8net_pynq-z2.yaml"
POT = ROOT / "configs" / "accel" / "shift8net_pot_pynq-z2.yaml"
MODEL = ROOT / "configs" / "models" / "resnet8_digits32.yaml"
#: per assignment: its config's (net_lanes, net_banks)
SHAPE = {"twohot_z2": (16, 32), "pot_z2": (16, 32)}


def test_the_configs_quadruple_the_units_at_a_clock_the_ps_gives():
    old = hlsnn.load_config(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml")
    units = old.params["net_lanes"] * old.params["net_banks"]
    for path, shape, k in ((CONFIG, SHAPE["twohot_z2"], 4), (POT, SHAPE["pot_z2"], 4)):
        cfg = hlsnn.load_config(path)
        p = cfg.params
        assert (p["net_lanes"], p["net_banks"]) == shape and p["net_lanes"] * p["net_banks"] == k * units
        assert cfg.board.name == "pynq-z2" and abs(cfg.clock_mhz - 1000 / 5) <= 1e-4 * cfg.clock_mhz
    assert hlsnn.load_config(POT).params["default_mode"] == "pot"


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
    every network loop at II 1 at 200 MHz (the schedule lists only the loops of functions the
    kernel's top calls: no IsqrtBits), and by hand: a 16 -> 16 conv on 32x32 at 32 * 32 * 5 taps
    plus the pipeline depth (tap pairs: its 16 channels copied into the upper 16 banks, two taps a
    cycle), 64 -> 64 at 4 blocks of outputs x 2 of inputs x 9 taps a pixel; two-hot: 256 shift-add
    units of 70 LUTs (two left shifters of 8 bits by 0..7: 11 LUTs for the 4:1 stage, ceil(15 / 2)
    = 8 for the 2:1 stage, each; two 16-bit add/negate stages: |code| <= 128 times an int8 is
    within 2^14) and 8 lane pairs x 16 banks = 128 DSPs; power of two: 512 units of 36 LUTs (one
    shifter, the negation), no DSP."""
    from hlsnn.network import fit
    from hlsnn.engines.shift_mac.network import kernel, perf
    from hlsnn.network import schedule
    prog, arrays = artifact.read(compiled(assignment))
    got = fit.check_network(prog, arrays)
    assert got["over"] == [] and got["board"] == "pynq-z2"
    for k, avail in {"lut": 53200, "ff": 106400, "dsp": 220, "bram36": 140}.items():
        assert got["resources"][k] <= 0.9 * avail, (k, got["resources"])
    net, cfg = fit.network_kernel(prog, arrays)
    assert abs(cfg.clock_mhz - 1000 / 5) <= 1e-4 * cfg.clock_mhz
    rows = schedule.network_schedule(net, cfg)
    assert [r["loop"] for r in rows if r["ii"] != 1] == [] and "IsqrtBits" not in [r["loop"] for r in rows]
    t = kernel.tables(net, *kernel.lanes(net.params))
    assert (t["pz"], t["pc"]) == SHAPE[assignment]
    cycles = {name: c for name, _, c in perf.op_cycles(net, t)}
    r = perf.resources(net, t, cfg.board.ps)
    assert cycles["s1a"] == 32 * 32 * 5 + perf.CONV_DEPTH
    assert cycles["s2a"] == 2 * 16 * 16 * 5 + perf.CONV_DEPTH         # 16 -> 32, stride 2: 2 blocks of outputs
    assert cycles["s3b"] == 4 * 8 * 8 * 2 * 9 + perf.CONV_DEPTH
    assert t["tap_pairs"]
    if assignment == "twohot_z2":
        assert not t["pot"] and t["dsp"] and t["sa_banks"] == 16 and t["prod_bits"] == 16
        assert r["logic"]["units"]["lut"] == 256 * (2 * (11 + 8) + 2 * 16) and r["dsp"] == 8 * 16
    else:
        assert t["pot"] and (t["pack"], t["code_bits"]) == (4, 5) and r["dsp"] == 0
        assert r["logic"]["units"]["lut"] == 512 * ((11 + 8) + 17)


def test_four_bit_exponents_at_16_x_16_are_refused(tmp_path):
    """Why the sized config takes 3-bit exponents: with shift8_pynq-z2's 4-bit ones (shifts 0..15,
    25-bit products, acc_bits 42) the same 16 x 16 kernel of ResNet-8 two-hot is above 90% of the
    XC7Z020's LUTs (47,880), and ``hlsnn compile`` refuses it in one line naming the LUTs."""
    import shutil
    from hlsnn.errors import InputError
    from hlsnn.network.build import compile_model
    acc = (CONFIG.read_text().replace("exp_bits: 3", "exp_bits: 4").replace("acc_bits: 34", "acc_bits: 42")
           .replace("\n  net_shape: board", "\n  net_lanes: 16\n  net_banks: 16")      # the sizer would pick 8 x 16
           .replace("\n  max_code: 128", "").replace("\n  net_dsp: true", ""))      # all shift-add, any code
    assert "exp_bits: 4" in acc and "acc_bits: 42" in acc and "net_banks: 16" in acc
    (tmp_path / "wide.yaml").write_text(acc.replace("name: shift8net_pynq_z2", "name: shift8wide"))
    shutil.copy(ROOT / "configs" / "models" / "resnet8_digits32.onnx", tmp_path)
    text = MODEL.read_text().replace("accel: shift8net_pynq-z2", f"accel: {tmp_path / 'wide.yaml'}")
    (tmp_path / "r8.yaml").write_text(text)
    out = tmp_path / "r8.hlsnn"
    with pytest.raises(InputError, match="does not fit pynq-z2: LUT") as e:
        compile_model(tmp_path / "r8.yaml", "twohot_z2", out, calibration_samples=16, check_samples=0)
    assert "\n" not in str(e.value) and not out.exists()


def test_the_sizer_picks_16_x_32_two_hot_with_dsps_16_x_32_pot_and_8_x_16_at_4_bit_exponents():
    """``net_shape: board`` (:mod:`hlsnn.engines.shift_mac.netsize`), per the config's
    ``default_mode``: two-hot with DSP banks at 16 x 32 (256 shift-add units of 70 LUTs, 128 DSPs;
    all shift-add, without ``net_dsp``, 16 x 16, as 16 x 32 models ~65k LUTs), power of
    two at 16 x 32 (one shifter a unit, four 5-bit codes a ROM word: within 90% of the LUTs and
    the 126 BRAM36; 32 x 32, 1,024 units, models ~81k LUTs); shift8_pynq-z2's 4-bit exponents
    (25-bit products, 42-bit sums) at 8 x 16 (16 x 16: above 47,880). The nominal kernel's units
    count by hand: 72 LUTs each two-hot at 3 bits (70 with max_code 128: the docstring of the compile test above), 36
    pot, 2 x 34 + 2 x 25 = 118 two-hot at 4 bits (two shifters of 8 bits by 0..15: 8 + 3 = 11
    and 8 + 15 = 23 LUTs for their two 4:1 stages)."""
    from hlsnn.engines.shift_mac import netsize
    cfg, pot = hlsnn.load_config(CONFIG), hlsnn.load_config(POT)
    assert cfg.params["net_shape"] == "board" and (cfg.params["net_lanes"], cfg.params["net_banks"]) == (16, 32)
    lut_only = {k: v for k, v in cfg.params.items() if k not in ("net_dsp", "max_code")}
    assert netsize.size(lut_only, cfg.board) == {"net_lanes": 16, "net_banks": 16}
    e = netsize.estimate(dict(cfg.params), 16, 32, "zynq7")
    assert e["logic"]["units"]["lut"] == 256 * 70 and e["dsp"] == 128 and e["lut"] <= 0.9 * 53200
    assert e["bram36"] <= 0.9 * 140
    assert netsize.size(dict(pot.params), pot.board) == {"net_lanes": 16, "net_banks": 32}
    old = dict(hlsnn.load_config(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml").params)
    assert netsize.size(old, cfg.board) == {"net_lanes": 8, "net_banks": 16}
    assert netsize.estimate(lut_only, 16, 16, "zynq7")["logic"]["units"]["lut"] == 256 * 72
    assert netsize.estimate(lut_only, 16, 32, "zynq7")["lut"] > 0.9 * 53200
    e = netsize.estimate(dict(pot.params), 16, 32, "zynq7")
    assert e["logic"]["units"]["lut"] == 512 * 36 and e["lut"] <= 0.9 * 53200 and e["bram36"] <= 0.9 * 140
    assert netsize.estimate(dict(pot.params), 32, 32, "zynq7")["lut"] > 0.9 * 53200
    assert netsize.estimate(old, 8, 16, "zynq7")["logic"]["units"]["lut"] == 128 * 118
    assert netsize.estimate(old, 16, 16, "zynq7")["lut"] > 0.9 * 53200


def test_tap_pairs_plan_and_layout_on_resnet8(compiled):
    """:mod:`hlsnn.engines.shift_mac.network.pairs` on ResNet-8 at 16 x 32: the 16-channel
    tensors made by a conv or by an Add of two such are copied (the stem's, s1a's, s1b's and
    add1's), the dense 3x3 convs that read one are paired (s1a, s1b, s2a; not the 1x1 shortcut
    s2s, not the stem, whose input is the image); the layout by hand: bank c holds taps 0..4 of
    channel c, bank 16 + c taps 5..8 and a zero code."""
    import numpy as np
    from hlsnn.network import fit
    from hlsnn.engines.network.kernel import allocate, unfold_of
    from hlsnn.engines.shift_mac.network import pairs
    net, _ = fit.network_kernel(*artifact.read(compiled("pot_z2")))
    place = allocate(net, 32)[0]
    dup, paired = pairs.plan(net, place, 16, 32, unfold_of(net, place, 32))
    made = {op.out: op.name for op in net.ops}
    assert sorted(made[t] for t in dup) == ["add1", "s1a", "s1b", "stem"]
    assert paired == {"s1a", "s1b", "s2a"}
    assert pairs.plan(net, place, 16, 16, None) == (set(), set())          # no upper half on 16 x 16
    codes = np.arange(2 * 16 * 9).reshape(2, 16, 9)
    lay = pairs.layout(codes, 32)
    assert lay.shape == (2, 32, 5)
    np.testing.assert_array_equal(lay[:, :16], codes[:, :, :5])
    np.testing.assert_array_equal(lay[:, 16:, :4], codes[:, :, 5:])
    assert (lay[:, 16:, 4] == 1 << 15).all()


def test_narrow_codes_round_trip_and_refuse_what_does_not_fit():
    """The ROM's codes (:func:`hlsnn.engines.shift_mac.network.kernel.narrow_codes`): two-hot
    ``2 * 3 + 4`` bits at 3-bit shifts, pot ``3 + 2``, fields placed by hand; a shift of 8 in 3
    bits, or a second term in a pot program, is refused in one line."""
    import numpy as np
    from hlsnn.errors import InputError
    from hlsnn.engines.shift_mac.network.kernel import code_bits, narrow_codes, weight_pack
    code = lambda ea, eb, so, hb, sb, z: ea | eb << 6 | so << 12 | hb << 13 | sb << 14 | z << 15   # noqa: E731
    two = np.array([code(7, 5, 1, 1, 0, 0), code(0, 0, 0, 0, 0, 1)])
    assert list(narrow_codes(two, 3, False)) == [7 | 5 << 3 | 1 << 6 | 1 << 7, 1 << 9]
    assert list(narrow_codes(np.array([code(6, 0, 1, 0, 0, 0)]), 3, True)) == [6 | 1 << 3]
    assert (code_bits(3, False), code_bits(3, True)) == (10, 5)
    assert (weight_pack(16, 10), weight_pack(16, 5), weight_pack(16, 16), weight_pack(3, 5)) == (2, 4, 2, 1)
    for c, pot in ((code(8, 0, 0, 0, 0, 0), True), (code(1, 2, 0, 1, 0, 0), True)):
        with pytest.raises(InputError, match="does not fit the ROM") as e:
            narrow_codes(np.array([c]), 3, pot)
        assert "\n" not in str(e.value)


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
def test_the_sized_kernels_give_the_emulators_bits_in_one_strict_start(compiled, assignment):
    """The strict C-simulation of the sized kernels (16 x 32 two-hot with DSP banks, 16 x 32 pot, both with tap pairs):
    one start for the batch, the layer-by-layer emulator's bits, every bank within its ports, the
    loop counters the cycle model's iterations."""
    from conftest import checked_raw
    from hlsnn.deploy import datasets
    from netfixtures import check_kernel_run
    run = check_kernel_run(compiled(assignment), "twohot", datasets.load("digits32", layout="nchw").x_test[:3])
    k = run._kernel                               # bits, one start, counters and ports: check_kernel_run
    assert k.strict and checked_raw(k.strict_report) == {"act": 8}
    assert (k.tables["pz"], k.tables["pc"]) == SHAPE[assignment]


def test_given_lanes_and_banks_win_over_the_sizer(tmp_path):
    """``net_shape: board`` with ``net_lanes`` / ``net_banks`` given keeps them (a compiled model
    records the sizer's pick; ``hlsnn compile``'s refusal names a shape to give)."""
    text = CONFIG.read_text().replace("\n  net_shape: board", "\n  net_shape: board\n  net_lanes: 8\n  net_banks: 16")
    (tmp_path / "given.yaml").write_text(text)
    p = hlsnn.load_config(tmp_path / "given.yaml").params
    assert (p["net_lanes"], p["net_banks"]) == (8, 16) and p["net_shape"] == "board"


def test_twohot_codes_keep_the_limit_and_a_code_beyond_it_is_refused(compiled):
    """The compiled twohot_z2 program's codes are within the config's max_code 128 (its quantizer's
    code limit; the refit of the codes on the calibration images may stop below it), and the network kernel
    refuses the same program on a config whose limit is below its codes, and on DSP banks a code
    above 128 (:mod:`hlsnn.engines.shift_mac.network.dsp`), in one line each."""
    from dataclasses import replace
    import numpy as np
    from hlsnn.errors import InputError
    from hlsnn.network import fit
    from hlsnn.engines.shift_mac.network import dsp, kernel
    net, _ = fit.network_kernel(*artifact.read(compiled("twohot_z2")))
    assert net.params["max_code"] == 128 and net.params["net_dsp"]
    t = kernel.tables(net, 16, 32)
    big = max(int(np.abs(dsp.values(b)).max()) for lane in t["weights"] for b in lane)
    assert 64 < big <= 128
    with pytest.raises(InputError, match="above the config's max_code 96") as e:
        kernel.tables(replace(net, params={**net.params, "max_code": 96}), 16, 32)
    assert "\n" not in str(e.value)
    hot = [[np.array([1 << 15]), np.array([7 | 6 << 6 | 1 << 13])]] * 2      # 128 + 64 on the DSP bank
    with pytest.raises(InputError, match="magnitude 192 on the DSP banks"):
        dsp.rom(hot, 2, 2)
