"""Small labelled data sets for whole-model deployment: calibration inputs and accuracy checks.

``load("digits")`` is scikit-learn's bundled 8 x 8 handwritten digits (1797 images, no
download), split once and for all into 1437 training and 360 test images (stratified,
``random_state=0``) and scaled to [0, 1]. ``load("digits32")`` is the same split as
32 x 32 colour images (N, 3, 32, 32) for the ResNet-8-shaped example: every pixel repeated
4 x 4, the three channels the grey image times 1, 3/4 and 1/2 (a fixed tint, so the channels
differ). ``load("path/to/data.npz")`` reads an ``.npz`` file
holding ``x_train``, ``y_train``, ``x_test`` and ``y_test``: ``x_train`` may be absent, and
any ``y_*`` may be absent (then it is None); a ``y_*`` is integer class labels (N,) or float
regression targets (N, ...) of any shape.

>>> ds = load("digits")                      # doctest: +SKIP
>>> ds.x_train.shape, ds.x_test.shape        # doctest: +SKIP
((1437, 64), (360, 64))
>>> load("digits", layout="nchw").x_test.shape  # doctest: +SKIP
(360, 1, 8, 8)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..errors import InputError

DIGITS_TEST_SIZE = 360
DIGITS_SPLIT_SEED = 0
LAYOUTS = ("flat", "nchw", "ncl", "ntf")
ALLOWED = ('"digits" (scikit-learn\'s bundled 8x8 digits), "digits32" (the same as 32x32x3 images) or a '
           "path to an .npz file with arrays x_train, y_train, x_test, y_test")
DIGITS32_TINT = (1.0, 0.75, 0.5)


@dataclass(eq=False)
class Dataset:
    """Inputs ``x_*`` (float32) and integer labels (int64) or float targets (float64) ``y_*``;
    the train arrays and ``y_test`` may be None."""

    name: str
    x_train: Optional[np.ndarray]
    y_train: Optional[np.ndarray]
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def num_classes(self) -> int:
        ys = [y for y in (self.y_train, self.y_test) if y is not None and y.size and y.dtype.kind in "iu"]
        return int(max(int(y.max()) for y in ys)) + 1 if ys else 0


def load(name_or_path, *, layout=None) -> Dataset:
    """Load a data set by name (``"digits"``) or from an ``.npz`` file.

    ``layout``: ``"flat"`` gives (N, features) inputs, ``"nchw"`` gives (N, C, H, W) inputs
    (digits: (N, 1, 8, 8)), ``"ncl"`` gives (N, C, L) inputs (a 1-D convolution's channels
    by length; digits: (N, 8, 8), the image's rows as channels of 8 samples) and ``"ntf"``
    (N, T, F) inputs (tokens by features; digits: (N, 8, 8), one token per row); None keeps an
    ``.npz`` file's own shapes and means ``"flat"`` for digits. Raises :class:`hlsnn.errors.InputError` for an unknown name, a missing or malformed
    file, or an unknown layout.
    """
    if layout is not None and layout not in LAYOUTS:
        raise InputError(f"layout = {layout!r}: expected one of {', '.join(map(repr, LAYOUTS))} or None")
    if isinstance(name_or_path, str) and name_or_path == "digits":
        return _digits(layout or "flat")
    if isinstance(name_or_path, str) and name_or_path == "digits32":
        if layout not in (None, "nchw"):
            raise InputError(f'layout = {layout!r}: "digits32" comes as (N, 3, 32, 32) images only ("nchw")')
        return _digits32()
    if isinstance(name_or_path, (str, os.PathLike)) and str(name_or_path).endswith(".npz"):
        return _npz(Path(name_or_path), layout)
    raise InputError(f"data set {name_or_path!r}: expected {ALLOWED}")


def _digits32() -> Dataset:
    ds = _digits("nchw")

    def up(x):
        big = np.kron(x, np.ones((1, 1, 4, 4), np.float32))                      # (N, 1, 32, 32)
        return np.ascontiguousarray(big * np.asarray(DIGITS32_TINT, np.float32).reshape(1, 3, 1, 1))

    return Dataset("digits32", up(ds.x_train), ds.y_train, up(ds.x_test), ds.y_test)


_DIGITS = []


def _digits_split():
    """digits' fixed split ``(x_train, x_test, y_train, y_test)``, read once per process
    (scikit-learn parses its CSV on every ``load_digits()``: ~0.04-0.1 CPU-s a call, and a test run
    loads digits about a thousand times); callers get copies."""
    try:                                      # every time: the same error without scikit-learn
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as exc:
        raise InputError(f'data set "digits" needs scikit-learn ({exc}): pip install "hlsnn[deploy]"') from None
    if not _DIGITS:
        digits = load_digits()
        x = (digits.data / 16.0).astype(np.float32)
        y = digits.target.astype(np.int64)
        _DIGITS.extend(train_test_split(x, y, test_size=DIGITS_TEST_SIZE, random_state=DIGITS_SPLIT_SEED,
                                        stratify=y))
    return [a.copy() for a in _DIGITS]


def _digits(layout: str) -> Dataset:
    x_train, x_test, y_train, y_test = _digits_split()
    if layout == "nchw":
        x_train, x_test = x_train.reshape(-1, 1, 8, 8), x_test.reshape(-1, 1, 8, 8)
    elif layout in ("ncl", "ntf"):
        x_train, x_test = x_train.reshape(-1, 8, 8), x_test.reshape(-1, 8, 8)
    return Dataset("digits", np.ascontiguousarray(x_train), y_train, np.ascontiguousarray(x_test), y_test)


def _npz(path: Path, layout: Optional[str]) -> Dataset:
    if not path.is_file():
        what = "a folder" if path.is_dir() else "not a regular file (a FIFO, device or socket)" if path.exists() \
            else "no such file"
        raise InputError(f"data set {str(path)!r}: {what} (expected {ALLOWED})")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except Exception as exc:  # a corrupt archive, a pickled object array...
        raise InputError(f"data set {str(path)!r}: cannot read it as .npz ({exc})") from None
    missing = [k for k in ("x_test",) if k not in arrays]
    if "y_train" in arrays and "x_train" not in arrays:
        missing.append("x_train")
    if missing:
        raise InputError(f"data set {str(path)!r}: missing array(s) {', '.join(missing)} "
                         f"(has {', '.join(sorted(arrays)) or 'none'}; expected x_train, y_train, x_test, y_test)")
    parts = {}
    for split in ("train", "test"):
        if f"x_{split}" not in arrays:
            parts[f"x_{split}"] = parts[f"y_{split}"] = None
            continue
        x, y = arrays[f"x_{split}"], arrays.get(f"y_{split}")
        if x.ndim < 2 or (y is not None and (y.ndim < 1 or len(x) != len(y))):
            raise InputError(f"data set {str(path)!r}: x_{split} {x.shape} and y_{split} {getattr(y, 'shape', None)} must be "
                             "(N, ...) and (N,) labels or (N, ...) targets")
        if not np.issubdtype(x.dtype, np.number) or (y is not None and not (
                np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating))):
            raise InputError(f"data set {str(path)!r}: x_{split} ({x.dtype}) must be numeric and "
                             f"y_{split} ({getattr(y, 'dtype', None)}) integer labels or float targets")
        if y is not None and np.issubdtype(y.dtype, np.integer) and y.ndim != 1:
            raise InputError(f"data set {str(path)!r}: integer y_{split} {y.shape} must be one class label per "
                             "sample, (N,) (float targets may have any shape)")
        if x.dtype.kind == "c":                      # float32 would drop the imaginary part silently
            raise InputError(f"data set {str(path)!r}: x_{split} ({x.dtype}) must be real numbers, not complex")
        if len(x) == 0:
            raise InputError(f"data set {str(path)!r}: x_{split} has no samples (shape {x.shape}); "
                             + ("leave x_train and y_train out for a data set without calibration images"
                                if split == "train" else "give at least one test sample"))
        if not np.isfinite(x).all():
            raise InputError(f"data set {str(path)!r}: x_{split} has {int((~np.isfinite(x)).sum())} non-finite "
                             "value(s) (NaN or Inf)")
        if y is not None and y.dtype.kind == "f" and not np.isfinite(y).all():
            raise InputError(f"data set {str(path)!r}: y_{split} has {int((~np.isfinite(y)).sum())} non-finite "
                             "target(s) (NaN or Inf)")
        parts[f"x_{split}"] = _layout(np.ascontiguousarray(x, dtype=np.float32), layout, path, f"x_{split}")
        parts[f"y_{split}"] = None if y is None else (y.astype(np.int64) if np.issubdtype(y.dtype, np.integer)
                                                      else y.astype(np.float64))
    return Dataset(path.stem, **parts)


def _layout(x: np.ndarray, layout: Optional[str], path: Path, key: str) -> np.ndarray:
    if layout is None:
        return x
    if layout == "flat":
        return x.reshape(len(x), -1)
    if layout in ("ncl", "ntf"):
        if x.ndim == 3:
            return x
        if x.ndim == 2:              # one channel of L samples (ncl), one token of F features (ntf)
            return x[:, None]
        raise InputError(f"data set {str(path)!r}: {key} {x.shape} cannot be given layout {layout!r} "
                         f"(store it as (N, {'C, L' if layout == 'ncl' else 'T, F'}), or (N, "
                         f"{'L' if layout == 'ncl' else 'F'}) for one {'channel' if layout == 'ncl' else 'token'})")
    if x.ndim == 4:
        return x
    if x.ndim == 3:
        return x[:, None]
    raise InputError(f"data set {str(path)!r}: {key} {x.shape} cannot be given layout 'nchw' "
                     "(store it as (N, H, W) or (N, C, H, W))")
