"""Every (radix, weight_fit) pair of a shift format on a classifier, and the rules that choose among
them (:mod:`hlsnn.deploy.shift_auto`) scored on the test images after the fact::

    python scripts/shift_pairs.py dump OUT_DIR MODEL.onnx ...             # digits, 128 calibration images
    DATA=digits32 NCAL=64 python scripts/shift_pairs.py dump OUT_DIR tests/data/torch/tiny/dscnn_ts17.onnx
    TYPE=pot python scripts/shift_pairs.py dump OUT_DIR_POT MODEL.onnx ...
    python scripts/shift_pairs.py rules OUT_DIR                         # the table of rules

``dump`` writes per model ``OUT_DIR/NAME.npz``: the float model's outputs and each pair's (set by
hand, calibrated on the first ``NCAL`` training images) on the first 640 training images and on
the test images, with the labels. A ``MANIFEST.json`` beside the model (the variant families'
exports) gives its layout and data (``seq64``, ``bc30``); models not classifiers there are
skipped. ``rules`` prints, over every dump (a ``v_`` copy of a model dumped under its own name
left out), each fixed pair's and each rule's test images against float's accuracy in all, the
test images of another class than float's, the models beyond one point, and which choices a
rule changes against fidelity alone. The models whose calibration is 64 images are named in
``TINY``."""
from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PAIRS = ["lse+network", "lse+output", "msb+network", "msb+output"]
TINY = ("mobilenet_relu6_ts17", "mobilenet_relu_ts17", "dscnn_ts17", "resnet8_ts17")


def dump(out, models):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.evaluate import _layout, open_accelerators
    from hlsnn.deploy.hostops import float_tensors
    from hlsnn.deploy.onnx_import import load_onnx
    from hlsnn.deploy.runner import Deployment
    typ, ncal = os.environ.get("TYPE", "twohot"), int(os.environ.get("NCAL", 128))
    Path(out).mkdir(parents=True, exist_ok=True)
    for m in models:
        m = Path(m).resolve()
        key, t0 = m.stem, time.time()
        dst = Path(out) / f"{key}.npz"
        if dst.exists():
            continue
        data, lay, entry = os.environ.get("DATA", "digits"), "auto", None
        if (m.parent / "MANIFEST.json").exists():
            entry = json.loads((m.parent / "MANIFEST.json").read_text())["models"].get(key)
        if entry is not None:
            if entry["task"] != "classification":
                continue
            lay = entry["layout"]
            if lay in ("seq64", "bc30"):
                data, lay = str(m.parent / f"{lay}.npz"), ("ncl" if lay == "seq64" else "flat")
        fm = "".join(f"  {p.replace('+', '_')}: {{type: {typ}, accel: shift8_pynq-z2, radix: {p.split('+')[0]}, "
                     f"weight_fit: {p.split('+')[1]}}}\n" for p in PAIRS)
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "c.yaml"
            p.write_text(f"name: {key}\nmodel: {m}\ndata: {data}\nlayout: {lay}\ntask: classification\nformats:\n{fm}")
            cfg = load_deploy_config(p)
        net = load_onnx(cfg.model)
        ds = datasets.load(data, layout=_layout(net, cfg.layout))
        x_train, y_train = ds.x_train[:640], ds.y_train[:640]
        res = {"y_train": y_train, "y_test": ds.y_test, "f_train": float_tensors(net, x_train)[net.output],
               "f_test": float_tensors(net, ds.x_test)[net.output]}
        if res["f_test"].ndim != 2 or (entry is None and res["f_test"].shape[1] != 10):
            print(key, "not a classifier")
            continue
        accs = open_accelerators(cfg, "emu")
        try:
            for pair in PAIRS:
                dep = Deployment(net, cfg.assignments[pair.replace("+", "_")], cfg.formats, accs, rounding=cfg.rounding)
                dep.task = "classification"
                dep.calibrate(x_train[:ncal])
                res[f"{pair}/train"], res[f"{pair}/test"] = dep.run(x_train), dep.run(ds.x_test)
        finally:
            for a in accs.values():
                a.close()
        np.savez(dst, **res)
        print(key, round(time.time() - t0, 1), {p: round(float(np.mean(res[f"{p}/test"].argmax(1) == ds.y_test)), 4)
                                               for p in PAIRS}, flush=True)


def _rel(q, f):
    return float(np.linalg.norm(q - f) / np.linalg.norm(f))


def _agree(q, f):
    return int(np.sum(q.argmax(1) == f.argmax(1)))


def choose(d, m, z=None):
    """shift_auto's rule on the first ``m`` training images: fidelity (agreement, error, order),
    then with ``z`` the labels' step (McNemar, ``b - c > z sqrt(b + c)``)."""
    qs = {p: d[f"{p}/train"][:m] for p in PAIRS}
    f, y = d["f_train"][:m], d["y_train"][:m]
    fid = min(PAIRS, key=lambda p: (-_agree(qs[p], f), _rel(qs[p], f), PAIRS.index(p)))
    if z is None:
        return fid
    ok = {p: qs[p].argmax(1) == y for p in PAIRS}
    better = []
    for p in PAIRS:
        b, c = int(np.sum(ok[p] & ~ok[fid])), int(np.sum(~ok[p] & ok[fid]))
        if b - c > z * np.sqrt(b + c):
            better.append(p)
    return min(better, key=lambda p: (-int(ok[p].sum()), -_agree(qs[p], f), _rel(qs[p], f),
                                      PAIRS.index(p))) if better else fid


def rules(out):
    files = sorted(glob.glob(f"{out}/*.npz"))
    stems = {Path(f).stem for f in files}
    files = [f for f in files if not (Path(f).stem.startswith("v_") and Path(f).stem[2:] in stems)]
    print(len(files), "models")
    named = {**{f"fixed {p}": ("fixed", p) for p in PAIRS}, "auto, fidelity": ("fid", None),
             "auto, fidelity scored on 640": ("fid640", None),
             **{f"auto, labels Z={z:g}": ("lab", z) for z in (1.64, 2.0, 2.5, 3.0)}}
    for name, (kind, arg) in named.items():
        net = flips = 0
        miss, moved = [], []
        for fn in files:
            d, k = np.load(fn), Path(fn).stem
            m = 64 if k in TINY else 128
            fa = int(np.sum(d["f_test"].argmax(1) == d["y_test"]))
            p = {"fixed": lambda: arg, "fid": lambda: choose(d, m), "fid640": lambda: choose(d, 640),
                 "lab": lambda: choose(d, m, arg)}[kind]()
            q = d[f"{p}/test"]
            dn = int(np.sum(q.argmax(1) == d["y_test"])) - fa
            net, flips = net + dn, flips + len(q) - _agree(q, d["f_test"])
            if dn < -0.01 * len(q):
                miss.append(f"{k} {dn:+d}")
            if kind != "fixed" and p != choose(d, m):
                moved.append(f"{k} {choose(d, m)} -> {p}")
        print(f"{name:30s} {net:+5d} images, {flips:5d} of another class than float's; beyond one point: "
              f"{', '.join(miss) or '-'}" + (f"; changes: {'; '.join(moved)}" if moved else ""))


if __name__ == "__main__":
    {"dump": lambda a: dump(a[0], a[1:]), "rules": lambda a: rules(a[0])}[sys.argv[1]](sys.argv[2:])
