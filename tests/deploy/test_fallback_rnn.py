"""``--host-fallback`` on what PyTorch writes for ``nn.GRU``/``nn.LSTM`` (session 32, hreal): a
recurrent node has several outputs of which the network reads one (a GRU's ``Y`` without its
``Y_h``, an LSTM's ``Y_h`` without ``Y``), and in a file whose batch is fixed at 1 it reads the
input transposed to (T, 1, F), a tensor that holds the batch on another axis (a *lifted* one,
hlsnn.deploy.run.samplewise). Both were refused even with ``--host-fallback`` (the message said the
flag would run them); the node now runs on each sample with onnx's reference, and the float path
equals onnxruntime run on each sample of the file, whose batch is 1. A one-direction cell without
``clip`` is unrolled onto the engines at import (issue 79, tests/deploy/test_rnnunroll.py): these
nodes carry a ``clip`` that never binds (:data:`CLIP`), which the unrolling refuses, so they are
the fallback's."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402

T, F, H, C = 3, 2, 4, 5
#: a clip far beyond every pre-activation here (it changes no value): hlsnn.deploy.rewrite.rnnunroll refuses it
CLIP = 1e4


def _rnn_model(tmp_path, op, outputs, tail, name):
    """x (1, T, F) -> Transpose to (T, 1, F) -> ``op`` (hidden H) writing ``outputs`` -> ``tail``
    nodes -> y (1, C). Gate count 3 (GRU) or 4 (LSTM)."""
    rng = np.random.default_rng(7)
    gates = 3 if op == "GRU" else 4
    inits = [numpy_helper.from_array((rng.normal(size=s) * 0.5).astype(np.float32), n) for n, s in
             (("W", (1, gates * H, F)), ("R", (1, gates * H, H)), ("B", (1, 2 * gates * H)))]
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="to_tnf", perm=[1, 0, 2]),
             helper.make_node(op, ["xt", "W", "R", "B"], outputs, name="rnn", hidden_size=H, clip=CLIP)] + \
        tail(inits, rng)
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, F])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C])], initializer=inits)
    p = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
    return p


def _head(src, k):
    def tail(inits, rng):
        inits += [numpy_helper.from_array(np.array([1, k], np.int64), "shape"),
                  numpy_helper.from_array((rng.normal(size=(C, k)) * 0.5).astype(np.float32), "wf"),
                  numpy_helper.from_array(rng.normal(size=C).astype(np.float32), "bf")]
        return [helper.make_node("Reshape", [src, "shape"], ["flat"], name="flat"),
                helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], name="fc", transB=1)]
    return tail


def _per_sample_onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])


def test_a_gru_without_its_y_h_runs_on_each_sample(tmp_path):
    """GRU writing (Y, Y_h), Y_h read by nothing; Y (T, 1, 1, H) squeezed, transposed back to
    (1, T, H) and flattened into a Gemm (TorchScript's ``nn.GRU(batch_first=True)``)."""
    def tail(inits, rng):
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "ax1"))
        return [helper.make_node("Squeeze", ["Y", "ax1"], ["ys"], name="squeeze"),
                helper.make_node("Transpose", ["ys"], ["yb"], name="to_ntf", perm=[1, 0, 2])] + \
            _head("yb", T * H)(inits, rng)
    path = _rnn_model(tmp_path, "GRU", ["Y", "Y_h"], tail, "gru")
    with pytest.raises(UnsupportedModelError, match=r"rnn \(GRU\): clip is not supported"):
        load_onnx(path)
    net = load_onnx(path, host_fallback=True)
    assert [la.name for la in net.layers if la.op == "fallback"] == ["rnn"]
    x = np.random.default_rng(1).normal(size=(6, T, F)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _per_sample_onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def test_an_lstm_read_through_its_y_h_only(tmp_path):
    """LSTM writing (Y, Y_h) with only Y_h (1, 1, H) read: the second output is the layer's."""
    path = _rnn_model(tmp_path, "LSTM", ["Y", "Y_h"], _head("Y_h", H), "lstm")
    net = load_onnx(path, host_fallback=True)
    (fb,) = [la for la in net.layers if la.op == "fallback"]
    assert fb.output == "Y_h" and [o for o in fb.node.output if o] == ["Y_h"]
    x = np.random.default_rng(2).normal(size=(5, T, F)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _per_sample_onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def test_an_lstm_writing_y_c_keeps_the_static_shapes(tmp_path):
    """TorchScript's ``nn.LSTM`` writes (Y, Y_h, Y_c); onnx's reference LSTM writes no Y_c, which
    made the batch-1 file's static shapes unknown, so every Transpose/Shape/Expand around it was
    listed as unsupported (14 nodes for a one-LSTM model). Only the LSTM is listed now, and it
    falls back; here its initial state is built from the input's shape as TorchScript writes it."""
    def tail(inits, rng):
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "ax1"))
        return [helper.make_node("Squeeze", ["Y", "ax1"], ["ys"], name="squeeze"),
                helper.make_node("Transpose", ["ys"], ["yb"], name="to_ntf", perm=[1, 0, 2])] + \
            _head("yb", T * H)(inits, rng)
    path = _rnn_model(tmp_path, "LSTM", ["Y", "Y_h", "Y_c"], tail, "lstm3")
    m = onnx.load(str(path))                       # h0 = zeros(1, x.shape[1], H), as TorchScript builds it
    rnn = next(n for n in m.graph.node if n.op_type == "LSTM")
    rnn.input.extend(["", "h0"])
    m.graph.initializer.extend([numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
                                numpy_helper.from_array(np.array([1], np.int64), "idx1"),
                                numpy_helper.from_array(np.array([1], np.int64), "one"),
                                numpy_helper.from_array(np.array([H], np.int64), "hid")])
    m.graph.node.insert(1, helper.make_node("Shape", ["xt"], ["shp"], name="shape"))
    m.graph.node.insert(2, helper.make_node("Gather", ["shp", "idx1"], ["nb"], name="batch", axis=0))
    m.graph.node.insert(3, helper.make_node("Concat", ["one", "nb", "hid"], ["h0shape"], name="h0shape", axis=0))
    m.graph.node.insert(4, helper.make_node("Expand", ["zero", "h0shape"], ["h0"], name="h0"))
    onnx.save(m, str(path))
    with pytest.raises(UnsupportedModelError) as e:
        load_onnx(path)
    assert [(n[0], n[1]) for n in e.value.nodes] == [("rnn", "LSTM")]
    net = load_onnx(path, host_fallback=True)
    x = np.random.default_rng(4).normal(size=(4, T, F)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _per_sample_onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def _fresh_reference(fb, x):
    """The fallback node on each sample of ``x`` with a ReferenceEvaluator built here, from the
    node and its constants (the test's own one-node model)."""
    from onnx.reference import ReferenceEvaluator
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in fb.inputs]
    init = [numpy_helper.from_array(np.asarray(v, np.float32), n) for n, v in fb.attrs["consts"].items()]
    g = helper.make_graph([fb.node], "one", ins, [helper.make_tensor_value_info(fb.output, TensorProto.FLOAT, None)],
                          initializer=init)
    sess = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    # the layer's input is held as (N, T, 1, F) (a lifted (T, 1, F) of each sample), its output Y_h
    # (1, 1, H) of each sample as (N, 1, H)
    return np.concatenate([sess.run(None, {fb.inputs[0]: np.asarray(xi, np.float32)})[0] for xi in x])


