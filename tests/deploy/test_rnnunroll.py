"""Recurrent cells unrolled at import (issue 79, :mod:`hlsnn.deploy.rewrite.rnnunroll`): the float graph
after the rewrite equals the original node as onnxruntime (layout 0) or onnx's
``ReferenceEvaluator`` with the layout-1 fix of :mod:`hlsnn.deploy.importer.reference` computes it, for
random weights and biases, both layouts, GRU with both ``linear_before_reset``, LSTM, RNN, the
reverse direction and constant initial states; the unsupported attributes are refused by name
(or left to ``--host-fallback``); torch's keyword spotters (tests/data/torch/rnn/, both
exporters) import with no fallback, their float graph equal to onnxruntime's, and deploy within
a point of float in one network kernel start whose bits are the layer path's."""
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.rewrite import rnnunroll  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "torch" / "rnn"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
T, N, F, H = 5, 3, 4, 6
GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}


def _node_model(op, layout, outputs=("Y", "Y_h"), states=False, bias=True, **attrs):
    """One ``op`` node (hidden H) on X of layout ``layout``, its outputs the graph's; random
    weights, biases and (``states``) constant initial states."""
    rng = np.random.default_rng(zlib.crc32(repr((op, layout, states, sorted(attrs.items()))).encode()))
    g = GATES[op]
    w = lambda *s: (rng.normal(size=s) * 0.6).astype(np.float32)   # noqa: E731
    inits = [numpy_helper.from_array(w(1, g * H, F), "W"), numpy_helper.from_array(w(1, g * H, H), "R")]
    ins = ["X", "W", "R"]
    if bias or states:
        inits.append(numpy_helper.from_array(w(1, 2 * g * H) if bias else np.zeros((1, 2 * g * H), np.float32), "B"))
        ins.append("B")
    if states:
        sh = (1, N, H) if layout == 0 else (N, 1, H)
        row = w(H)
        inits.append(numpy_helper.from_array(np.broadcast_to(row, sh).astype(np.float32), "h0"))
        ins += ["", "h0"]
        if op == "LSTM":
            inits.append(numpy_helper.from_array(np.broadcast_to(w(H), sh).astype(np.float32), "c0"))
            ins.append("c0")
    x_shape = [T, N, F] if layout == 0 else [N, T, F]
    y_shapes = {"Y": [T, 1, N, H] if layout == 0 else [N, T, 1, H], "Y_h": [1, N, H] if layout == 0 else [N, 1, H]}
    y_shapes["Y_c"] = y_shapes["Y_h"]
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:3 if op == "LSTM" else 2]]
    while outs and not outs[-1]:
        outs.pop()
    node = helper.make_node(op, ins, outs, name="cell", hidden_size=H, layout=layout, **attrs)
    graph = helper.make_graph([node], "cell", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, y_shapes[o]) for o in outs if o],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model, x):
    """The node as onnxruntime computes it. onnxruntime refuses ``layout=1`` (and onnx's reference
    writes no ``Y_c``): a layout-1 node runs as its layout-0 twin on the swapped tensors (ONNX's
    definition of the layout), its outputs swapped back."""
    layout = helper.get_attribute_value(next(a for a in model.graph.node[0].attribute if a.name == "layout"))
    if layout == 1:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        next(a for a in m.graph.node[0].attribute if a.name == "layout").i = 0
        for t in m.graph.initializer:
            if t.name in ("h0", "c0"):
                t.CopyFrom(numpy_helper.from_array(np.swapaxes(numpy_helper.to_array(t), 0, 1).copy(), t.name))
        for v in list(m.graph.input) + list(m.graph.output):
            v.type.tensor_type.ClearField("shape")
        outs = _reference(m, np.swapaxes(x, 0, 1).copy())
        names = [o.name for o in m.graph.output]
        return [np.transpose(y, (2, 0, 1, 3)) if n == "Y" else np.swapaxes(y, 0, 1) for n, y in zip(names, outs)]
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})


