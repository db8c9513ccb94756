#!/usr/bin/env python
"""The accuracy tables of docs/deploy.md's "Models quantized elsewhere": every file of
``tests/data/qdq/`` (onnxruntime's QDQ) and ``tests/data/qonnx/`` (Brevitas' QONNX) deployed on
``fixed8`` (sparse8_pynq-z2) and ``twohot`` (shift8_pynq-z2) with ``rounding: nearest_even``, on
the emulator, on the 360 test images of the digits; the reference column is the accuracy that
the file's own executor (onnxruntime, qonnx) gave when the file was made (``MANIFEST.json``).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_quantized_elsewhere.py      # about 5 CPU-minutes
    python benchmarks/bench_quantized_elsewhere.py --only qdq/res_pot

Prints one Markdown row per file, as the tables hold them. The exit status is 0 whatever the
outcome (a measurement).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))

FILES = {"qdq": ("mlp_pot", "mlp_pc", "mlp_u8", "cnn_pot", "cnn_pc", "cnn_u8", "res_pot", "res_pc", "res_u8"),
         "qonnx": ("mlp_pot", "mlp_w4", "mlp_float", "cnn_pot", "res_pot", "res_float", "cnv_w4a4", "cnv_w4a4_ts",
                   "cnv_w2a2", "cnv_w2a2_ts", "cnv_w1a1", "cnv_w1a1_ts")}
REFERENCE = {"qdq": "onnxruntime_accuracy", "qonnx": "qonnx_accuracy"}


def row(kind, name, folder):
    from hlsnn.evaluation.run import deploy
    cfg = Path(folder) / f"{kind}_{name}.yaml"
    cfg.write_text(f"name: {name}\nmodel: {ROOT / 'tests' / 'data' / kind / (name + '.onnx')}\ndata: digits\n"
                   "layout: nchw\nrounding: nearest_even\nformats:\n"
                   "  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n  twohot: {type: twohot, accel: shift8_pynq-z2}\n"
                   "assignments:\n  fixed8: {default: fixed8}\n  twohot: {default: twohot}\n")
    res = deploy(cfg)
    ref = json.loads((ROOT / "tests" / "data" / kind / "MANIFEST.json").read_text())["files"][f"{name}.onnx"]
    fx, th = res["assignments"]["fixed8"], res["assignments"]["twohot"]
    exact = fx.get("imported_quantization") or {}
    n = sum(v["mapping"] == "exact" for v in exact.values())
    return (f"| {name} | {100 * ref[REFERENCE[kind]]:.2f}% | {100 * fx['accuracy']:.2f}% | {n} of {len(exact)} | "
            f"{100 * th['accuracy']:.2f}% |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="KIND/NAME, e.g. qdq/res_pot (repeatable)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hlsnn-qe-") as d:
        for kind, names in FILES.items():
            for name in names:
                if args.only and f"{kind}/{name}" not in args.only:
                    continue
                print(f"{kind}: {row(kind, name, d)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
