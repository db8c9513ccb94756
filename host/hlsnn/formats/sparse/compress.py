"""The compressed formats of the sparse accelerators: compressed kernels
(:func:`compress_kernel`, :class:`SparseKernel`) and compressed sub-feature-maps
(:func:`compress_map`, :class:`SparseMap`), with their input checks.

The rules (entry order, coordinates, origin, accepted inputs) and examples are in the
package docstring, :mod:`hlsnn.formats.sparse`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Tuple

import numpy as np

from hlsnn.errors import InputError

__all__ = ["SparseKernel", "SparseMap", "compress_kernel", "compress_map"]

_INT64 = (-(1 << 63), (1 << 63) - 1)


# --------------------------------------------------------------------------- validation

from .._validate import as_int_array as _as_int_array  # noqa: E402
from .._validate import check_int_range as _check_int_range  # noqa: E402
from .._validate import is_int as _is_int  # noqa: E402


def _check_pair(name: str, value, lo: int) -> Tuple[int, int]:
    """A pair of ints, each ``>= lo``."""
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(_is_int(v) and v >= lo for v in value)):
        raise InputError(f"{name} = {value!r}: must be a pair of ints >= {lo}")
    return int(value[0]), int(value[1])


def _index_array(name: str, value, hi: int) -> np.ndarray:
    arr = _as_int_array(name, value, 0, max(hi - 1, 0), np.int64)
    if arr.ndim != 1:
        raise InputError(f"{name}: has shape {arr.shape}: must be 1-D")
    return arr


def _check_sorted(key: np.ndarray, what: str):
    bad = np.flatnonzero(np.diff(key) <= 0)
    if bad.size:
        raise InputError(f"entries: entry {int(bad[0]) + 1} is not after entry "
                         f"{int(bad[0])}: must be strictly increasing in {what}")


def _set_entries(obj, vname, zeros, indices, order, what, **extra):
    """Check and store (read-only) the entry arrays of ``obj``: its non-zero values
    ``vname`` (``zeros``: the message for a zero) and, per ``(name, hi)`` of ``indices``, an
    index array in ``[0, hi)`` of the same length; the entries strictly increasing in the
    indices ``order``, most significant first (``what`` in the message). ``extra`` fields are
    set as given."""
    values = _as_int_array(vname, getattr(obj, vname), *_INT64, np.int64)
    if values.ndim != 1:
        raise InputError(f"{vname}: has shape {values.shape}: must be 1-D")
    if np.any(values == 0):
        raise InputError(f"{vname}: has {int(np.count_nonzero(values == 0))} zero(s): "
                         f"{zeros}")
    fields = {vname: values}
    for name, hi in indices:
        arr = _index_array(name, getattr(obj, name), hi)
        if arr.shape != values.shape:
            raise InputError(f"{name}: has length {arr.size}: must be {values.size}, the "
                             f"length of {vname}")
        fields[name] = arr
    key = np.zeros_like(values)
    for name in order:
        key = key * dict(indices)[name] + fields[name]
    _check_sorted(key, what)
    for value in fields.values():
        value.setflags(write=False)
    for name, value in {**fields, **extra}.items():
        object.__setattr__(obj, name, value)


# --------------------------------------------------------------------------- kernels

@dataclass(frozen=True, eq=False)
class SparseKernel:
    """A compressed kernel tensor: one entry per non-zero coefficient.

    Build one with :func:`compress_kernel` (or directly from entry arrays, which are all
    validated). The arrays are stored read-only.

    Attributes
    ----------
    coef : numpy.ndarray of int64
        The non-zero coefficients, 1-D of length ``nnz``.
    z, kz, ky, kx : numpy.ndarray of int64
        Kernel (output channel), input channel, kernel row and kernel column of each entry,
        in ``[0, Z)``, ``[0, C)``, ``[0, KH)``, ``[0, KW)``. Entries are strictly increasing
        in ``(kz, z, ky, kx)``: kz-major, then z, then ky, then kx.
    shape : tuple of int
        ``(Z, C, KH, KW)`` of the dense tensor, each ``>= 1``.
    """

    coef: np.ndarray
    z: np.ndarray
    kz: np.ndarray
    ky: np.ndarray
    kx: np.ndarray
    shape: Tuple[int, int, int, int]

    def __post_init__(self):
        shape = self.shape
        if (not isinstance(shape, (tuple, list)) or len(shape) != 4
                or not all(_is_int(s) and s >= 1 for s in shape)):
            raise InputError(f"shape = {shape!r}: must be 4 ints >= 1, (Z, C, KH, KW)")
        shape = tuple(int(s) for s in shape)
        Z, C, KH, KW = shape
        _set_entries(self, "coef", "a compressed kernel has no entries for zero coefficients",
                     (("z", Z), ("kz", C), ("ky", KH), ("kx", KW)), ("kz", "z", "ky", "kx"),
                     "(kz, z, ky, kx)", shape=shape)

    @property
    def nnz(self) -> int:
        """Number of entries (non-zero coefficients)."""
        return int(self.coef.size)

    @property
    def density(self) -> float:
        """``nnz / (Z * C * KH * KW)``: the fraction of non-zero coefficients."""
        return self.nnz / float(np.prod(self.shape))

    def nnz_per_channel(self) -> np.ndarray:
        """Entries per input channel ``kz``: an int64 array of length ``C``."""
        return np.bincount(self.kz, minlength=self.shape[1]).astype(np.int64)

    def decompress(self) -> np.ndarray:
        """The dense ``(Z, C, KH, KW)`` int64 tensor (zeros where there is no entry)."""
        out = np.zeros(self.shape, dtype=np.int64)
        out[self.z, self.kz, self.ky, self.kx] = self.coef
        return out

    def _channel(self, kz) -> slice:
        c = _check_int_range("kz", kz, 0, self.shape[1] - 1)
        lo, hi = np.searchsorted(self.kz, [c, c + 1])
        return slice(int(lo), int(hi))

    def entries(self, kz: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The entries of input channel ``kz`` in stream order.

        Parameters
        ----------
        kz : int
            Input channel, in ``[0, C)``.

        Returns
        -------
        tuple of numpy.ndarray
            ``(coef, z, ky, kx)``, read-only int64 views, ordered by z, then ky, then kx.

        Raises
        ------
        InputError
            ``kz`` out of range.

        Examples
        --------
        >>> w = [[[[0, 2], [0, 0]]], [[[-1, 0], [0, 4]]]]        # Z=2, C=1, k=2
        >>> compress_kernel(w).entries(0)
        (array([ 2, -1,  4]), array([0, 1, 1]), array([0, 0, 1]), array([1, 0, 1]))
        """
        s = self._channel(kz)
        return self.coef[s], self.z[s], self.ky[s], self.kx[s]

    def coefficients(self, kz: int) -> Iterator[Tuple[int, int, int, int]]:
        """Yield the entries of input channel ``kz`` one at a time, in stream order.

        The source's kernel decompressor emits one coefficient per step, skipping zeros;
        this is that loop (for tests and documentation, not for speed).

        Parameters
        ----------
        kz : int
            Input channel, in ``[0, C)`` (checked at the call, not at the first ``next``).

        Returns
        -------
        iterator of tuple of int
            ``(coef, z, ky, kx)`` as Python ints.

        Raises
        ------
        InputError
            ``kz`` out of range.

        Examples
        --------
        >>> w = [[[[0, 2], [0, 0]]], [[[-1, 0], [0, 4]]]]
        >>> list(compress_kernel(w).coefficients(0))
        [(2, 0, 0, 1), (-1, 1, 0, 0), (4, 1, 1, 1)]
        """
        s = self._channel(kz)
        cols = [a[s].tolist() for a in (self.coef, self.z, self.ky, self.kx)]
        return (entry for entry in zip(*cols))


