"""CBAM with both halves (Woo et al. 2018) as people write it in PyTorch: hfam's ``f_dw_cbam`` (channel
attention by avg + max pooling through one shared MLP of 1x1 convs) followed by the spatial half,
``torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)`` -> ``Conv2d(2, 1, 7, padding=3)``
-> sigmoid -> ``x * s`` (a 1 x H x W gate broadcast over the channels).

It reuses ``variant_family.py``'s steps (train a few seconds on the digits, one thread; export both
ways; deploy in bfp8 / two-hot / fixed8 against onnxruntime; ``hlsnn compile`` + one network start)::

    python scripts/cbam_spatial.py export --out /tmp/hcbam_sp
    python scripts/cbam_spatial.py deploy --out /tmp/hcbam_sp
    python scripts/cbam_spatial.py status --out /tmp/hcbam_sp
    python scripts/cbam_spatial.py table --out /tmp/hcbam_sp
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402
import variant_fresh as vfr  # noqa: E402


def _models(torch, nn):
    ChanAtt, sep = vfr.cbam_parts(torch, nn)   # f_dw_cbam's channel attention and block

    class SpatAtt(nn.Module):           # CBAM spatial attention: channel mean and max, 7x7 conv, sigmoid
        def __init__(self, use_amax=True):
            super().__init__()
            self.conv = nn.Conv2d(2, 1, 7, padding=3)
            self.use_amax = use_amax

        def forward(self, x):
            mx = x.amax(1, keepdim=True) if self.use_amax else torch.max(x, 1, keepdim=True)[0]
            return x * torch.sigmoid(self.conv(torch.cat([x.mean(1, keepdim=True), mx], 1)))

    class DwCbamFull(nn.Module):
        def __init__(self, use_amax=True):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.Hardswish())
            self.s1, self.s2, self.s3 = sep(8, 16, 2), sep(16, 16, 1), sep(16, 24, 2)
            self.att, self.sp = ChanAtt(16, 4), SpatAtt(use_amax)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            h = self.s3(self.sp(self.att(self.s2(self.s1(self.stem(x))))))
            return self.fc(h.mean([2, 3]))

    return {
        "f_dw_cbam_sp": (DwCbamFull(True), "nchw", "classification", 25),
        "f_dw_cbam_spmax": (DwCbamFull(False), "nchw", "classification", 25),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("export", "deploy", "status", "table"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/hcbam_sp"))
    ap.add_argument("--only", nargs="*", help="these variants (name prefixes) only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    vf._models = _models
    if args.step == "export":
        vf.export(args.out, args.only)
    elif args.step == "deploy":
        vf.deploy_all(args.out, args.only)
    elif args.step == "status":
        vfr.status(args.out, args.only)
    else:
        vfr.table(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
