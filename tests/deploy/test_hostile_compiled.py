"""Hostile input, round three (issue 47): compiled models, names in generated text, paths from
data, damaged containers, regression data, run inputs. Every case must end in one clear
InputError/ModelError/CsimError (or the correct result): no traceback of another type, no code
run, nothing written outside the build folder. The program cases are written with a valid
checksum (``artifact.write``), so they reach the schema, the check an attacker faces."""
import copy
import ctypes
import json
import os

import numpy as np
import pytest

from hlsnn.network import artifact
from hlsnn.errors import CsimError, InputError

from compiled_fixtures import digits_cnn_three_formats, layer_named as _layer


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return digits_cnn_three_formats(tmp_path_factory, "hostile3")


def conv1(field, value, sub=None):
    def m(p, a):
        j = _layer(p, "conv1")
        if sub is None:
            j[field] = value
        else:
            j[field][sub] = value
    return m


def top(field, value):
    def m(p, a):
        p[field] = value
    return m


def drop(field):
    def m(p, a):
        del p[field]
    return m


def arr(key, value):
    def m(p, a):
        if value is None:
            del a[key]
        else:
            a[key] = value
    return m


def pool1(field, value):
    def m(p, a):
        _layer(p, "pool1")["attrs"][field] = value
    return m


def _fallback(p, a, attrs, node=np.frombuffer(b"\n\x01x\x12\x01y\"\x04Relu", np.uint8)):
    """pool1 turned into a --host-fallback layer with ``attrs`` and the node bytes ``node``
    (default: a serialized Relu x -> y; None: no node array)."""
    j = _layer(p, "pool1")
    j["op"], j["attrs"] = "fallback", attrs
    if node is not None:
        a["pool1/onnx_node"] = node


HOSTILE_NAMES = ["a\nb", "x\n__attribute__((constructor)) static void pwn() { system(\"id\"); }\n//",
                 "a\rb", "a\x00b", "a\u2028b", "a\u202eb", "", "x" * 300, "a\x1bb", "tab\there"]
SLUG_BAD = ["../../evil", "/tmp/evil", "a/b", ".hidden", "..", "a\nb", "", "x" * 200, "a b", "é", 5, None]

