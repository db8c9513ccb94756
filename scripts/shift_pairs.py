"""Every (radix, weight_fit) pair of a shift format on a classifier, and the rules that choose among
them (:mod:`hlsnn.deploy.quantize.shift_auto`) scored on the test images after the fact::

    python scripts/shift_pairs.py dump OUT_DIR MODEL.onnx ...             # digits, 128 calibration images
    DATA=digits32 NCAL=64 python scripts/shift_pairs.py dump OUT_DIR tests/data/torch/tiny/dscnn_ts17.onnx
    TYPE=pot python scripts/shift_pairs.py dump OUT_DIR_POT MODEL.onnx ...
    OFF=128 python scripts/shift_pairs.py dump OUT_DIR_128 MODEL.onnx ... # calibrated on training images 128-255
    python scripts/shift_pairs.py rules OUT_DIR [OUT_DIR_128 ...]       # the table of rules
    python scripts/shift_pairs.py layers MODEL.onnx lse+network         # where a pair's changed classes come from
    python scripts/shift_pairs.py sets MODEL.onnx ...                   # the default choice on five calibration sets

``dump`` writes per model ``OUT_DIR/NAME.npz``: the float model's outputs and each pair's (set by
hand, calibrated on the first ``NCAL`` training images) on the first 640 training images and on
the test images, with the labels. A ``MANIFEST.json`` beside the model (the variant families'
exports) gives its layout and data (``seq64``, ``bc30``); models not classifiers there are
skipped. ``rules`` prints, over every dump (a ``v_`` copy of a model dumped under its own name
left out), each fixed pair's and each rule's test images against float's accuracy in all, the
test images of another class than float's, the models beyond one point, and which choices a
rule changes against fidelity alone. The models whose calibration is 64 images are named in
``TINY``.

``sets`` deploys each digits classifier with the default format (``TYPE``, ``radix`` and
``weight_fit`` ``auto``, the calibration images' labels given as ``hlsnn deploy`` gives them) on
five calibration sets of 128 (training images 0-127, 128-255, ..., 512-639) and prints per set
the chosen pair, the test images of another class than float's and the test images right
against float's.

``layers`` (a digits classifier, two-hot on ``ACCEL`` (``shift8_pynq-z2``), the pair set by
hand, calibrated on the first ``NCAL`` training images) counts the images whose class differs from
the float model's (training images 128-999, never calibrated on but trained on, so few change,
and the test images) with every layer quantized, then with one engine layer's output at a time
replaced by the float network's value of it on the layer's own output grid (its radix and bits,
saturating), and with its input the float network's (on the grid of the codes it reads, or
converted at its calibrated input radix where it reads a float tensor: a gate's product, a pool's
sums): the layers after it still quantize, the error of every layer before it is gone. Where the
count falls from one layer to the next, that stretch of the network makes the changed classes
(layer path, emu). With ``weight_fit: network`` or ``output`` a later layer's codes were fitted
to the quantized inputs it had, so a float input can also add a few changes (dw_a's /3/Conv:
3 -> 10)."""
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
    from hlsnn.deploy.reports.evaluate import _layout, open_accelerators
    from hlsnn.deploy.run.hostops import float_tensors
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    typ, ncal, off = os.environ.get("TYPE", "twohot"), int(os.environ.get("NCAL", 128)), int(os.environ.get("OFF", 0))
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
        if len(ds.x_train) < off + ncal:
            print(key, f"skipped: {len(ds.x_train)} training images, fewer than OFF + NCAL = {off + ncal}")
            continue
        x_train, y_train = ds.x_train[:640], ds.y_train[:640]
        res = {"y_train": y_train, "y_test": ds.y_test, "off": off, "f_train": float_tensors(net, x_train)[net.output],
               "f_test": float_tensors(net, ds.x_test)[net.output]}
        if res["f_test"].ndim != 2 or (entry is None and res["f_test"].shape[1] != 10):
            print(key, "not a classifier")
            continue
        accs = open_accelerators(cfg, "emu")
        try:
            for pair in PAIRS:
                dep = Deployment(net, cfg.assignments[pair.replace("+", "_")], cfg.formats, accs, rounding=cfg.rounding)
                dep.task = "classification"
                dep.calibrate(x_train[off:off + ncal])
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


