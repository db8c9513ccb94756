"""The output layer of a regression deployment refitted to the float network (``weight_fit:
network`` on bfp / fixed / sparse formats, hlsnn.deploy.quantize.outfit; issue 52): the layers it
refits, the error-feedback rounding against a closed form, the refit's error against
onnxruntime's float outputs on held-out images below the plain quantization's, the compiled
model's bits those of the deployment, and the config's rule."""
import numpy as np
import onnx
import pytest
from conftest import ROOT
from onnx import TensorProto, helper, numpy_helper

from hlsnn.deploy import datasets
from hlsnn.deploy.quantize import outfit, outputs
from hlsnn.deploy.config import ConfigError, load_deploy_config
from hlsnn.deploy.reports.evaluate import open_accelerators
from hlsnn.deploy.importer.onnx_import import load_onnx
from hlsnn.deploy.run.runner import Deployment


def _model(path, flatten=True):
    """x (N, 1, 8, 8) -> Conv 3x3 (8) -> ReLU -> Conv 3x3 (1) [-> Flatten]: an output conv whose
    eight channels' terms cancel (weights of both signs, a small output)."""
    rng = np.random.default_rng(7)
    w1 = rng.normal(0, 0.6, (8, 1, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w2 = rng.normal(0, 0.25, (1, 8, 3, 3)).astype(np.float32)
    w2[0, ::2] = -w2[0, 1::2] * 0.93                         # pairs of channels that nearly cancel
    b2 = np.zeros(1, np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c" if flatten else "y"], pads=[1, 1, 1, 1])]
    if flatten:
        nodes.append(helper.make_node("Flatten", ["c"], ["y"]))
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64] if flatten else ["n", 1, 8, 8])]
    g = helper.make_graph(nodes, "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
                          out, [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return path


def _yaml(tmp_path, model, fmt):
    p = tmp_path / "c.yaml"
    p.write_text(f"name: c\nmodel: {model}\ndata: digits\nlayout: nchw\ntask: regression\ncalibration: {{samples: 64}}\n"
                 f"formats:\n  f: {fmt}\n")
    return p


def _ort(path, x):
    import onnxruntime as ort
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x.astype(np.float32)})[0].astype(np.float64)


def test_the_output_layers_are_reached_through_reshapes_and_a_tanh_or_sigmoid_head_only(tmp_path):
    net = load_onnx(_model(tmp_path / "m.onnx"))
    assert [la.name for la in outputs.output_layers(net)] == [net.engine_layers()[-1].name]
    # an elementwise Tanh / Sigmoid head (pix2pix's Tanh, a mask's Sigmoid): still the layer's output
    # fitted to its float value; a host computation that mixes its values (a Softmax) is not the layer's
    for op, attrs, want in (("Sigmoid", {}, True), ("Tanh", {}, True), ("Softmax", {"axis": 1}, False)):
        m = onnx.load(_model(tmp_path / "n.onnx", flatten=False))
        m.graph.node[-1].output[0] = "c"
        m.graph.node.append(helper.make_node(op, ["c"], ["y"], **attrs))
        onnx.save(m, tmp_path / "s.onnx")
        net = load_onnx(tmp_path / "s.onnx")
        assert [la.name for la in outputs.output_layers(net)] == ([net.engine_layers()[-1].name] if want else []), op


def test_feedback_rounding_is_gptq_s_closed_form_on_two_weights():
    """Two weights: the first rounds to its nearest step; the second is rounded after moving
    by ``(w0 - q0) * H01 / H11``, the least-squares answer to the first one's error under ``H``."""
    h = np.array([[2.0, 0.9], [0.9, 1.0]])
    step = np.array([0.25])
    for w in ([0.37, -0.61], [1.12, 0.05], [-0.2, 0.4]):
        w0, w1 = w
        q0 = np.rint(w0 / 0.25) * 0.25
        q1 = np.rint((w1 + (w0 - q0) * h[0, 1] / h[1, 1]) / 0.25) * 0.25
        got = outfit.feedback_codes(np.array([[w]]), h[None], step, damp=0.0)
        np.testing.assert_allclose(got[0, 0], [q0, q1], atol=1e-12)
    # uncorrelated inputs: each weight's nearest code, clipped to the code range
    got = outfit.feedback_codes(np.array([[[0.3, 40.0, -0.6]]]), np.eye(3)[None], np.array([0.25]), damp=0.0)
    np.testing.assert_allclose(got[0, 0], [0.25, 127 * 0.25, -0.5])


