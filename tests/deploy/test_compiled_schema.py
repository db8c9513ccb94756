"""The compiled model's schema (hlsnn.network.schema, hlsnn.network.hostschema): every host op's
attributes checked by one table, each host op run once on its input's shape at load, engine
layers' fields by a table per engine; messages name the layer, the field, what it holds and
what is allowed. What fails after the schema passed is an InternalError (a bug of hlsnn), not
"your file is damaged". The models are the three engines' digits CNN that
tests/deploy/test_hostile_compiled.py compiles too (one compile per assignment)."""
import re

import numpy as np
import pytest

from hlsnn.errors import InputError, InternalError
from hlsnn.network import artifact, hostschema, schema

from compiled_fixtures import digits_cnn_three_formats, layer_named as _layer
from conftest import ROOT


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return digits_cnn_three_formats(tmp_path_factory, "schema")


def _refused(good, tmp_path, edit, which="twohot"):
    program, arrays = artifact.read(good[which])
    edit(program, arrays)
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)
    with pytest.raises(InputError) as e:
        artifact.read(bad)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{bad}: damaged or hostile compiled model: ")
    return msg


def _host(op, attrs, name="pool1"):
    def edit(p, a):
        j = _layer(p, name)
        j["op"], j["attrs"] = op, attrs
    return edit


def _after_pool1(op, attrs, n_in=1):
    """A host layer ``evil`` of ``op`` inserted between pool1 (8 x 4 x 4 per image) and conv2."""
    def edit(p, a):
        layers = p["layers"]
        i = layers.index(_layer(p, "pool1"))
        layers.insert(i + 1, {"name": "evil", "kind": "host", "op": op, "inputs": ["pool1_out"] * n_in,
                              "output": "evil_out", "attrs": attrs})
        layers[i + 2]["inputs"] = ["evil_out"]
    return edit


