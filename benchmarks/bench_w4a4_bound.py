#!/usr/bin/env python
"""What bounds issue 82's last target: the ResNet-8 W4A4 (``configs/models/resnet8_w4a4_digits32.yaml``)
1.5 times faster end to end at batch 1 on the PYNQ-Z2 than the same model on the int8 kernel.

The script compiles the model's ``w8`` assignment (``sparse8net_pynq-z2``) and the 4-bit kernel
(``sparse4net_pynq-z2``) at every read count per bank (``net_sub``) from 3 (the sizer's nominal pick)
to 6 (4 with ``net_wlut: 1``, the config's own), with ``--allow-overfit`` (hlsnn compile refuses 5 and 6), and prints for each the modelled
kernel, host and end to end of ``hlsnn perf`` (float32 images, as digits32 stores them, and uint8
images), the ratio against ``w8``, and the network kernel's resources against the fit budget
(:data:`hlsnn.resources.FIT_SHARE` of the board) with the largest logic rows.

With the host time ``H`` common to both kernels (the host's steps do not depend on the kernel) and
``T8`` the int8 kernel's time with its DDR traffic, the target ``(T8 + H) / (T4 + H) >= 1.5`` holds
iff ``T4 <= (T8 + H) / 1.5 - H``; the script prints that bound for each input type.

Usage (from the repository root; about 30 s, no C-simulation)::

    python benchmarks/bench_w4a4_bound.py            # the table
    python benchmarks/bench_w4a4_bound.py --json     # the rows as JSON
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
MODEL = ROOT / "configs" / "models" / "resnet8_w4a4_digits32.yaml"
ACCEL4 = ROOT / "configs" / "accel" / "sparse4net_pynq-z2.yaml"
#: (net_sub, net_wlut) of each 4-bit shape: (4, 1) is sparse4net_pynq-z2's own
SHAPES = ((3, 0), (4, 1), (5, 0), (6, 0))
TARGET = 1.5


def _configs(tmp: Path, sub: int, wlut: int) -> Path:
    """A copy of the model's config whose ``w4a4`` format runs on the 4-bit kernel with ``net_sub: sub``
    and ``net_wlut: wlut``."""
    accel = tmp / f"sparse4net_sub{sub}.yaml"
    body = [ln for ln in ACCEL4.read_text().splitlines()
            if not ln.startswith("#") and not ln.strip().startswith(("net_sub:", "net_wlut:"))]
    body = [f"name: sparse4net_sub{sub}" if ln.startswith("name:") else ln for ln in body]
    accel.write_text("\n".join(body + [f"  net_sub: {sub}"] + ([f"  net_wlut: {wlut}"] if wlut else []) + [""]))
    text = MODEL.read_text().replace("model: resnet8_w4a4_digits32.onnx",
                                     f"model: {ROOT / 'configs' / 'models' / 'resnet8_w4a4_digits32.onnx'}")
    text = text.replace("accel: sparse4net_pynq-z2}", f"accel: {accel}}}")
    text = text.replace("accel: sparse8net_pynq-z2}", f"accel: {ROOT / 'configs' / 'accel' / 'sparse8net_pynq-z2.yaml'}}}")
    cfg = tmp / f"resnet8_w4a4_sub{sub}.yaml"
    cfg.write_text(text)
    return cfg


def _row(path, label, budget):
    from hlsnn.network import latency
    out = {"shape": label}
    for dtype in ("float32", "uint8"):
        r = latency.model(path, input_dtype=dtype)
        out[dtype] = {"kernel_us": r["kernel_us"], "ddr_us": r["ddr_us"], "host_us": r["host_us"],
                      "end_to_end_us": r["end_to_end_us"]}
    res = r["kernel_resources"]
    out["resources"] = {k: res[k] for k in ("bram36", "lut", "ff", "dsp")}
    out["over"] = [k for k in ("bram36", "lut", "ff", "dsp") if res[k] > budget[k]]
    out["products"] = res.get("products", "")
    logic = sorted(((v["lut"], k) for k, v in r["kernel_logic"].items()), reverse=True)
    out["logic_lut"] = {k: v for v, k in logic[:4]}
    return out


def measure():
    from hlsnn.config import load_board
    from hlsnn.network.build import compile_model
    from hlsnn.resources import FIT_SHARE
    board = load_board("pynq-z2")
    budget = {k: int(FIT_SHARE * board.resources[k]) for k in ("bram36", "lut", "ff", "dsp")}
    rows = []
    with tempfile.TemporaryDirectory(prefix="hlsnn-w4a4-") as tmp:
        tmp = Path(tmp)
        w8 = tmp / "w8.hlsnn"
        compile_model(MODEL, "w8", w8)
        rows.append(_row(w8, "w8 (int8 kernel, sparse8net_pynq-z2)", budget))
        for sub, wlut in SHAPES:
            path = tmp / f"w4a4_sub{sub}.hlsnn"
            compile_model(_configs(tmp, sub, wlut), "w4a4", path, allow_overfit=True)
            rows.append(_row(path, f"w4a4, net_sub {sub}" + (f", net_wlut {wlut}" if wlut else "")
                             + (" (the sizer's nominal pick)" if sub == 3 else "")
                             + (" (sparse4net_pynq-z2)" if (sub, wlut) == (4, 1) else ""), budget))
    base = rows[0]
    for r in rows:
        for dtype in ("float32", "uint8"):
            r[dtype]["ratio"] = round(base[dtype]["end_to_end_us"] / r[dtype]["end_to_end_us"], 3)
    need = {}
    for dtype in ("float32", "uint8"):
        h = base[dtype]["host_us"]
        t8 = base[dtype]["kernel_us"] + base[dtype]["ddr_us"]
        need[dtype] = {"host_us": h, "w8_kernel_ddr_us": t8, "w4_kernel_ddr_max_us": round((t8 + h) / TARGET - h, 1)}
    return {"budget": budget, "rows": rows, "need": need}


def table(res):
    b = res["budget"]
    lines = [f"fit budget (90% of the PYNQ-Z2): {b['bram36']} BRAM36, {b['lut']:,} LUT, {b['ff']:,} FF, {b['dsp']} DSP",
             f"{'shape':62} {'kernel':>7} {'e2e f32':>8} {'x f32':>6} {'e2e u8':>7} {'x u8':>6} "
             f"{'BRAM36':>6} {'LUT':>7} {'DSP':>4}  over"]
    for r in res["rows"]:
        f, u, q = r["float32"], r["uint8"], r["resources"]
        lines.append(f"{r['shape']:62} {f['kernel_us']:7.1f} {f['end_to_end_us']:8.1f} {f['ratio']:6.2f} "
                     f"{u['end_to_end_us']:7.1f} {u['ratio']:6.2f} {q['bram36']:6d} {q['lut']:7,d} {q['dsp']:4d}  "
                     f"{', '.join(r['over']) or '-'}")
    for r in res["rows"][1:]:
        lines.append(f"  {r['shape']}: LUT " + ", ".join(f"{k} {v:,}" for k, v in r["logic_lut"].items()))
    for dtype, n in res["need"].items():
        lines.append(f"1.5x with {dtype} images: host {n['host_us']:.1f} us, int8 kernel + DDR "
                     f"{n['w8_kernel_ddr_us']:.1f} us: the 4-bit kernel + DDR at most {n['w4_kernel_ddr_max_us']:.1f} us")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    a = ap.parse_args(argv)
    res = measure()
    print(json.dumps(res, indent=1) if a.json else table(res))


if __name__ == "__main__":
    main()