PROGRAM_CASES = {
    # names (1): where they enter
    **{f"name={n!r}"[:40]: top("name", n) for n in SLUG_BAD},
    **{f"layer name {n!r}"[:40]: conv1("name", n) for n in HOSTILE_NAMES},
    **{f"tensor name {n!r}"[:40]: conv1("output", n) for n in HOSTILE_NAMES[:5]},
    "input list name newline": conv1("inputs", ["in\nput"]),
    "model newline": top("model", "m\nx"),
    "assignment not str": top("assignment", 3),
    "stem traversal": lambda p, a: next(iter(p["accels"].values())).__setitem__("stem", "../../x"),
    "accel key traversal": lambda p, a: p.__setitem__("accels", {"../x": v for v in p["accels"].values()}),
    "calibration missing": drop("calibration"),
    "calibration images string": lambda p, a: p["calibration"].__setitem__("images", "128"),
    "quantized_by newline": lambda p, a: p["input"].__setitem__("quantized_by", "conv\n1"),
    "format_name newline": conv1("format_name", "two\nhot"),
    "nested 40 deep": lambda p, a: _layer(p, "pool1")["attrs"].__setitem__("x", __import__("functools").reduce(
        lambda acc, _: [acc], range(40), 0)),
    "NaN in attrs": lambda p, a: _layer(p, "pool1")["attrs"].__setitem__("alpha", float("nan")),
    "inf in calibration": lambda p, a: p["calibration"].__setitem__("x", float("inf")),
    "host_after newline": lambda p, a: p["output"].__setitem__("host_after", ["soft\nmax"]),
    "duplicate layer": lambda p, a: p["layers"].insert(1, copy.deepcopy(p["layers"][0])),
    # structure
    "program a list": lambda p, a: (p.clear(), p.update(format=artifact.FORMAT, version=1)),
    **{f"missing {k}": drop(k) for k in ("name", "accels", "layers", "input", "output", "rounding", "model")},
    "layers empty": top("layers", []),
    "layers a string": top("layers", "conv1"),
    "layer a number": lambda p, a: p["layers"].__setitem__(0, 7),
    "kind evil": conv1("kind", "evil"),
    "missing kind": lambda p, a: _layer(p, "conv1").pop("kind"),
    "missing geom": lambda p, a: _layer(p, "conv1").pop("geom"),
    "inputs empty": conv1("inputs", []),
    "inputs a string": conv1("inputs", "input"),
    "accel unknown": conv1("accel", "nope"),
    "engine mismatch": conv1("engine", "bfp_systolic"),
    # geometry: ranges and consistency
    "pads negative": conv1("geom", [-1, -1, -1, -1], "pads"),
    "pads huge": conv1("geom", [100000, 0, 0, 0], "pads"),
    "pads three": conv1("geom", [1, 1, 1], "pads"),
    "pads float": conv1("geom", [1.0, 1, 1, 1], "pads"),
    "stride zero": conv1("geom", [0, 1], "strides"),
    "stride negative": conv1("geom", [-1, 1], "strides"),
    "stride string": conv1("geom", ["1", 1], "strides"),
    "stride huge": conv1("geom", [10 ** 30, 1], "strides"),
    "stride bool": conv1("geom", [True, 1], "strides"),
    "dilation zero": conv1("geom", [0, 1], "dilations"),
    "group zero": conv1("geom", 0, "group"),
    "group 3": conv1("geom", 3, "group"),
    "group 8 on 1 channel": conv1("geom", 8, "group"),
    "kh mismatch": conv1("geom", 5, "kh"),
    "kernel beyond map": lambda p, a: (_layer(p, "conv1")["geom"].update(kh=9, kw=9, pads=[0, 0, 0, 0]),
                                       _layer(p, "conv1").__setitem__("w_shape", [8, 1, 9, 9])),
    "w_shape three": conv1("w_shape", [8, 1, 3]),
    "w_shape zero": conv1("w_shape", [0, 1, 3, 3]),
    "w_shape channels": conv1("w_shape", [8, 2, 3, 3]),
    "w_shape huge": conv1("w_shape", [1 << 20, 1 << 20, 3, 3]),
    "n_out mismatch": conv1("n_out", 9),
    "n_out negative": conv1("n_out", -8),
    "relu string": conv1("relu", "yes"),
    "f_x huge": conv1("f_x", 1000),
    "f_out huge": conv1("f_out", -1000),
    "f_w float": conv1("f_w", 1.5),
    "f_w list len": conv1("f_w", [1, 2, 3]),
    "f_out string": conv1("f_out", "4"),
    "exp_bits 99": conv1("exp_bits", 99),
    "mode evil": conv1("mode", "evil"),
    "dense K mismatch": lambda p, a: _layer(p, "fc").__setitem__("w_shape", [10, 65]),
    # arrays against the descriptor tables
    "bias short": arr("conv1/b", np.zeros(7)),
    "bias long": arr("conv1/b", np.zeros(9)),
    "bias 2-D": arr("conv1/b", np.zeros((8, 1))),
    "bias int": arr("conv1/b", np.zeros(8, np.int64)),
    "bias NaN": arr("conv1/b", np.full(8, np.nan)),
    "bias inf": arr("conv1/b", np.full(8, np.inf)),
    "bias missing": arr("conv1/b", None),
    "e1 missing": arr("conv1/e1", None),
    "e1 huge": arr("conv1/e1", np.full((8, 9), 100, np.int8)),
    "e1 wrong shape": arr("conv1/e1", np.zeros((8, 10), np.int8)),
    "e1 float": arr("conv1/e1", np.zeros((8, 9))),
    "s1 = 5": arr("conv1/s1", np.full((8, 9), 5, np.int8)),
    "scale exponent huge": arr("conv1/scale_exponent", np.full((1, 1), 100, np.int8)),
    "stray array": arr("nobody/w", np.zeros(3)),
    "check x shape": arr("check/x", np.zeros((2, 3, 3))),
    "check y inf": arr("check/y", np.full((2, 10), np.inf)),
    # host layers
    "pool kernel zero": pool1("kernel_shape", [0, 0]),
    "pool stride zero": pool1("strides", [0, 0]),
    "pool stride negative": pool1("strides", [-2, 2]),
    "pool pads negative": pool1("pads", [-1, 0, 0, 0]),
    "pool pads >= kernel": pool1("pads", [2, 2, 2, 2]),
    "pool kernel missing": lambda p, a: _layer(p, "pool1")["attrs"].pop("kernel_shape"),
    "pool kernel beyond map": pool1("kernel_shape", [64, 64]),
    "attrs a list": lambda p, a: _layer(p, "pool1").__setitem__("attrs", [1]),
    "bfp_table a string": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", "x"),
    "bfp_table f_in huge": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", {"f_in": 10 ** 6}),
    "bfp_table f_in string": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", {"f_in": "3"}),
    "bfp_table no f_in": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", {}),
    "bfp_table bits 13": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", {"f_in": 3, "bits": 13}),   # rule 9g
    "bfp_table bits string": lambda p, a: _layer(p, "pool1").__setitem__("bfp_table", {"f_in": 3, "bits": "8"}),
    "table f_out huge": lambda p, a: _layer(p, "pool1").__setitem__("table", {"f_out": 10 ** 6}),
    "table a list": lambda p, a: _layer(p, "pool1").__setitem__("table", [3]),
    "table no f_out": lambda p, a: _layer(p, "pool1").__setitem__("table", {}),
    "gate_in on a pool": lambda p, a: _layer(p, "pool1").__setitem__("gate_in", {"f_in": [3, None]}),
    "gate_in a string": lambda p, a: _layer(p, "pool1").__setitem__("gate_in", "x"),
    "gate_in no f_in": lambda p, a: _layer(p, "pool1").__setitem__("gate_in", {}),
    "flatten axis 100": lambda p, a: _layer(p, "flatten")["attrs"].__setitem__("axis", 100),
    # the top level
    "rounding evil": top("rounding", "evil"),
    "overflow NaN": top("overflow_ratio", float("nan")),
    "overflow string": top("overflow_ratio", "0"),
    "accels empty": top("accels", {}),
    "accels a list": top("accels", []),
    "sha short": lambda p, a: next(iter(p["accels"].values())).__setitem__("sha", "zz"),
    "accel engine evil": lambda p, a: next(iter(p["accels"].values())).__setitem__("engine", "evil"),
    "input shape empty": lambda p, a: p["input"].__setitem__("shape", []),
    "input shape zero": lambda p, a: p["input"].__setitem__("shape", [0, 8, 8]),
    "input shape huge": lambda p, a: p["input"].__setitem__("shape", [1 << 20, 1 << 20, 1]),
    "input shape string": lambda p, a: p["input"].__setitem__("shape", "1,8,8"),
    "input frac bits huge": lambda p, a: p["input"]["quantization"].__setitem__("frac_bits", 10 ** 6),
    "engine layer unknown": lambda p, a: p["output"].__setitem__("engine_layer", "nope"),
    # a --host-fallback layer (session 31: its attrs and arrays were read unchecked, KeyError tracebacks)
    "fallback no opset": lambda p, a: _fallback(p, a, {"why": "x", "const_names": []}),
    "fallback no const_names": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15]]}),
    "fallback no node": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15]], "const_names": []}, None),
    "fallback node int32": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15]], "const_names": []},
                                                  np.zeros(4, np.int32)),
    "fallback opset string": lambda p, a: _fallback(p, a, {"why": "x", "opset": "15", "const_names": []}),
    "fallback opset triple": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15, 1]], "const_names": []}),
    "fallback opset domain newline": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["a\nb", 1]],
                                                                   "const_names": []}),
    "fallback const missing": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15]], "const_names": ["c"]}),
    "fallback const_names a string": lambda p, a: _fallback(p, a, {"why": "x", "opset": [["", 15]],
                                                                   "const_names": "c"}),
}


