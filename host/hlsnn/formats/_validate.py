"""Input checks shared by the number-format modules (one-line ``InputError`` messages naming
the parameter, the value and what is allowed)."""
from typing import Optional

import numpy as np

from ..errors import InputError


def is_int(value) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int_range(name: str, value, lo: int, hi: Optional[int]) -> int:
    """``value`` as an int in ``[lo, hi]`` (``hi=None``: no upper bound)."""
    if not is_int(value) or value < lo or (hi is not None and value > hi):
        allowed = f"an int in [{lo}, {hi}]" if hi is not None else f"an int >= {lo}"
        raise InputError(f"{name} = {value!r}: must be {allowed}")
    return int(value)


def check_axis(axis, ndim: int) -> Optional[int]:
    """None, or ``axis`` normalized to ``[0, ndim)``."""
    if axis is None:
        return None
    if not is_int(axis) or not -ndim <= axis < ndim:
        raise InputError(f"axis = {axis!r}: must be None or an int in [{-ndim}, {ndim}) "
                         f"for an array with ndim = {ndim}")
    return int(axis) % ndim


def as_int_array(name: str, value, lo: int, hi: int, dtype, copy: bool = True) -> np.ndarray:
    """Integer-valued array-like -> a private ``dtype`` copy, every value checked in ``[lo, hi]``
    (``copy=False``: the array itself when it already is a ``dtype`` array, for a caller that
    only reads it)."""
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: cannot convert to an integer array ({exc})") from None
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if np.any(bad):
            raise InputError(f"{name}: has {int(np.count_nonzero(bad))} non-integer "
                             f"value(s), e.g. {arr[bad].flat[0]!r}: must be integers")
    elif arr.dtype.kind not in "iu":
        raise InputError(f"{name}: has dtype {arr.dtype}: must be integers")
    if arr.dtype == dtype and (lo, hi) == (np.iinfo(dtype).min, np.iinfo(dtype).max):
        pass                                   # every value of the type is in range
    elif arr.size:
        amin, amax = arr.min(), arr.max()
        if amin < lo or amax > hi:
            badval = (amin if amin < lo else amax).item()
            raise InputError(f"{name}: value {badval!r} is out of range: must be integers "
                             f"in [{lo}, {hi}]")
    return arr.astype(dtype, copy=copy)      # a private copy (stored read-only) unless copy=False


FLAG_OPTIONS = ("relu", "stats", "requantize", "pool", "raw")
#: integer options: None or an int (a string "10" or a float was compared or truncated in silence)
INT_OPTIONS = ("k_step", "stats_k", "n", "ksize", "pad")


def check_options(options: dict) -> dict:
    """The keyword options every operation shares, checked in one place (the Accelerator calls
    this): flags must be True or False (``relu="no"`` is truthy and applied ReLU), ``stats_k``
    an integer, not a float that would be truncated."""
    for key in FLAG_OPTIONS:
        if key in options and not isinstance(options[key], (bool, np.bool_)):
            from ..errors import excerpt
            raise InputError(f"{key} = {excerpt(options[key], 40)}: must be True or False")
    for key in INT_OPTIONS:
        if options.get(key) is not None and not is_int(options[key]):
            from ..errors import excerpt
            raise InputError(f"{key} = {excerpt(options[key], 40)}: must be an integer"
                             + (" in [0, 15]" if key == "stats_k" else ""))
    return options


def as_float_input(x, name: str = "x") -> np.ndarray:
    """Real, finite, ndim >= 1 float64 array, else an InputError naming the first bad index.
    Complex, string and object arrays are refused (complex values would lose their imaginary
    part in silence)."""
    arr = as_float_array(x, name)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = ~finite
        first = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), arr.shape))
        raise InputError(f"{name}: has {int(np.count_nonzero(bad))} non-finite value(s) (NaN or "
                         f"Inf), the first at index {first}: must be finite")
    return arr


def as_float_array(x, name: str = "x") -> np.ndarray:
    """:func:`as_float_input` without the finiteness check, for a caller that reads every
    value's extremes anyway (a NaN or an Inf shows in them) and then calls
    :func:`as_float_input` for the error."""
    if np.iscomplexobj(x):
        raise InputError(f"{name}: is complex: must be real floats")
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind in ("O", "U", "S", "V", "M", "m"):
        raise InputError(f"{name}: has dtype {x.dtype}: must be real numbers (int or float)")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: cannot convert to a float64 array ({exc})") from None
    if arr.ndim == 0:
        raise InputError(f"{name}: is 0-d (a scalar {float(arr)!r}): must have ndim >= 1, "
                         f"e.g. wrap it as [{name}]")
    return arr


_INT64 = np.iinfo(np.int64)


def as_int_input(x, name: str = "x", copy: bool = True) -> np.ndarray:
    """Integer-valued array -> an int64 copy, else an InputError naming ``name``: complex,
    string and object arrays are refused (``np.asarray(x, np.int64)`` dropped an imaginary
    part, parsed ``"1"`` and truncated 1.5 to 1 in silence), and so are NaN, Inf and
    fractional floats. The engine checks the value range itself."""
    if np.iscomplexobj(x):
        raise InputError(f"{name}: is complex: must be integers")
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind in ("O", "U", "S", "V", "M", "m"):
        raise InputError(f"{name}: has dtype {x.dtype}: must be integers")
    return as_int_array(name, x, int(_INT64.min), int(_INT64.max), np.int64, copy)
