#!/usr/bin/env python
"""The CNV files of ``tests/data/qonnx/`` (W4A4, W2A2, W1A1, both of Brevitas' exporters) compiled
onto an accelerator's network kernel and run on the 360 digits test images on ``emu``, ``csim`` and
``sim``, against qonnx's executor on the files (issue 82; docs/engines/sparse_cluster.md's CNV table).

Usage::

    python benchmarks/bench_cnv_kernels.py sparse4net_pynq-z2          # the packed 4-bit kernel
    python benchmarks/bench_cnv_kernels.py sparse8net_pynq-z2 --only cnv_w2a2 --targets emu,csim

Needs qonnx (the reference) and g++ (csim, sim). Prints one JSON line per file and target: the
images whose 10 outputs all equal qonnx's, and the kernel starts of the run. About 2 CPU-minutes a
file (a C-simulation build each, cached); the exit status is 1 when any output differs.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
NAMES = ("cnv_w4a4", "cnv_w4a4_ts", "cnv_w2a2", "cnv_w2a2_ts", "cnv_w1a1", "cnv_w1a1_ts")


def qonnx_outputs(path, x):
    """qonnx's executor, one image a call (the export fixes the batch at 1)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes
    m = ModelWrapper(str(path)).transform(InferShapes())
    inp, out = m.graph.input[0].name, m.graph.output[0].name
    return np.concatenate([execute_onnx(m, {inp: x[i:i + 1].astype(np.float32)})[out] for i in range(len(x))])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("accel", help="an accelerator config name (configs/accel/NAME.yaml)")
    ap.add_argument("--only", action="append", choices=NAMES, help="only this file (repeatable)")
    ap.add_argument("--targets", default="emu,csim,sim")
    a = ap.parse_args(argv)
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    x = datasets.load("digits", layout="nchw").x_test
    bad = 0
    with tempfile.TemporaryDirectory(prefix="hlsnn-cnv-") as tmp:
        for name in a.only or NAMES:
            onnx_path = ROOT / "tests" / "data" / "qonnx" / f"{name}.onnx"
            cfg = Path(tmp) / f"{name}.yaml"
            cfg.write_text(f"name: {name}\nmodel: {onnx_path}\ndata: digits\nlayout: nchw\nrounding: nearest_even\n"
                           f"formats:\n  f: {{type: fixed, accel: {a.accel}}}\nassignments:\n  f: {{default: f}}\n")
            ref = qonnx_outputs(onnx_path, x)
            path = Path(tmp) / f"{name}.hlsnn"
            compile_model(cfg, "f", path)
            for target in a.targets.split(","):
                with hlsnn.load(path, target, network=True) as net:
                    y = net.logits(x)
                    starts = net.last_kernel_starts
                equal = int((y == ref).all(axis=1).sum())
                bad += equal != len(x)
                print(json.dumps(dict(name=name, accel=a.accel, target=target, equal=equal, images=len(x),
                                      starts=starts)), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