@pytest.mark.parametrize("case", sorted(PROGRAM_CASES))
def test_a_hostile_program_is_refused_in_one_line(good, tmp_path, case):
    program, arrays = artifact.read(good["twohot"])
    PROGRAM_CASES[case](program, arrays)
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    with pytest.raises(InputError) as e:
        artifact.read(bad)
    msg = str(e.value)
    assert "\n" not in msg and str(bad) in msg


SPARSE_BFP_CASES = {
    "sparse wq int16": ("fixed8", arr("conv1/wq", np.zeros((8, 1, 3, 3), np.int16))),
    "sparse wq rows": ("fixed8", arr("conv1/wq", np.zeros((7, 1, 3, 3), np.int8))),
    "sparse general no pads1": ("fixed8", conv1("general", True)),
    "sparse general string": ("fixed8", conv1("general", "no")),
    "bfp chunk gap": ("bfp8", lambda p, a: _layer(p, "conv1")["chunks"][0].__setitem__("rows", [1, 8])),
    "bfp chunk short": ("bfp8", lambda p, a: _layer(p, "conv1")["chunks"][0].__setitem__("rows", [0, 7])),
    "bfp chunk missing array": ("bfp8", arr("conv1/w0_mantissas", None)),
    "bfp mantissa bits 99": ("bfp8", conv1("mantissa_bits", 99)),
    "bfp chunks empty": ("bfp8", conv1("chunks", [])),
    "bfp block zero": ("bfp8", lambda p, a: _layer(p, "conv1")["chunks"][0].__setitem__("w_block", 0)),
}


@pytest.mark.parametrize("case", sorted(SPARSE_BFP_CASES))
def test_hostile_sparse_and_bfp_programs_are_refused(good, tmp_path, case):
    which, mutate = SPARSE_BFP_CASES[case]
    program, arrays = artifact.read(good[which])
    mutate(program, arrays)
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    with pytest.raises(InputError):
        artifact.read(bad)


@pytest.mark.parametrize("node,match", [
    (b"\xff\xff\xff\xff", "not a serialized ONNX node"),
    (b"\n\x01x\x12\x01y\"\x04Relu", r"its node reads \['x'\] and writes \['y'\]; the layer reads"),
    (b"\n\x01x\x12\x01y\"\x05Re\nlu", "op type"),
], ids=["garbage", "other tensors", "newline in op type"])
def test_a_hostile_fallback_node_is_refused_when_it_loads(good, tmp_path, node, match):
    """The node of a --host-fallback layer (its serialized bytes pass the schema) is parsed and
    matched against its layer at load: garbage was a protobuf DecodeError traceback, a node of
    other tensors a reference-evaluator failure at the first run."""
    import hlsnn
    program, arrays = artifact.read(good["twohot"])
    _fallback(program, arrays, {"why": "x", "opset": [["", 15]], "const_names": []},
              np.frombuffer(node, np.uint8).copy())
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    with pytest.raises(InputError, match=match) as e:
        hlsnn.load(bad, target="emu")
    assert "\n" not in str(e.value)


HOST_OP_CASES = {   # found by swapping pool1's op and attributes (session 31): each was a traceback at load
    "Concat axis string": ("Concat", {"axis": "x"}, "attrs.axis: 'x' is not the integer 1"),
    "Concat axis -5": ("Concat", {"axis": -5}, "attrs.axis: -5 is not the integer 1"),
    "Reshape shape string": ("Reshape", {"shape": "x"}, "attrs.shape: 'x' is not a list of 1..8 integers"),
    "Reshape no shape": ("Reshape", {}, "attrs: the key 'shape' is missing"),
    "Squeeze axes huge": ("Squeeze", {"axes": [10 ** 9]}, r"attrs.axes: \[1000000000\] is not a list of 1..8 integers "
                                                         r"in 1..7"),
    "Pad pads int": ("Pad", {"pads": -5}, "attrs: the key 'value' is missing"),
    "ZeroStuff strides string": ("ZeroStuff", {"strides": "x"}, "attrs.strides: 'x' is not a list"),
    "LayerNormalization no epsilon": ("LayerNormalization", {"axis": -5}, "attrs: the key 'epsilon' is missing"),
    "UnaryChain no nodes": ("UnaryChain", {}, "attrs: the key 'nodes' is missing"),
    "GlobalMaxPool keepdims null": ("GlobalMaxPool", {"keepdims": None}, "attrs.keepdims: None is not true, false"),
}


