"""Accuracy with and without ``bias_correction: empirical`` (:mod:`hlsnn.deploy.quantize.biascorr`): each
format of a deployment config run twice on emu, as it is (``bias_correction: none``) and with the
correction, through ``hlsnn deploy``'s own evaluation; one Markdown table on stdout
(``docs/history/deploy-models.md`` and ``docs/history/deploy-beyond-cnn.md`` show them)::

    python scripts/bias_correction.py tiny                     # tests/data/torch/tiny: bfp8, twohot, fixed8
    python scripts/bias_correction.py models                   # configs/models: every format of each
    python scripts/bias_correction.py family --out /tmp/v --only dw_a_ts17 dw_mult_ts17
                                     # the configs the variant_family deploy step wrote into --out

Classification rows: accuracy in % (points against float); regression rows: the relative error
(family) or the MSE (tiny) as ``hlsnn deploy`` reports it.
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

MODES = ("none", "empirical")


def _doubled(cfg, formats=None):
    """``cfg`` (a parsed deployment config) with each of its formats (or ``formats`` of them)
    twice: ``NAME`` with ``bias_correction: none`` and ``NAME_bc`` with ``empirical``; one
    assignment per format."""
    fm = cfg["formats"]
    names = [n for n in fm if formats is None or n in formats]
    cfg["formats"] = {k: v for n in names
                      for k, v in ((n, dict(fm[n], bias_correction="none")),
                                   (n + "_bc", dict(fm[n], bias_correction="empirical")))}
    cfg.pop("assignments", None)
    return cfg, names


def _absolute(cfg, base):
    cfg["model"] = str((base / cfg["model"]).resolve()) if not Path(cfg["model"]).is_absolute() else cfg["model"]
    for v in cfg["formats"].values():
        if (base / v["accel"]).exists():
            v["accel"] = str((base / v["accel"]).resolve())
    return cfg


def _cell(res, e):
    if "error" in e:
        return "failed"
    if "accuracy" in e:
        return f"{100 * e['accuracy']:.2f} ({100 * (e['accuracy'] - res['float_accuracy']):+.2f})"
    if "relative_error" in e:
        return f"{100 * e['relative_error']:.2f} %"
    return f"{e['mse']:.4f}"


def run(name, cfg, formats=None):
    cfg, names = _doubled(cfg, formats)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.yaml"
        path.write_text(json.dumps(cfg))          # JSON is YAML
        res = deploy(path, "emu")
    cells = [_cell(res, res["assignments"][n + s]) for n in names for s in ("", "_bc")]
    return names, cells


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", choices=("tiny", "models", "family"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/variants"),
                    help="family: the --out of python tests/fixtures/torch_families variant_family export")
    ap.add_argument("--only", nargs="*", help="these model names only (family: the config files' stems)")
    args = ap.parse_args(argv)
    if args.set == "tiny":
        base, formats = ROOT / "tests" / "data" / "torch" / "tiny", ("bfp8", "twohot", "fixed8")
    elif args.set == "models":
        base, formats = ROOT / "configs" / "models", None
    else:
        base, formats = args.out, ("bfp8", "twohot", "fixed8")
    names = args.only or sorted(p.stem for p in base.glob("*.yaml") if "__" not in p.stem)
    header = None
    for name in names:
        cfg = _absolute(read_yaml(base / f"{name}.yaml"), base)
        fmts, cells = run(name, cfg, formats)
        if fmts != header:          # a model with other formats (configs/models) starts a table of its own
            print(("\n" if header is not None else "") + "| model | "
                  + " | ".join(f"{f} | {f} + bc" for f in fmts) + " |")
            print("|---" * (2 * len(fmts) + 1) + "|")
            header = fmts
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
