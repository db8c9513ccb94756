"""Hostile ONNX models and data (issue 33, findings 5, 6, 8 and the smaller things): every one
ends in one clear hlsnn error naming what is wrong (a node, an initializer, a path), or in the
correct result; none hangs, none leaves a raw traceback."""
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.cli import main  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.reports.evaluate import float_reference  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.errors import InputError, ModelError, UnsupportedModelError  # noqa: E402


def _save(tmp_path, nodes, inits, in_shape=("N", 4), out_shape=("N", "M"), name="m", opset=15, out_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                          [helper.make_tensor_value_info("y", out_type, out_shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return p


def _f(name, a, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(a, dtype), name)


def _conv_model(tmp_path, w_shape=(2, 1, 3, 3), in_shape=("N", 1, 5, 5), **attrs):
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", **attrs),
             helper.make_node("Flatten", ["c"], ["y"], name="flat")]
    return _save(tmp_path, nodes, [_f("w", rng.normal(size=w_shape))], in_shape)


def test_loop_with_a_huge_constant_trip_count_is_refused_not_run(tmp_path):
    """Finding 5: a Loop of constant trip count 10^12 was constant-folded (run) at import: a hang."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["v_in"], ["v_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [4])])
    inits = [numpy_helper.from_array(np.array(10 ** 12, np.int64), "M"),
             numpy_helper.from_array(np.array(True), "cond"), _f("v0", np.ones(4))]
    nodes = [helper.make_node("Loop", ["M", "cond", "v0"], ["v"], name="forever", body=body),
             helper.make_node("Add", ["x", "v"], ["y"], name="add")]
    p = _save(tmp_path, nodes, inits)
    for fallback in (False, True):
        with pytest.raises(UnsupportedModelError, match=r"forever \(Loop\): control flow"):
            load_onnx(p, host_fallback=fallback)


def test_folding_a_huge_constant_is_refused_before_it_is_evaluated(tmp_path):
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("s", 0), ("l", 10 ** 12), ("d", 1))]
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
             helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "rf"], ["y"], name="add")]
    with pytest.raises(ModelError, match=r"'range' \(Range\).*1,000,000,000,000 values"):
        load_onnx(_save(tmp_path, nodes, inits))


@pytest.mark.parametrize("make, node", [
    (lambda t: _conv_model(t, w_shape=(2, 3, 3, 3)), "conv"),                         # channel mismatch
    (lambda t: _conv_model(t, w_shape=(2, 1, 7, 7)), "conv"),                         # kernel larger than the map
    (lambda t: _save(t, [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                     [numpy_helper.from_array(np.array([-1, 3], np.int64), "s")], ("N", 4)), "rs"),
])
def test_every_reference_failure_is_one_model_error_naming_the_node(tmp_path, make, node):
    """Finding 8: the float reference's exceptions reached the user raw."""
    p = make(tmp_path)
    x = np.ones((2,) + tuple(onnx.load(str(p)).graph.input[0].type.tensor_type.shape.dim[i].dim_value
                             for i in range(1, len(onnx.load(str(p)).graph.input[0].type.tensor_type.shape.dim))),
                np.float32)
    with pytest.raises(ModelError, match=f"node '{node}'") as e:
        float_reference(p, x)
    assert "\n" not in str(e.value)


def test_huge_pads_are_refused_by_the_size_bound_not_by_running_out_of_memory(tmp_path):
    p = _conv_model(tmp_path, pads=[30000] * 4)
    with pytest.raises(ModelError, match=r"node 'conv' \(Conv\).*per evaluation"):
        load_onnx(p)


def test_pool_stride_zero_is_refused(tmp_path):
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[2, 2], strides=[0, 0]),
             helper.make_node("Flatten", ["p"], ["y"], name="flat")]
    p = _save(tmp_path, nodes, [], ("N", 1, 4, 4))
    with pytest.raises((UnsupportedModelError, ModelError, InputError), match="pool"):
        load_onnx(p)


@pytest.mark.parametrize("dtype", [np.int8, np.bool_, np.float16, object])
def test_weights_of_other_types_are_named(tmp_path, dtype):
    if dtype is object:
        w = numpy_helper.from_array(np.array([["a"] * 4] * 3, dtype=object), "w")
    else:
        w = numpy_helper.from_array(np.ones((4, 3), dtype), "w")
    p = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [w])
    if dtype is np.float16:                          # a float weight: imported exactly, as float64
        net = load_onnx(p)
        assert np.array_equal(net.layer("fc").w, np.ones((3, 4)))
        return
    with pytest.raises(ModelError, match=r"node 'fc' \(MatMul\): weight 'w' has dtype"):
        load_onnx(p)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_name_the_initializer(tmp_path, bad):
    w = np.ones((4, 3))
    w[2, 1] = bad
    p = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [_f("w", w)])
    with pytest.raises(ModelError, match=r"node 'fc' \(MatMul\): weight 'w' has 1 non-finite value\(s\).*\(2, 1\)"):
        load_onnx(p)


def test_negative_batchnorm_variance_names_the_node(tmp_path):
    inits = [_f("g", np.ones(4)), _f("b", np.zeros(4)), _f("m", np.zeros(4)), _f("v", [1, -1, 1, 1])]
    p = _save(tmp_path, [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], name="bn")],
              inits, ("N", 4, 2, 2), ("N", 4, 2, 2))
    with pytest.raises(ModelError, match=r"'bn' \(BatchNormalization\): variance 'v' has 1 negative"):
        load_onnx(p)