@pytest.mark.parametrize("case", sorted(HOST_OP_CASES))
@pytest.mark.parametrize("self_check", [True, False])
def test_a_host_op_with_hostile_attributes_is_one_line(good, tmp_path, case, self_check):
    """Each edit was a traceback (session 31), then one InputError of the catch-all; now the schema's
    table of host ops (hlsnn.network.hostschema.HOST_OPS) refuses it at load, naming the file,
    the layer, its op and the field."""
    import hlsnn
    program, arrays = artifact.read(good["twohot"])
    j = _layer(program, "pool1")
    j["op"], j["attrs"], want = HOST_OP_CASES[case]
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    with pytest.raises(InputError, match="damaged or hostile compiled model: layer pool1 ") as e:
        with hlsnn.load(bad, target="emu", self_check=self_check) as net:
            net(net.check["x"])
    assert "\n" not in str(e.value) and str(bad) in str(e.value)
    assert f"layer pool1 ({j['op']}): " in str(e.value)
    assert __import__("re").search(want, str(e.value)), str(e.value)


@pytest.mark.parametrize("case", [("pool1", "Reshape", {"shape": "x"}), ("pool1", "ZeroStuff", {"strides": "x"}),
                                  ("softmax", "Softmax", {"axis": "x"})], ids=["reshape", "zerostuff", "softmax"])
def test_perf_and_build_of_a_hostile_host_op_are_one_line(good, tmp_path, monkeypatch, capsys, case):
    """`hlsnn perf` and `hlsnn build --dry-run` lower the program themselves (not through
    hlsnn.load): the same edits were tracebacks there."""
    from hlsnn.cli import main
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    program, arrays = artifact.read(good["twohot"])
    j = _layer(program, case[0])
    j["op"], j["attrs"] = case[1:]
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    for argv in (["perf", str(bad)], ["build", str(bad), "--dry-run", "--out", str(tmp_path / "ov")]):
        rc = main(argv)
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1 and str(bad) in err
        assert f"damaged or hostile compiled model: layer {case[0]} ({case[1]}): attrs" in err, err


def test_a_ragged_input_is_the_callers_mistake_not_the_models(good):
    """The guard of hlsnn.load/run (the catch-all of session 31, now artifact.as_internal_error) must
    not blame the model for the caller's input: a ragged nested list was numpy's ValueError, then
    "damaged or hostile"."""
    import hlsnn
    with hlsnn.load(good["twohot"], target="emu") as net:
        with pytest.raises(InputError, match=r"^input: not an array of one shape"):
            net([[1, 2], [3]])
    with pytest.raises(InputError, match=r"^overlays = 5: must be a dict"):
        hlsnn.load(good["twohot"], target="emu", overlays=5)
    with pytest.raises(InputError, match=r"^timeout = 'x': must be a positive number of seconds"):
        hlsnn.load(good["twohot"], target="sim", timeout="x")


@pytest.mark.parametrize("which", ["twohot", "fixed8", "bfp8"])
def test_the_untouched_models_pass_and_run(good, which):
    import hlsnn
    with hlsnn.load(good[which], target="emu") as net:        # the self-check runs: the stored bits
        assert net(net.check["x"]).shape == (2, 10)


@pytest.mark.parametrize("which", ["twohot", "fixed8", "bfp8"])
def test_a_batch_beyond_the_run_bound_is_refused_before_anything_is_allocated(good, which):
    """A batch broadcast to 50 million images (a view of one image: no memory) ended in numpy's
    ArrayMemoryError of the float64 copy (issue 84); it is refused first, naming its size, the
    bound (128 Mi values: the PYNQ-Z2's 128 MiB of contiguous memory at one byte a value) and
    the batch that fits. A batch at the bound's edge is the size check's, not a copy's."""
    import hlsnn
    with hlsnn.load(good[which], target="emu", self_check=False) as net:
        n = int(np.prod(net.input_shape))
        img = np.zeros(net.input_shape, np.float32)
        for dt in (np.float32, np.float64, np.uint8):
            x = np.broadcast_to(img.astype(dt), (50_000_000,) + net.input_shape)
            for keep in (False, True):
                with pytest.raises(InputError) as info:
                    net.run(x, keep=keep)
                assert str(info.value) == (
                    f"input: a batch of 50,000,000 images of {n:,} values ({50_000_000 * n:,} values); one run "
                    f"takes at most 134,217,728 (128 MiB at one byte a value, the PYNQ-Z2's contiguous memory): "
                    f"give at most {134_217_728 // n:,} images a run")
        from hlsnn.network.loader import MAX_RUN_VALUES
        assert MAX_RUN_VALUES == 128 * 2 ** 20
        edge = np.broadcast_to(img, (MAX_RUN_VALUES // n + 1,) + net.input_shape)
        with pytest.raises(InputError, match=r"^input: a batch of "):
            net.run(edge)


# ------------------------------------------------------------------ damaged containers

def _bytes(path):
    return path.read_bytes()


CONTAINER_CASES = {
    **{f"truncated to {n}": (lambda n: lambda b: b[:n])(n) for n in (0, 1, 22, 100, 1000)},
    **{f"truncated by {n}": (lambda n: lambda b: b[:-n])(n) for n in (1, 22, 100, 5000)},
    **{f"bit {i} flipped": (lambda i: lambda b: b[:i] + bytes([b[i] ^ 0x10]) + b[i + 1:])(i)
       for i in (40, 200, 1000, 3000, 6000, 9000, -30, -200)},
    "random bytes": lambda b: bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8)),
    "text": lambda b: b"hello, not a model\n",
    "zip in the middle": lambda b: b"JUNK" * 100 + b,
}