def test_the_fallback_session_is_built_once_per_layer_and_gives_a_fresh_evaluators_bits(tmp_path, monkeypatch):
    """The one-node ReferenceEvaluator is built on the layer's first run and reused (it was rebuilt
    on every call, ~100 us of the node's cost on x86, ~10x on a board's core): two calls give the
    same bits as an evaluator built afresh, and one construction serves both; a copy of the layer
    with other constants gets its own (no stale session); the cache holds no dead layer and leaves
    the layer picklable."""
    import copy
    import gc
    import pickle
    import onnx.reference
    from hlsnn.deploy.run import hostops
    path = _rnn_model(tmp_path, "GRU", ["", "Y_h"], _head("Y_h", H), "gru_h")
    (fb,) = [la for la in load_onnx(path, host_fallback=True).layers if la.op == "fallback"]
    built = []

    class Counting(onnx.reference.ReferenceEvaluator):
        def __init__(self, *a, **k):
            built.append(1)
            super().__init__(*a, **k)
    x = np.random.default_rng(5).normal(size=(3, T, 1, F))
    other = copy.copy(fb)
    other.attrs = dict(fb.attrs, consts={k: np.asarray(v) * 0.5 for k, v in fb.attrs["consts"].items()})
    want, want_other = _fresh_reference(fb, x), _fresh_reference(other, x)
    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", Counting)
    a, b = hostops.run(fb, [x]), hostops.run(fb, [x])
    assert len(built) == 1
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.asarray(want, np.float64))
    # a copy with other weights: a session of its own, the copy's outputs
    c = hostops.run(other, [x])
    assert len(built) == 2
    np.testing.assert_array_equal(c, np.asarray(want_other, np.float64))
    assert not np.array_equal(c, a)
    # the same layer with its constants replaced (other objects): rebuilt, not stale
    fb.attrs["consts"] = other.attrs["consts"]
    np.testing.assert_array_equal(hostops.run(fb, [x]), c)
    assert len(built) == 3
    # picklable and deep-copyable after runs, and the copy runs to the same bits
    np.testing.assert_array_equal(hostops.run(pickle.loads(pickle.dumps(fb)), [x]), c)
    np.testing.assert_array_equal(hostops.run(copy.deepcopy(fb), [x]), c)
    # a collected layer leaves no entry
    n = len(hostops._FALLBACK_SESSIONS)
    key = id(other)
    del other
    gc.collect()
    assert key not in hostops._FALLBACK_SESSIONS and len(hostops._FALLBACK_SESSIONS) < n


