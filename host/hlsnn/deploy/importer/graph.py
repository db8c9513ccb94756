"""The imported network (:func:`hlsnn.deploy.importer.onnx_import.load_onnx`): its layers in execution order
(:class:`Layer`) and the whole (:class:`Network`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError


@dataclass
class Layer:
    """One step of the network.

    ``kind`` is ``"dense"`` or ``"conv"`` (run on an accelerator) or ``"host"`` (numpy).
    ``inputs``/``output`` are tensor names. Engine layers carry ``w`` (dense: (N, K); conv:
    (Z, C/group, kh, kw)), ``b`` (N,) or (Z,), ``relu`` and, for conv, its geometry: ``pad``
    (the same padding on every side) or ``pads`` (top, left, bottom, right), ``strides``,
    ``dilations`` and ``group`` (:attr:`geom`). Host layers carry ``op`` and ``attrs`` (and
    ``node`` for the reference-implementation fallback).
    """
    name: str
    kind: str
    inputs: list
    output: str
    op: str = ""
    w: np.ndarray = None
    b: np.ndarray = None
    relu: bool = False
    pad: int = 0
    pads: tuple = None
    strides: tuple = (1, 1)
    dilations: tuple = (1, 1)
    group: int = 1
    attrs: dict = field(default_factory=dict)
    node: object = None
    folded: list = field(default_factory=list)
    in_hw: tuple = None         # a conv layer's input height and width, when shape inference knows them

    @property
    def is_engine(self):
        return self.kind in ("dense", "conv")

    @property
    def geom(self):
        """The :class:`~hlsnn.engines.convgeom.ConvGeom` of a conv layer."""
        from ...engines.convgeom import ConvGeom
        pads = tuple(self.pads) if self.pads is not None else (self.pad,) * 4
        return ConvGeom(int(self.w.shape[2]), int(self.w.shape[3]), *map(int, self.strides), pads,
                        *map(int, self.dilations), int(self.group))

    def describe(self):
        if self.kind == "dense":
            return f"dense {self.w.shape[1]}->{self.w.shape[0]}" + (" +relu" if self.relu else "")
        if self.kind == "conv":
            z, c = self.w.shape[:2]
            return f"conv {c * self.group}->{z} {self.geom.describe()}" + (" +relu" if self.relu else "")
        return f"host {self.op}"


@dataclass
class Network:
    """An imported model: ``layers`` in execution order, the input name and shape (batch
    dimension first, ``None`` where symbolic) and the output name."""
    name: str
    path: str
    input: str
    input_shape: tuple
    output: str
    layers: list
    #: the file declares a batch of exactly 1 (onnx's own evaluation then runs one sample a time)
    fixed_batch_one: bool = False

    def engine_layers(self):
        return [layer for layer in self.layers if layer.is_engine]

    def layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise InputError(f"network {self.name} has no layer {name!r}; layers: "
                         f"{', '.join(x.name for x in self.layers)}")