CASES = [("GRU", 0, {"linear_before_reset": 1}, False), ("GRU", 1, {"linear_before_reset": 1}, False),
         ("GRU", 0, {"linear_before_reset": 0}, True), ("GRU", 1, {"linear_before_reset": 0}, False),
         ("LSTM", 0, {}, False), ("LSTM", 1, {}, True), ("RNN", 0, {}, True), ("RNN", 1, {}, False),
         ("GRU", 0, {"direction": "reverse"}, True), ("LSTM", 1, {"direction": "reverse"}, False)]


@pytest.mark.parametrize("op,layout,attrs,states", CASES)
def test_the_unrolled_graph_equals_the_node(op, layout, attrs, states):
    outputs = ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")
    model = _node_model(op, layout, outputs, states, **attrs)
    new = rnnunroll.rewrite(model)
    onnx.checker.check_model(new)
    assert not {n.op_type for n in new.graph.node} & set(rnnunroll.OPS)
    assert {n.op_type for n in new.graph.node} <= {"Gemm", "Add", "Mul", "Sigmoid", "Tanh", "Flatten", "Transpose",
                                                   "Unsqueeze", "Concat", "Identity"}
    x = np.random.default_rng(3).normal(size=(T, N, F) if layout == 0 else (N, T, F)).astype(np.float32)
    got = ort.InferenceSession(new.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})
    for g, r in zip(got, _reference(model, x)):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=2e-6)


def test_a_gru_without_biases_and_a_last_state_read_through_gather():
    """No B input; ``Y_h[-1]`` (a Gather on the direction axis) read by a Gemm: the Gemm reads
    the last step's state, and no data move is left."""
    model = _node_model("GRU", 0, ("Y_h",), bias=False, linear_before_reset=1)
    g = model.graph
    g.initializer.extend([numpy_helper.from_array(np.array(-1, np.int64), "last"),
                          numpy_helper.from_array(np.ones((2, H), np.float32), "wf")])
    g.node.extend([helper.make_node("Gather", ["Y_h", "last"], ["hT"], name="pick", axis=0),
                   helper.make_node("Gemm", ["hT", "wf"], ["y"], name="fc", transB=1)])
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, 2]))
    new = rnnunroll.rewrite(model)
    fc = next(n for n in new.graph.node if n.name == "fc")
    assert not any(n.op_type == "Gather" for n in new.graph.node)
    assert fc.input[0].startswith("cell/t4/h")
    x = np.random.default_rng(4).normal(size=(T, N, F)).astype(np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]   # noqa: E731
    np.testing.assert_allclose(run(new), run(model), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("change,match", [
    (dict(direction="bidirectional"), r"direction 'bidirectional' is not supported \(forward and reverse are\)"),
    (dict(clip=3.0), r"clip is not supported"),
    (dict(activations=["Relu", "Tanh"]), r"activations \['Relu', 'Tanh'\] are not supported"),
    (dict(sequence_lens=True), r"a sequence_lens input is not supported"),
    (dict(input_forget=1), r"input_forget=1 is not supported"),
    (dict(P=True), r"peepholes \(input P\) are not supported")])
def test_what_is_not_supported_is_refused_by_name_or_left_to_the_host_fallback(change, match):
    op = "LSTM" if ("input_forget" in change or "P" in change) else "GRU"
    attrs = {k: v for k, v in change.items() if k not in ("sequence_lens", "P")}
    model = _node_model(op, 0, **attrs)
    node = model.graph.node[0]
    if "sequence_lens" in change or "P" in change:
        model.graph.initializer.extend([numpy_helper.from_array(np.full(N, T, np.int32), "lens"),
                                        numpy_helper.from_array(np.ones((1, 3 * H), np.float32), "P")])
        while len(node.input) < 8:
            node.input.append("")
        node.input[4 if "sequence_lens" in change else 7] = "lens" if "sequence_lens" in change else "P"
    with pytest.raises(UnsupportedModelError, match=r"cell \((GRU|LSTM)\): " + match + r".*--host-fallback runs it"):
        rnnunroll.rewrite(model)
    assert rnnunroll.rewrite(model, host_fallback=True).graph.node[0].op_type == op    # left as it is


def test_an_initial_state_from_the_inputs_values_is_refused():
    model = _node_model("GRU", 0)
    node = model.graph.node[0]
    model.graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
    model.graph.node.insert(0, helper.make_node("ReduceSum", ["X", "ax"], ["h0"], name="sum", keepdims=1))
    node.input.extend(["", "", "h0"][len(node.input) - 3:] if len(node.input) < 6 else [])
    node.input[5] = "h0"
    with pytest.raises(UnsupportedModelError, match=r"initial state 'h0': it is computed from the input's values"):
        rnnunroll.rewrite(model)


@pytest.mark.parametrize("name", sorted(MANIFEST["models"]))
def test_torch_keyword_spotters_import_with_no_fallback_and_equal_onnxruntime(name):
    from hlsnn.deploy import datasets
    net = load_onnx(DATA / f"{name}.onnx")
    assert not [la for la in net.layers if la.kind == "host" and la.op == "fallback"]
    x = datasets.load("digits", layout="ntf").x_test[:24].astype(np.float32)
    sess = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-4, atol=1e-5)