@pytest.mark.parametrize("case", sorted(CONTAINER_CASES))
def test_a_damaged_container_is_one_line(good, tmp_path, case):
    bad = tmp_path / "bad.hlsnn"
    bad.write_bytes(CONTAINER_CASES[case](_bytes(good["twohot"])))
    try:
        program, arrays = artifact.read(bad)
    except InputError as e:
        assert "\n" not in str(e)
        return
    # a flip the container does not read (a header's padding): the same model, bit for bit
    p0, a0 = artifact.read(good["twohot"])
    assert program == p0 and a0.keys() == arrays.keys()
    assert all(np.array_equal(a0[k], arrays[k]) and a0[k].dtype == arrays[k].dtype for k in a0)


def _zip_with(tmp_path, **entries):
    bad = tmp_path / "bad.hlsnn"
    with open(bad, "wb") as fh:
        np.savez(fh, **entries)
    return bad


def _blob(obj_text):
    return np.frombuffer(obj_text.encode(), np.uint8)


@pytest.mark.parametrize("case", ["npy", "no program", "pickle", "program float", "program not utf8",
                                  "program not json", "deep json", "deep list json", "version 2", "format wrong",
                                  "no checksum", "checksum wrong", "edited weights", "program huge 2-D"])
def test_a_container_of_the_wrong_content_is_one_line(good, tmp_path, case):
    program, arrays = artifact.read(good["twohot"])
    good_blob = json.dumps(dict(program))
    if case == "npy":
        bad = tmp_path / "bad.hlsnn"
        with open(bad, "wb") as fh:
            np.save(fh, np.zeros(3))
    elif case == "no program":
        bad = _zip_with(tmp_path, x=np.zeros(3))
    elif case == "pickle":
        bad = _zip_with(tmp_path, __program__=np.array([{"a": 1}], dtype=object))
    elif case == "program float":
        bad = _zip_with(tmp_path, __program__=np.zeros(4))
    elif case == "program not utf8":
        bad = _zip_with(tmp_path, __program__=np.frombuffer(b"\xff\xfe\xfa", np.uint8))
    elif case == "program not json":
        bad = _zip_with(tmp_path, __program__=_blob("{not json"))
    elif case == "deep json":
        bad = _zip_with(tmp_path, __program__=_blob('{"a": ' * 100000 + "1" + "}" * 100000))
    elif case == "deep list json":
        bad = _zip_with(tmp_path, __program__=_blob("[" * 200000 + "]" * 200000))
    elif case == "program huge 2-D":
        bad = _zip_with(tmp_path, __program__=np.zeros((2, 2), np.uint8))
    else:
        p = dict(program)
        p[artifact.CHECKSUM_KEY] = artifact.checksum(arrays)
        a = dict(arrays)
        if case == "version 2":
            p["version"] = 2
        elif case == "format wrong":
            p["format"] = "evil"
        elif case == "no checksum":
            del p[artifact.CHECKSUM_KEY]
        elif case == "checksum wrong":
            p[artifact.CHECKSUM_KEY] = "0" * 64
        elif case == "edited weights":              # the self-check pairs gone, a weight edited
            a = {k: v for k, v in a.items() if not k.startswith("check/")}
            a["conv1/e1"] = a["conv1/e1"].copy()
            a["conv1/e1"][0, 0] ^= 1
        bad = _zip_with(tmp_path, __program__=_blob(json.dumps(p)), **a)
    assert good_blob
    with pytest.raises(InputError) as e:
        artifact.read(bad)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kind", ["folder", "fifo", "missing", "devnull"])
def test_a_model_path_that_is_no_regular_file(tmp_path, kind):
    p = tmp_path / "m.hlsnn"
    if kind == "folder":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "devnull":
        p.symlink_to("/dev/null")
    with pytest.raises(InputError, match="no such compiled model"):
        artifact.read(p)


def test_a_zip_declaring_huge_sizes_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(artifact, "MAX_BYTES", 1000)
    bad = _zip_with(tmp_path, __program__=_blob("{}"), x=np.zeros(1000))
    with pytest.raises(InputError, match="declaring"):
        artifact.read(bad)


def test_an_interrupted_write_leaves_the_old_file(good, tmp_path, monkeypatch):
    program, arrays = artifact.read(good["twohot"])
    out = tmp_path / "m.hlsnn"
    artifact.write(out, program, arrays)
    before = out.read_bytes()

    def boom(fh, array, **kw):                 # the first array's bytes: a part, then a full disk
        fh.write(b"\x93NUMPYpartial")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(np.lib.format, "write_array", boom)     # what hlsnn.files.write_npz writes with
    with pytest.raises(OSError):
        artifact.write(out, program, arrays)
    assert out.read_bytes() == before
    assert [f.name for f in tmp_path.iterdir()] == ["m.hlsnn"]          # no temporary left
    with pytest.raises(OSError):
        artifact.write(tmp_path / "new.hlsnn", program, arrays)
    assert not (tmp_path / "new.hlsnn").exists()


# ------------------------------------------------------------------ names in generated text

EVIL = 'x\n__attribute__((constructor)) static void pwn() { __builtin_trap(); }\n// ??/\n*/ /* \\'


def _lowered(path, name=None, op_name=None):
    from hlsnn.deploy.lower import program as netmode
    net = netmode.lower(*artifact.read(path))
    if name is not None:
        net.name = name
    if op_name is not None:
        for op in net.ops:
            op.name = op_name + op.name
    return net


