"""The import's rewrites as one registered, ordered list (:mod:`hlsnn.deploy.rewrite.passes`,
issue 80): every module of the room is a pass there, once; and where a pass applies to a stored
real export (PyTorch's two exporters, Brevitas, skl2onnx), the graph it leaves computes the same
float function as the graph it was given, by onnx's own reference evaluator (an independent
reference: the passes never run it)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hlsnn.deploy.rewrite import passes

ROOM = Path(passes.__file__).parent
DATA = Path(__file__).resolve().parents[1] / "data"


def test_every_module_of_the_room_is_one_registered_pass():
    modules = sorted(p.stem for p in ROOM.glob("*.py") if p.stem not in ("__init__", "passes"))
    names = [p.name for p in passes.GRAPH_PASSES + passes.LAYER_PASSES]
    assert len(names) == len(set(names)), f"a pass registered twice: {names}"
    assert sorted(names) == modules, (f"modules without a pass: {sorted(set(modules) - set(names))}; "
                                      f"passes without a module: {sorted(set(names) - set(modules))}")
    assert all(p.does for p in passes.GRAPH_PASSES + passes.LAYER_PASSES)


def test_the_passes_that_read_static_shapes_run_after_they_are_set():
    order = [p.name for p in passes.GRAPH_PASSES]
    readers = [p.name for p in passes.GRAPH_PASSES if "c.fs" in _source(p)]
    assert readers and all(order.index(r) > order.index("shapefold") for r in readers), readers
    assert order[0] == "rnnunroll"      # the unrolled cells' Gemms are read by every pass after


def _source(p):
    import inspect
    return inspect.getsource(p.run)


#: a stored export per pass that applies to it (the smallest found; more passes apply only to
#: models the test families export at run time, tests/deploy/test_torch_*.py)
APPLIES = {
    "rnnunroll": "torch/rnn/gru_kws_ts17.onnx",
    "torchdecomp": "torch/beyond/p_f_hsig_inplace_mul_ts17.onnx",
    "chomp": "torch/beyond/v_k_wavenet_ts17.onnx",
    "splitconv": "torch/beyond/v_k_flat_conv_ts17.onnx",
    "shapefold": "torch/beyond/p_mha_ts17.onnx",
    "constchan": "qonnx/cnv_w2a2_ts.onnx",
}


def _input(model):
    from onnx import TensorProto
    inits = {t.name for t in model.graph.initializer}
    x = [i for i in model.graph.input if i.name not in inits][0]
    dims = [d.dim_value if d.dim_value > 0 else 1 for d in x.type.tensor_type.shape.dim]
    assert x.type.tensor_type.elem_type == TensorProto.FLOAT
    return x.name, np.random.default_rng(0).standard_normal(dims).astype(np.float32)


def _run(model, feed):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feed)


@pytest.mark.parametrize("name", sorted(APPLIES))
def test_a_pass_keeps_the_float_function_of_a_real_export(name):
    onnx = pytest.importorskip("onnx")
    from hlsnn.deploy.importer import onnx_import, qimport
    path = DATA / APPLIES[name]
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    model = qimport.float_model(onnx.load(str(path)), path)
    ctx = passes.Context(path, host_fallback=True, fold=onnx_import._fold_constant)
    for p in passes.GRAPH_PASSES:
        if p.name == name:
            break
        model = p.run(model, ctx)
    before = model.SerializeToString()
    feed = dict([_input(model)])
    want = _run(model, feed)
    model = p.run(model, ctx)
    assert model.SerializeToString() != before, f"{name} did not apply to {path.name}"
    got = _run(model, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-4, atol=1e-5)