def test_the_whole_sequence_flattened_into_a_gemm_reads_the_steps_states(tmp_path):
    """TorchScript's ``out.flatten(1)`` of a ``batch_first`` GRU (``Y`` squeezed, transposed to
    (N, T, H), reshaped to (N, T*H)) into a Gemm: the Gemm reads the ``Concat`` of the T states,
    and the import equals onnxruntime on each sample of the batch-1 file."""
    rng = np.random.default_rng(9)
    w = lambda *s: (rng.normal(size=s) * 0.5).astype(np.float32)   # noqa: E731
    inits = [numpy_helper.from_array(v, k) for k, v in (
        ("W", w(1, 3 * H, F)), ("R", w(1, 3 * H, H)), ("B", w(1, 6 * H)), ("wf", w(2, T * H)), ("bf", w(2)),
        ("ax1", np.array([1], np.int64)), ("shape", np.array([1, T * H], np.int64)))]
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             helper.make_node("GRU", ["xt", "W", "R", "B"], ["Y", "Y_h"], name="cell", hidden_size=H,
                              linear_before_reset=1),
             helper.make_node("Squeeze", ["Y", "ax1"], ["ys"]),
             helper.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["yb", "shape"], ["flat"]),
             helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, F])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], initializer=inits)
    path = tmp_path / "seq.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    new = rnnunroll.rewrite(onnx.load(str(path)))
    fc = next(n for n in new.graph.node if n.name == "fc")
    cat = next(n for n in new.graph.node if fc.input[0] in n.output)
    assert cat.op_type == "Concat" and len(cat.input) == T and not any(
        n.op_type in ("Squeeze", "Reshape", "Transpose") for n in new.graph.node)
    net = load_onnx(path)
    assert not [la for la in net.layers if la.kind == "host" and la.op == "fallback"]
    x = rng.normal(size=(6, T, F)).astype(np.float32)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-5, atol=1e-5)


def _kws_config(tmp_path, name, fmts):
    text = (f"name: {name}\nmodel: {DATA / (name + '.onnx')}\ndata: digits\nlayout: ntf\nformats:\n"
            + "".join(f"  {k}: {v}\n" for k, v in fmts.items())
            + "assignments:\n" + "".join(f"  {k}: {{default: {k}}}\n" for k in fmts))
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


KWS_FORMATS = {"fixed8_z2": ("{type: fixed, accel: sparse8net_pynq-z2}", "sparse_cluster"),
               "twohot": ("{type: twohot, accel: shift8_pynq-z2}", "shift_mac"),
               "bfp8": ("{type: bfp, accel: bfp8_zcu104}", "bfp_systolic")}


@pytest.mark.parametrize("name,fmt", [("gru_kws_dynamo", "fixed8_z2"), ("lstm_kws_ts17", "fixed8_z2"),
                                      ("gru_kws_ts17", "twohot"), ("gru_kws_dynamo", "twohot"),
                                      ("lstm_kws_ts17", "twohot"), ("lstm_kws_dynamo", "twohot"),
                                      ("gru_kws_ts17", "bfp8"), ("gru_kws_dynamo", "bfp8"),
                                      ("lstm_kws_ts17", "bfp8"), ("lstm_kws_dynamo", "bfp8")])
