"""Empirical bias correction (a format's ``bias_correction``, :mod:`hlsnn.deploy.quantize.biascorr`):
after it, the network's output has the float64 network's per-channel mean on the calibration
images; the corrected deployment runs the same bits on its compiled paths as layer by layer;
the config refuses values it does not know."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from test_deploy import ROOT, _base, _write  # noqa: E402

from hlsnn.deploy.quantize import biascorr  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.run.hostops import float_tensors  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.errors import ConfigError  # noqa: E402

FORMATS = (("bfp8", "bfp", "bfp8_zcu104"), ("twohot", "twohot", "shift8_pynq-z2"), ("fixed8", "fixed", "sparse8_pynq-z2"))


def _dw_net(path, seed=0, act="HardSwish"):
    """conv 1->6 3x3, ``act`` (HardSwish), depthwise 3x3 + ReLU, global average pool, dense 6->5
    (no ReLU)."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)

    def arr(a, n):
        return numpy_helper.from_array(np.asarray(a, np.float32), n)
    inits = [arr(rng.normal(0, 0.4, (6, 1, 3, 3)), "w1"), arr(rng.normal(0, 0.2, 6), "b1"),
             arr(rng.normal(0, 0.5, (6, 1, 3, 3)), "w2"), arr(rng.normal(0, 0.2, 6), "b2"),
             arr(rng.normal(0, 0.5, (5, 6)), "w3"), arr(rng.normal(0, 0.1, 5), "b3")]
    mk = helper.make_node
    nodes = [mk("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="c1"),
             mk(act, ["c1"], ["h1"], name="h1"),
             mk("Conv", ["h1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=6, name="c2"),
             mk("Relu", ["c2"], ["r2"], name="r2"), mk("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             mk("Flatten", ["g"], ["f"], name="flat"), mk("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _deployments(tmp_path, mode, act="HardSwish"):
    model = _dw_net(tmp_path / "dw.onnx", act=act)
    cfg = load_deploy_config(_write(tmp_path, _base(model) + "formats:\n" + "".join(
        f"  {k}: {{type: {t}, accel: {ROOT}/configs/accel/{a}.yaml, bias_correction: {mode}"
        + (", weight_fit: output" if t == "twohot" else "") + "}\n"       # not network's fit: its own mean
        for k, t, a in FORMATS), name=f"{mode}.yaml"))
    return cfg, load_onnx(model)


def _images():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_train[:64]


@pytest.mark.slow
def test_corrected_output_has_the_float_networks_mean(tmp_path):
    """The output layer (no ReLU) after the correction: its per-channel mean error against the
    float64 network (numpy, hostops.float_tensors) on the calibration images is a small part of
    one output step (twohot, fixed8: the weights' own error included) and well below the
    uncorrected one; bfp8 (without the weights' own term) at most half the uncorrected."""
    x = _images()
    err = {}
    for mode in ("none", "empirical"):
        cfg, net = _deployments(tmp_path, mode)
        yf = float_tensors(net, x)[net.output]
        accs = open_accelerators(cfg, "emu")
        try:
            for fmt, _, _ in FORMATS:
                dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
                dep.calibrate(x)
                ex = dep.execs["fc"]
                lsb = 2.0 ** -ex.f_out if ex.f_out is not None else None
                err[mode, fmt] = (np.abs((dep.run(x) - yf).mean(axis=0)).max(), lsb)
        finally:
            for a in accs.values():
                a.close()
    for fmt in ("twohot", "fixed8"):
        (before, lsb), (after, _) = err["none", fmt], err["empirical", fmt]
        assert before > lsb / 4, (fmt, before, lsb)            # the uncorrected mean error: not small
        assert after < before / 5 and after < lsb / 4, (fmt, after, before, lsb)
    assert err["empirical", "bfp8"][0] < err["none", "bfp8"][0] / 2, err


def test_corrected_bias_is_the_mean_difference():
    """corrected_bias by its formula, against the float64 outputs written out here: the
    corrected layer's mean output on x_quant (with the quantized weights) equals the float
    layer's mean output on x_float."""
    from hlsnn.deploy.importer.graph import Layer
    from hlsnn.engines.convgeom import conv_float
    rng = np.random.default_rng(0)
    layer = Layer("c", "conv", ["x"], "y", w=rng.normal(0, 0.5, (4, 2, 3, 3)), b=rng.normal(0, 0.1, 4), pad=1)
    xf = rng.normal(0, 1, (16, 2, 5, 5))
    xq = np.rint(xf * 4 + 0.3) / 4                                    # a biased quantization
    wq = np.rint(layer.w * 8) / 8
    b = biascorr.corrected_bias(layer, xf, xq, wq)
    want = conv_float(xf, layer.w, layer.b, layer.geom).mean(axis=(0, 2, 3))
    got = conv_float(xq, wq, b, layer.geom).mean(axis=(0, 2, 3))
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert np.abs(conv_float(xq, wq, layer.b, layer.geom).mean(axis=(0, 2, 3)) - want).max() > 1e-2


def test_corrected_deployment_runs_the_same_bits_compiled(tmp_path):
    """The corrected biases reach the compiled paths (the integer network program of
    twohot/fixed8, hlsnn.deploy.run.bfpfast of bfp8): their outputs equal the layer path's bit for bit."""
    x = _images()
    cfg, net = _deployments(tmp_path, "empirical")
    accs = open_accelerators(cfg, "emu")
    try:
        for fmt, _, _ in FORMATS:
            dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
            dep.calibrate(x[:32])
            fast = dep.run(x)
            assert fmt == "bfp8" or dep.fast_network() is not None
            layered, _ = dep.run(x, keep=True)
            np.testing.assert_array_equal(fast, layered)
            assert not np.array_equal(dep.execs["fc"].layer.b, net.layer("fc").b)     # corrected, net untouched
    finally:
        for a in accs.values():
            a.close()


def test_bias_correction_values_are_checked(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_deploy_config(_write(tmp_path, _base() + f"formats: {{a: {{type: bfp, accel: "
                                  f"{ROOT}/configs/accel/bfp8_zcu104.yaml, bias_correction: mean}}}}\n"))
    assert "formats.a.bias_correction" in str(e.value) and "one of" in str(e.value)
    cfg = load_deploy_config(_write(tmp_path, _base(), name="d.yaml"))
    assert {f.bias_correction for f in cfg.formats.values()} == {"auto"}


def _plain_net(path):
    """_dw_net with its depthwise conv replaced by an ordinary 6->6 3x3 conv (group 1)."""
    import onnx as ox
    m = ox.load(str(_dw_net(path)))
    rng = np.random.default_rng(1)
    for init in m.graph.initializer:
        if init.name == "w2":
            init.CopyFrom(ox.numpy_helper.from_array(rng.normal(0, 0.2, (6, 6, 3, 3)).astype(np.float32), "w2"))
    for node in m.graph.node:
        if node.name == "c2":
            del node.attribute[:]
            node.attribute.extend([ox.helper.make_attribute("pads", [1, 1, 1, 1])])
    ox.save(m, str(path))
    return path


def test_auto_corrects_bfp_in_networks_with_a_grouped_conv(tmp_path):
    """The default (``auto``): the formats' configs say nothing; a bfp deployment of the network
    with a depthwise conv gets corrected biases (the layers after the first, whose input is the
    float image in both networks), its twohot and fixed8
    deployments and a bfp deployment of the same network with an ordinary conv keep the
    imported biases."""
    x = _images()[:32]
    plain = load_onnx(_plain_net(tmp_path / "plain.onnx"))
    dw = load_onnx(_dw_net(tmp_path / "dw.onnx"))
    assert [la.group for la in plain.engine_layers() if la.kind == "conv"] == [1, 1]
    cfg = load_deploy_config(_write(tmp_path, _base(tmp_path / "dw.onnx") + "formats:\n" + "".join(
        f"  {k}: {{type: {t}, accel: {ROOT}/configs/accel/{a}.yaml}}\n" for k, t, a in FORMATS), name="auto.yaml"))
    accs = open_accelerators(cfg, "emu")
    moved = {}
    try:
        for name, net in (("dw", dw), ("plain", plain)):
            for fmt, _, _ in FORMATS:
                dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
                dep.calibrate(x)
                moved[name, fmt] = sorted(la.name for la in net.engine_layers()
                                          if np.abs(dep.execs[la.name].layer.b - la.b).max() > 1e-9)
    finally:
        for a in accs.values():
            a.close()
    assert moved == {("dw", "bfp8"): ["c2", "fc"], ("dw", "twohot"): [], ("dw", "fixed8"): [],
                     ("plain", "bfp8"): [], ("plain", "twohot"): [], ("plain", "fixed8"): []}, moved
    assert [biascorr.policy(t, dw) for _, t, _ in FORMATS] == ["empirical", "none", "none"]
    assert [biascorr.policy(t, plain) for _, t, _ in FORMATS] == ["none", "none", "none"]


def test_float_means_are_the_float_networks_mean_inputs(tmp_path):
    """float_means (slices of images, kept on the network) against hostops.float_tensors on the
    whole batch: each engine layer's mean input image; a new batch is computed afresh."""
    net = load_onnx(_dw_net(tmp_path / "dw.onnx"))
    x = _images()[:40]
    env = float_tensors(net, x)
    got = biascorr.float_means(net, x)
    for layer in net.engine_layers():
        np.testing.assert_allclose(got[layer.name], env[layer.inputs[0]].mean(axis=0, keepdims=True), atol=1e-12)
    assert biascorr.float_means(net, x) is got
    other = biascorr.float_means(net, x[:8])
    np.testing.assert_allclose(other["fc"], env[net.layer("fc").inputs[0]][:8].mean(axis=0, keepdims=True), atol=1e-12)
    # a copy of the network with other layers (hlsnn.deploy.quantize.equalize's balanced copy): its own means
    import copy
    scaled = copy.copy(net)
    scaled.layers = [copy.copy(la) for la in net.layers]
    la = next(la for la in scaled.layers if la.name == "c1")
    la.w, la.b = la.w * 2, la.b * 2
    np.testing.assert_allclose(biascorr.float_means(scaled, x)["c2"],
                               float_tensors(scaled, x)[scaled.layer("c2").inputs[0]].mean(axis=0, keepdims=True),
                               atol=1e-12)
    assert biascorr.float_means(net, x) is got


def test_bfp_calibration_pass_corrects_as_the_layer_path(tmp_path, monkeypatch):
    """bfp8 with the correction: the calibrating pass through hlsnn.deploy.run.bfpfast (each layer
    corrected just before it runs) gives the layer path's biases, statistics and outputs."""
    used = []
    real = biascorr._bfp_pass
    monkeypatch.setattr(biascorr, "_bfp_pass", lambda d, x: used.append(real(d, x)) or used[-1])
    x = _images()
    # a Relu where the others have a HardSwish: a table of BFP values runs the layer path's loop
    # (bfpfast.build gives None, netbfp rule 9b), which this test is not about
    cfg, net = _deployments(tmp_path, "empirical", act="Relu")
    accs = open_accelerators(cfg, "emu")
    got = []
    try:
        for fast in (True, False):
            dep = Deployment(net, cfg.assignments["bfp8"], cfg.formats, accs, rounding=cfg.rounding)
            dep.fast = fast
            dep.calibrate(x[:40])
            got.append(([ex.layer.b for ex in dep.execs.values()], dep.run(x),
                        [(ex.stats.sat_count, ex.stats.input_density, ex.stats.calls) for ex in dep.execs.values()]))
    finally:
        for a in accs.values():
            a.close()
    assert used == [True, False]
    for a, b in zip(got[0][0], got[1][0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[0][1], got[1][1])
    assert got[0][2] == got[1][2]
    assert not np.array_equal(got[0][0][-1], net.layer("fc").b)


def test_bfp_rebuilt_is_the_constructors_exec(tmp_path):
    """bfp_rebuilt (a used BfpExec with another bias) against BfpExec's constructor on that
    layer: the same attributes, chunks (mantissas and exponents), fresh state and statistics."""
    import copy

    from hlsnn.deploy.run.executors import BfpExec
    x = _images()[:32]
    cfg, net = _deployments(tmp_path, "none")
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["bfp8"], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(x)
        dep.run(x)
        for la in net.engine_layers():
            ex = dep.execs[la.name]
            new = copy.copy(la)
            new.b = la.b + 0.01 * np.arange(len(la.b))
            a, b = BfpExec(new, ex.fmt, ex.acc, dep), biascorr.bfp_rebuilt(ex, new)
            assert set(a.__dict__) == set(b.__dict__)
            for k, va in a.__dict__.items():
                vb = b.__dict__[k]
                if k == "chunks":
                    for ca, cb in zip(va, vb, strict=True):
                        assert ca[:2] == cb[:2]
                        for qa, qb in zip(ca[2:], cb[2:]):
                            np.testing.assert_array_equal(qa.mantissas, qb.mantissas)
                            np.testing.assert_array_equal(qa.exponents, qb.exponents)
                elif k == "stats":
                    assert va.__dict__ == vb.__dict__ and vb is not ex.stats
                elif isinstance(va, np.ndarray):
                    np.testing.assert_array_equal(va, vb)
                else:
                    assert va is vb or va == vb, k
            assert not np.array_equal(b.chunks[0][3].mantissas, ex.chunks[0][3].mantissas) or \
                not np.array_equal(b.chunks[0][3].exponents, ex.chunks[0][3].exponents)
    finally:
        for a in accs.values():
            a.close()


def test_auto_leaves_a_model_trained_by_hlsnn_train_alone(tmp_path):
    """A file hlsnn.train.export wrote (its .hlsnn-train.json beside it) keeps its trained
    biases under ``auto``: what was trained is what deploys (tests/train checks the bits)."""
    model = _dw_net(tmp_path / "dw.onnx")
    assert biascorr.policy("bfp", load_onnx(model)) == "empirical"
    (tmp_path / "dw.onnx.hlsnn-train.json").write_text("{}")
    assert biascorr.policy("bfp", load_onnx(model)) == "none"
    assert biascorr.policy("twohot", load_onnx(model)) == "none"