def test_a_dynamic_batch_export_runs_its_gru_on_each_sample(tmp_path):
    """A file of dynamic batch N whose GRU reads x (N, T, F) transposed to (T, N, F), as TorchScript
    writes ``batch_first=True``: its shapes are folded at batch 1, so the node runs on each sample
    (``sw``: the latency model's batch x one sample's cost), equal to onnxruntime on the whole batch."""
    path = _rnn_model(tmp_path, "GRU", ["", "Y_h"], _head("Y_h", H), "gru_dyn")
    m = onnx.load(str(path))
    for v in (m.graph.input[0], m.graph.output[0]):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    next(t for t in m.graph.initializer if t.name == "shape").CopyFrom(
        numpy_helper.from_array(np.array([-1, H], np.int64), "shape"))
    onnx.save(m, str(path))
    net = load_onnx(path, host_fallback=True)
    (fb,) = [la for la in net.layers if la.op == "fallback"]
    assert "sw" in fb.attrs
    x = np.random.default_rng(6).normal(size=(4, T, F)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-5, atol=1e-5)


def test_a_node_with_two_read_outputs_is_refused_by_name_even_with_the_fallback(tmp_path):
    def tail(inits, rng):
        inits.append(numpy_helper.from_array(np.array([1, H], np.int64), "hshape"))
        return [helper.make_node("Reshape", ["Y_h", "hshape"], ["h"], name="h"),
                helper.make_node("Reshape", ["Y_c", "hshape"], ["c"], name="c"),
                helper.make_node("Add", ["h", "c"], ["hc"], name="hc")] + _head("hc", H)(inits, rng)
    path = _rnn_model(tmp_path, "LSTM", ["", "Y_h", "Y_c"], tail, "lstm2")
    with pytest.raises(UnsupportedModelError) as e:
        load_onnx(path, host_fallback=True)
    msg = str(e.value)
    assert "rnn (LSTM): no engine or host rule for LSTM; --host-fallback runs a node of one used output only" in msg
    assert "(Y_h, Y_c)" in msg and "not even --host-fallback runs them" in msg
    assert "--host-fallback runs each of them" not in msg