def compress_kernel(w) -> SparseKernel:
    """Compress a ``(Z, C, KH, KW)`` integer kernel tensor, dropping zero coefficients.

    Parameters
    ----------
    w : array_like of int
        4-D, each dimension ``>= 1``, integer values (integer-valued floats and bools are
        accepted) in the int64 range.

    Returns
    -------
    SparseKernel
        Entries ordered kz-major, then z, ky, kx (see the package docstring).

    Raises
    ------
    InputError
        ``w`` not 4-D, an empty dimension, or non-integer values.

    Examples
    --------
    >>> sk = compress_kernel([[[[1, 0], [0, -2]]]])
    >>> sk.coef, sk.ky, sk.kx, sk.density
    (array([ 1, -2]), array([0, 1]), array([0, 1]), 0.5)
    """
    arr = _as_int_array("w", w, *_INT64, np.int64)
    if arr.ndim != 4 or 0 in arr.shape:
        raise InputError(f"w: has shape {arr.shape}: must be 4-D (Z, C, KH, KW) with every "
                         f"dimension >= 1")
    t = arr.transpose(1, 0, 2, 3)              # (kz, z, ky, kx): nonzero() is then in order
    kz, z, ky, kx = np.nonzero(t)
    return SparseKernel(t[kz, z, ky, kx], z, kz, ky, kx, arr.shape)


