"""A malformed QDQ or QONNX file is a user's mistake: ``hlsnn deploy`` ends in one line naming the
node, what is wrong and what is allowed (exit 2), never a traceback, and never runs it silently.
Each case edits the committed residual CNN (``tests/data/qdq/res_pot.onnx``,
``tests/data/qonnx/res_pot.onnx``) with onnx's helpers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

from hlsnn.cli import main  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"


def _init(m, name):
    return next(t for t in m.graph.initializer if t.name == name)


def _set(m, name, value):
    _init(m, name).CopyFrom(numpy_helper.from_array(np.asarray(value), name))


def _weight_dq(m):
    """The first DequantizeLinear of a constant (a weight or a bias) and that constant."""
    inits = {t.name for t in m.graph.initializer}
    d = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits)
    return d, numpy_helper.to_array(_init(m, d.input[0]))


def _per_axis(m, n_scales, axis=None):
    """The first dequantized constant given ``n_scales`` scales (and zero points), ``axis`` set."""
    d, q = _weight_dq(m)
    s = float(numpy_helper.to_array(_init(m, d.input[1])).reshape(-1)[0])
    _set(m, d.input[1], np.full(n_scales, s, np.float32))
    _set(m, d.input[2], np.zeros(n_scales, q.dtype))
    if axis is not None:
        d.attribute.append(helper.make_attribute("axis", axis))


def _quants(m, weights):
    """QONNX Quant nodes of constants (``weights``) or of activations."""
    inits = {t.name for t in m.graph.initializer}
    return [n for n in m.graph.node if n.op_type == "Quant" and (n.input[0] in inits) == weights]


def _deploy(tmp_path, kind, edit, capsys, *extra):
    m = onnx.load(str(DATA / kind / "res_pot.onnx"))
    edit(m)
    onnx.save(m, str(tmp_path / "m.onnx"))
    cfg = tmp_path / "m.yaml"
    cfg.write_text("name: m\nmodel: m.onnx\ndata: digits\nlayout: nchw\nrounding: nearest_even\n"
                   "formats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\nassignments:\n  fixed8: {default: fixed8}\n")
    capsys.readouterr()
    rc = main(["deploy", str(cfg), "--test-samples", "2", "-q", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("hlsnn: error: ") and "Traceback" not in err, (rc, err)
    return err


def _qonnx_domain(m):
    _quants(m, weights=False)[0].domain = ""


def _trunc(m):
    _quants(m, weights=False)[1].op_type = "Trunc"


def _qonnx_scale(m):
    n = _quants(m, weights=True)[0]
    m.graph.initializer.append(numpy_helper.from_array(np.full((3, 1, 1, 1), 0.01, np.float32), "three"))
    n.input[1] = "three"


CASES = {
    # per-axis scales whose count is not the axis's length: numpy's broadcast error (a traceback)
    "qdq scales per axis, too few": ("qdq", lambda m: _per_axis(m, 3), r"3 scales along axis .* one per index"),
    # an axis the tensor does not have: taken modulo its rank and run (no error at all)
    "qdq axis out of range": ("qdq", lambda m: _per_axis(m, 8, axis=7), r"8 scales along axis 7 .* the axis must be"),
    "qdq scale with no value": ("qdq", lambda m: _set(m, next(n for n in m.graph.node
                                                              if n.op_type == "QuantizeLinear").input[1],
                                                      np.zeros(0, np.float32)), r"must be finite and > 0 \(it has no value\)"),
    "qdq zero points for one scale": ("qdq", lambda m: _set(m, next(n for n in m.graph.node
                                                                    if n.op_type == "QuantizeLinear").input[2],
                                                            np.zeros(4, np.int8)), r"zero point of shape \(4,\) for a scale"),
    # a Quant's scale that does not broadcast to its weight: numpy's broadcast error (a traceback)
    "qonnx scale of another shape": ("qonnx", _qonnx_scale, r"\(Quant\): scale \(3, 1, 1, 1\) .* do not broadcast"),
    "qonnx Quant in the default domain": ("qonnx", _qonnx_domain, r"Quant is a QONNX op: its node's domain must be "
                                                                  r"'qonnx.custom_op.general'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_file_is_one_line_naming_what_is_wrong(case, tmp_path, capsys):
    kind, edit, want = CASES[case]
    import re
    err = _deploy(tmp_path, kind, edit, capsys)
    assert re.search(want, err), err


def test_a_qonnx_op_hlsnn_does_not_read_is_not_sent_to_host_fallback(tmp_path, capsys):
    """``Trunc``: the error said "--host-fallback runs each of them", and --host-fallback then
    failed in onnx's reference evaluator (it has no QONNX ops)."""
    for extra in ((), ("--host-fallback",)):
        err = _deploy(tmp_path, "qonnx", _trunc, capsys, *extra)
        assert "(Trunc)" in err and "--host-fallback cannot run it either" in err, err
        assert "not even --host-fallback runs them" in err and "--host-fallback runs each" not in err, err


def test_a_built_in_data_set_in_another_layout_names_the_layout(tmp_path, capsys):
    """`layout: flat` for a model of (1, 8, 8) images: the error said only the two shapes; the same 64
    values need `layout: nchw`, which it now names."""
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"name: m\nmodel: {DATA / 'qdq' / 'res_pot.onnx'}\ndata: digits\nlayout: flat\n"
                   "formats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    assert main(["deploy", str(cfg), "--test-samples", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert "samples of shape (64,); the model res_pot takes (1, 8, 8)" in err and "set `layout: nchw`" in err, err
