"""Import pynq where setuptools no longer ships ``pkg_resources``.

pynq 3.0–4.0 import ``pkg_resources`` at module level (``pynq`` → ``pynqutils`` →
``build_utils/xsa_parser.py`` and ``setup_utils/extension_manager.py``). setuptools 81 and later
no longer ship it, and a neighbour such as ``pip install torch`` upgrades setuptools past 80, after
which ``import pynq`` fails. A version pin on setuptools does not survive what users install next
to hlsnn, so :func:`ensure_pkg_resources` puts a small stand-in in ``sys.modules`` when, and only
when, the real module cannot be imported. The stand-in offers what pynq and pynqutils use, built on
:mod:`importlib.metadata` and :mod:`importlib.resources`:

* ``iter_entry_points(group, name=None)`` (pynq's extension discovery),
* ``resource_filename(package, resource)`` and ``cleanup_resources(force=False)``,
* ``NullProvider`` (pynqutils patches and restores its ``__init__``),
* ``fixup_namespace_packages(path)``, a no-op (pytest's ``monkeypatch.syspath_prepend`` calls
  it whenever a ``pkg_resources`` is in ``sys.modules``; there are no old-style namespace packages
  to fix up without setuptools' own).

The board's and the simulated board's run-time paths call none of them; the import is what
fails. ``sys.modules["pkg_resources"].HLSNN_STAND_IN`` is True when the stand-in is in use.
"""
import os
import sys
import types

__all__ = ["ensure_pkg_resources", "import_pynq"]


def _entry_points(group):
    from importlib import metadata
    eps = metadata.entry_points()
    if hasattr(eps, "select"):  # Python 3.10+
        return list(eps.select(group=group))
    return list(eps.get(group, []))  # pragma: no cover - Python 3.8/3.9


def _stand_in() -> types.ModuleType:
    mod = types.ModuleType("pkg_resources", "hlsnn's stand-in for setuptools' removed pkg_resources "
                                            "(only what pynq uses; see hlsnn.runtime.pynq_compat)")

    def iter_entry_points(group, name=None):
        return iter([ep for ep in _entry_points(group) if name is None or ep.name == name])

    def resource_filename(package, resource):
        module = sys.modules.get(package) or __import__(package, fromlist=["__name__"])
        base = os.path.dirname(getattr(module, "__file__", None) or next(iter(module.__path__)))
        return os.path.join(base, *[p for p in resource.split("/") if p])

    def cleanup_resources(force=False):
        return []

    class NullProvider:
        def __init__(self, module):
            self.loader = getattr(module, "__loader__", None)
            self.module_path = os.path.dirname(getattr(module, "__file__", "") or "")

    mod.iter_entry_points = iter_entry_points
    mod.resource_filename = resource_filename
    mod.cleanup_resources = cleanup_resources
    mod.NullProvider = NullProvider
    mod.fixup_namespace_packages = lambda path, parent=None: None
    mod.HLSNN_STAND_IN = True
    return mod


def ensure_pkg_resources() -> bool:
    """Make ``import pkg_resources`` work; True when the stand-in had to be installed."""
    if "pkg_resources" in sys.modules:
        return bool(getattr(sys.modules["pkg_resources"], "HLSNN_STAND_IN", False))
    try:
        import pkg_resources  # noqa: F401  (setuptools < 81)
        return False
    except ImportError:
        sys.modules["pkg_resources"] = _stand_in()
        return True


def import_pynq():
    """``import pynq`` after :func:`ensure_pkg_resources`; ImportError as usual without pynq.

    An ``import pynq`` that failed before the stand-in was in place (a notebook's own board
    check, say) leaves pynq's submodules (``pynq.ps``, ``pynq.pl_server``...) in
    ``sys.modules`` without the package: a second import would then bind none of them as
    attributes (``pynq.ps`` missing). Those leftovers are dropped so pynq imports whole."""
    ensure_pkg_resources()
    if "pynq" not in sys.modules and any(m.startswith("pynq.") for m in sys.modules):
        for name in [m for m in sys.modules if m.startswith(("pynq.", "pynqutils"))]:
            del sys.modules[name]
    import pynq
    return pynq
