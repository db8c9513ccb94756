"""A HardSwish after a squeeze-excite gate on BFP activations (issue 52, rule bfp_hardswish_table of
hlsnn.engines.bfp_systolic.network.gate): d-li14's MobileNetV3 port (v_f_mbv3_dl, ``x *
hsigmoid(fc(pool(x)))`` then ``x * relu6(x + 3) / 6``) in bfp8 runs in one network start with the
layer path's bits. The gate's products have wider mantissas than rule bfp_hardswish's exact HardSwish takes,
so both paths code them at a calibrated radix and look the code up in rule unary_table's table (bfp_table).

References: the codes and the table entries computed on the exact values with Python's Fraction
from HardSwish's definition, and the layer-by-layer compiled network on the emulator."""
import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, round_fraction  # noqa: E402
from test_torch_beyond import _data, compile_beyond  # noqa: E402

NAME = "v_f_mbv3_dl_ts17"


@pytest.fixture(scope="module")
def mbv3(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netbfphswish", [NAME], formats=("bfp8",))[NAME, "bfp8"]


def _hswish(x):
    return x * min(max(x + 3, 0), 6) / 6


def test_hardswish_of_a_gate_is_a_table_of_codes_in_both_paths(mbv3):
    """Before: refused by name on the network path ("HardSwish of BFP values that are not an
    engine layer's output"). Now each HardSwish after a gate is a table op (bfp_hardswish_table: ``bfp_table`` in
    the program, no ``exact``), the one after a conv stays rule bfp_hardswish; the network runs as one
    program with the layer path's bits; the layer path's values are the codes ``q = R(v 2**F)``
    (saturated to b = 11 bits: rule bfp_wide_codes's M + 3 for a gate's products, 8 before it) looked up in
    the table ``R(hswish(q 2**-F) 2**F_o)``."""
    x = _data(NAME).x_test[:40]
    layers = hlsnn.load(mbv3, "emu", network=False)
    want, env = layers.run(x, keep=True)
    net = hlsnn.load(mbv3, "emu", network=True)
    hs = [op for op in net.network.ops if op.kind == "lut" and op.f["fn"] == "HardSwish"]
    made = {op.out: op for op in net.network.ops}
    tabled = [op for op in hs if not op.f.get("exact")]
    assert len(tabled) == 2 and all(made[op.ins[0]].kind == "gate" for op in tabled)
    assert all(made[op.ins[0]].kind == "conv" for op in hs if op.f.get("exact"))
    np.testing.assert_array_equal(net(x), want)
    rnd = layers.program["rounding"]
    lays = {j["name"]: j for j in layers.program["layers"]}
    for op in tabled:
        j = lays[op.name]
        f_in, f_o = j["bfp_table"]["f_in"], op.f["f_out"]
        assert j["bfp_table"]["bits"] == 11 and op.f["f_in"] == f_in
        half = 1 << 10
        for q in range(-half, half, 7):
            t = round_fraction(_hswish(Fraction(q, 2 ** f_in)) * 2 ** f_o, rnd)
            assert op.f["table"][q + half] == t
        for v, g in zip(env[j["inputs"][0]].reshape(-1)[:600], env[j["output"]].reshape(-1)[:600]):
            q = max(-half, min(half - 1, round_fraction(Fraction(float(v)) * 2 ** f_in, rnd)))
            assert Fraction(float(g)) == Fraction(int(op.f["table"][q + half]), 2 ** f_o)


@pytest.mark.csim
@pytest.mark.slow      # a kernel build (~25 s); the quick test above runs the rules on emu
def test_mbv3_bfp8_runs_in_one_start_of_the_network_kernel_and_the_board(mbv3):
    """The bfp_systolic network kernel's C-simulation and the simulated board: one start per
    batch, the layer path's bits. (Its Add of 8 channels runs on 16 banks: the banks past the
    last channel hold the gate's wide products and must raise no status bit.)"""
    check_kernel_run(mbv3, "bfp8", _data(NAME).x_test[:64], board=True)