def _mcnemar(ok, best, z):
    """The pairs whose bool per image (``ok[pair]``) beats ``best``'s: ``b - c > z sqrt(b + c)``."""
    return [p for p in PAIRS if int(np.sum(ok[p] & ~ok[best])) - int(np.sum(~ok[p] & ok[best]))
            > z * np.sqrt(int(np.sum(ok[p] & ~ok[best])) + int(np.sum(~ok[p] & ok[best])))]


def choose(d, m, z=None, agreement_first=False):
    """shift_auto's rule on the ``m`` calibration images (training images from the dump's ``OFF``):
    fidelity (the least error, unless a pair agrees with float's classes on significantly more
    images: McNemar at ``shift_auto.Z``; ``agreement_first``: the rule before 2026-11-26, the
    agreeing images first, then the error), then with ``z`` the labels' step (McNemar,
    ``b - c > z sqrt(b + c)``)."""
    from hlsnn.deploy.quantize.shift_auto import Z
    o = int(d["off"]) if "off" in d else 0
    qs = {p: d[f"{p}/train"][o:o + m] for p in PAIRS}
    f, y = d["f_train"][o:o + m], d["y_train"][o:o + m]
    err = lambda p: (_rel(qs[p], f), PAIRS.index(p))      # noqa: E731
    if agreement_first:
        fid = min(PAIRS, key=lambda p: (-_agree(qs[p], f),) + err(p))
    else:
        fid = min(PAIRS, key=err)
        agreeing = _mcnemar({p: qs[p].argmax(1) == f.argmax(1) for p in PAIRS}, fid, Z)
        fid = min(agreeing, key=lambda p: (-_agree(qs[p], f),) + err(p)) if agreeing else fid
    if z is None:
        return fid
    ok = {p: qs[p].argmax(1) == y for p in PAIRS}
    better = _mcnemar(ok, fid, z)
    return min(better, key=lambda p: (-int(ok[p].sum()),) + ((-_agree(qs[p], f),) if agreement_first else ())
               + err(p)) if better else fid


def rules(*outs):
    """The table over the dumps of every directory in ``outs`` (one per calibration set: ``OFF``)."""
    files = []
    for out in outs:
        here = sorted(glob.glob(f"{out}/*.npz"))
        stems = {Path(f).stem for f in here}
        files += [f for f in here if not (Path(f).stem.startswith("v_") and Path(f).stem[2:] in stems)]
    print(len(files), "deployments")
    named = {**{f"fixed {p}": ("fixed", p) for p in PAIRS}, "auto, fidelity": ("fid", None),
             "auto, fidelity scored on 640": ("fid640", None),
             **{f"auto, labels Z={z:g}": ("lab", z) for z in (1.64, 2.0, 2.5, 3.0)},
             "auto before 2026-11-26 (agreement first), labels Z=2": ("old", 2.0)}
    for name, (kind, arg) in named.items():
        net = flips = 0
        miss, moved = [], []
        for fn in files:
            d, k = np.load(fn), Path(fn).stem
            k += f"@{int(d['off'])}" if "off" in d and int(d["off"]) else ""
            m = 64 if k.split("@")[0] in TINY else 128
            fa = int(np.sum(d["f_test"].argmax(1) == d["y_test"]))
            p = {"fixed": lambda: arg, "fid": lambda: choose(d, m), "fid640": lambda: choose(d, 640),
                 "lab": lambda: choose(d, m, arg), "old": lambda: choose(d, m, arg, True)}[kind]()
            q = d[f"{p}/test"]
            dn = int(np.sum(q.argmax(1) == d["y_test"])) - fa
            net, flips = net + dn, flips + len(q) - _agree(q, d["f_test"])
            if dn < -0.01 * len(q):
                miss.append(f"{k} {dn:+d}")
            if kind != "fixed" and p != choose(d, m):
                moved.append(f"{k} {choose(d, m)} -> {p}")
        print(f"{name:30s} {net:+5d} images, {flips:5d} of another class than float's; beyond one point: "
              f"{', '.join(miss) or '-'}" + (f"; changes: {'; '.join(moved)}" if moved else ""))


