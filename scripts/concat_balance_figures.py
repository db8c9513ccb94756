"""Relative error of dense (U-Net) ONNX files on emu in bfp8 and fixed8, with the skip-Concat
balance of hlsnn.deploy.quantize.equalize off (before) and on (after)::

    PYTHONPATH=host python scripts/concat_balance_figures.py tests/data/torch/beyond/*unet*.onnx
"""
import sys, tempfile, pathlib
from hlsnn.deploy.quantize import equalize
from hlsnn.evaluation.run import deploy
orig = equalize.plan
for name in sys.argv[1:]:
    p = pathlib.Path(name)
    t = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    t.write_text(f"name: x\nmodel: {p.resolve()}\ndata: digits\nlayout: auto\ntask: regression\ntargets: inputs\n"
                 "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    row = []
    for label, f in (("before", lambda *a: {}), ("after", orig)):
        equalize.plan = f
        r = deploy(t, "emu")["assignments"]
        row.append(f"{label} bfp8 {100*r['bfp8']['relative_error']:.2f}% fixed8 {100*r['fixed8']['relative_error']:.2f}%")
    print(p.stem, " | ".join(row), flush=True)
