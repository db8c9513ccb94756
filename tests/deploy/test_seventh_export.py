"""``variant_seventh``'s export (tests/fixtures/torch_families) writes the same weights each time,
whatever else it builds.

Its models were built in one random stream before any training (the table's instances, seeded once),
so a model added to the table moved the initial weights of every model after it (s_unet_bicubic and
s_xvector did: s_ghost's float accuracy 98.3 % before s_xvector, 88.1 % after, torch 2.13). Now the
table holds builders and ``steps.export`` builds each one from its own seed
(``steps.build``); training reseeds itself (``export_torch_models.train``). Quick: each
model's initial weights are the same built alone, after the others or after other draws. Slow: two
exports, one with another model before it, give the same initializers bit for bit.
"""
import sys

import numpy as np
import pytest

from conftest import ROOT

torch = pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from torch_families import FAMILIES, steps  # noqa: E402

SEVENTH = FAMILIES["variant_seventh"]


def _weights(model):
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_each_model_is_built_from_its_own_seed_whatever_was_built_before():
    table = SEVENTH.models(torch, torch.nn)
    assert not any(isinstance(entry[0], torch.nn.Module) for entry in table.values())
    alone = {name: _weights(steps.build(torch, entry[0])) for name, entry in table.items()}
    torch.manual_seed(123)
    torch.rand(1000)                       # draws before, as another model's training or init would
    for name, entry in reversed(table.items()):        # and the others built first, in another order
        assert _same(_weights(steps.build(torch, entry[0])), alone[name]), name
    # the property has teeth: the same builders drawn in one stream (the old table) differ
    torch.manual_seed(0)
    stream = [_weights(entry[0]()) for entry in table.values()]
    assert not all(_same(w, alone[name]) for w, name in zip(stream, table))


@pytest.mark.slow
def test_two_exports_write_the_same_weights(tmp_path):
    """s_jet_bnafter (the quickest trained model, ~12 s) exported alone and after s_jet_std."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from onnx import numpy_helper
    torch.set_num_threads(1)
    steps.export(SEVENTH, tmp_path / "a", ["s_jet_bnafter"])
    steps.export(SEVENTH, tmp_path / "b", ["s_jet_std", "s_jet_bnafter"])

    def inits(path):
        return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer}

    for key in ("s_jet_bnafter_ts17", "s_jet_bnafter_dynamo"):
        a, b = inits(tmp_path / "a" / f"{key}.onnx"), inits(tmp_path / "b" / f"{key}.onnx")
        assert a and _same(a, b), key