def layers(model, pair):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import _layout, open_accelerators
    from hlsnn.deploy.run.hostops import float_tensors
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.quantize.quant import Act
    from hlsnn.deploy.run.runner import Deployment
    ncal, accel = int(os.environ.get("NCAL", 128)), os.environ.get("ACCEL", "shift8_pynq-z2")
    radix, _, fit = pair.partition("+")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.yaml"
        p.write_text(f"name: x\nmodel: {Path(model).resolve()}\ndata: digits\nlayout: auto\ntask: classification\n"
                     f"formats:\n  t: {{type: twohot, accel: {accel}, radix: {radix}, weight_fit: {fit}}}\n")
        cfg = load_deploy_config(p)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout=_layout(net, cfg.layout))
    x, nt = np.concatenate([ds.x_train[128:1000], ds.x_test]), len(ds.x_test)
    ft = float_tensors(net, x)
    fy = ft[net.output].argmax(1)
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["t"], cfg.formats, accs, rounding=cfg.rounding)
        dep.task = "classification"
        dep.calibrate(ds.x_train[:ncal])
        dep.chunk = len(x)                                   # one pass: the float tensors are the whole batch's

        def count(what):
            y = dep.run(x, keep=True)[0].argmax(1)
            print(f"{what:40s} changed classes: {int(np.sum(y != fy)):3d} of {len(x)} "
                  f"({int(np.sum(y[-nt:] != fy[-nt:]))} of {nt} test), test accuracy "
                  f"{100 * np.mean(y[-nt:] == ds.y_test):.2f} % (float {100 * np.mean(fy[-nt:] == ds.y_test):.2f})",
                  flush=True)
        count("all quantized")
        for name, ex in dep.execs.items():
            run, la = ex.run, ex.layer

            def grid(v, fmt):
                f, bits, signed = fmt
                lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
                return Act(np.ldexp(np.clip(np.floor(np.ldexp(v, f) + 0.5), lo, hi), -f), fmt)

            def float_in(act, calibrate, run=run, src=la.inputs[0]):
                return run(Act(ft[src], None) if act.fmt is None else grid(ft[src], act.fmt), calibrate)

            def float_out(act, calibrate, run=run, out=la.output):
                return grid(ft[out], run(act, calibrate).fmt)
            ex.run = float_in
            count(f"{name} input float")
            ex.run = float_out
            count(f"{name} output float (radix {ex.f_out})")
            ex.run = run
    finally:
        for a in accs.values():
            a.close()


def sets(models):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import _layout, open_accelerators
    from hlsnn.deploy.run.hostops import float_tensors
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    typ = os.environ.get("TYPE", "twohot")
    for m in models:
        m = Path(m).resolve()
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "c.yaml"
            p.write_text(f"name: x\nmodel: {m}\ndata: digits\nlayout: auto\ntask: classification\n"
                         f"formats:\n  t: {{type: {typ}, accel: shift8_pynq-z2}}\n")
            cfg = load_deploy_config(p)
        net = load_onnx(cfg.model)
        ds = datasets.load("digits", layout=_layout(net, cfg.layout))
        fy = float_tensors(net, ds.x_test)[net.output].argmax(1)
        accs = open_accelerators(cfg, "emu")
        try:
            for off in (0, 128, 256, 384, 512):
                dep = Deployment(net, cfg.assignments["t"], cfg.formats, accs, rounding=cfg.rounding)
                dep.task, dep.cal_labels = "classification", ds.y_train[off:off + 128]
                dep.calibrate(ds.x_train[off:off + 128])
                y = dep.run(ds.x_test).argmax(1)
                print(f"{m.stem} set {off}: {dep.shift_choice['chosen']}, {int(np.sum(y != fy))} of another class "
                      f"than float's, {int(np.sum(y == ds.y_test)) - int(np.sum(fy == ds.y_test)):+d} images right "
                      f"against float ({100 * np.mean(y == ds.y_test):.2f} %)", flush=True)
        finally:
            for a in accs.values():
                a.close()


if __name__ == "__main__":
    {"dump": lambda a: dump(a[0], a[1:]), "rules": lambda a: rules(*a),
     "layers": lambda a: layers(a[0], a[1]), "sets": sets}[sys.argv[1]](sys.argv[2:])
