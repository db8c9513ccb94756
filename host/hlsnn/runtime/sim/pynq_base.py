"""pynq, imported once with its x86 import warning silenced: the ``pynq.Device`` and ``PynqBuffer``
the simulated device and its buffers derive from (numpy stand-ins without pynq), and
:func:`_require_pynq`."""
from __future__ import annotations

import warnings

import numpy as np

from ...errors import MissingDependency

with warnings.catch_warnings():
    # pynq warns at import time that x86 is not a board architecture: irrelevant here.
    warnings.filterwarnings("ignore", message="Pynq does not support the CPU Architecture",
                            category=ResourceWarning)
    try:
        from ..pynq_compat import import_pynq as _import_pynq
        _pynq = _import_pynq()  # with a pkg_resources stand-in on setuptools >= 81
        from pynq.buffer import PynqBuffer as _PynqBuffer
        _DeviceBase = _pynq.Device
        _PYNQ_IMPORT_ERROR = None
    except ImportError as _exc:  # pragma: no cover - exercised only without pynq
        _pynq = None
        _PynqBuffer = np.ndarray
        _DeviceBase = object
        _PYNQ_IMPORT_ERROR = _exc


def _require_pynq():
    if _pynq is None:  # pragma: no cover
        raise MissingDependency(
            f"hlsnn.runtime.sim needs pynq ({_PYNQ_IMPORT_ERROR}); install it with "
            "`pip install pynq==4.0.0 'setuptools<81'` (pynq 4.0 still imports pkg_resources)")
