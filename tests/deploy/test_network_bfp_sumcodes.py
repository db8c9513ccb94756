"""Rule bfp_wide_codes of hlsnn.engines.bfp_systolic.network.gate (issue 52): a table of a sum or product of
BFP pairs reads codes of ``M + 3`` bits (11 for bfp8), a table of a conv's output keeps ``M``.

Before, CBAM's ``sigmoid(mlp(avgpool) + mlp(maxpool))`` read 8-bit codes of the exact sum and
f_dw_cbam's bfp8 accuracy fell from 95.56 to 95.00 % (float 96.11). The reference here is
independent of the code under test: numpy's sigmoid and leaky relu of the codes, the codes
computed by hand from the layer path's exact float64 sums by the documented rule
(``q = sat_b(round(v 2**F))``, the table entry ``round(f(q 2**-F) 2**F_o)``, both with the
deployment's rounding); the radix ``F`` and ``F_o`` are the compiled program's calibrated
parameters."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import round_array  # noqa: E402
from test_network_tablein import BEYOND, _compile, _x, tablein_model  # noqa: E402

BFP8 = {"bfp8": "{type: bfp, accel: bfp8_zcu104}"}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _leaky(alpha):
    return lambda x: np.where(x >= 0, x, x * alpha)


def _check(path, x, fns):
    """The layer path's table outputs of ``fns`` (``{op: numpy function}``) against the
    reference; returns ``{op: (bits, source kind)}`` of every bfp_table table op of the program."""
    layers = hlsnn.load(path, "emu", network=False)
    _, env = layers.run(x, keep=True)
    net = hlsnn.load(path, "emu", network=True)
    made = {op.out: op.kind for op in net.network.ops}
    ops = {op.name: op for op in net.network.ops if op.kind == "lut" and not op.f.get("exact")}
    rnd = layers.program["rounding"]
    seen = {}
    for j in layers.program["layers"]:
        if "bfp_table" not in j or j["name"] not in ops:
            continue
        op = ops[j["name"]]
        b, f_in, f_o = int(j["bfp_table"]["bits"]), int(j["bfp_table"]["f_in"]), int(op.f["f_out"])
        seen[j["op"]] = (b, made.get(net.network.aliases.get(op.ins[0], op.ins[0])))
        if j["op"] not in fns:
            continue
        v = env[j["inputs"][0]].astype(np.float64)
        q = np.clip(round_array(np.ldexp(v, f_in), rnd), -(1 << (b - 1)), (1 << (b - 1)) - 1)
        want = np.ldexp(round_array(np.ldexp(fns[j["op"]](np.ldexp(q, -f_in)), f_o), rnd), -f_o)
        np.testing.assert_array_equal(env[j["output"]], want)
        assert (np.abs(q) < (1 << (b - 1)) - 1).mean() > 0.99        # DETERMINE's radix: few codes saturate
    np.testing.assert_array_equal(net(x), layers(x))                 # the network mode: the same bits
    return seen


def test_a_leaky_relu_of_a_sum_reads_11_bit_codes_a_sigmoid_of_a_conv_8(tmp_path):
    """The tablein model (LeakyRelu(alpha 1/8) of an Add, Sigmoid of a conv, HardSigmoid of a
    gate's product, Tanh of an average pool) in bfp8: the sum's, product's and mean's tables have
    11-bit codes, the conv's 8; the LeakyRelu's and Sigmoid's outputs are numpy's on the codes."""
    path = _compile(tmp_path, tablein_model(tmp_path / "tablein.onnx", gate_act="HardSigmoid", gated="c1"),
                    "tablein", BFP8)["bfp8"]
    seen = _check(path, _x(48), {"LeakyRelu": _leaky(0.125), "Sigmoid": _sigmoid})
    assert seen == {"LeakyRelu": (11, "add"), "Sigmoid": (8, "conv"), "HardSigmoid": (11, "gate"),
                    "Tanh": (11, "avgpool")}, seen


@pytest.mark.parametrize("name", ["v_f_dw_cbam_ts17", "v_f_dw_cbam_dynamo"])
def test_cbam_channel_attention_sigmoid_of_the_sum_is_numpys_on_11_bit_codes(name, tmp_path):
    """hfam's f_dw_cbam exported by torch: the channel attention's Sigmoid of the Add of the two
    MLP outputs reads 11-bit codes (rule bfp_wide_codes) and gives numpy's sigmoid of them."""
    model = BEYOND / f"{name}.onnx"
    if not model.exists():
        pytest.skip(f"{model.name}: hfam's fixture")
    path = _compile(tmp_path, model, name, BFP8)["bfp8"]
    assert _check(path, _x(24), {"Sigmoid": _sigmoid}) == {"Sigmoid": (11, "add")}