@pytest.mark.parametrize("fmt", ["{type: bfp, accel: bfp8_zcu104}", "{type: fixed, accel: sparse8_pynq-z2}"])
def test_the_refit_is_nearer_onnxruntime_on_held_out_images(tmp_path, fmt):
    path = _model(tmp_path / "m.onnx")
    ds = datasets.load("digits", layout="nchw")
    x_cal, x = ds.x_train[:64], np.asarray(ds.x_test[:100], np.float64)
    ref = _ort(path, x)
    errs = {}
    for fit in ("output", "network"):
        cfg = load_deploy_config(_yaml(tmp_path, path, fmt[:-1] + f", weight_fit: {fit}}}"))
        net = load_onnx(cfg.model)
        accs = open_accelerators(cfg, "emu")
        try:
            dep = Deployment(net, cfg.assignments["f"], cfg.formats, accs)
            dep.calibrate(x_cal)
            y = dep.run(x)
        finally:
            for a in accs.values():
                a.close()
        errs[fit] = np.linalg.norm(y.reshape(ref.shape) - ref) / np.linalg.norm(ref)
        if fit == "network":
            (name, (before, after)), = dep.output_fit.items()
            assert name == net.engine_layers()[-1].name and after < before
        else:
            assert not hasattr(dep, "output_fit")
    assert errs["network"] < 0.9 * errs["output"], errs


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["{type: bfp, accel: bfp8_zcu104}", "{type: fixed, accel: sparse8_pynq-z2}"])
def test_the_refit_through_a_tanh_head_is_nearer_onnxruntime(tmp_path, fmt):
    """The output conv under a ``Tanh`` (pix2pix's head, torch_families/variant_seventh.py's s_unet_p2p):
    refitted to its float output, the network's output is nearer onnxruntime's on held-out images."""
    m = onnx.load(_model(tmp_path / "n.onnx", flatten=False))
    m.graph.node[-1].output[0] = "c"
    m.graph.node.append(helper.make_node("Tanh", ["c"], ["y"]))
    path = tmp_path / "t.onnx"
    onnx.save(m, path)
    ds = datasets.load("digits", layout="nchw")
    x_cal, x = ds.x_train[:64], np.asarray(ds.x_test[:100], np.float64)
    ref = _ort(path, x)
    errs = {}
    for fit in ("output", "network"):
        cfg = load_deploy_config(_yaml(tmp_path, path, fmt[:-1] + f", weight_fit: {fit}}}"))
        accs = open_accelerators(cfg, "emu")
        try:
            dep = Deployment(load_onnx(cfg.model), cfg.assignments["f"], cfg.formats, accs)
            dep.calibrate(x_cal)
            y = dep.run(x)
        finally:
            for a in accs.values():
                a.close()
        errs[fit] = np.linalg.norm(y.reshape(ref.shape) - ref) / np.linalg.norm(ref)
    assert errs["network"] < 0.9 * errs["output"], errs


def test_weight_fit_of_a_bfp_or_fixed_format_is_output_or_network(tmp_path):
    path = _model(tmp_path / "m.onnx")
    cfg = load_deploy_config(_yaml(tmp_path, path, "{type: bfp, accel: bfp8_zcu104, weight_fit: network}"))
    assert cfg.formats["f"].weight_fit == "network" and "weight_fit" not in cfg.formats["f"].auto
    with pytest.raises(ConfigError, match="weight_fit.*output .*or network"):
        load_deploy_config(_yaml(tmp_path, path, "{type: fixed, accel: sparse8_pynq-z2, weight_fit: nearest}"))


@pytest.mark.parametrize("fmt", ["{type: bfp, accel: bfp8_zcu104}",
                                 pytest.param("{type: fixed, accel: sparse8_pynq-z2}", marks=pytest.mark.slow)])
def test_a_compiled_model_has_the_refitted_deployment_s_bits(tmp_path, fmt):
    """``hlsnn compile`` resolves the regression default (``weight_fit: network``) and stores
    the refitted weights: the compiled model's outputs are the deployment's, which differ from
    the plain quantization's."""
    import hlsnn
    from hlsnn.deploy.quantize import task_formats
    from hlsnn.network.build import compile_model
    path = _model(tmp_path / "m.onnx")
    cfg_path = _yaml(tmp_path, path, fmt)
    out = tmp_path / "m.hlsnn"
    compile_model(cfg_path, "f", out, check_samples=2)
    cfg = load_deploy_config(cfg_path)
    ds = datasets.load("digits", layout="nchw")
    x = np.asarray(ds.x_test[:30], np.float64)
    ys = {}
    for task in ("regression", "classification"):
        accs = open_accelerators(cfg, "emu")
        try:
            dep = Deployment(load_onnx(cfg.model), cfg.assignments["f"], task_formats.resolve(cfg.formats, task), accs)
            dep.calibrate(ds.x_train[:64])
            ys[task] = dep.run(x)
        finally:
            for a in accs.values():
                a.close()
    assert dep.formats["f"].weight_fit == "output"
    with hlsnn.load(out) as net:
        y = net.run(x)
    np.testing.assert_array_equal(y, ys["regression"])
    assert not np.array_equal(y, ys["classification"])