# --------------------------------------------------------------------------- feature maps

@dataclass(frozen=True, eq=False)
class SparseMap:
    """A compressed (sub-)feature-map: a value buffer and an index buffer.

    Build one with :func:`compress_map` (or directly from entry arrays, which are all
    validated). The arrays are stored read-only.

    Attributes
    ----------
    values : numpy.ndarray of int64
        The non-zero values, 1-D of length ``nnz``.
    rows, cols : numpy.ndarray of int64
        Local row and column of each value, in ``[0, H)`` and ``[0, W)``.
    chan : numpy.ndarray of int64
        Channel of each value, in ``[0, C)``; all 0 for a 2-D map. Entries are strictly
        increasing in ``(chan, row, col)``: channels in order, row-major within a channel.
    shape : tuple of int
        ``(H, W)`` or ``(C, H, W)`` of the dense sub-map.
    origin : tuple of int
        ``(row, col)`` of the sub-map's top-left pixel in the full map, each ``>= 0``.
    """

    values: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    chan: np.ndarray
    shape: Tuple[int, ...]
    origin: Tuple[int, int] = (0, 0)

    def __post_init__(self):
        shape = self.shape
        if (not isinstance(shape, (tuple, list)) or len(shape) not in (2, 3)
                or not all(_is_int(s) and s >= 0 for s in shape)):
            raise InputError(f"shape = {shape!r}: must be 2 or 3 ints >= 0, (H, W) or "
                             f"(C, H, W)")
        shape = tuple(int(s) for s in shape)
        C, H, W = (1,) + shape if len(shape) == 2 else shape
        origin = _check_pair("origin", self.origin, 0)
        _set_entries(self, "values", "a compressed map has no entries for zero values",
                     (("rows", H), ("cols", W), ("chan", C)), ("chan", "rows", "cols"),
                     "(chan, row, col)", shape=shape, origin=origin)

    @property
    def nnz(self) -> int:
        """Number of entries (non-zero values)."""
        return int(self.values.size)

    def nnz_per_channel(self) -> np.ndarray:
        """Entries per channel: an int64 array of length ``C`` (length 1 for a 2-D map)."""
        nchan = self.shape[0] if len(self.shape) == 3 else 1
        return np.bincount(self.chan, minlength=nchan).astype(np.int64)

    def decompress(self) -> np.ndarray:
        """The dense int64 sub-map of :attr:`shape` (zeros where there is no entry)."""
        out = np.zeros(self.shape, dtype=np.int64)
        if len(self.shape) == 2:
            out[self.rows, self.cols] = self.values
        else:
            out[self.chan, self.rows, self.cols] = self.values
        return out


def compress_map(fmap, origin: Tuple[int, int] = (0, 0)) -> SparseMap:
    """Compress a 2-D ``(H, W)`` or 3-D ``(C, H, W)`` integer (sub-)feature-map.

    Parameters
    ----------
    fmap : array_like of int
        2-D or 3-D, integer values (integer-valued floats and bools are accepted) in the
        int64 range. Empty dimensions are allowed.
    origin : pair of int, default (0, 0)
        ``(row, col)`` of the sub-map in the full feature map, each ``>= 0``.

    Returns
    -------
    SparseMap
        Entries ordered by channel, then row-major, with local coordinates.

    Raises
    ------
    InputError
        ``fmap`` not 2-D or 3-D, non-integer values, or a bad ``origin``.

    Examples
    --------
    >>> sm = compress_map([[[0, 1], [2, 0]], [[0, 0], [0, -5]]])
    >>> sm.values, sm.chan, sm.rows, sm.cols, sm.nnz_per_channel()
    (array([ 1,  2, -5]), array([0, 0, 1]), array([0, 1, 1]), array([1, 0, 1]), array([2, 1]))
    """
    arr = _as_int_array("fmap", fmap, *_INT64, np.int64)
    if arr.ndim not in (2, 3):
        raise InputError(f"fmap: has shape {arr.shape}: must be 2-D (H, W) or 3-D (C, H, W)")
    origin = _check_pair("origin", origin, 0)
    a3 = arr if arr.ndim == 3 else arr[None]
    chan, rows, cols = np.nonzero(a3)
    return SparseMap(a3[chan, rows, cols], rows, cols, chan, arr.shape, origin)
