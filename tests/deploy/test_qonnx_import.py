"""QONNX models (issue 50): files that Brevitas' ``export_qonnx`` wrote after quantization-aware
training (``scripts/make_qonnx_models.py``) deploy; where every layer maps exactly, their outputs
equal qonnx's own executor's (``qonnx.core.onnx_exec.execute_onnx``) bit for bit; otherwise accuracy
stays within one point of qonnx's and every layer says what was approximated."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
qonnx = pytest.importorskip("qonnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy import datasets
from hlsnn.deploy.importer import qimport  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_deployment  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "qonnx"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
FILES = sorted(MANIFEST["files"])
EXACT = [f[:-5] for f in FILES if MANIFEST["files"][f]["variant"] in ("pot", "w4")
         or MANIFEST["files"][f]["model"] == "cnv"]          # issue 82: W4A4, W2A2, W1A1 (test_qonnx_lowbit.py)
APPROX = [f[:-5] for f in FILES if MANIFEST["files"][f]["variant"] == "float"]


def _qonnx(path, x):
    """qonnx's executor, one image a call (the export fixes the batch at 1)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes
    m = ModelWrapper(str(path)).transform(InferShapes())
    inp, out = m.graph.input[0].name, m.graph.output[0].name
    return np.concatenate([execute_onnx(m, {inp: x[i:i + 1].astype(np.float32)})[out] for i in range(len(x))])


def _config(tmp_path, name, formats="  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"):
    names = [line.split(":")[0].strip() for line in formats.strip("\n").split("\n")]
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nmodel: {DATA / (name + '.onnx')}\ndata: digits\nlayout: nchw\n"
                    f"rounding: nearest_even\nformats:\n{formats}assignments:\n"
                    + "".join(f"  {n}: {{default: {n}}}\n" for n in names))
    return path


def _deployed(tmp_path, name, x):
    ds = datasets.load("digits", layout="nchw")
    with open_deployment(_config(tmp_path, name)) as dep:
        dep.calibrate(ds.x_train[:128])          # the documented path: calibrate pins the file's radix points
        return dep.run(x), dep.imported


def test_the_files_are_brevitas_qonnx():
    assert MANIFEST["brevitas"] and EXACT and APPROX
    for f in FILES:
        m = onnx.load(str(DATA / f))
        quants = [n for n in m.graph.node if n.op_type == "Quant"]
        assert quants and all(n.domain == "qonnx.custom_op.general" for n in quants)
        inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        scales = [inits[n.input[1]] for n in quants if n.input[1] in inits]
        bits = sorted({int(inits[n.input[3]]) for n in quants if n.input[3] in inits})
        pow2 = all(np.all(np.frexp(s.astype(np.float64))[0] == 0.5) for s in scales)
        assert pow2 == (MANIFEST["files"][f]["variant"] != "float")
        wbits = MANIFEST["files"][f]["weight_bits"]
        assert (wbits in bits if wbits > 1 else any(n.op_type == "BipolarQuant" for n in m.graph.node)) \
            and 32 in bits                                                       # Int32Bias


@pytest.mark.slow            # qonnx's executor runs node by node: ~1-2 s per image on a loaded machine
@pytest.mark.parametrize("name", EXACT)
def test_power_of_two_files_equal_qonnx_bit_for_bit(name, tmp_path):
    x = datasets.load("digits", layout="nchw").x_test[:12]
    y, layers = _deployed(tmp_path, name, x)
    assert all(v["mapping"] == "exact" for v in layers.values()), layers
    want = _qonnx(DATA / f"{name}.onnx", x)
    assert np.array_equal(y, want) and np.abs(want).max() > 1


@pytest.mark.slow
@pytest.mark.parametrize("name", EXACT)
def test_power_of_two_files_equal_qonnx_on_every_test_image(name, tmp_path):
    x = datasets.load("digits", layout="nchw").x_test
    y, _ = _deployed(tmp_path, name, x)
    assert np.array_equal(y, _qonnx(DATA / f"{name}.onnx", x))


@pytest.mark.parametrize("name", APPROX)
def test_float_scale_files_are_approximated_within_one_point(name, tmp_path):
    res = deploy(_config(tmp_path, name, "  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                                         "  twohot: {type: twohot, accel: shift8_pynq-z2}\n"))
    want = MANIFEST["files"][f"{name}.onnx"]["qonnx_accuracy"]       # qonnx's executor, 360 images
    for a in ("fixed8", "twohot"):
        e = res["assignments"][a]
        assert abs(e["accuracy"] - want) <= 0.01 + 1e-9, (a, e["accuracy"], want)
        assert all(v["mapping"] == "approximated" and "power-of-two" in v["why"]
                   for v in e["imported_quantization"].values())


def test_reference_quant_equals_qonnx_op():
    """hlsnn's Quant (the float reference's and the weight folding's) against qonnx's own op
    function, over bit widths 2..8, signed, narrow and rounding modes."""
    from qonnx.custom_op.general.quant import quant
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(4000) * 3).astype(np.float32)
    x[:40] = np.arange(-20, 20) * 0.25            # exact ties at scale 0.5
    for bits in range(2, 9):
        for signed in (0, 1):
            for narrow in (0, 1):
                for mode in ("ROUND", "FLOOR", "CEIL", "UP", "DOWN", "HALF_UP", "HALF_DOWN"):
                    for scale in (np.float32(0.5), np.float32(0.3)):
                        want = quant(x, scale, np.float32(0), np.float32(bits), signed, narrow, mode)
                        tq = qimport.TensorQuant("", "", bits, bool(signed), np.asarray(scale), np.zeros(()),
                                                 narrow=bool(narrow), rounding="ROUND" if mode == "ROUND" else mode)
                        assert np.array_equal(qimport.qonnx_quant(x, tq), np.asarray(want, np.float32)), \
                            (bits, signed, narrow, mode, scale)


def test_bipolar_weights_fold(tmp_path):
    """A MatMul by BipolarQuant weights: the folded network equals qonnx's execution."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("BipolarQuant", ["w", "s"], ["wq"], domain="qonnx.custom_op.general"),
         helper.make_node("MatMul", ["x", "wq"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.25), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("qonnx.custom_op.general", 1)])
    path = tmp_path / "bip.onnx"
    onnx.save(m, str(path))
    x = rng.standard_normal((5, 8)).astype(np.float32)
    net = load_onnx(path)
    assert np.array_equal(net.engine_layers()[0].w, np.where(w >= 0, 0.25, -0.25).T)
    np.testing.assert_allclose(float_forward(net, x), _qonnx(path, x), rtol=1e-6, atol=1e-6)