@pytest.mark.slow
def test_the_compiled_lstm_runs_each_sample_as_the_deployment(tmp_path):
    """``hlsnn compile --host-fallback`` keeps the per-sample rule (the layer's ``sw`` shapes): the
    compiled model's emulator gives the deployment's bits (two-hot, 16 calibration images; 17 s,
    most of it the compile's self-check)."""
    import hlsnn
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.network.build import compile_model
    path = _rnn_model(tmp_path, "LSTM", ["Y", "Y_h"], _head("Y_h", H), "lstm")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(24, T, F)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x_train=x[:16], y_train=rng.integers(0, C, 16), x_test=x[16:],
             y_test=rng.integers(0, C, 8))
    cfg = tmp_path / "lstm.yaml"
    cfg.write_text(f"name: lstm\nmodel: {path}\ndata: d.npz\ncalibration: {{samples: 16}}\nformats:\n"
                   "  twohot: {type: twohot, accel: " + str(hlsnn.paths.CONFIGS_DIR / "accel" / "shift8_pynq-z2.yaml")
                   + ", radix: msb, weight_fit: output}\n")
    compile_model(cfg, "twohot", tmp_path / "lstm.hlsnn", host_fallback=True)
    dc = load_deploy_config(cfg)
    accs = open_accelerators(dc, "emu")
    try:
        dep = Deployment(load_onnx(path, host_fallback=True), dc.assignments["twohot"], dc.formats, accs)
        dep.calibrate(x[:16])
        want = dep.run(x[16:])
    finally:
        for a in accs.values():
            a.close()
    np.testing.assert_array_equal(hlsnn.load(tmp_path / "lstm.hlsnn", "emu")(x[16:]), want)
    # its modelled end to end counts the LSTM at the fitted host-fallback estimate (T steps of one
    # sample), on the network path and layer by layer, not at a generic host op's few microseconds
    from hlsnn.network import hostmodel, latency
    node = onnx.helper.make_node("LSTM", ["xt", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H)
    want_us = hostmodel.fallback_us("cortex-a9-650", node, {"W": np.zeros((1, 4 * H, F))}, T * F, 1)["us"]
    assert want_us == pytest.approx(10 * (hostmodel.FALLBACK_RNN["LSTM"][0] + T * hostmodel.FALLBACK_RNN["LSTM"][1]))
    for network in (None, False):
        res = latency.model(tmp_path / "lstm.hlsnn", network=network)
        row = next(r for r in res["layers"] if r["name"] == "rnn")
        assert row["host_us"] >= want_us and row["host_us"] < want_us + 5, (network, row)
        assert res["end_to_end_us"] > want_us


@pytest.mark.parametrize("op", ["GRU", "LSTM", "RNN"])
def test_a_batch_first_recurrent_node_runs_a_whole_batch(tmp_path, op):
    """``layout=1`` (batch first): onnx 1.22's reference failed on every such node (it took the batch
    size from the time axis), and onnxruntime refuses it. hlsnn's reference runs it; compared with
    onnxruntime on the same node at ``layout=0`` between Transposes, on a batch of 4 with an initial
    state, through the float reference and the ``--host-fallback`` import."""
    from hlsnn.deploy.importer.reference import reference_probs
    rng = np.random.default_rng(11)
    gates = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
    n = 4
    w = {k: (rng.normal(size=s) * 0.5).astype(np.float32) for k, s in
         (("W", (1, gates * H, F)), ("R", (1, gates * H, H)), ("B", (1, 2 * gates * H)), ("h0", (n, 1, H)),
          ("wf", (C, H)), ("bf", (C,)))}
    states = ["", "h0"] + (["c0"] if op == "LSTM" else [])
    w["c0"] = -w["h0"]

    def model(layout):
        inits = [numpy_helper.from_array(v if layout == 1 or k not in ("h0", "c0") else v.transpose(1, 0, 2), k)
                 for k, v in w.items()] + [numpy_helper.from_array(np.array([n, H], np.int64), "shape")]
        x = "x"
        nodes = []
        if layout == 0:
            nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]))
            x = "xt"
        nodes.append(helper.make_node(op, [x, "W", "R", "B"] + states, ["", "Y_h"], hidden_size=H, layout=layout))
        h = "Y_h"
        if layout == 0:
            nodes.append(helper.make_node("Transpose", ["Y_h"], ["ht"], perm=[1, 0, 2]))
            h = "ht"
        nodes += [helper.make_node("Reshape", [h, "shape"], ["flat"]),
                  helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], transB=1)]
        g = helper.make_graph(nodes, f"bf{layout}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, T, F])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, C])], initializer=inits)
        p = tmp_path / f"{op}_{layout}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p))
        return p

    x = rng.normal(size=(n, T, F)).astype(np.float32)
    want = ort.InferenceSession(str(model(0)), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    path = model(1)
    np.testing.assert_allclose(reference_probs(path, x), want, rtol=1e-5, atol=1e-5)
    net = load_onnx(path, host_fallback=True)
    assert [la.op for la in net.layers if la.kind == "host"].count("fallback") == 1
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-5, atol=1e-5)
