"""hlsnn: deploy quantized neural networks on FPGAs through high-level synthesis.

>>> import hlsnn
>>> acc = hlsnn.Accelerator("configs/accel/bfp16_pynq-z2.yaml", target="emu")  # doctest: +SKIP
>>> y = acc.gemm(x, w, bias=b, relu=True)                                       # doctest: +SKIP
"""
from .version import __version__  # noqa: E402
from .config import Config, load_board, load_config  # noqa: E402
from .errors import (CompileError, ConfigError, CsimError, HlsnnError, InputError,  # noqa: E402
                     MissingDependency)
from .runtime import Accelerator  # noqa: E402



def load(path, target="emu", **options):
    """A compiled model (``hlsnn compile``) on ``target``, as a callable network: ``y = net(x)``
    (:func:`hlsnn.network.loader.load`; on a board it needs only numpy and pynq)."""
    from .network.loader import load as _load
    return _load(path, target, **options)


__all__ = ["__version__", "Accelerator", "load", "Config", "load_config", "load_board", "HlsnnError",
           "ConfigError", "InputError", "CompileError", "CsimError", "MissingDependency"]