@pytest.mark.parametrize("which", ["twohot", "fixed8", "bfp8"])
def test_hostile_names_reach_generated_cxx_only_reduced(good, tmp_path, which):
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel
    from hlsnn.engines.shift_mac.network import kernel as shiftkernel
    render = {"twohot": shiftkernel.render, "fixed8": sparsekernel.render, "bfp8": bfpkernel.render}[which]
    net = _lowered(good[which], name=EVIL, op_name=EVIL)
    net.accel = EVIL
    files, _, _ = render(net, tmp_path)[:3]
    for f in files:
        if f.startswith("include/"):
            continue
        text = (tmp_path / f).read_text()
        assert "pwn" not in text.replace("pwn_", "") or "constructor" not in text.split("pwn")[0][-40:] \
            or all(line.lstrip().startswith("//") for line in text.splitlines() if "pwn" in line)
        for line in text.splitlines():
            if "constructor" in line or "pwn" in line:
                assert line.lstrip().startswith("//"), (f, line)
                assert "\\" not in line and "?" not in line and "*" not in line
        assert text.isascii()


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("which", ["twohot", "fixed8", "bfp8"])
def test_hostile_names_render_kernels_that_compile_and_run_no_code(good, tmp_path, monkeypatch, which):
    """Every network template rendered with hostile names (the accelerator's, every op's)
    compiles, and its C-simulation runs the network with the network mode's bits (a global
    constructor slipped past a comment would trap the process first)."""
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    from hlsnn.engines.network import kernel as netkernel
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.shift_mac.network import kernel as shiftkernel
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    mod = {"twohot": shiftkernel, "fixed8": sparsekernel, "bfp8": bfpkernel}[which]
    cls = {"twohot": netkernel.NetKernel, "fixed8": sparsekernel.SparseNetKernel,
           "bfp8": bfpkernel.BfpNetKernel}[which]
    render = mod.render
    net = _lowered(good[which])

    def hostile(n, out_dir):
        n2 = copy.copy(n)
        n2.accel = EVIL
        n2.ops = [netmode.Op(o.kind, EVIL + o.name, o.ins, o.out, o.f) for o in n.ops]
        return render(n2, out_dir)
    if which == "twohot":
        kernel = cls(net, builder=lambda n, strict=None: netkernel.build(n, strict=strict, render_fn=hostile))
    else:
        monkeypatch.setattr(mod, "render", hostile)
        kernel = cls(net)
    text = (kernel.path.parent / "network_data.h").read_text()
    assert "constructor" in text                  # the hostile names are there, inside comments only
    x = np.asarray(artifact.read(good[which])[1]["check/x"], np.float64)
    for i in range(len(x)):                       # batch 1: bfp's kernel gives the layer path's bits there
        xq = netmode.quantize_input(net, x[i:i + 1])
        got = netmode.dequantize(net, kernel.run(xq)).reshape(-1)
        want = netmode.dequantize(net, netmode.run_ints(net, xq)).reshape(-1)
        assert np.array_equal(np.asarray(got, np.float64).view(np.uint64), np.asarray(want, np.float64).view(np.uint64))


@pytest.mark.parametrize("name", SLUG_BAD[:8])
def test_a_program_name_cannot_steer_a_build_folder(good, tmp_path, monkeypatch, name):
    from hlsnn.engines.network import kernel as netkernel
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    net = _lowered(good["twohot"], name=name)
    before = set(os.listdir(tmp_path))
    with pytest.raises(InputError, match="not a valid name"):
        netkernel.build(net, out_root=tmp_path / "build" / "netkernel")
    assert set(os.listdir(tmp_path)) - before <= {"build"}
    leftovers = [p for p in (tmp_path / "build").rglob("*") if p.is_file()] if (tmp_path / "build").exists() else []
    assert leftovers == []


@pytest.mark.parametrize("name", ["ok", "a-b.c", "x@1+2"])
def test_names_that_are_folder_names_pass(name):
    from hlsnn.names import check_slug, comment
    assert check_slug("n", name) == name
    assert comment(name) == name


@pytest.mark.parametrize("text", HOSTILE_NAMES + [EVIL, "a*/b", "??/", "a\\", "名前"])
def test_comment_form_cannot_leave_a_comment(text):
    from hlsnn.names import comment
    c = comment(text)
    assert c.isascii() and "\n" not in c and "\r" not in c and "\\" not in c and "?" not in c and "*" not in c
    assert len(c) <= 200


# ------------------------------------------------------------------ the last check before C

@pytest.mark.parametrize("field,value", [("pads", (-1, 0, 0, 0)), ("sh", 0), ("sw", -1), ("oh", 99), ("kh", 0),
                                         ("group", 0), ("bias", np.zeros(3, np.int64)), ("shift", np.full(8, 70)),
                                         ("codes", np.zeros((8, 2, 3, 3), np.int64)), ("c", 10 ** 9)])
def test_check_ops_refuses_fields_the_c_helpers_cannot_take(good, field, value):
    from hlsnn.deploy.lower import program as netmode
    net = _lowered(good["twohot"])
    op = next(o for o in net.ops if o.kind == "conv")
    op.f[field] = value
    with pytest.raises(InputError, match=f"op {op.name}"):
        netmode.check_ops(net)


@pytest.mark.parametrize("field,value", [("sa", 40), ("sb", -1), ("shift", 99), ("hw", 0)])
def test_check_ops_refuses_undefined_add_shifts(field, value):
    from hlsnn.deploy.lower import program as netmode
    op = netmode.Op("add", "add1", ["a", "b"], "c", dict(c=4, hw=4, sa=0, sb=1, shift=2))
    op.f[field] = value
    net = netmode.NetProgram("n", [op], {}, {}, {}, [], {}, "acc", {})
    with pytest.raises(InputError, match="op add1"):
        netmode.check_ops(net)