def test_a_keyword_spotter_compiles_to_one_start_with_the_layer_paths_bits(tmp_path, name, fmt):
    """The unrolled cell on a network kernel (the PYNQ-Z2's sized sparse kernel, two-hot's on the
    PYNQ-Z2, bfp8's on the ZCU104), within its board's budget (compile refuses a kernel over it:
    the steps' equal gate tables are stored once): every layer up to the logits in the network
    mode (one start), its logits the layer path's bits, within a point of the float accuracy on
    the digits test split."""
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    spec, engine = KWS_FORMATS[fmt]
    cfg = _kws_config(tmp_path, name, {fmt: spec})
    out = tmp_path / f"{name}.hlsnn"
    compile_model(cfg, fmt, out)
    ds = datasets.load("digits", layout="ntf")
    net, layers = hlsnn.load(out, "emu", network=True), hlsnn.load(out, "emu", network=False)
    assert net.network is not None and net.network.engine == engine
    y = net(ds.x_test)
    np.testing.assert_array_equal(y, layers(ds.x_test))
    acc = np.mean(np.argmax(y, axis=1) == ds.y_test)
    assert acc >= MANIFEST["models"][name]["float_accuracy"] - 0.01, acc


@pytest.mark.slow      # the emu test above covers the lowering; this compiles the kernel's C++ (~30-40 s)
@pytest.mark.csim
def test_the_gru_network_kernel_is_bit_exact_on_csim_and_the_simulated_board(tmp_path):
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    from netfixtures import check_kernel_run
    cfg = _kws_config(tmp_path, "gru_kws_ts17", {"fixed8": "{type: fixed, accel: sparse8net_pynq-z2}"})
    out = tmp_path / "gru.hlsnn"
    compile_model(cfg, "fixed8", out)
    check_kernel_run(out, "fixed8", datasets.load("digits", layout="ntf").x_test[:8], board=True)


@pytest.mark.slow      # two kernels' C++ (~1 min each)
@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", "bfp8"])
def test_the_gru_on_two_hot_and_bfp8_kernels_is_bit_exact_on_csim_and_the_simulated_board(tmp_path, fmt):
    """The shared gate tables (one ROM copy read by every step's table op) give the emulator's
    bits on the generated C++ and the simulated board."""
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    from netfixtures import check_kernel_run
    cfg = _kws_config(tmp_path, "gru_kws_ts17", {fmt: KWS_FORMATS[fmt][0]})
    out = tmp_path / "gru.hlsnn"
    compile_model(cfg, fmt, out)
    check_kernel_run(out, fmt, datasets.load("digits", layout="ntf").x_test[:8], board=True)


@pytest.mark.slow      # the LSTM's wide-element kernel's C++ (~40 s)
@pytest.mark.csim
def test_the_lstm_on_the_bfp8_kernel_is_bit_exact_on_csim_and_the_simulated_board(tmp_path):
    """Rule bfp_gate_wide (the cell's i * g exact in wide elements): the emulator's bits on the generated C++
    and the simulated board, one start."""
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    from netfixtures import check_kernel_run
    cfg = _kws_config(tmp_path, "lstm_kws_ts17", {"bfp8": KWS_FORMATS["bfp8"][0]})
    out = tmp_path / "lstm.hlsnn"
    compile_model(cfg, "bfp8", out)
    check_kernel_run(out, "bfp8", datasets.load("digits", layout="ntf").x_test[:8], board=True)


