"""Low-bit QONNX activations (issue 82): Brevitas CNV-style models at W4A4 (unsigned 4-bit ReLU
activations), W2A2 and W1A1 (binary weights, sign activations: ``BipolarQuant``), trained briefly on
the digits and exported with ``export_qonnx`` (``scripts/make_qonnx_models.py``; its dynamo and its
TorchScript exporter, ``cnv_*_ts.onnx``), deploy with every
layer exact and give qonnx's executor's outputs bit for bit: through the Python API here (emu),
through ``hlsnn compile`` and the network kernel on the simulated board (one start) in the slow test.

The references are qonnx's own: its executor (``qonnx.core.onnx_exec.execute_onnx``) on the files,
and its op functions (``quant``, ``binary_quant``) for the rules the import relies on."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("qonnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy import datasets
from hlsnn.deploy.importer import qimport  # noqa: E402
from hlsnn.errors import ModelError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "qonnx"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
LOWBIT = sorted(f[:-5] for f, e in MANIFEST["files"].items() if e["model"] == "cnv")

_spec = importlib.util.spec_from_file_location("qonnx_import_helpers", Path(__file__).with_name("test_qonnx_import.py"))
_t = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_t)           # its qonnx executor, deployment config and Python-API path


def test_the_low_bit_files_are_there():
    assert LOWBIT == ["cnv_w1a1", "cnv_w1a1_ts", "cnv_w2a2", "cnv_w2a2_ts", "cnv_w4a4", "cnv_w4a4_ts"]
    assert {MANIFEST["files"][f"{n}.onnx"]["exporter"] for n in LOWBIT} == {"dynamo", "torchscript"}
    for name in LOWBIT:
        m = onnx.load(str(DATA / f"{name}.onnx"))
        inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        acts = [n for n in m.graph.node if n.op_type in ("Quant", "BipolarQuant") and n.input[0] not in inits
                and not n.input[0].startswith("slice")]
        bits = MANIFEST["files"][f"{name}.onnx"]["act_bits"]
        if bits == 1:
            assert sum(n.op_type == "BipolarQuant" for n in acts) == 4
        else:
            assert sorted(int(inits[n.input[3]]) for n in acts if n.op_type == "Quant").count(bits) == 4


@pytest.mark.parametrize("bits", range(2, 9))
@pytest.mark.parametrize("signed,narrow", [(0, 0), (1, 0), (1, 1), (0, 1)])
def test_a_low_bit_quant_is_int8_requantization_clamped(bits, signed, narrow):
    """qonnx's Quant at ``2**-f`` equals int8's requantization (round half to even, saturate to
    int8) clamped to :func:`qimport.clamp_bounds`, where that gives a range (else int8 itself)."""
    from qonnx.custom_op.general.quant import quant
    rng = np.random.default_rng(bits)
    for f in (-2, 0, 3):
        x = (rng.standard_normal(3000) * 2.0 ** (bits - f)).astype(np.float32)
        x[:64] = np.arange(-32, 32) * np.float32(2.0 ** -(f + 1))         # ties
        tq = qimport.TensorQuant("", "activation", bits, bool(signed), np.asarray(2.0 ** -f, np.float32),
                                 np.zeros(()), narrow=bool(narrow))
        bounds = qimport.clamp_bounds(tq)
        lo, hi = bounds or (-128, 127)
        if tq.int_range[1] > 127:                                        # uint8: not within int8
            assert bounds is None
            continue
        assert bounds is None if tq.int_range == (-128, 127) else bounds == tq.int_range
        q8 = np.clip(np.rint(x.astype(np.float64) * 2.0 ** f), -128, 127)
        got = np.clip(q8, lo, hi) * 2.0 ** -f
        want = quant(x, np.float32(2.0 ** -f), np.float32(0), np.float32(bits), signed, narrow, "ROUND")
        assert np.array_equal(got, np.asarray(want, np.float64)), (bits, signed, narrow, f)


def test_the_bipolar_table_is_qonnx_binary_quant():
    """Rule 9's Bipolar table on every int8 code at several radixes: qonnx's ``binary_quant`` of
    the code's value, exactly (0 goes to +scale)."""
    from qonnx.custom_op.general.bipolar_quant import binary_quant
    from hlsnn.engines.network import gate
    q = np.arange(-128, 128)
    for f_in in (-3, 0, 5, 14):
        for scale in (1.0, 0.125, 4.0):
            f_o, t = gate.table("Bipolar", {"scale": scale}, (f_in, 8, True), "nearest_even")
            want = binary_quant(np.ldexp(q, -f_in).astype(np.float32), np.float32(scale))
            assert np.array_equal(np.ldexp(t.astype(np.float64), -f_o), want), (f_in, scale)


