"""The per-model choice of a shift format's radix rule and codes' fit (``radix: auto``,
``weight_fit: auto``, :mod:`hlsnn.deploy.quantize.shift_auto`) against each pair set by hand: one JSON
line per deployment config (``docs/history/deploy-models.md`` shows the figures).

    python scripts/shift_choice.py OUT.jsonl configs/models/digits_cnn.yaml tests/data/torch/tiny/*_ts17.yaml
    python scripts/shift_choice.py --type pot OUT.jsonl CFG.yaml ...      # the two-hot format run as pot
    python scripts/shift_choice.py --held-out OUT.jsonl CFG.yaml ...      # choose on half, score on the other

Each config's first two-hot format (``--type pot``: the same, as pot; ``--type twohot,pot``: its
own two-hot and pot formats) is deployed on emu with ``msb``/``output``, ``lse``/``output``,
``lse``/``network``, ``msb``/``network`` and ``auto``; each line holds the float accuracy (or
MSE), each variant's accuracy and agreement with float, its calibration seconds, and for
``auto`` the pair chosen and every pair's scores. The variant families' configs are one format
each, e.g. ``name: dw_a_ts17\\nmodel: DIR/dw_a_ts17.onnx\\ndata: digits\\nlayout: auto\\nformats:
{t: {type: twohot, accel: shift8_pynq-z2}}`` for the exports of ``variant_family`` (tests/fixtures/torch_families).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

VARIANTS = {"msb": {"radix": "msb", "weight_fit": "output"}, "lse": {"radix": "lse", "weight_fit": "output"},
            "lsenet": {"radix": "lse", "weight_fit": "network"}, "msbnet": {"radix": "msb", "weight_fit": "network"},
            "auto": {}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--type", default="twohot", help="twohot, pot (the two-hot format as pot) or twohot,pot")
    ap.add_argument("--held-out", action="store_true", help="auto chooses on half of the calibration images")
    ap.add_argument("--only", default=",".join(VARIANTS), help="variants, comma-separated: " + ", ".join(VARIANTS))
    a = ap.parse_args(argv)
    from hlsnn.config import read_yaml
    from hlsnn.deploy.quantize import shift_auto
    from hlsnn.evaluation.run import deploy
    shift_auto.HOLD_OUT = a.held_out
    variants = {k: VARIANTS[k] for k in a.only.split(",")}
    with open(a.out, "a") as out:
        for y in map(Path, a.configs):
            cfg = read_yaml(y)
            if not Path(cfg["model"]).is_absolute():
                cfg["model"] = str(y.resolve().parent / cfg["model"])
            types = a.type.split(",")
            as_pot = types == ["pot"]
            fx = {}
            for v in (cfg.get("formats") or {}).values():
                t = "pot" if as_pot and v.get("type") == "twohot" else v.get("type")
                if t in types and t not in fx:
                    acc = v["accel"]
                    fx[t] = {"type": t, "accel": Path(acc).stem if "/" in str(acc) else acc,
                             **{k: w for k, w in v.items() if k not in ("type", "accel", "radix", "weight_fit")}}
            if not fx:
                print(y.stem, "no shift format")
                continue
            cfg["formats"] = {f"{t}_{n}": dict(spec, **o) for t, spec in fx.items() for n, o in variants.items()}
            cfg.pop("assignments", None)
            t0 = time.time()
            with tempfile.TemporaryDirectory() as d:
                p = Path(d) / "c.yaml"
                p.write_text(json.dumps(cfg))
                r = deploy(p, "emu")
            rec = {"model": y.stem, "held_out": a.held_out, "float": r.get("float_accuracy"),
                   "float_mse": r.get("float_mse"), "s": round(time.time() - t0, 1)}
            for f, e in r["assignments"].items():
                rec[f] = {k: e.get(k) for k in ("accuracy", "agreement_with_float", "mse", "error", "calibration_s")
                          if e.get(k) is not None}
                if e.get("shift_choice"):
                    rec[f].update(choice=e["shift_choice"]["chosen"], scores=e["shift_choice"]["scores"])
            print(json.dumps(rec), flush=True)
            out.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