# ------------------------------------------------------------------ run inputs (5)

@pytest.mark.parametrize("case", ["fifo", "folder", "empty batch", "nan", "npz", "text", "object"])
def test_run_refuses_bad_inputs_in_one_line(good, tmp_path, capsys, case):
    from hlsnn.cli import main
    x = tmp_path / "x.npy"
    if case == "fifo":
        os.mkfifo(x)
    elif case == "folder":
        x.mkdir()
    elif case == "empty batch":
        np.save(x, np.zeros((0, 1, 8, 8)))
    elif case == "nan":
        np.save(x, np.full((2, 1, 8, 8), np.nan))
    elif case == "npz":
        with open(x, "wb") as fh:
            np.savez(fh, a=np.zeros(3))
    elif case == "text":
        x.write_text("1 2 3")
    else:
        np.save(x, np.array([None, 1], dtype=object), allow_pickle=True)
    assert main(["run", str(good["twohot"]), "--input", str(x), "--target", "emu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "--input" in err or "input" in err


def test_run_refuses_a_damaged_model_in_one_line(tmp_path, capsys):
    from hlsnn.cli import main
    m = tmp_path / "m.hlsnn"
    m.write_bytes(b"PK\x03\x04" + b"\0" * 40)
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8)))
    assert main(["run", str(m), "--input", str(tmp_path / "x.npy"), "--target", "emu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "not a compiled model" in err


# ------------------------------------------------------------------ regression data (5)

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("split", ["train", "test"])
def test_non_finite_regression_targets_are_refused(tmp_path, bad, split):
    from hlsnn.deploy import datasets
    y = np.zeros((4, 2))
    y[1, 1] = bad
    arrays = {"x_train": np.zeros((4, 3)), "y_train": np.zeros((4, 2)), "x_test": np.zeros((4, 3)),
              "y_test": np.zeros((4, 2)), f"y_{split}": y}
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(InputError, match=f"y_{split} has 1 non-finite"):
        datasets.load(tmp_path / "d.npz")


def test_integer_regression_targets_are_used_not_dropped():
    from hlsnn.deploy.reports.evaluate import _targets
    y_ref = np.zeros((3, 2))
    got = _targets("d", np.array([[1, 2], [3, 4], [5, 6]]), y_ref)
    assert got.dtype == np.float64 and got.tolist() == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(InputError, match="non-finite"):
        _targets("d", np.array([[1.0, np.nan]] * 3), y_ref)


# ------------------------------------------------------------------ unbounded memory (4)

class _Dense:
    kind, group, name = "dense", 1, "fc_huge"

    def __init__(self, k, n=2):
        rng = np.random.default_rng(0)
        self.w = rng.standard_normal((n, k))
        self.b = np.zeros(n)


def test_a_dense_layer_of_40960_inputs_fits_without_its_gram(monkeypatch):
    """K = 40,960 would need a 12.5 GiB K x K Gram; beyond MAX_FEEDBACK_K none is built (a
    Gram helper that is called fails the test), and the bias correction uses the exact means."""
    from hlsnn.deploy.quantize import shift_fit
    from hlsnn.formats import shift_codes as codes
    monkeypatch.setattr(shift_fit, "_grams", lambda *a: pytest.fail("a Gram was built"))
    layer, k = _Dense(40960), 40960
    x = np.random.default_rng(1).integers(-128, 128, (4, k)).astype(np.int64)
    tab = codes.table("twohot", 4, 0)
    values, bias = shift_fit.fit_layer(layer, x, 6, np.full((2, 1), 8), tab)
    assert values.shape == (2, k)
    near = shift_fit.nearest_values(np.ldexp(layer.w, 8)[None], tab)[0]
    assert np.array_equal(values, near)
    want = layer.b + (layer.w - np.ldexp(near, -8)) @ np.ldexp(x.mean(axis=0), -6)
    np.testing.assert_allclose(bias, want, rtol=1e-12, atol=1e-12)


def test_a_gram_beyond_the_bound_is_refused_naming_the_layer(monkeypatch):
    from hlsnn.deploy.quantize import shift_fit
    from hlsnn.formats import shift_codes as codes
    monkeypatch.setattr(shift_fit, "MAX_GRAM_BYTES", 1000)
    layer = _Dense(64)
    with pytest.raises(InputError, match=r"layer fc_huge: .*1 x 64 x 64 float64"):
        shift_fit.fit_layer(layer, np.ones((4, 64), np.int64), 6, np.full((2, 1), 8), codes.table("twohot", 4, 0))


# ------------------------------------------------------------------ round-two leftovers (6)

@pytest.mark.parametrize("bias_shape", [(3,), (2, 4), (5,)])
def test_gemm_with_a_wrong_length_bias_is_a_model_error(tmp_path, bias_shape):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from hlsnn.deploy.importer.onnx_import import load_onnx
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    b = numpy_helper.from_array(np.ones(bias_shape, np.float32), "B")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "W", "B"], ["y"], name="gemm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    onnx.save(m, tmp_path / "m.onnx")
    from hlsnn.errors import UnsupportedModelError
    with pytest.raises((InputError, UnsupportedModelError), match="gemm .*bias 'B'"):
        load_onnx(tmp_path / "m.onnx")


@pytest.mark.parametrize("where", ["node", "tensor", "initializer", "input", "output"])
@pytest.mark.parametrize("name", ["a\nb", "a\x00b", "x" * 300])
def test_hostile_onnx_names_are_refused_at_import(tmp_path, where, name):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from hlsnn.deploy.importer.onnx_import import load_onnx
    n = {k: (name if k == where else k) for k in ("node", "tensor", "initializer", "input", "output")}
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), n["initializer"])
    nodes = [helper.make_node("MatMul", [n["input"], n["initializer"]], [n["tensor"]], name=n["node"]),
             helper.make_node("Relu", [n["tensor"]], [n["output"]], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n["input"], TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info(n["output"], TensorProto.FLOAT, ["N", 2])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    onnx.save(m, tmp_path / "m.onnx")
    with pytest.raises(InputError) as e:
        load_onnx(tmp_path / "m.onnx")
    assert "\n" not in str(e.value)


def test_a_library_without_the_kernels_functions_names_the_compiler(tmp_path):
    from hlsnn.csim import require_symbols
    lib = ctypes.CDLL("libm.so.6")
    with pytest.raises(CsimError, match=r"C\+\+ compiler .* reported success"):
        require_symbols(lib, tmp_path / "libnet.so", ("hlsnn_net_run",))


def test_a_compiler_that_writes_an_empty_library_is_named(good, tmp_path, monkeypatch):
    from hlsnn import csim
    from hlsnn.engines.network import kernel as netkernel
    fake = tmp_path / "fake-cxx"
    fake.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ]; do if [ "$1" = -o ]; then : > "$2"; fi; shift; done\n')
    fake.chmod(0o755)
    monkeypatch.setattr(csim, "compiler", lambda: str(fake))
    with pytest.raises(CsimError, match="fake-cxx"):
        netkernel.build(_lowered(good["twohot"]), out_root=tmp_path / "nk")


@pytest.mark.parametrize("case", ["suffix", "no folder", "full disk"])
def test_run_output_is_checked_first_and_written_whole(good, tmp_path, capsys, monkeypatch, case):
    from hlsnn.cli import main
    x = tmp_path / "x.npy"
    np.save(x, artifact.read(good["twohot"])[1]["check/x"])
    out = {"suffix": tmp_path / "y.txt", "no folder": tmp_path / "nope" / "y.npy", "full disk": tmp_path / "y.npy"}[case]
    if case == "full disk":
        real = np.save

        def boom(fh, a, *k, **kw):
            if not isinstance(fh, (str, os.PathLike)) and getattr(fh, "name", "").startswith(str(tmp_path / ".y")):
                fh.write(b"\x93NUMPY partial")
                raise OSError(28, "No space left on device")
            return real(fh, a, *k, **kw)
        monkeypatch.setattr(np, "save", boom)
    rc = main(["run", str(good["twohot"]), "--input", str(x), "--target", "emu", "--output", str(out)])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".y")]


