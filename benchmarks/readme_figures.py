"""Recompute the README's cycle and time figures from ``hlsnn perf`` and compare (``--check``,
exit 1 on a mismatch) or rewrite them (``--write``).

Two tables of README.md:

* "What the shipped configs do": per config row, ``hlsnn perf CONFIG --gemm 256,1024,1024``
  (shift_mac rows in the row's mode) or ``--conv 64,56,56,64,3 --density 0.5`` (sparse_cluster),
  on the strict C-simulation: the cycles, the time and MAC/cycle of peak columns.
* the ResNet-8 network table: per assignment, ``hlsnn perf NAME.hlsnn`` (batch 1 and batch 16)
  of ``hlsnn compile configs/models/resnet8_digits32.yaml --assignment A``: the kernel time, the
  end-to-end time at batch 1 (its "(was ...)" note is kept), per image at batch 16, and the
  energy per image at batch 1 (``hlsnn perf``'s estimate: the board's power x end-to-end time).

Every figure comes from the cycle model with each loop at its II derived from the rendered C++
(:mod:`hlsnn.perf.schedule`). Usage: ``python benchmarks/readme_figures.py --check`` (or
``--write``; ``--only configs`` / ``--only network`` for one table).
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GEMM = (256, 1024, 1024)
CONV = (64, 56, 56, 64, 3)
MODEL = ROOT / "configs" / "models" / "resnet8_digits32.yaml"
#: the network table's rows, by their first cell's start: the assignments (joined by " / ")
NET_ROWS = {"| two-hot, power of two (`shift_mac`, 128": ("twohot",),
            "| two-hot / power of two, sized to the chip": ("twohot_z2", "pot_z2"),
            "| fixed8 / sparse50": ("fixed8", "sparse50"),
            "| bfp16 / bfp8 (`bfp_systolic`, 128 / 192 DSP, 100 / 200 MHz) | PYNQ-Z2": ("bfp16", "bfp8_z2"),
            "| bfp8 (`bfp_systolic`, 128 DSP) | ZCU104": ("bfp8",),
            "| fixed8, sized to the chip (`sparse_cluster`, 192 DSP": ("fixed8_z2",),
            "| fixed8, sized to the chip (`sparse_cluster`, 320 / 640": ("fixed8_zu3", "fixed8_zcu104", "fixed8_kv260"),
            "| bfp8 / two-hot (128 lanes, 100 MHz) | AUP-ZU3": ("bfp8_zu3", "twohot_zu3"),
            "| 75% sparse, trained, zeros skipped": ("resnet8_digits32_sparse75:sparse75_z2",),
            "| W4A4 from Brevitas, int8 / 4-bit kernel": ("resnet8_w4a4_digits32:w8", "resnet8_w4a4_digits32:w4a4")}


def _config_cells(name, op):
    from hlsnn.measure import operation as pm
    cfg = ROOT / "configs" / "accel" / f"{name}.yaml"
    if op.startswith("conv"):
        r = pm.measure(str(cfg), conv=CONV, density=0.5)
    else:
        mode = "pot" if "power of two" in op else "twohot" if "two-hot" in op else None
        r = pm.measure(str(cfg), gemm=GEMM, mode=mode)
    ms = r["time_us"] / 1e3
    mpc = f"{r['macs_per_cycle']:.1f}" if r["engine"] == "sparse_cluster" else f"{r['macs_per_cycle']:.0f}"
    return [f"{r['cycles']:,}", f"{ms:.3g} ms", f"{mpc} / {r['peak_macs_per_cycle']} ({100 * r['utilization']:.1f}%)"]


def _ms(us):
    return f"{us / 1e3:.2f}"


def _net_cells(assignments, compiled):
    from hlsnn.network.latency import model
    k, e1, e16, en = [], [], [], []
    for a in assignments:
        r1 = model(compiled(a), batch=1)
        r16 = model(compiled(a), batch=16)
        k.append(_ms(r1["kernel_us"]))
        e1.append(_ms(r1["end_to_end_us"]))
        e16.append(_ms(r16["end_to_end_us"] / 16))
        en.append(f"{r1['energy']['uj_per_image'] / 1e3:.2f}")       # board power x end to end, batch 1
    join = lambda v, unit=" ms": (v[0] if len(set(v)) == 1 else " / ".join(v)) + unit   # noqa: E731
    return join(k), join(e1), join(e16), join(en, " mJ")


def recompute(text, only=None, log=print):
    """The README text with every figure of the two tables recomputed, and the changes
    ``[(row, old cells, new cells)]``."""
    lines = text.splitlines(keepends=True)
    changes = []
    in_cfg = False
    tmp = tempfile.TemporaryDirectory(prefix="readme-figures-")
    cache = {}

    def compiled(a):
        """``a``: an assignment of :data:`MODEL`, or ``MODEL_NAME:ASSIGNMENT`` of another config of
        configs/models (a trained model ships as its own ONNX file and config)."""
        if a not in cache:
            from hlsnn.cli import main
            model, _, name = a.rpartition(":")
            cfg = ROOT / "configs" / "models" / f"{model}.yaml" if model else MODEL
            out = Path(tmp.name) / f"r8_{name}.hlsnn"
            if main(["compile", str(cfg), "--assignment", name, "-o", str(out)]) != 0:     # every row within budget
                raise SystemExit(f"hlsnn compile --assignment {a} failed")
            cache[a] = str(out)
        return cache[a]

    for i, ln in enumerate(lines):
        if ln.startswith("## What the shipped configs do"):
            in_cfg = True
        elif ln.startswith("## "):
            in_cfg = False
        cells = [c.strip() for c in ln.strip().strip("|").split("|")] if ln.startswith("|") else None
        if in_cfg and only in (None, "configs") and cells and len(cells) == 5 and re.match(r"[a-z]", cells[0]) \
                and "(" in cells[0] and not cells[0].startswith("config"):
            name = cells[0].split()[0]
            new = _config_cells(name, cells[1])
            log(f"{name}: {' | '.join(cells[2:])} -> {' | '.join(new)}")
            if new != cells[2:]:
                changes.append((name, cells[2:], new))
                lines[i] = "| " + " | ".join(cells[:2] + new) + " |\n"
        elif only in (None, "network") and cells and len(cells) == 6:
            key = next((k for k in NET_ROWS if ln.startswith(k)), None)
            if key is None:
                continue
            k, e1, e16, en = _net_cells(NET_ROWS[key], compiled)
            was = re.search(r"\(was [^)]*\)", cells[3])
            e1 = e1 + (f" {was.group(0)}" if was else "")
            new = [k, e1, e16, en]
            log(f"{'/'.join(NET_ROWS[key])}: {' | '.join(cells[2:])} -> {' | '.join(new)}")
            if new != cells[2:]:
                changes.append(("/".join(NET_ROWS[key]), cells[2:], new))
                lines[i] = "| " + " | ".join(cells[:2] + new) + " |\n"
    tmp.cleanup()
    return "".join(lines), changes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="exit 1 when a figure does not reproduce")
    g.add_argument("--write", action="store_true", help="rewrite the figures in README.md")
    ap.add_argument("--only", choices=["configs", "network"], help="one of the two tables")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "host"))
    text = README.read_text()
    new, changes = recompute(text, args.only)
    if args.write:
        if new != text:
            README.write_text(new)
        print(f"README.md: {len(changes)} row(s) rewritten")
        return 0
    for row, old, now in changes:
        print(f"MISMATCH {row}: README {' | '.join(old)}; hlsnn perf {' | '.join(now)}")
    print("README figures reproduce" if not changes else f"{len(changes)} README row(s) do not reproduce; "
          "python benchmarks/readme_figures.py --write rewrites them")
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
