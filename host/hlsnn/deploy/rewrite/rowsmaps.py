"""Token-wise dense layers and 1-D convolutions as the 2-D convolutions every engine runs: a pass
on the imported layers (:data:`hlsnn.deploy.rewrite.passes.LAYER_PASSES`), after
:mod:`~hlsnn.deploy.rewrite.catfold` (which reads a 1-D branch's conv before it is wrapped)."""
from __future__ import annotations

import numpy as np

from ..importer.graph import Layer


def rewrite(layers, output, fresh=lambda name: name):
    """A dense layer on a tensor of rank > 2 (``attrs["rows"]``, a token-wise ``MatMul``)
    becomes the same GEMM over all its rows, exactly, as a 1x1 convolution: the rows of each
    sample, ``(*lead, K)``, are the ``L = prod(lead)`` pixels of a ``K x L x 1`` map
    (``RowsToMap``), and the conv's ``N x L x 1`` output goes back to ``(*lead, N)``
    (``MapToRows``). Every engine computes a 1x1 conv as a GEMM over the pixels with the
    layer's own weights, bias, ReLU and output rule, so the result is each row's dense layer.
    A ``MapToRows`` whose only readers are ``RowsToMap`` (two token-wise layers in a row, the
    ReLU between them fused) cancels out with them.

    A 1-D convolution (``attrs["conv1d"]``: its weight, pads, strides and dilations already
    those of the ``(k, 1)`` 2-D convolution) reads its ``(N, C, L)`` input as an ``(N, C, L,
    1)`` map and gives back ``(N, Z, L')``: two ``Reshape`` host ops around it, which move no
    value, and cancel out the same way between 1-D convolutions. So does a host op marked
    ``map_1d`` (a 1-D transposed convolution's ``ZeroStuff``, a nearest ``Upsample`` of the
    length), which then runs on the map as its 2-D form. ``fresh(base)`` names the new layers and
    tensors (:func:`hlsnn.deploy.importer.graphindex.namer` of the file's names: ``base``, with ``_``
    appended where the file has it)."""
    out = []
    for la in layers:
        if (la.kind == "conv" and la.attrs.get("conv1d")) or la.attrs.get("map_1d"):
            to_map = Layer(fresh(f"{la.name}/as_2d"), "host", list(la.inputs), fresh(f"{la.name}/map"), op="Reshape",
                           attrs={"shape": (0, 0, -1, 1), "to_2d": True})
            back = Layer(fresh(f"{la.name}/as_1d"), "host", [fresh(f"{la.name}/map_out")], la.output, op="Reshape",
                         attrs={"shape": (0, 0, -1), "to_1d": True})
            if la.is_engine:                 # the file's tensor of this output, (N, Z, L): --per-layer's reference
                la.attrs = dict(la.attrs, file_output=(la.output, "1d"))
            la.inputs, la.output = [to_map.output], back.inputs[0]
            out += [to_map, la, back]
            continue
        if la.kind != "dense" or "rows" not in la.attrs:
            out.append(la)
            continue
        lead = la.attrs["rows"]
        n, k = la.w.shape
        length = int(np.prod(lead)) if -1 not in lead else None
        to_map = Layer(fresh(f"{la.name}/rows_to_map"), "host", list(la.inputs), fresh(f"{la.name}/map"),
                       op="RowsToMap")
        conv_l = Layer(la.name, "conv", [to_map.output], fresh(f"{la.name}/map_out"), op=la.op,
                       w=la.w.reshape(n, k, 1, 1), b=la.b, relu=la.relu, pads=(0, 0, 0, 0), folded=la.folded,
                       in_hw=None if length is None else (length, 1), attrs={"file_output": (la.output, "rows")})
        back = Layer(fresh(f"{la.name}/map_to_rows"), "host", [conv_l.output], la.output, op="MapToRows",
                     attrs={"lead": lead})
        out += [to_map, conv_l, back]
    readers = {}
    for la in out:
        for i in la.inputs:
            readers.setdefault(i, []).append(la)
    drop = set()
    for la in out:
        if not (la.op == "MapToRows" or la.attrs.get("to_1d")) or la.output == output:
            continue
        rd = readers.get(la.output, [])
        if rd and all(r.op == "RowsToMap" if la.op == "MapToRows" else r.attrs.get("to_2d") for r in rd):
            for r in rd:
                for user in readers.get(r.output, []):
                    user.inputs = [la.inputs[0] if i == r.output else i for i in user.inputs]
                drop.add(id(r))
            drop.add(id(la))
    return [la for la in out if id(la) not in drop]
