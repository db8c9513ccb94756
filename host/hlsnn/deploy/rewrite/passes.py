"""The import's rewrites, one ordered list: :data:`GRAPH_PASSES` run on the ONNX model
before its nodes are read, :data:`LAYER_PASSES` on the imported layers after.

Every pass is one module of this room with its contract in the module docstring: the pattern it
matches, the exact algebra by which the rewritten graph computes the same float function, and
that it leaves the graph as it was where the pattern does not apply. The order matters where
one pass makes another's pattern (the recurrent cells are unrolled before anything reads their
Gemms; the static shapes are folded before the passes that read shapes; ``catfold`` reads a
1-D branch's conv before ``rowsmaps`` wraps it in reshapes). :func:`run_graph` and
:func:`run_layers` are how :func:`hlsnn.deploy.importer.onnx_import.load_onnx` applies them; a
new pass is a module and one entry here.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from ...errors import printable
from ..importer.trained import trained_file
from . import (actup, bnforward, catfold, chomp, constchan, constmm, ecafold, gatherup2d, iffold, maxleaky, meanfold,
               noopslice, pixelshuffle, repeatup, rnnunroll, rowsmaps, shapefold, shufflefold, sklfold, splitconv,
               subneg, torchdecomp, unaryfuse, unshuffle, wheregate)


@dataclasses.dataclass
class Context:
    """What the passes read beside the graph: the model file, ``--host-fallback``, the importer's
    constant folding (``fold(node, consts, opset)``), the static shapes at batch 1 (set by the
    ``shapefold`` pass; ``None`` where the model needs none) and the namer of new layers."""
    path: Path
    host_fallback: bool = False
    fold: Callable | None = None
    fs: Any = None
    fresh: Callable = lambda name: name


@dataclasses.dataclass(frozen=True)
class Pass:
    """One rewrite: its module's name, what it does in a line, and how it runs."""
    name: str
    does: str
    run: Callable


def _shapes(model, ctx):
    merged = not shapefold.needed(model.graph) and shapefold.merges_batch(model)
    if merged or shapefold.needed(model.graph):
        fs = shapefold.file_shapes(model, ctx.path)
        if merged and fs is not None and not shapefold.restores_batch(model, fs):
            fs = None          # the file's output keeps rows merged with the batch: imported as before
        ctx.fs = fs
        return model if fs is None else shapefold.fold(model, fs)
    return model


#: The rewrites of the ONNX model, in the order they run: ``run(model, ctx) -> model``.
GRAPH_PASSES = (
    Pass("rnnunroll", "GRU/LSTM/RNN: steps of Gemm, tables, Mul, Add",
         lambda m, c: rnnunroll.rewrite(m, c.host_fallback, printable(c.path))),
    Pass("sklfold", "skl2onnx's Scaler, c - x: standard ops (Sub, Mul, Add)", lambda m, c: sklfold.rewrite(m)),
    Pass("torchdecomp", "Einsum as MatMul, dynamo's 1-D upsampling as Resize", lambda m, c: torchdecomp.rewrite(m)),
    Pass("gatherup2d", "dynamo's 2-D nearest-exact (a GatherND): nearest Resize", lambda m, c: gatherup2d.rewrite(m)),
    Pass("maxleaky", "torch.maximum(x, c * x), 0 <= c <= 1: LeakyRelu(alpha=c)", lambda m, c: maxleaky.rewrite(m)),
    Pass("meanfold", "x.mean(-1).mean(-1) as one mean over (H, W)", lambda m, c: meanfold.rewrite(m)),
    Pass("iffold", "TorchScript's squeeze(d) of an unproven d: the If's branch taken", lambda m, c: iffold.rewrite(m)),
    Pass("chomp", "Conv1d(padding=p) + Chomp1d x[:, :, :-c]: the conv's own pads", lambda m, c: chomp.rewrite(m)),
    Pass("shapefold", "static shapes at batch 1 for attention and shape ops", _shapes),
    Pass("noopslice", "a Slice that keeps every element (GhostNet's [:, :oup])", lambda m, c: noopslice.rewrite(m, c.fs)),
    Pass("shufflefold", "ShuffleNet's channel shuffle before convs: in their weights",
         lambda m, c: shufflefold.rewrite(m, c.fs)),
    Pass("ecafold", "ECA's Conv1d across the pooled channels: a 1x1 conv", lambda m, c: ecafold.rewrite(m, c.fs)),
    Pass("splitconv", "a conv's channels split (F.glu, chunk): one conv per part", lambda m, c: splitconv.rewrite(m)),
    Pass("subneg", "x - conv(x): x + conv'(x), the conv's weights negated", lambda m, c: subneg.rewrite(m)),
    Pass("bnforward", "Linear -> ReLU -> BatchNorm1d -> Linear: the BN into the next Gemm",
         lambda m, c: bnforward.rewrite(m)),
    Pass("unshuffle", "PixelUnshuffle read by convs: strided convs of its input", lambda m, c: unshuffle.rewrite(m)),
    Pass("pixelshuffle", "PixelShuffle of a conv inside the net: a 0/1 ConvTranspose",
         lambda m, c: pixelshuffle.rewrite(m)),
    Pass("repeatup", "repeat_interleave (Unsqueeze, Tile/Expand, Reshape): nearest Resize",
         lambda m, c: repeatup.rewrite(m, c.fs)),
    Pass("constmm", "C @ X, a constant times a computed tensor: a dense layer of X's rows",
         lambda m, c: constmm.rewrite(m, c.fs, lambda n, k: c.fold(n, k, list(m.opset_import)))),
    Pass("constchan", "a pruned model's dead channels: into the readers' biases",
         lambda m, c: constchan.rewrite(m, trained=trained_file(c.path))),
)

#: The rewrites of the imported layers, in order: ``run(layers, output, ctx) -> layers``.
LAYER_PASSES = (
    Pass("catfold", "bn(cat(convs)) (and its Relu) into each branch's conv", lambda la, o, c: catfold.fold(la, o)),
    Pass("rowsmaps", "token-wise dense layers and 1-D convs as 2-D convs", lambda la, o, c: rowsmaps.rewrite(la, o, c.fresh)),
    Pass("wheregate", "where(h > 0, h, a * h) as LeakyRelu(a)", lambda la, o, c: wheregate.fold(la, o)),
    Pass("unaryfuse", "x * g(x) chains as one unary op (GELU at opset 17)", lambda la, o, c: unaryfuse.fuse(la, o)),
    Pass("actup", "act(up(x)) as up(act(x)): the act where a rule reads it", lambda la, o, c: actup.rewrite(la, o)),
)


def run_graph(model, ctx):
    """``model`` after every pass of :data:`GRAPH_PASSES`, in order (``ctx.fs`` set on the way)."""
    for p in GRAPH_PASSES:
        model = p.run(model, ctx)
    return model


def run_layers(layers, output, ctx):
    """``layers`` after every pass of :data:`LAYER_PASSES`, in order."""
    for p in LAYER_PASSES:
        layers = p.run(layers, output, ctx)
    return layers