@pytest.mark.parametrize("name", LOWBIT)
def test_every_layer_exact_and_qonnx_bit_for_bit_through_the_python_api(name, tmp_path):
    """open_deployment -> calibrate -> run (the tutorial's path) on 40 test images."""
    x = datasets.load("digits", layout="nchw").x_test[:40]
    y, layers = _t._deployed(tmp_path, name, x)
    assert len(layers) == 5 and all(v["mapping"] == "exact" for v in layers.values()), layers
    want = _t._qonnx(DATA / f"{name}.onnx", x)
    assert np.array_equal(y, want) and np.abs(want).max() > 1


@pytest.mark.parametrize("name", ["cnv_w1a1", "cnv_w2a2"])
def test_shift_codes_that_hold_the_files_weights_run_them_exactly(name, tmp_path):
    """Binary and 2-bit weights at a power-of-two scale are power-of-two codes: on ``shift_mac``
    (``pot``, ``weight_fit: nearest``) every layer is exact and qonnx's bits come out; with
    ``weight_fit: network`` (the codes refitted to the float network's outputs; ``auto``'s choice
    here) the layers say why not."""
    from hlsnn.deploy.reports.evaluate import open_deployment
    x = datasets.load("digits", layout="nchw").x_test[:40]
    ds = datasets.load("digits", layout="nchw")
    for fit in ("nearest", "network"):
        cfg = _t._config(tmp_path, name, f"  pot: {{type: pot, accel: shift8_pynq-z2, weight_fit: {fit}}}\n")
        with open_deployment(cfg) as dep:
            dep.calibrate(ds.x_train[:128])
            y, layers = dep.run(x), dep.imported
        if fit == "nearest":
            assert all(v["mapping"] == "exact" for v in layers.values()), layers
            assert np.array_equal(y, _t._qonnx(DATA / f"{name}.onnx", x))
        else:
            assert any("weight_fit: nearest keeps the file's" in v["why"] for v in layers.values()), layers


def test_the_deploy_report_says_exact_and_the_kernel_takes_the_clamps_and_signs(tmp_path):
    from hlsnn.evaluation.run import deploy
    for name in ("cnv_w4a4", "cnv_w1a1"):
        res = deploy(_t._config(tmp_path, name))
        e = res["assignments"]["fixed8"]
        assert all(v["mapping"] == "exact" for v in e["imported_quantization"].values())
        assert abs(e["accuracy"] - MANIFEST["files"][f"{name}.onnx"]["qonnx_accuracy"]) < 1e-9


def _act_model(tmp_path, node, scale_shape=()):
    """x -> MatMul by +-1 weights -> the activation ``node`` (reading "h", writing "y")."""
    w = np.where(np.random.default_rng(0).standard_normal((6, 4)) >= 0, 1.0, -1.0).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(scale_shape, 0.5, np.float32), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("qonnx.custom_op.general", 1)])
    path = tmp_path / "act.onnx"
    onnx.save(m, str(path))
    return path


def test_a_bipolar_activation_in_the_float_model_equals_qonnx(tmp_path):
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    path = _act_model(tmp_path, helper.make_node("BipolarQuant", ["h", "s"], ["y"], domain="qonnx.custom_op.general"))
    x = np.random.default_rng(1).integers(-3, 4, (9, 6)).astype(np.float32) * 0.5     # sums of 0 too
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host"] == ["Bipolar"]
    assert np.array_equal(float_forward(net, x), _t._qonnx(path, x))