MESSAGES = {   # edit -> what the message must say (the layer, the op, the field, the value, what is allowed)
    "softmax axis": (_host("Softmax", {"axis": "x"}, "softmax"),
                     r"layer softmax \(Softmax\): attrs\.axis: 'x' is not an integer in -8\.\.7"),
    "unknown op": (_host("Evil", {}), r"layer pool1: op: 'Evil' is not a host op of this hlsnn \(one of Abs, Add, "),
    "missing key": (_host("HardSigmoid", {"alpha": 0.2}),
                    r"layer pool1 \(HardSigmoid\): attrs: the key 'beta' is missing \(HardSigmoid always has it: a "
                    r"finite number\)"),
    "unknown key": (_host("Upsample", {"factors": [1, 1], "evil": 1}),
                    r"layer pool1 \(Upsample\): attrs\.evil: is not an attribute of Upsample \(its attributes: "
                    r"factors, map_1d\)"),
    "choice": (_host("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
               r"layer pool1 \(MaxPool\): attrs\.auto_pad: 'SAME_UPPER' is not one of 'NOTSET', 'VALID'"),
    "two fields": (_host("Clip", {"lo": 1.0, "hi": 0.5}),
                   r"layer pool1 \(Clip\): lo 1\.0 > hi 0\.5: a clamp's lower bound is at most its upper bound"),
    "ragged array": (_host("PRelu", {"slope": [[1.0, 2.0], [3.0]]}),
                     r"attrs\.slope: \[\[1\.0, 2\.0\], \[3\.0\]\] is not a number or a rectangular list of numbers"),
    "chain node": (_host("UnaryChain", {"nodes": [{"op": "Sigmoid", "attrs": {}, "args": [3]}]}),
                   r"layer pool1 \(UnaryChain\): attrs\.nodes\[0\]\.args: \[3\] is not a list of 1 integer equal to 0"),
    "chain node attrs": (_host("UnaryChain", {"nodes": [{"op": "LeakyRelu", "attrs": {"alpha": "x"}, "args": [0]}]}),
                         r"attrs\.nodes\[0\] \(LeakyRelu\): attrs\.alpha: 'x' is not a finite number"),
    "sw needs": (_after_pool1("SwMove", {"fn": "Transpose", "in_shapes": [[1, 8, 4, 4]], "out_shape": [1, 8, 4, 4]}),
                 r"layer evil \(SwMove\): attrs: the key 'perm' is missing \(a SwMove of Transpose needs perm\)"),
    "sw perm": (_after_pool1("SwMove", {"fn": "Transpose", "in_shapes": [[1, 8, 4, 4]], "out_shape": [1, 8, 4, 4],
                                        "perm": [0, 0, 1, 2]}),
                r"attrs\.perm: \[0, 0, 1, 2\] is not a permutation of 0\.\.3"),
    # right types, wrong for the tensor: the dry run on the input's shape
    "reshape size": (_after_pool1("Reshape", {"shape": [0, 3, 7]}),
                     r"layer evil \(Reshape\): its attributes do not fit its input of shape \(8, 4, 4\) per image "
                     r"\(ValueError: cannot reshape"),
    "squeeze of 8": (_after_pool1("Squeeze", {"axes": [1]}),
                     r"layer evil \(Squeeze\): its attributes do not fit its input of shape \(8, 4, 4\)"),
    "arity": (_after_pool1("Sub", {}), r"layer evil \(Sub\): inputs: 1 tensors; Sub reads 2"),
    "shape after": (_after_pool1("Upsample", {"factors": [2, 2]}),
                    r"layer fc: a dense layer of 64 inputs reads a tensor of shape \(256,\) \(256 values\)"),
    # the wiring: a tensor read before it is written (was a KeyError while the model loaded)
    "dangling input": (lambda p, a: _layer(p, "conv1").__setitem__("output", "x"),
                       r"layer pool1: inputs: 'relu1_out' is neither the network's input nor an earlier layer's "
                       r"output"),
    "written twice": (lambda p, a: _layer(p, "pool1").__setitem__("output", "relu1_out"),
                      r"layer pool1: output: 'relu1_out' is written already"),
    # engine layers: the table per engine
    "input radix": (lambda p, a: _layer(p, "conv1").__setitem__("f_x", None),
                    r"layer conv1: f_x: None: the layer reads the network's float input, so it holds the input's "
                    r"radix point"),
    "engine format": (lambda p, a: _layer(p, "conv1").__setitem__("format", "bfp"),
                      r"layer conv1: format: 'bfp' is not one of 'twohot', 'pot'"),
    "engine unknown field": (lambda p, a: _layer(p, "conv1").__setitem__("evil", 1),
                             r"layer conv1: evil: is not a field of this layer \(its fields: name, kind, "),
    "engine missing field": (lambda p, a: _layer(p, "conv1").pop("k_step"),
                             r"layer conv1: the key 'k_step' is missing \(null or an integer in 1\.\.67108864\)"),
    "output radix list": (lambda p, a: _layer(p, "fc").__setitem__("f_out", [-1]),
                          r"layer fc: f_out: \[-1\] is not null or an integer in -60\.\.60"),
    "dense geom": (lambda p, a: _layer(p, "fc").__setitem__("geom", {"a": 1}),
                   r"layer fc: geom: \{'a': 1\}: a dense layer has none \(null\)"),
    "step null": (lambda p, a: _layer(p, "conv1").__setitem__("step", None),
                  r"layer conv1: step: None is not an integer in 1\.\.67108864"),
    "engine bool": (lambda p, a: _layer(p, "conv1").__setitem__("signed", 1), r"layer conv1: signed: 1 is not true "
                                                                              r"or false"),
}


@pytest.mark.parametrize("case", sorted(MESSAGES))
def test_the_message_names_the_layer_the_field_and_what_is_allowed(good, tmp_path, case):
    edit, want = MESSAGES[case]
    msg = _refused(good, tmp_path, edit)
    assert re.search(want, msg), msg


@pytest.mark.parametrize("which,layer,field,value,want", [
    ("bfp8", "conv1", "rounding", "evil", r"layer conv1: rounding: 'evil' is not one of 'nearest_even'"),
    ("bfp8", "conv1", "chunks", "x", r"layer conv1: chunks: 'x' is not a list of 1\.\.4096 items"),
    ("fixed8", "conv1", "general", "no", r"layer conv1: general: 'no' is not true or false"),
    ("fixed8", "conv1", "format", "twohot", r"layer conv1: format: 'twohot' is not one of 'fixed', 'sparse'"),
])
def test_the_other_engines_fields_are_checked_by_their_table(good, tmp_path, which, layer, field, value, want):
    msg = _refused(good, tmp_path, lambda p, a: _layer(p, layer).__setitem__(field, value), which)
    assert re.search(want, msg), msg


def test_an_output_beyond_the_bound_is_refused_before_it_is_made(good, tmp_path, monkeypatch):
    monkeypatch.setattr(hostschema, "MAX_ELEMS", 1000)
    msg = _refused(good, tmp_path, _after_pool1("Upsample", {"factors": [4, 4]}))
    assert "layer evil (Upsample): its output would hold 2,048 values per image (at most 1,000)" in msg


@pytest.mark.parametrize("which", ["twohot", "fixed8", "bfp8"])
def test_todays_compiled_models_pass_and_the_dry_run_knows_every_tensors_shape(good, which):
    """A model written by today's `hlsnn compile` for each engine passes the schema, and the
    shapes it works out (engine layers' geometry, host ops run on zeros) are those of the
    tensors a run on the stored inputs gives."""
    import hlsnn
    program, arrays = artifact.read(good[which])
    shapes = schema.validate(program, arrays)
    with hlsnn.load(good[which], target="emu", network=False) as net:     # layer by layer: every tensor
        _, tensors = net.run(net.check["x"], keep=True)
    names = [j["output"] for j in program["layers"]] + [program["input"]["name"]]
    assert set(names) <= set(shapes)                      # every tensor's shape is known
    for name in names:
        assert tuple(np.shape(tensors[name])[1:]) == shapes[name], name


def test_a_bug_after_the_schema_passed_is_an_internal_error_not_a_damaged_file(good, monkeypatch):
    """The catch-all of session 31 said "damaged or hostile compiled model" for any TypeError ...
    while a model ran; now a model that passed the schema is not blamed: the error says it is a
    bug of hlsnn, names the file and chains the original."""
    import hlsnn
    from hlsnn.deploy.run import hostops
    real = hostops.run

    def buggy(layer, inputs):
        if layer.op == "Softmax":
            raise KeyError("a planted bug")
        return real(layer, inputs)
    with hlsnn.load(good["twohot"], target="emu") as net:
        monkeypatch.setattr(hostops, "run", buggy)
        with pytest.raises(InternalError, match=r"internal error, a bug of hlsnn \(KeyError: 'a planted bug'\)") as e:
            net(net.check["x"])
    assert str(good["twohot"]) in str(e.value) and "not the file's" in str(e.value)
    assert isinstance(e.value.__cause__, KeyError) and not isinstance(e.value, InputError)


def test_the_docs_list_every_host_op_and_its_attributes():
    """docs/compiled-format.md's table of host ops is the table of hlsnn.network.hostschema."""
    text = (ROOT / "docs" / "compiled-format.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([A-Za-z0-9_]+)` \|.*$", text, re.M)}
    for op, spec in hostschema.HOST_OPS.items():
        assert op in rows, f"docs/compiled-format.md: no row for the host op {op}"
        for k in list(spec.req) + list(spec.opt):
            where = text if op in hostschema.SW_FNS and k in spec.opt else rows[op]   # their fn's keys: one list
            assert f"`{k}`" in where, f"docs/compiled-format.md: {op}'s attribute {k} is not in its row"
