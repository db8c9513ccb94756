"""Accuracy with one and two shift codes per weight (``weight_terms: 1`` / ``2``,
:mod:`hlsnn.deploy.quantize.twoterm`): each two-hot format of a deployment config run twice on emu.

    python scripts/weight_terms.py family --out /tmp/v --only dw_a_ts17 dw_b_ts17   # variant_family's export
    python scripts/weight_terms.py beyond --only se_cnn_ts17                          # tests/data/torch/beyond
    python scripts/weight_terms.py tiny                                               # tests/data/torch/tiny
    python scripts/weight_terms.py models                                             # configs/models
    python scripts/weight_terms.py sets /tmp/v/dw_a_ts17.onnx --accel ACCEL.yaml      # 4 calibration sets
    python scripts/weight_terms.py family --out /tmp/v --accel shift10_pynq-z2         # 10-bit activations

``sets``: one model, one and two terms (and fixed8) on four disjoint calibration sets of 128, the
mean accuracy and the test images whose class differs from the float64 network's; ``--accel``
another shift_mac config (e.g. a copy of shift8_pynq-z2.yaml with ``act_bits: 10``,
``acc_bits: 44``).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))

from hlsnn.config import read_yaml  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402

TWOHOT = {"type": "twohot", "accel": "shift8_pynq-z2"}


def _cell(res, e):
    if "error" in e:
        return "failed: " + str(e["error"])[:80]
    us = e.get("modelled_us_per_image")
    us = "" if us is None else f", {us:.1f} us"
    if "accuracy" in e:
        return f"{100 * e['accuracy']:.2f} ({100 * (e['accuracy'] - res['float_accuracy']):+.2f}{us})"
    if "relative_error" in e:
        return f"{100 * e['relative_error']:.2f} %"
    return f"{e['mse']:.4f}"


def run(name, cfg, base, accel=None):
    cfg["model"] = str((base / cfg["model"]).resolve()) if not Path(cfg["model"]).is_absolute() else cfg["model"]
    fm = cfg.get("formats") or {"twohot": dict(TWOHOT)}
    names = [n for n, v in fm.items() if v.get("type") == "twohot"]
    for n in names if accel else ():               # --accel: the two-hot formats on another config
        fm[n]["accel"] = accel
    for v in fm.values():
        if (base / v["accel"]).exists():
            v["accel"] = str((base / v["accel"]).resolve())
    cfg["formats"] = {k: v for n in names for k, v in ((n, dict(fm[n], weight_terms=1)),
                                                         (n + "_t2", dict(fm[n], weight_terms=2)))}
    cfg.pop("assignments", None)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.yaml"
        path.write_text(json.dumps(cfg))          # JSON is YAML
        res = deploy(path, "emu")
    return names, [_cell(res, res["assignments"][n + s]) for n in names for s in ("", "_t2")]


def sets(model, accel, n_sets=4):
    import numpy as np
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.hostops import float_tensors
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    fm = {"t1": {"type": "twohot", "accel": accel}, "t2": {"type": "twohot", "accel": accel, "weight_terms": 2},
          "fixed8": {"type": "fixed", "accel": "sparse8_pynq-z2"}}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.yaml"
        path.write_text(json.dumps({"name": "m", "model": str(Path(model).resolve()), "data": "digits",
                                    "formats": fm}))
        cfg = load_deploy_config(path)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="ncl" if len(net.input_shape) == 3 else "nchw")
    yf = float_tensors(net, ds.x_test)[net.output].argmax(1)
    accs = open_accelerators(cfg, "emu")
    try:
        for f in fm:
            acc, dis = [], []
            for i in range(n_sets):
                dep = Deployment(net, cfg.assignments[f], cfg.formats, accs, rounding=cfg.rounding)
                dep.calibrate(ds.x_train[i * 128:(i + 1) * 128])
                y = dep.run(ds.x_test).argmax(1)
                acc.append(100 * np.mean(y == ds.y_test))
                dis.append(int(np.sum(y != yf)))
            print(f"{Path(model).stem} {f}: accuracy {np.mean(acc):.2f} % (float {100 * np.mean(yf == ds.y_test):.2f}),"
                  f" images off float's class {dis}", flush=True)
    finally:
        for a in accs.values():
            a.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", choices=("tiny", "models", "family", "beyond", "sets"))
    ap.add_argument("model", nargs="?", help="sets: the ONNX model")
    ap.add_argument("--accel", default="shift8_pynq-z2", help="the shift_mac accel config of the two-hot formats "
                    "(e.g. shift10_pynq-z2)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/variants"),
                    help="family: the --out of python tests/fixtures/torch_families variant_family export")
    ap.add_argument("--only", nargs="*", help="these model names only (the config files' stems)")
    args = ap.parse_args(argv)
    if args.set == "sets":
        sets(args.model, args.accel)
        return 0
    base = {"tiny": ROOT / "tests" / "data" / "torch" / "tiny", "models": ROOT / "configs" / "models",
            "beyond": ROOT / "tests" / "data" / "torch" / "beyond", "family": args.out}[args.set]
    if args.set in ("family", "beyond"):
        names = args.only or sorted(p.stem for p in base.glob("*_ts17.onnx"))
    else:
        names = args.only or sorted(p.stem for p in base.glob("*.yaml") if "__" not in p.stem)
    for name in names:
        y = base / f"{name}.yaml"
        cfg = read_yaml(y) if y.exists() else {"name": name.replace("-", "_"), "model": f"{name}.onnx",
                                                "data": "digits", "formats": {"twohot": dict(TWOHOT)}}
        fmts, cells = run(name, cfg, base, None if args.accel == "shift8_pynq-z2" else args.accel)
        print(f"| {name} | " + " | ".join(f"{f}: {a} -> {b}" for f, a, b in zip(fmts, cells[::2], cells[1::2]))
              + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