def test_a_bipolar_activation_of_channel_scales_is_refused_by_name(tmp_path):
    path = _act_model(tmp_path, helper.make_node("BipolarQuant", ["h", "s"], ["y"], name="sign1",
                                                 domain="qonnx.custom_op.general"), scale_shape=(1, 4))
    with pytest.raises(ModelError, match=r"'sign1' \(BipolarQuant\): scale of shape \(1, 4\) on an activation; "
                                         r"hlsnn takes one scale per tensor"):
        qimport.annotations(path)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("name", ["cnv_w4a4", "cnv_w1a1_ts"])
def test_compiled_network_kernel_on_the_sim_board_equals_qonnx(name, tmp_path):
    """hlsnn compile, then the network kernel on the simulated board: one start for the batch,
    qonnx's outputs bit for bit."""
    import hlsnn
    from hlsnn.network.build import compile_model
    x = datasets.load("digits", layout="nchw").x_test[:48]
    path = tmp_path / f"{name}.hlsnn"
    compile_model(_t._config(tmp_path, name), "fixed8", path)
    with hlsnn.load(path, "sim", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 1
    assert np.array_equal(got, _t._qonnx(DATA / f"{name}.onnx", x))


def test_signed_narrow_low_bit_activations_are_exact_too(tmp_path):
    """A hand-made QONNX MLP whose hidden activation is a signed narrow int4 Quant (no ReLU, so
    the clamp [-7, 7] is all that bounds it; most values saturate) and whose output is int8: every
    layer exact, qonnx's outputs bit for bit."""
    from hlsnn.deploy.reports.evaluate import open_deployment
    rng = np.random.default_rng(3)
    q = "qonnx.custom_op.general"
    inits = {"w1": rng.integers(-7, 8, (64, 32)) * 2.0 ** -5, "w2": rng.integers(-127, 128, (32, 10)) * 2.0 ** -9,
             "b1": rng.integers(-500, 500, 32) * 2.0 ** -11, "b2": rng.integers(-500, 500, 10) * 2.0 ** -9,
             "s_x": 2.0 ** -6, "s_w1": 2.0 ** -5, "s_h": 2.0 ** -3, "s_w2": 2.0 ** -9, "s_y": 2.0 ** -4,
             "z": 0.0, "b8": 8.0, "b4": 4.0, "shape": np.array([1, 64])}
    a = dict(domain=q, signed=1, rounding_mode="ROUND")
    nodes = [helper.make_node("Quant", ["x", "s_x", "z", "b8"], ["xq"], narrow=0, **a),
             helper.make_node("Reshape", ["xq", "shape"], ["xf"]),
             helper.make_node("Quant", ["w1", "s_w1", "z", "b4"], ["w1q"], narrow=1, **a),
             helper.make_node("MatMul", ["xf", "w1q"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Quant", ["h1", "s_h", "z", "b4"], ["h"], narrow=1, **a),
             helper.make_node("Quant", ["w2", "s_w2", "z", "b8"], ["w2q"], narrow=1, **a),
             helper.make_node("MatMul", ["h", "w2q"], ["y0"]), helper.make_node("Add", ["y0", "b2"], ["y1"]),
             helper.make_node("Quant", ["y1", "s_y", "z", "b8"], ["y"], narrow=0, **a)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          [numpy_helper.from_array(np.asarray(v, np.int64 if k == "shape" else np.float32), k)
                           for k, v in inits.items()])
    path = tmp_path / "mlp_a4.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(q, 1)]),
              str(path))
    cfg = tmp_path / "mlp_a4.yaml"
    cfg.write_text(f"name: mlp_a4\nmodel: {path}\ndata: digits\nlayout: nchw\nrounding: nearest_even\nformats:\n"
                   "  fixed8: {type: fixed, accel: sparse8_pynq-z2}\nassignments:\n  fixed8: {default: fixed8}\n")
    ds = datasets.load("digits", layout="nchw")
    x = ds.x_test[:40]
    with open_deployment(cfg) as dep:
        dep.calibrate(ds.x_train[:128])
        y, layers = dep.run(x), dep.imported
    assert [v["mapping"] for v in layers.values()] == ["exact", "exact"], layers
    want = _t._qonnx(path, x)
    hidden = qimport.annotations(path)["h1"]
    assert qimport.clamp_bounds(hidden) == (-7, 7)
    assert np.array_equal(y, want) and len(np.unique(want)) > 20