def test_raw_data_of_the_wrong_length_names_the_initializer(tmp_path):
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3], raw_data=b"\0" * 7)
    p = tmp_path / "m.onnx"
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])], initializer=[w])
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString())
    # hlsnn's own check names "initializer 'w'"; onnx >= 1.23's checker refuses it first, naming
    # "(tensor name: w)" (what `pip install "hlsnn[deploy]"` alone installs)
    with pytest.raises(InputError, match="'w'|initializer|tensor name: w") as e:
        load_onnx(p)
    assert "\n" not in str(e.value)


def test_external_data_shorter_than_declared(tmp_path):
    w = numpy_helper.from_array(np.ones((64, 32), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p), save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").write_bytes((tmp_path / "w.bin").read_bytes()[:100])
    m = onnx.load(str(p), load_external_data=False)          # and a length entry that agrees with the file
    for e in m.graph.initializer[0].external_data:
        if e.key == "length":
            e.value = "100"
    onnx.save(m, str(p))
    with pytest.raises(InputError, match="'w'|w.bin|initializer|tensor name: w") as e:    # onnx 1.23: see above
        load_onnx(p)
    assert "\n" not in str(e.value)


def test_an_initializer_beyond_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    import hlsnn.deploy.importer.onnx_import as imp
    monkeypatch.setattr(imp, "MAX_INITIALIZER_ELEMENTS", 100)   # 600 MB stands for 12 values here
    p = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], [_f("w", np.ones((4, 30)))])
    with pytest.raises(ModelError, match=r"initializer 'w' declares 120 values"):
        load_onnx(p)


def test_flatten_axis_0_is_refused_it_merges_the_batch(tmp_path):
    """Finding 6: Flatten(axis=0) gave "float accuracy 0.00%" with exit 0."""
    p = _save(tmp_path, [helper.make_node("Flatten", ["x"], ["y"], name="flat", axis=0)], [], ("N", 2, 2))
    with pytest.raises(UnsupportedModelError, match=r"flat \(Flatten\): axis = 0"):
        load_onnx(p)


@pytest.mark.parametrize("kind", ["folder", "fifo", "device"])
def test_a_model_path_that_is_no_regular_file_says_so(tmp_path, kind):
    if kind == "folder":
        p = tmp_path / "m.onnx"
        p.mkdir()
        want = "is a folder"
    elif kind == "fifo":
        p = tmp_path / "m.onnx"
        os.mkfifo(p)
        want = "not a regular file"
    else:
        p = "/dev/zero"
        want = "not a regular file"
    with pytest.raises(InputError, match=want):
        load_onnx(p)


def _npz(tmp_path, **arrays):
    p = tmp_path / "d.npz"
    np.savez(p, **arrays)
    return p


def test_complex_inputs_are_refused(tmp_path):
    """Finding 6: a complex x_test lost its imaginary part with exit 0."""
    p = _npz(tmp_path, x_test=np.ones((3, 4), np.complex64), y_test=np.zeros(3, np.int64))
    with pytest.raises(InputError, match=r"x_test \(complex64\) must be real"):
        datasets.load(p)


@pytest.mark.parametrize("split", ["test", "train"])
def test_empty_splits_are_refused(tmp_path, split):
    arrays = dict(x_test=np.ones((3, 4)), y_test=np.zeros(3, np.int64), x_train=np.ones((3, 4)),
                  y_train=np.zeros(3, np.int64))
    arrays[f"x_{split}"], arrays[f"y_{split}"] = np.ones((0, 4)), np.zeros(0, np.int64)
    with pytest.raises(InputError, match=f"x_{split} has no samples"):
        datasets.load(_npz(tmp_path, **arrays))


def test_deploy_cli_names_the_node_in_one_line(tmp_path, capsys):
    p = _conv_model(tmp_path, w_shape=(2, 3, 3, 3))
    np.savez(tmp_path / "d.npz", x_train=np.ones((4, 1, 5, 5), np.float32), y_train=np.zeros(4, np.int64),
             x_test=np.ones((4, 1, 5, 5), np.float32), y_test=np.zeros(4, np.int64))
    (tmp_path / "dep.yaml").write_text(f"name: t\nmodel: {p}\ndata: {tmp_path / 'd.npz'}\n"
                                       "formats: {bfp8: {type: bfp, accel: bfp8_zcu104}}\n")
    assert main(["deploy", str(tmp_path / "dep.yaml")]) == 2
    err = capsys.readouterr().err
    assert "node 'conv' (Conv)" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("section, name", [("formats", "a\nb"), ("assignments", "x\n| forged | row |")])
def test_names_with_newlines_are_refused(tmp_path, section, name):
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.errors import ConfigError
    import yaml
    from conftest import ROOT
    raw = {"name": "t", "model": str(ROOT / "configs/models/digits_mlp.onnx"),
           "formats": {"f": {"type": "bfp", "accel": "bfp8_zcu104"}}, "assignments": {"a": {"default": "f"}}}
    if section == "formats":
        raw["formats"] = {name: raw["formats"]["f"]}
        raw["assignments"] = {"a": {"default": name}}
    else:
        raw["assignments"] = {name: {"default": "f"}}
    (tmp_path / "d.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=f"{section}.*names must be"):
        load_deploy_config(tmp_path / "d.yaml")


def test_a_data_path_that_is_a_fifo_says_so(tmp_path):
    p = tmp_path / "d.npz"
    os.mkfifo(p)
    with pytest.raises(InputError, match="not a regular file"):
        datasets.load(p)
