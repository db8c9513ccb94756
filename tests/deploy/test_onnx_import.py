"""ONNX import: every supported op, BN folding, ReLU fusion, unsupported-node errors and the
host fallback, checked against onnx's ReferenceEvaluator (never against our own float code
alone)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import InputError, UnsupportedModelError  # noqa: E402


def _init(rng, name, shape, scale=0.5):
    return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), name)


def _save(tmp_path, nodes, inits, in_shape, out_shape, name="m"):
    # opset 15: onnx's ReferenceEvaluator runs BatchNormalization of opsets 9-13 with batch
    # statistics (its default momentum selects training mode), so it is no reference there
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return p


def _bn(rng, prefix, c):
    return [numpy_helper.from_array(a.astype(np.float32), f"{prefix}_{n}") for n, a in
            (("g", rng.uniform(0.5, 1.5, c)), ("b", rng.normal(size=c)), ("m", rng.normal(size=c)),
             ("v", rng.uniform(0.2, 2.0, c)))]


def every_op_model(tmp_path):
    rng = np.random.default_rng(1)
    inits = [_init(rng, "w1", (4, 2, 3, 3)), _init(rng, "b1", (4,)), *_bn(rng, "bn1", 4),
             _init(rng, "w2", (4, 4, 1, 1)), *_bn(rng, "bn3", 4),
             _init(rng, "w3", (16, 8)), _init(rng, "b3", (8,)),
             _init(rng, "w4", (3, 8)), _init(rng, "b4", (3,)),
             numpy_helper.from_array(np.array([-1, 8], np.int64), "shape")]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c1", "bn1_g", "bn1_b", "bn1_m", "bn1_v"], ["n1"], name="bn1",
                         epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "p1"], ["s2"], name="add"),
        helper.make_node("Relu", ["s2"], ["r2"], name="relu2"),
        helper.make_node("AveragePool", ["r2"], ["a2"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["a2", "bn3_g", "bn3_b", "bn3_m", "bn3_v"], ["n3"], name="bn3"),
        helper.make_node("Flatten", ["n3"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "w3"], ["mm"], name="fc1"),
        helper.make_node("Add", ["mm", "b3"], ["fc1o"], name="fc1_bias"),
        helper.make_node("Relu", ["fc1o"], ["r3"], name="relu3"),
        helper.make_node("Reshape", ["r3", "shape"], ["rs"], name="reshape"),
        helper.make_node("Dropout", ["rs"], ["d"], name="drop"),
        helper.make_node("Gemm", ["d", "w4", "b4"], ["g"], name="fc2", transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
    ]
    return _save(tmp_path, nodes, inits, ["N", 2, 8, 8], ["N", 3], "every_op")


def test_every_supported_op_matches_reference_evaluator(tmp_path):
    path = every_op_model(tmp_path)
    net = load_onnx(path)
    kinds = [(layer.name, layer.kind, layer.op) for layer in net.layers]
    assert kinds == [("conv1", "conv", "Conv"), ("pool1", "host", "MaxPool"), ("conv2", "conv", "Conv"),
                     ("add", "host", "Add"), ("relu2", "host", "Relu"), ("avg", "host", "AveragePool"),
                     ("bn3", "host", "BatchNormalization"), ("flatten", "host", "Flatten"),
                     ("fc1", "dense", "MatMul"), ("reshape", "host", "Reshape"), ("drop", "host", "Dropout"),
                     ("fc2", "dense", "Gemm"), ("softmax", "host", "Softmax")]
    conv1 = net.layer("conv1")
    assert conv1.folded == ["bn1", "relu1"] and conv1.relu and conv1.geom.pads == (1, 1, 1, 1)
    assert net.layer("fc1").folded == ["relu3"] and net.layer("fc1").relu
    assert not net.layer("conv2").relu
    x = np.random.default_rng(2).normal(size=(5, 2, 8, 8)).astype(np.float32)
    ref = ReferenceEvaluator(str(path)).run(None, {"x": x})[0]
    got = float_forward(net, x)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)
    # the folded intermediate tensor is the BN+ReLU output in the reference too
    inter = ReferenceEvaluator(str(path)).run(None, {"x": x}, intermediate=True)
    assert conv1.output == "r1"
    assert inter["r1"].shape == (5, 4, 8, 8)


def test_global_average_pool_and_valid_conv(tmp_path):
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
             helper.make_node("GlobalAveragePool", ["c"], ["gap"], name="gap"),
             helper.make_node("Flatten", ["gap"], ["y"], name="flat")]
    path = _save(tmp_path, nodes, [_init(rng, "w", (5, 3, 3, 3))], ["N", 3, 6, 6], ["N", 5], "gap")
    net = load_onnx(path)
    assert net.layer("conv").pad == 0
    x = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), ReferenceEvaluator(str(path)).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-6)


def _unsupported_model(tmp_path):
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="autopad", strides=[2, 2], kernel_shape=[3, 3],
                              auto_pad="SAME_UPPER"),
             helper.make_node("Sin", ["c"], ["s"], name="sig"),
             helper.make_node("Flatten", ["s"], ["f"], name="flat"),
             helper.make_node("Atan", ["f"], ["y"], name="soft")]
    # SAME_UPPER's pads depend on the input's H and W, which this file leaves symbolic
    return _save(tmp_path, nodes, [_init(rng, "w", (2, 1, 3, 3))], ["N", 1, "H", "W"], ["N", 18], "unsup")


def test_unsupported_nodes_are_all_listed(tmp_path):
    path = _unsupported_model(tmp_path)
    with pytest.raises(UnsupportedModelError) as e:
        load_onnx(path)
    msg = str(e.value)
    assert "3 unsupported node(s)" in msg
    for name, op in (("autopad", "Conv"), ("sig", "Sin"), ("soft", "Atan")):
        assert f"{name} ({op})" in msg
    assert "auto_pad" in msg and "--host-fallback" in msg
    assert [n[0] for n in e.value.nodes] == ["autopad", "sig", "soft"]


def test_host_fallback_runs_unsupported_nodes_with_the_reference(tmp_path):
    path = _unsupported_model(tmp_path)
    net = load_onnx(path, host_fallback=True)
    assert [layer.op for layer in net.layers] == ["fallback", "fallback", "Flatten", "fallback"]
    x = np.random.default_rng(5).normal(size=(3, 1, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), ReferenceEvaluator(str(path)).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_bad_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_onnx(tmp_path / "nope.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(InputError, match="not a valid ONNX model"):
        load_onnx(bad)


def test_exports_without_constant_folding_and_float_casts(tmp_path):
    """What a TorchScript export without constant folding leaves (the Transpose of a weight
    feeding MatMul, a Mul of two constants) and skl2onnx's float->float Cast: the constant
    subgraph is evaluated once at import and the cast is a no-op; the result equals onnx's
    ReferenceEvaluator on the same file."""
    rng = np.random.default_rng(3)
    inits = [_init(rng, "w_t", (6, 5)), _init(rng, "b", (6,)), _init(rng, "scale", (1,))]
    nodes = [
        helper.make_node("Transpose", ["w_t"], ["w"], name="transpose_w", perm=[1, 0]),
        helper.make_node("Mul", ["w", "scale"], ["ws"], name="scale_w"),
        helper.make_node("Cast", ["x"], ["xc"], name="cast_in", to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["xc", "ws"], ["mm"], name="fc"),
        helper.make_node("Add", ["mm", "b"], ["y0"], name="fc_bias"),
        helper.make_node("Cast", ["y0"], ["y"], name="cast_out", to=TensorProto.DOUBLE),
    ]
    p = _save(tmp_path, nodes, inits, [None, 5], [None, 6])
    net = load_onnx(p)                                      # no UnsupportedModelError, no fallback
    assert [layer.kind for layer in net.layers].count("dense") == 1
    x = rng.normal(size=(7, 5)).astype(np.float32)
    want = ReferenceEvaluator(str(p)).run(None, {"x": x})[0]
    got = float_forward(net, x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_casts_to_other_types_stay_unsupported(tmp_path):
    nodes = [helper.make_node("Cast", ["x"], ["y"], name="to_int", to=TensorProto.INT32)]
    p = _save(tmp_path, nodes, [], [None, 4], [None, 4])
    with pytest.raises(UnsupportedModelError, match="to_int"):
        load_onnx(p)


def test_fixed_batch_one_export_runs_any_batch(tmp_path):
    """torch.onnx.export's default fixes the batch at 1 and flattens with Reshape to [1, N]: the
    leading 1 is taken as the batch, so a batch of 5 runs, equal to onnx evaluating each sample."""
    rng = np.random.default_rng(4)
    inits = [_init(rng, "wc", (2, 2, 3, 3)), _init(rng, "wf", (4, 72)), _init(rng, "bf", (4,)),
             numpy_helper.from_array(np.array([1, 72], np.int64), "flat")]
    nodes = [helper.make_node("Conv", ["x", "wc"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "flat"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    p = _save(tmp_path, nodes, inits, [1, 2, 6, 6], [1, 4])
    net = load_onnx(p)
    assert net.input_shape == (None, 2, 6, 6) and net.fixed_batch_one
    x = rng.normal(size=(5, 2, 6, 6)).astype(np.float32)
    ev = ReferenceEvaluator(str(p))
    want = np.concatenate([ev.run(None, {"x": x[i:i + 1]})[0] for i in range(5)])
    np.testing.assert_allclose(float_forward(net, x.astype(np.float64)), want, rtol=1e-5, atol=1e-5)
    from hlsnn.deploy.reports.evaluate import float_reference
    np.testing.assert_allclose(float_reference(p, x), want, rtol=1e-6, atol=1e-6)


def test_a_model_with_two_outputs_deploys_the_named_one(tmp_path):
    """skl2onnx-style: a label (ArgMax, no engine) beside the probabilities. Without `output:` the
    error names the outputs; with it only what that output needs is imported, and the whole
    deployment runs on the named output."""
    from hlsnn.cli import main
    from conftest import ROOT
    src = ROOT / "configs" / "models" / "digits_mlp.onnx"
    m = onnx.load(str(src))
    probs = m.graph.output[0].name
    m.graph.node.append(helper.make_node("ArgMax", [probs], ["label"], name="label", axis=1, keepdims=0))
    m.graph.output.append(helper.make_tensor_value_info("label", TensorProto.INT64, [None]))
    p = tmp_path / "two.onnx"
    onnx.save(m, str(p))
    with pytest.raises(InputError, match=f"2 outputs \\({probs}, label\\); name the one to deploy with `output:`"):
        load_onnx(p)
    net = load_onnx(p, output=probs)
    assert net.output == probs and not any(layer.op == "ArgMax" for layer in net.layers)
    with pytest.raises(InputError, match="'nope' is not an output"):
        load_onnx(p, output="nope")
    cfg = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text().replace("../accel/", "")
    (tmp_path / "two.yaml").write_text(cfg.replace("model: digits_mlp.onnx", f"model: {p}\noutput: {probs}"))
    (tmp_path / "one.yaml").write_text(cfg.replace("model: digits_mlp.onnx", f"model: {src}"))
    import json
    import io
    import contextlib
    res = {}
    for name in ("two", "one"):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["deploy", str(tmp_path / f"{name}.yaml"), "--assignment", "bfp8", "--test-samples", "40",
                         "--json"]) == 0
        res[name] = json.loads(buf.getvalue())
    assert res["two"]["assignments"]["bfp8"]["accuracy"] == res["one"]["assignments"]["bfp8"]["accuracy"]
    assert res["two"]["float_accuracy"] == res["one"]["float_accuracy"]


def test_host_layers_are_reported_with_their_precision(tmp_path, capsys):
    """No layer runs on the host without the report saying so: the deploy table and JSON list
    the host layers and their precision, and a --host-fallback layer gets a NOTE."""
    from hlsnn.cli import main
    from conftest import ROOT
    src = ROOT / "configs" / "models" / "digits_mlp.onnx"
    m = onnx.load(str(src))
    out = m.graph.output[0]
    m.graph.node.append(helper.make_node("Sin", [out.name], ["squashed"], name="squash"))
    m.graph.output.remove(out)
    m.graph.output.append(helper.make_tensor_value_info("squashed", TensorProto.FLOAT, [None, 10]))
    p = tmp_path / "sig.onnx"
    onnx.save(m, str(p))
    cfg = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text().replace("../accel/", "")
    (tmp_path / "sig.yaml").write_text(cfg.replace("model: digits_mlp.onnx", f"model: {p}"))
    args = ["deploy", str(tmp_path / "sig.yaml"), "--assignment", "bfp8", "--test-samples", "20"]
    assert main(args) == 2                                   # refused without --host-fallback
    capsys.readouterr()
    assert main(args + ["--host-fallback"]) == 0
    text = capsys.readouterr().out
    assert "on the host (" in text and "squash (Sin)" in text and "NOTE: 1 layer(s) ran in float" in text
    assert main(args + ["--host-fallback", "--json"]) == 0
    import json
    res = json.loads(capsys.readouterr().out)
    squash = [h for h in res["host_layers"] if h["layer"] == "squash"]
    assert len(squash) == 1 and squash[0]["op"] == "Sin" and "--host-fallback" in squash[0]["precision"]
    assert all("--host-fallback" not in h["precision"] for h in res["host_layers"] if h["layer"] != "squash")


def _mlp_with_an_atan(tmp_path):
    """The digits MLP with its hidden ReLU replaced by an Atan (no engine or host op: a
    --host-fallback node between the two dense layers) and its Softmax kept on the host."""
    from conftest import ROOT
    m = onnx.load(str(ROOT / "configs" / "models" / "digits_mlp.onnx"))
    relu = next(n for n in m.graph.node if n.op_type == "Relu")
    relu.op_type = "Atan"
    p = tmp_path / "atan.onnx"
    onnx.save(m, str(p))
    cfg = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text().replace("../accel/", "")
    (tmp_path / "leaky.yaml").write_text(cfg.replace("model: digits_mlp.onnx", f"model: {p}"))
    return tmp_path / "leaky.yaml", relu.name


def test_quantized_host_mode_computes_host_layers_in_fixed_point(tmp_path):
    """--host-precision quantized: a computing host layer's output is an 8-bit fixed-point
    tensor at its calibrated radix, equal to the rule written out in this test (input and
    output rounded half away from zero at their radix points and saturated); the Softmax's
    output is unsigned and the Atan's signed; 16 bits stay within a point of float,
    and 2 bits lose accuracy (the mode is in effect)."""
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.evaluation.run import deploy
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.deploy import datasets
    from hlsnn.deploy.run import hostops
    path, leaky = _mlp_with_an_atan(tmp_path)
    cfg = load_deploy_config(path)
    net = load_onnx(cfg.model, host_fallback=True)
    ds = datasets.load("digits")
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["bfp8"], cfg.formats, accs, host_bits=8)
        assert set(dep.host) == {leaky, net.layers[-1].name}           # the Atan and the Softmax
        dep.calibrate(ds.x_train[:64])
        _, env = dep.run(ds.x_test[:50], keep=True)
    finally:
        for a in accs.values():
            a.close()
    def q(v, f, signed):
        """The docstring's rule, written here: round half away from zero at radix f, saturate to 8 bits."""
        r = np.sign(v) * np.floor(np.abs(v) * 2.0 ** f + 0.5)
        return np.clip(r, -128 if signed else 0, 127 if signed else 255) / 2.0 ** f

    for name, h in dep.host.items():
        layer, y = h.layer, env[h.layer.output]
        ints = np.ldexp(y, h.f_out)
        assert np.array_equal(ints, np.rint(ints)) and ints.min() >= (-128 if h.signed else 0) and ints.max() <= 127 + 128 * (not h.signed), name
        xq = q(env[layer.inputs[0]], h.f_in[0], True)             # a BFP layer's output: requantized
        np.testing.assert_array_equal(y, q(hostops.run(layer, [xq]), h.f_out, h.signed), err_msg=name)
    assert dep.host[leaky].signed and not dep.host[net.layers[-1].name].signed   # softsign < 0; softmax >= 0
    wide = deploy(path, "emu", assignments=["bfp8"], host_fallback=True, host_precision="quantized", host_bits=16,
                  test_samples=120)
    narrow = deploy(path, "emu", assignments=["bfp8"], host_fallback=True, host_precision="quantized", host_bits=2,
                    test_samples=120)
    floating = deploy(path, "emu", assignments=["bfp8"], host_fallback=True, test_samples=120)
    assert wide["host_precision"] == "quantized 16-bit" and floating["host_precision"] == "float"
    assert abs(wide["assignments"]["bfp8"]["accuracy"] - floating["assignments"]["bfp8"]["accuracy"]) <= 0.01
    assert narrow["assignments"]["bfp8"]["accuracy"] < wide["assignments"]["bfp8"]["accuracy"] - 0.1
    fx = wide["assignments"]["bfp8"]["host_fixed_point"][leaky]
    assert fx["bits"] == 16 and isinstance(fx["f_out"], int) and "host_fixed_point" not in floating["assignments"]["bfp8"]


def test_quantized_host_mode_is_reported(tmp_path, capsys):
    from hlsnn.cli import main
    path, leaky = _mlp_with_an_atan(tmp_path)
    args = ["deploy", str(path), "--assignment", "bfp8", "--test-samples", "20", "--host-fallback"]
    assert main(args + ["--host-precision", "quantized"]) == 0
    text = capsys.readouterr().out
    assert f"{leaky} (Atan): 8-bit fixed point in and out" in text and "onnx's reference" in text
    assert "(Softmax): 8-bit fixed point in and out" in text and "float64 in numpy between them" in text
    assert "NOTE" not in text                                 # nothing ran in float
    assert main(args + ["--host-precision", "quantized", "--host-bits", "40"]) == 2
    assert "host bits = 40: an integer 2..32" in capsys.readouterr().err
