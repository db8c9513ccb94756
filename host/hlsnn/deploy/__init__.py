"""Whole-model deployment, in rooms that follow the pipeline:

1. :mod:`~hlsnn.deploy.importer`: an ONNX file (float, QDQ or QONNX) becomes a network of layers;
2. :mod:`~hlsnn.deploy.rewrite`: the import's graph rewrites, one ordered list
   (:mod:`hlsnn.deploy.rewrite.passes`);
3. :mod:`~hlsnn.deploy.quantize`: calibration and the weight and radix fits;
4. :mod:`~hlsnn.deploy.lower`: the network mode's integer program (:mod:`hlsnn.deploy.lower.program`);
5. :mod:`~hlsnn.deploy.run`: the layer-by-layer run (the specification), the fast paths, the host ops;
6. :mod:`~hlsnn.deploy.reports`: what ``hlsnn deploy`` measures and ``hlsnn report``'s page.

:mod:`~hlsnn.deploy.config` (deployment configs) and :mod:`~hlsnn.deploy.datasets` stay here.
The modules' old flat paths (``hlsnn.deploy.run.runner``, ...) still import, with a
``DeprecationWarning`` naming the new one (:data:`MOVED`)."""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: room of every module that lived in this folder before issue 80 (``hlsnn.deploy.<name>`` is
#: now ``hlsnn.deploy.<room>.<name>``)
MOVED = {name: room for room, names in {
    "importer": "graph graphindex onnx_import onnx_nodes onnx_attrs import_rules qimport qparams qassign trained reference",
    "rewrite": "actup bnforward catfold chomp constchan constmm ecafold gatherup2d iffold maxleaky meanfold noopslice "
               "pixelshuffle repeatup rnnunroll shapefold shufflefold sklfold splitconv subneg torchdecomp unaryfuse "
               "unshuffle wheregate",
    "quantize": "quant calibrate catradix chain_equalize equalize biascorr kprune outfit outputs radix_lse radix_search "
                "shift_auto shift_fit shift_netfit task_formats update twoin twoterm",
    "lower": "program programrev layers netprefix netafter netcheck dilate",
    "run": "runner executors fast bfpfast blocks groups hostops hostarith hostextra hostmath hostunary hostquant pooling "
           "samplewise swslice maskfill actmm_engine actmm_sparse attnrun lnsum gatecodes tablecodes calcodes",
    "reports": "report fitreport evaluate"}.items() for name in names.split()}


class _OldPath(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import hlsnn.deploy.<old>``: the module at its new path, under both names."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, name = fullname.rpartition(".")
        if head == __name__ and name in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__.rpartition(".")[2]
        new = f"{__name__}.{MOVED[name]}.{name}"
        warnings.warn(f"{module.__name__} moved to {new} (issue 80); import it from there", DeprecationWarning,
                      stacklevel=2)
        sys.modules[module.__name__] = importlib.import_module(new)   # the import returns what sys.modules holds


def __getattr__(name):
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not any(isinstance(f, _OldPath) for f in sys.meta_path):
    sys.meta_path.append(_OldPath())