def test_the_lstm_cell_takes_wide_elements_in_bfp8_and_fails_without(tmp_path, monkeypatch):
    """Rule bfp_gate_wide: the LSTM's gate of two tables' outputs read by the cell's Add makes the program's
    elements 53-bit (the GRU's stay 26-bit); without it (a planted change: the rule off) the cell's
    product passes the 26-bit element and the network mode refuses the batch at run time."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import gatero, lower
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    nets = {}
    for name in ("lstm_kws_ts17", "gru_kws_ts17"):
        cfg = _kws_config(tmp_path, name, {"bfp8": KWS_FORMATS["bfp8"][0]})
        compile_model(cfg, "bfp8", tmp_path / f"{name}.hlsnn")
        prog, arrays = artifact.read(tmp_path / f"{name}.hlsnn")[:2]
        nets[name] = (netmode.lower(prog, arrays), arrays)
    assert lower.elem_bits(nets["lstm_kws_ts17"][0]) == 53 and lower.elem_bits(nets["gru_kws_ts17"][0]) == 26
    net, arrays = nets["lstm_kws_ts17"]
    q = netmode.run_ints(net, netmode.quantize_input(net, arrays["check/x"]))
    assert (netmode.dequantize(net, q).reshape(arrays["check/logits"].shape) == arrays["check/logits"]).all()
    monkeypatch.setattr(gatero, "wide", lambda net: False)
    with pytest.raises(lower.NotExact, match="spans more than 25 bits"):
        netmode.run_ints(net, netmode.quantize_input(net, arrays["check/x"]))


def test_equal_tables_are_stored_once_and_different_ones_apart():
    """The network kernels' table ROM (hlsnn.engines.network.gate.lut_rom): an op whose table
    equals an earlier op's reads that op's words; a different table gets its own."""
    from types import SimpleNamespace
    from hlsnn.engines.network.gate import lut_rom
    a, b = np.arange(256) - 128, np.arange(256)[::-1] - 100
    ops = [SimpleNamespace(kind="lut", name=f"t{i}", f={"table": t.copy()}) for i, t in enumerate((a, b, a, b, a))]
    rom = lut_rom(SimpleNamespace(ops=ops), 8)
    assert [op.f["rom"] for op in ops] == [0, 256, 0, 256, 0] and rom.shape == (512,)
    for op in ops:
        np.testing.assert_array_equal(rom[op.f["rom"]:op.f["rom"] + 256], op.f["table"])
    banked = lut_rom(SimpleNamespace(ops=ops), 8, pc=4)
    assert banked.shape == (4, 512) and [op.f["rom"] for op in ops] == [0, 256, 0, 256, 0]


@pytest.mark.parametrize("n", [1, 3])
def test_two_stacked_grus(n):
    """``nn.GRU(num_layers=2)`` as TorchScript writes it: the first node's ``Y`` squeezed into the
    second's input. The second reads the first's states flattened batch first (their
    ``Concat``, no data move), at the file's batch 1 and 3 alike; both equal onnxruntime."""
    rng = np.random.default_rng(21)
    w = lambda *s: (rng.normal(size=s) * 0.5).astype(np.float32)   # noqa: E731
    inits = [numpy_helper.from_array(v, k) for k, v in (
        ("W1", w(1, 3 * H, F)), ("R1", w(1, 3 * H, H)), ("B1", w(1, 6 * H)),
        ("W2", w(1, 3 * H, H)), ("R2", w(1, 3 * H, H)), ("B2", w(1, 6 * H)), ("ax1", np.array([1], np.int64)))]
    nodes = [helper.make_node("GRU", ["X", "W1", "R1", "B1"], ["Y1"], name="l1", hidden_size=H, linear_before_reset=1),
             helper.make_node("Squeeze", ["Y1", "ax1"], ["X2"]),
             helper.make_node("GRU", ["X2", "W2", "R2", "B2"], ["", "Y_h"], name="l2", hidden_size=H,
                              linear_before_reset=1)]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, n, F])],
                          [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, n, H])], initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    new = rnnunroll.rewrite(model)
    assert not {nd.op_type for nd in new.graph.node} & set(rnnunroll.OPS)
    assert not any(nd.op_type == "Squeeze" for nd in new.graph.node)
    x = rng.normal(size=(T, n, F)).astype(np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]   # noqa: E731
    np.testing.assert_allclose(run(new), run(model), rtol=1e-5, atol=2e-6)
