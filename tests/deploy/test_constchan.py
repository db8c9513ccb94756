"""A pruned model's dead channels folded into the layers that read them (:mod:`hlsnn.deploy.rewrite.constchan`).

Expected values: onnxruntime on the file as written (the function must not change), the weights
the rule zeroes (read off the graph), and the deployed accuracy against the float model's."""
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from hlsnn.deploy.rewrite import constchan  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from netfixtures import f32_init, save_net, write_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _run(path, x):
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def _consts(m):
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def _weight(m, node_name):
    n = next(n for n in m.graph.node if n.name == node_name)
    return _consts(m)[n.input[1]], (_consts(m)[n.input[2]] if len(n.input) > 2 and n.input[2] else None)


def _chain(tmp_path, seed):
    """conv 3x3 (padded, channels 1 and 4 dead) -> BN -> Relu -> 1x1 conv (stride 2; its channel 2
    reads only the dead ones) -> BN (channel 2: variance 0) -> Clip 0..6 -> padded 3x3 conv (never
    folded) and an unpadded depthwise 2x2 conv, Add -> LeakyRelu -> MaxPool -> GlobalAveragePool ->
    Flatten -> Gemm (transB) with a dead row -> Relu -> Gemm."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=(6, 3, 3, 3)).astype(np.float32)
    w1[[1, 4]] = 0
    b1 = rng.normal(size=6).astype(np.float32) + 1.0
    bn1 = [rng.uniform(0.5, 2, 6), rng.normal(size=6), rng.normal(size=6) * 0.1, rng.uniform(0.5, 2, 6)]
    w2 = rng.normal(size=(5, 6, 1, 1)).astype(np.float32)
    w2[2] = 0
    w2[2, [1, 4], 0, 0] = [1.5, -0.7]
    bn2 = [rng.uniform(0.5, 2, 5), rng.normal(size=5), rng.normal(size=5), rng.uniform(0.5, 2, 5)]
    bn2[3][2] = 0.0
    w3 = rng.normal(size=(5, 5, 3, 3)).astype(np.float32)          # padded: reads the constants at the border
    w4 = rng.normal(size=(5, 1, 2, 2)).astype(np.float32)          # depthwise, unpadded
    w5 = rng.normal(size=(7, 5)).astype(np.float32)                # Gemm transB: (N, K)
    w5[3] = 0
    w6 = rng.normal(size=(7, 4)).astype(np.float32)                # Gemm: (K, N), reads the dead row 3
    inits = [f32_init("w1", w1), f32_init("b1", b1), f32_init("w2", w2), f32_init("w3", w3), f32_init("w4", w4),
             f32_init("b4", rng.normal(size=5)), f32_init("w5", w5), f32_init("b5", rng.normal(size=7)),
             f32_init("w6", w6), f32_init("b6", rng.normal(size=4)), f32_init("lo", 0.0), f32_init("hi", 6.0)]
    inits += [f32_init(f"bn1_{i}", v) for i, v in enumerate(bn1)] + [f32_init(f"bn2_{i}", v) for i, v in enumerate(bn2)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1"] + [f"bn1_{i}" for i in range(4)], ["n1"], name="n1"),
             helper.make_node("Relu", ["n1"], ["r1"], name="r1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="c2", strides=[2, 2]),
             helper.make_node("BatchNormalization", ["c2"] + [f"bn2_{i}" for i in range(4)], ["n2"], name="n2"),
             helper.make_node("Clip", ["n2", "lo", "hi"], ["r2"], name="r2"),
             helper.make_node("Conv", ["r2", "w3"], ["c3"], name="c3", pads=[0, 0, 1, 1]),
             helper.make_node("Conv", ["r2", "w4", "b4"], ["c4"], name="c4", group=5, kernel_shape=[2, 2]),
             helper.make_node("Add", ["c3", "c4"], ["a"], name="a"),
             helper.make_node("LeakyRelu", ["a"], ["l"], name="l", alpha=0.1),
             helper.make_node("MaxPool", ["l"], ["p"], name="p", kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="g"),
             helper.make_node("Flatten", ["g"], ["f"], name="f"),
             helper.make_node("Gemm", ["f", "w5", "b5"], ["d1"], name="d1", transB=1),
             helper.make_node("Relu", ["d1"], ["d1r"], name="d1r"),
             helper.make_node("Gemm", ["d1r", "w6", "b6"], ["y"], name="d2", alpha=0.5, beta=2.0)]
    return save_net(tmp_path / f"chain{seed}.onnx", nodes, inits, "chain", ("N", 3, 14, 14), ("N", 4))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_function_is_kept_and_the_reads_of_constants_are_gone(tmp_path, seed):
    path = _chain(tmp_path, seed)
    m0 = onnx.load(str(path))
    m1 = constchan.rewrite(m0)
    onnx.checker.check_model(m1)
    out = tmp_path / "folded.onnx"
    onnx.save(m1, str(out))
    x = np.random.default_rng(seed + 10).normal(size=(4, 3, 14, 14)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(path, x), rtol=1e-5, atol=1e-5)
    w2, _ = _weight(m1, "c2")
    assert not w2[:, [1, 4]].any()                       # the dead channels' weights: in the bias now
    assert w2[:, [0, 2, 3, 5]].any(axis=(0, 2, 3)).all()
    w4, _ = _weight(m1, "c4")                            # channel 2 of the depthwise conv reads a constant
    assert not w4[2].any() and w4[[0, 1, 3, 4]].any(axis=(1, 2, 3)).all()
    w3, _ = _weight(m1, "c3")                            # padded: untouched
    np.testing.assert_array_equal(w3, _weight(m0, "c3")[0])
    w6, b6 = _weight(m1, "d2")                           # the Gemm after the dead row 3 of d1
    assert not w6[3].any() and b6.shape == (4,)
    assert next(a.f for a in next(n for n in m1.graph.node if n.name == "d2").attribute if a.name == "beta") == 1.0


@pytest.mark.parametrize("axis", [1, -3, 2])
def test_constant_channels_cross_a_concat_along_the_channels(tmp_path, axis):
    """conv b (4 channels, none dead) and conv a (3 channels, channel 1 dead, padded) -> Relu on a ->
    Concat [b, a] -> unpadded 1x1 conv: a's dead channel is channel 4 + 1 of the Concat; along
    another axis (2, the rows) a channel is no constant of the output and nothing folds."""
    rng = np.random.default_rng(7)
    wa = rng.normal(size=(3, 3, 3, 3)).astype(np.float32)
    wa[1] = 0
    wb = rng.normal(size=(4, 3, 1, 1)).astype(np.float32)
    cin = 7 if axis != 2 else 3
    wr = rng.normal(size=(5, cin, 1, 1)).astype(np.float32)
    inits = [f32_init("wa", wa), f32_init("ba", rng.normal(size=3) + 1.0), f32_init("wb", wb),
             f32_init("bb", rng.normal(size=4)), f32_init("wr", wr), f32_init("br", rng.normal(size=5))]
    b_out = "cb" if axis != 2 else "cb3"
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], name="ca", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["ca"], ["ra"], name="ra"),
             helper.make_node("Conv", ["x", "wb", "bb"], ["cb"], name="cb")]
    if axis == 2:              # rows: b's first three channels beside a's three
        inits.append(onnx.numpy_helper.from_array(np.array([0, 0, 0, 0], np.int64), "st"))
        inits.append(onnx.numpy_helper.from_array(np.array([9, 3, 9, 9], np.int64), "en"))
        nodes.append(helper.make_node("Slice", ["cb", "st", "en"], ["cb3"], name="sl"))
    nodes += [helper.make_node("Concat", [b_out, "ra"], ["cat"], name="cat", axis=axis),
              helper.make_node("Conv", ["cat", "wr", "br"], ["y"], name="r")]
    rows = 9 if axis != 2 else 18
    path = save_net(tmp_path / f"cat{axis}.onnx", nodes, inits, "cat", ("N", 3, 9, 9), ("N", 5, rows, 9))
    m0 = onnx.load(str(path))
    m1 = constchan.rewrite(m0)
    if axis == 2:
        assert m1 is m0
        return
    onnx.checker.check_model(m1)
    out = tmp_path / "folded.onnx"
    onnx.save(m1, str(out))
    x = np.random.default_rng(8).normal(size=(2, 3, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x), _run(path, x), rtol=1e-5, atol=1e-5)
    w, _ = _weight(m1, "r")
    assert not w[:, 5].any() and w[:, [0, 1, 2, 3, 4, 6]].all()


def test_nothing_to_fold_and_a_trained_export_are_left_as_they_are(tmp_path):
    plain = onnx.load(str(ROOT / "configs" / "models" / "digits_cnn.onnx"))
    assert constchan.rewrite(plain) is plain
    m = onnx.load(str(_chain(tmp_path, 0)))
    assert constchan.rewrite(m, trained=True) is m


def _hazard(tmp_path):
    """The shipped digits CNN with a pruned channel: conv1's channel 0 loses its weights (its
    output the constant 0.8 after BN and ReLU), and a 1x1 conv inserted after it (identity, but
    its channel 3 reads only channel 0) has a BatchNorm that saw no variance there, as training
    leaves it: folded, weights of 1.7 / sqrt(1e-5) = 538 whose products cancel in float only."""
    m = onnx.load(str(ROOT / "configs" / "models" / "digits_cnn.onnx"))
    g = m.graph
    c = _consts(m)
    w1, b1 = c["conv1.weight"].copy(), c["conv1.bias"].copy()
    w1[0] = 0
    s = c["bn1.gamma"][0] / np.sqrt(c["bn1.var"][0] + 1e-5)
    b1[0] = c["bn1.mean"][0] + (0.8 - c["bn1.beta"][0]) / s
    for t in g.initializer:
        if t.name in ("conv1.weight", "conv1.bias"):
            t.CopyFrom(numpy_helper.from_array(w1 if t.name == "conv1.weight" else b1, t.name))
    n = w1.shape[0]
    w = np.eye(n, dtype=np.float32)[:, :, None, None]
    w[3] = 0
    w[3, 0] = 1.7
    mean, var = np.zeros(n, np.float32), np.ones(n, np.float32) - 1e-5
    mean[3], var[3] = 1.7 * 0.8, 0.0
    g.initializer.extend([f32_init("ins.w", w), f32_init("ins.g", np.ones(n)), f32_init("ins.b", np.zeros(n)),
                          f32_init("ins.m", mean), f32_init("ins.v", var)])
    nodes = list(g.node)
    i = [x.op_type for x in nodes].index("MaxPool")
    nodes[i].input[0] = "ins_r"
    extra = [helper.make_node("Conv", ["relu1_out", "ins.w"], ["ins_c"], name="ins_c"),
             helper.make_node("BatchNormalization", ["ins_c", "ins.g", "ins.b", "ins.m", "ins.v"], ["ins_n"], name="ins_n"),
             helper.make_node("Relu", ["ins_n"], ["ins_r"], name="ins_r")]
    del g.node[:]
    g.node.extend(nodes[:i] + extra + nodes[i:])
    onnx.checker.check_model(m)
    path = tmp_path / "pruned_cnn.onnx"
    onnx.save(m, str(path))
    return path


def test_a_dead_channels_reader_deploys_within_a_point_of_float(tmp_path, monkeypatch):
    path = _hazard(tmp_path)
    cfg = write_config(tmp_path, "pruned_cnn", path, formats={"fixed8": "{type: fixed, accel: sparse8_pynq-z2}"})
    res = deploy(cfg, "emu")
    assert abs(res["assignments"]["fixed8"]["accuracy"] - res["float_accuracy"]) <= 0.01
    # without the fold the inserted conv's folded weights (538) set its step: the hazard is real
    monkeypatch.setattr(constchan, "rewrite", lambda model, trained=False: model)
    before = deploy(cfg, "emu")
    assert before["float_accuracy"] == res["float_accuracy"]
    assert before["assignments"]["fixed8"]["accuracy"] < res["float_accuracy"] - 0.2
