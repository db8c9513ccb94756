"""What scikit-learn pipelines write through skl2onnx, in standard ops, at import.

* ``Scaler`` (domain ``ai.onnx.ml``; skl2onnx's ``StandardScaler``, ``MinMaxScaler``,
  ``MaxAbsScaler``, ``RobustScaler``): ``Y = (X - offset) * scale``, ``offset`` and ``scale``
  one number or one per feature (its definition). It becomes ``Sub(X, offset)`` then
  ``Mul(., scale)`` by constants: host ops in float64 (:mod:`hlsnn.deploy.run.hostarith`'s
  ``AddConst`` and ``import_rules``' ``Scale``) whose output the first engine layer quantizes,
  so the layer sees the standardized features, as in scikit-learn (folding the scaler into the
  first layer's weights would be exact in reals but would quantize the raw features, whose ranges
  differ by 10^4 in the breast-cancer data, at one radix point).
* ``Sub(c, x)`` with ``c`` a constant (``c - x``; skl2onnx's binary ``MLPClassifier`` writes
  ``1 - p`` for the negative class, PyTorch's ``1 - torch.sigmoid(g)`` of a gate): it becomes
  ``Add(Mul(x, -1), c)``, exact in float (a sign flip, then the same float addition), which the
  importer's constant ``Mul`` and ``Add`` rules take. ``x - c`` and ``x - y`` are unchanged.
"""
from __future__ import annotations

import numpy as np

ML_DOMAIN = "ai.onnx.ml"


def rewrite(model):
    """``model`` with each ``Scaler`` and each ``Sub`` of a computed tensor from a constant
    rewritten (the module docstring); the same object when there is none."""
    from onnx import helper, numpy_helper
    g = model.graph
    consts = {t.name for t in g.initializer}
    consts |= {o for n in g.node if n.op_type == "Constant" for o in n.output}
    todo = [n for n in g.node if (n.op_type == "Scaler" and n.domain == ML_DOMAIN and len(n.input) == 1)
            or (n.op_type == "Sub" and n.domain in ("", "ai.onnx") and len(n.input) == 2
                and n.input[0] in consts and n.input[1] not in consts)]
    if not todo:
        return model
    from ..importer.graphindex import copied, namer, replace, tensor_names
    fresh = namer(tensor_names(g) | {n.name for n in g.node if n.name})
    nodes, inits = [], []
    for n in g.node:
        if not any(n is t for t in todo):
            nodes.append(n)
            continue
        base = n.name or n.output[0]
        if n.op_type == "Scaler":
            a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
            offset = np.asarray(a.get("offset", [0.0]), np.float32)
            scale = np.asarray(a.get("scale", [1.0]), np.float32)
            off, sc, mid = fresh(f"{base}/offset"), fresh(f"{base}/scale"), fresh(f"{base}/centred")
            inits += [numpy_helper.from_array(offset, off), numpy_helper.from_array(scale, sc)]
            nodes += [helper.make_node("Sub", [n.input[0], off], [mid], name=fresh(f"{base}/sub")),
                      helper.make_node("Mul", [mid, sc], [n.output[0]], name=fresh(f"{base}/mul"))]
        else:                                               # c - x = (-1 * x) + c
            m1, neg = fresh(f"{base}/minus_one"), fresh(f"{base}/negated")
            inits.append(numpy_helper.from_array(np.asarray(-1.0, np.float32), m1))
            nodes += [helper.make_node("Mul", [n.input[1], m1], [neg], name=fresh(f"{base}/negate")),
                      helper.make_node("Add", [neg, n.input[0]], [n.output[0]], name=base)]
    out = copied(model)
    replace(out.graph.node, nodes)
    out.graph.initializer.extend(inits)
    if not any(n.domain == ML_DOMAIN for n in nodes):
        keep = [o for o in out.opset_import if o.domain != ML_DOMAIN]
        del out.opset_import[:]
        out.opset_import.extend(keep)
    return out