@pytest.mark.parametrize("name", ["a--b", "x-", EVIL])
def test_the_network_overlays_hwh_stays_well_formed_xml(tmp_path, name):
    import xml.etree.ElementTree as ET
    from hlsnn.network.hwh import render_net_hwh
    from hlsnn.runtime import Accelerator
    cfg = Accelerator("shift8_pynq-z2", "emu").config
    path = render_net_hwh(cfg, tmp_path / "n.hwh", network=name)
    ET.parse(path)                                        # well-formed
    text = path.read_text()
    assert "pwn" not in text or all("<!--" in line or "-->" in line or "Generated" in line
                                    for line in text.splitlines() if "pwn" in line)
    assert text.count("<!--") == text.count("-->")


@pytest.mark.parametrize("flag", ["--input", "--weights"])
def test_the_layer_run_refuses_a_fifo(tmp_path, capsys, flag):
    from hlsnn.cli import main
    fifo = tmp_path / "p.npy"
    os.mkfifo(fifo)
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 16), np.float32))
    args = ["run", "bfp8_zcu104", "--target", "emu", "--input", str(fifo if flag == "--input" else x)]
    if flag == "--weights":
        args += ["--weights", str(fifo)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "not a regular file" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("template", ["run_hls_net.tcl.j2", "bd.tcl.j2"])
def test_hostile_names_reach_generated_tcl_only_reduced(tmp_path, template):
    """The network overlay's TCL as ``hlsnn build NAME.hlsnn`` renders it (netflow: the name
    through :func:`hlsnn.names.comment`): the hostile text stays on comment lines, and the
    script is complete TCL (no brace or bracket left open)."""
    import shutil
    import subprocess
    from hlsnn import codegen
    from hlsnn.blockdesign.design import bd_context
    from hlsnn.names import comment
    from hlsnn.runtime import Accelerator
    cfg = Accelerator("shift8_pynq-z2", "emu").config
    name = "x\nexec touch /tmp/pwned ;# } { [exec id] \\"
    ctx = ({"ip_name": "n", "network": comment(name), "project": "p", "top": "net_top", "kernel_cpp": "network.cpp",
            "clock_period_ns": 10.0} if template == "run_hls_net.tcl.j2"
           else dict(bd_context(cfg), network=comment(name), net_name="n", net_vlnv="hlsnn.org:hls:n:1.0"))
    out = codegen.render_extra(cfg, template, tmp_path / "t.tcl", ctx)
    text = out.read_text()
    assert "touch" in text
    for line in text.splitlines():
        if "touch" in line:
            assert line.lstrip().startswith("#") and not line.rstrip().endswith("\\") and "{" not in line
    if shutil.which("tclsh"):
        got = subprocess.run(["tclsh"], input=f"puts [info complete {{{text}}}]\n", capture_output=True, text=True)
        assert got.stdout.strip() == "1", got.stderr
