"""The ResNet-8-shaped example (configs/models/resnet8_digits32.*, scripts/train_resnet8.py;
issue 16): the shipped model imports without a host fallback, its float network equals onnx's
ReferenceEvaluator, it deploys in every format, bit for bit the same on emu and csim, and 8-bit
BFP and two-hot stay within one point of the float accuracy."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment, float_forward  # noqa: E402

CONFIG = ROOT / "configs" / "models" / "resnet8_digits32.yaml"


@pytest.fixture(scope="module")
def model():
    cfg = load_deploy_config(CONFIG)
    return cfg, load_onnx(cfg.model), datasets.load("digits32")


def test_shape_of_resnet8(model):
    _, net, _ = model
    engine = [(la.name, la.kind, la.w.shape[0], la.strides) for la in net.engine_layers()]
    assert engine == [("stem", "conv", 16, (1, 1)), ("s1a", "conv", 16, (1, 1)), ("s1b", "conv", 16, (1, 1)),
                      ("s2a", "conv", 32, (2, 2)), ("s2s", "conv", 32, (2, 2)), ("s2b", "conv", 32, (1, 1)),
                      ("s3a", "conv", 64, (2, 2)), ("s3s", "conv", 64, (2, 2)), ("s3b", "conv", 64, (1, 1)),
                      ("fc", "dense", 10, (1, 1))]
    assert [la.op for la in net.layers if la.kind == "host"].count("Add") == 3
    assert not [la for la in net.layers if la.op == "fallback"]


def test_float_network_equals_the_reference(model):
    from onnx.reference import ReferenceEvaluator
    cfg, net, ds = model
    x = ds.x_test[:8]
    want = ReferenceEvaluator(cfg.model).run(None, {"input": x})[0]
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-4, atol=1e-6)


def test_float_accuracy(model):
    ort = pytest.importorskip("onnxruntime")
    cfg, _, ds = model
    sess = ort.InferenceSession(cfg.model, providers=["CPUExecutionProvider"])
    probs = sess.run(None, {"input": ds.x_test})[0]
    assert np.mean(probs.argmax(1) == ds.y_test) >= 0.97


@pytest.mark.slow   # the whole 32x32 test set emulated twice (~25 CPU-s); the quick suite keeps the
# accuracy rule on the digits MLP/CNN (test_deploy) and the torch exports' strided nets (test_torch_exports)
@pytest.mark.parametrize("fmt", ["bfp8", "bfp8_z2", "twohot"])
def test_bfp8_and_twohot_within_one_point_of_float(model, fmt):
    ort = pytest.importorskip("onnxruntime")
    cfg, net, ds = model
    sess = ort.InferenceSession(cfg.model, providers=["CPUExecutionProvider"])
    float_acc = np.mean(sess.run(None, {"input": ds.x_test})[0].argmax(1) == ds.y_test)
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(ds.x_train[:cfg.calibration["samples"]])
        acc = np.mean(dep.run(ds.x_test).argmax(1) == ds.y_test)
    finally:
        for a in accs.values():
            a.close()
    assert acc >= float_acc - 0.01, (fmt, acc, float_acc)


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bfp8", "bfp16", "twohot", "pot", "fixed8", "sparse50"])
def test_every_format_bit_exact_on_csim(model, fmt):
    cfg, net, ds = model
    assert fmt in cfg.assignments
    x_cal, x = ds.x_train[:4], ds.x_test[:1]
    emu, tgt = open_accelerators(cfg, "emu"), open_accelerators(cfg, "csim")
    try:
        outs = []
        for accs in (emu, tgt):
            dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
            dep.calibrate(x_cal)
            outs.append(dep.run(x))
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=fmt)
    finally:
        for a in list(emu.values()) + list(tgt.values()):
            a.close()
