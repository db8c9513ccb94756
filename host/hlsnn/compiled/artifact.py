"""The compiled model container (``NAME.hlsnn``): one uncompressed ``.npz`` (a zip of ``.npy``
arrays, read with ``allow_pickle=False``, so nothing in it is code).

* ``__program__``: the layer program, UTF-8 JSON as a uint8 array (:data:`FORMAT`,
  :data:`VERSION`; its keys are documented in ``docs/compiled-models.md``);
* every other key is one array a layer's state names (``<layer>/<field>``), integers in
  the engine's codes (two-hot/power-of-two fields, int8 weights, BFP mantissas and
  exponents), the float biases, and the self-check inputs and outputs (``check/...``).

This module needs only numpy and the standard library: a board reads the file with it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError

FORMAT = "hlsnn-compiled-model"
VERSION = 1
PROGRAM_KEY = "__program__"


def write(path, program, arrays):
    """Write ``program`` (a JSON-able dict) and ``arrays`` (name -> ndarray) to ``path``."""
    program = dict(program, format=FORMAT, version=VERSION)
    blob = np.frombuffer(json.dumps(program, sort_keys=True, indent=1).encode("utf-8"), np.uint8)
    bad = [k for k, v in arrays.items() if np.asarray(v).dtype.kind not in "biuf"]
    if bad:
        raise InputError(f"compiled model: arrays {bad} are not numbers (only int, uint, bool and float are stored)")
    path = Path(path)
    with open(path, "wb") as fh:             # np.savez would append .npz to a name without it
        np.savez(fh, **{PROGRAM_KEY: blob}, **{k: np.asarray(v) for k, v in arrays.items()})
    return path


def read(path):
    """``(program, arrays)`` of a compiled model, or :class:`InputError` naming what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such compiled model (make one with `hlsnn compile MODEL.yaml --assignment A "
                         f"-o NAME.hlsnn`)")
    try:
        with np.load(p, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{path}: not a compiled model (not an .npz container without pickles: {exc})") from None
    blob = arrays.pop(PROGRAM_KEY, None)
    if blob is None:
        raise InputError(f"{path}: not a compiled model (no {PROGRAM_KEY} entry)")
    try:
        program = json.loads(blob.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: the layer program is not valid JSON ({exc})") from None
    fmt = program.get("format") if isinstance(program, dict) else None
    if fmt != FORMAT:
        raise InputError(f"{path}: not a compiled model (format {fmt!r}, expected {FORMAT!r})")
    if program.get("version") != VERSION:
        raise InputError(f"{path}: compiled model version {program.get('version')!r}; this hlsnn reads version "
                         f"{VERSION}: recompile it with `hlsnn compile`")
    return program, arrays
