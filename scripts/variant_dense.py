"""Issue 52's hidden family, dense: U-Nets and autoencoders written as a new user would write them.

Twelve small dense models in styles the earlier families (``variant_family.py``, ``variant_fresh.py``,
``variant_fourth.py``) did not use, each trained for seconds on bundled data (CPU, one thread;
nothing downloaded), exported by torch's dynamo exporter and by TorchScript at opset 17, deployed on
emu in bfp8 / two-hot / fixed8 without host fallback (``hlsnn.evaluation.run.deploy``, what
``hlsnn deploy`` runs; relative error ``||y - y_float|| / ||y_float||`` as there), and compiled
(``hlsnn compile``) and run on the network path::

    python scripts/variant_dense.py export --out /tmp/hfam6
    python scripts/variant_dense.py deploy --out /tmp/hfam6
    python scripts/variant_dense.py status --out /tmp/hfam6
    python scripts/variant_dense.py table --out /tmp/hfam6

The data (``export`` writes each as an .npz beside the models; fixed seeds):

- ``img16``: 16x16 grey patches of ``sklearn.datasets.load_sample_images()``; inputs with Gaussian
  noise (sigma 0.1), the clean patch as the target (denoising).
- ``seg16``: the same clean patches; the target is a soft mask of where the patch is brighter than
  its 3x3-blurred self plus 0.02 (a segmentation-like edge/blob map).
- ``sr8``: the patches averaged 2x2 to 8x8 as inputs, the 16x16 patch as the target (super-resolution).
- ``dig16``: the digits repeated 2x2 to 16x16 (autoencoding; ``digm16`` in [-1, 1] for a Tanh head).
- ``sig64``: (N, 1, 64) synthetic signals (two sines and a step) with noise, the clean one as target.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402
import variant_fourth as v4  # noqa: E402

FORMATS = vf.FORMATS
TWO_WAYS = vf.TWO_WAYS
N_TRAIN, N_TEST = 512, 96


def _models(torch, nn):
    """name -> (module, data set, epochs)."""
    F = nn.functional

    # --- classic U-Net: Conv(bias=False)-BN-LeakyReLU double convs, MaxPool2d, ConvTranspose2d(2, 2),
    # torch.cat skips, three levels, a Sigmoid head (the "milesial"-like DoubleConv but LeakyReLU)
    class DoubleConv(nn.Sequential):
        def __init__(self, c, z):
            super().__init__(nn.Conv2d(c, z, 3, padding=1, bias=False), nn.BatchNorm2d(z), nn.LeakyReLU(0.1),
                             nn.Conv2d(z, z, 3, padding=1, bias=False), nn.BatchNorm2d(z), nn.LeakyReLU(0.1))

    class ClassicUNet(nn.Module):
        def __init__(self, ch=(8, 16, 24)):
            super().__init__()
            self.inc = DoubleConv(1, ch[0])
            self.downs = nn.ModuleList(DoubleConv(a, b) for a, b in zip(ch[:-1], ch[1:]))
            self.ups = nn.ModuleList(nn.ConvTranspose2d(b, a, 2, stride=2) for a, b in zip(ch[:-1], ch[1:]))
            self.decs = nn.ModuleList(DoubleConv(2 * a, a) for a in ch[:-1])
            self.outc = nn.Conv2d(ch[0], 1, 1)

        def forward(self, x):
            skips = [self.inc(x)]
            for down in self.downs:
                skips.append(down(F.max_pool2d(skips[-1], 2)))
            x = skips.pop()
            for up, dec in zip(reversed(self.ups), reversed(self.decs)):
                x = dec(torch.cat([skips.pop(), up(x)], dim=1))
            return torch.sigmoid(self.outc(x))

    # --- strided-conv encoder, F.interpolate nearest by scale_factor and by size=skip.shape[-2:],
    # additive skips (no concat), a Tanh head on [-1, 1] images
    class InterpAddUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e0 = nn.Conv2d(1, 8, 3, padding=1)
            self.e1 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.e2 = nn.Conv2d(16, 16, 3, stride=2, padding=1)
            self.d1 = nn.Conv2d(16, 16, 3, padding=1)
            self.d0 = nn.Conv2d(16, 8, 3, padding=1)
            self.head = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x):
            s0 = F.relu(self.e0(x))
            s1 = F.relu(self.e1(s0))
            b = F.relu(self.e2(s1))
            u1 = F.relu(self.d1(F.interpolate(b, scale_factor=2, mode="nearest") + s1))
            u0 = F.relu(self.d0(F.interpolate(u1, size=s0.shape[-2:])) + s0)
            return torch.tanh(self.head(u0))

    # --- nn.Upsample(bilinear, align_corners=False) + conv decoder, AvgPool down, concat skips, a
    # segmentation-like Sigmoid mask
    class BilinearSeg(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc0 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.enc1 = nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.dec = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1), nn.Sigmoid())

        def forward(self, x):
            a = self.enc0(x)
            return self.dec(torch.cat((a, self.up(self.enc1(a))), 1))

    # --- strided convs down, ConvTranspose2d(k=3, s=2, p=1, output_padding=1) and (k=4, s=2, p=1) up,
    # no skips (a convolutional autoencoder)
    class CtAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 8, 4, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
            self.dec = nn.Sequential(nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(4, 1, 3, padding=1))

        def forward(self, x):
            return self.dec(self.enc(x))

    # --- a 1-D U-Net for signals: Conv1d, MaxPool1d, ConvTranspose1d and nn.Upsample (1-D nearest)
    class UNet1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.c0 = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.Conv1d(8, 8, 5, padding=2), nn.ReLU())
            self.c1 = nn.Sequential(nn.MaxPool1d(2), nn.Conv1d(8, 16, 5, padding=2), nn.ReLU())
            self.c2 = nn.Sequential(nn.MaxPool1d(2), nn.Conv1d(16, 16, 3, padding=1), nn.ReLU())
            self.up2 = nn.ConvTranspose1d(16, 16, 2, stride=2)
            self.d1 = nn.Sequential(nn.Conv1d(32, 8, 3, padding=1), nn.ReLU())
            self.up1 = nn.Upsample(scale_factor=2)
            self.d0 = nn.Sequential(nn.Conv1d(16, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 1, 1))

        def forward(self, x):
            a = self.c0(x)
            b = self.c1(a)
            m = self.c2(b)
            d = self.d1(torch.cat([self.up2(m), b], 1))
            return self.d0(torch.cat([self.up1(d), a], 1))

    # --- ESPCN-style super-resolution: 5x5 and 3x3 convs with Tanh, nn.PixelShuffle(2)
    class Espcn(nn.Module):
        def __init__(self, r=2):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.Tanh(), nn.Conv2d(16, 8, 3, padding=1),
                                      nn.Tanh(), nn.Conv2d(8, r * r, 3, padding=1))
            self.shuffle = nn.PixelShuffle(r)

        def forward(self, x):
            return self.shuffle(self.body(x))

    # --- a denoising autoencoder with a bottleneck Linear: conv encoder, flatten, Linear, Linear,
    # view back to a map, ConvTranspose decoder
    class LinearAE(nn.Module):
        def __init__(self, code=24):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
            self.fc_enc = nn.Linear(16 * 4 * 4, code)
            self.fc_dec = nn.Linear(code, 16 * 4 * 4)
            self.dec = nn.Sequential(nn.ConvTranspose2d(16, 8, 2, stride=2), nn.ReLU(),
                                     nn.ConvTranspose2d(8, 1, 2, stride=2), nn.Sigmoid())

        def forward(self, x):
            z = F.relu(self.fc_enc(self.enc(x).flatten(1)))
            h = F.relu(self.fc_dec(z)).view(-1, 16, 4, 4)
            return self.dec(h)

    # --- DnCNN-like residual denoiser x - net(x): Conv-BN-ReLU body, no pooling
    class ResDenoise(nn.Module):
        def __init__(self, depth=4, ch=16):
            super().__init__()
            layers = [nn.Conv2d(1, ch, 3, padding=1), nn.ReLU(inplace=True)]
            for _ in range(depth - 2):
                layers += [nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU(inplace=True)]
            layers.append(nn.Conv2d(ch, 1, 3, padding=1))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return x - self.net(x)

    # --- sub-pixel U-Net: nn.PixelUnshuffle down, nn.PixelShuffle up between convs, concat skip
    class ShuffleUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e0 = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
            self.down = nn.PixelUnshuffle(2)                               # (16, 8, 8)
            self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1))
            self.up = nn.PixelShuffle(2)                                   # (4, 16, 16)
            self.out = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

        def forward(self, x):
            a = self.e0(x)
            return self.out(torch.cat([a, F.relu(self.up(self.mid(self.down(a))))], 1))

    # --- FFDNet-like denoiser: nn.PixelUnshuffle(2) of the input, Conv-BN-ReLU at half size, PixelShuffle back
    class FFDNetLike(nn.Module):
        def __init__(self, ch=24):
            super().__init__()
            self.down, self.up = nn.PixelUnshuffle(2), nn.PixelShuffle(2)
            self.body = nn.Sequential(nn.Conv2d(4, ch, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch),
                                      nn.ReLU(inplace=True), nn.Conv2d(ch, 4, 3, padding=1))

        def forward(self, x):
            return self.up(self.body(self.down(x)))

    # --- upsampling written by hand (repeat_interleave), a concat skip, a torch.clamp(0, 1) head
    class RepeatUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.dec = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))

        def forward(self, x):
            a = self.enc(x)
            u = self.mid(a).repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
            return torch.clamp(self.dec(torch.cat([a, u], 1)), 0, 1)

    # --- SiLU everywhere (YOLO / diffusion style convs): MaxPool2d down, nn.Upsample up, concat skip
    class SiluUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e0 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.SiLU())
            self.e1 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.SiLU(), nn.Upsample(scale_factor=2))
            self.d = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.SiLU(), nn.Conv2d(8, 1, 1))

        def forward(self, x):
            a = self.e0(x)
            return self.d(torch.cat([a, self.e1(a)], 1))

    return {
        "d_unet_classic": (ClassicUNet(), "img16", 30),
        "d_unet_interp_add": (InterpAddUNet(), "digm16", 30),
        "d_seg_bilinear": (BilinearSeg(), "seg16", 40),
        "d_ae_ct": (CtAE(), "dig16", 30),
        "d_unet1d": (UNet1d(), "sig64", 30),
        "d_espcn": (Espcn(), "sr8", 30),
        "d_ae_linear": (LinearAE(), "img16", 60),
        "d_dncnn": (ResDenoise(), "img16", 30),
        "d_unet_shuffle": (ShuffleUNet(), "img16", 30),
        "d_ffdnet": (FFDNetLike(), "img16", 30),
        "d_unet_repeat": (RepeatUNet(), "img16", 30),
        "d_unet_silu": (SiluUNet(), "img16", 30),
    }


def _patches(n, rng):
    """n 16x16 grey patches in [0, 1] of the two sample images, at seeded random places."""
    from sklearn.datasets import load_sample_images
    imgs = [im.astype(np.float32).mean(axis=2) / 255.0 for im in load_sample_images().images]
    out = np.empty((n, 1, 16, 16), np.float32)
    for i in range(n):
        im = imgs[i % 2]
        r, c = rng.integers(0, im.shape[0] - 16), rng.integers(0, im.shape[1] - 16)
        out[i, 0] = im[r:r + 16, c:c + 16]
    return out


def _make_data(kind):
    """(x, y) float32 arrays of N_TRAIN + N_TEST samples of one data set (see the module doc)."""
    rng = np.random.default_rng(52)
    n = N_TRAIN + N_TEST
    if kind in ("dig16", "digm16"):
        from hlsnn.deploy import datasets
        ds = datasets.load("digits", layout="nchw")
        x = np.kron(np.concatenate([ds.x_train, ds.x_test])[:n], np.ones((1, 1, 2, 2), np.float32))
        x = 2 * x - 1 if kind == "digm16" else x
        return x, x
    if kind == "sig64":
        t = np.linspace(0, 1, 64, dtype=np.float32)
        f = rng.uniform(1, 6, (n, 2, 1)).astype(np.float32)
        a = rng.uniform(0.2, 1, (n, 2, 1)).astype(np.float32)
        step = (t[None] > rng.uniform(0.2, 0.8, (n, 1))).astype(np.float32) * rng.uniform(-0.5, 0.5, (n, 1))
        clean = (a * np.sin(2 * np.pi * f * t + rng.uniform(0, 6, (n, 2, 1)))).sum(1) + step
        noisy = clean + rng.normal(0, 0.15, clean.shape)
        return noisy[:, None].astype(np.float32), clean[:, None].astype(np.float32)
    clean = _patches(n, rng)
    if kind == "img16":
        return np.clip(clean + rng.normal(0, 0.1, clean.shape), 0, 1).astype(np.float32), clean
    if kind == "seg16":
        p = np.pad(clean, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="edge")
        blur = sum(p[:, :, i:i + 16, j:j + 16] for i in range(3) for j in range(3)) / 9
        return clean, (1 / (1 + np.exp(-(clean - blur - 0.02) * 15))).astype(np.float32)
    if kind == "sr8":
        return clean.reshape(n, 1, 8, 2, 8, 2).mean((3, 5)), clean
    raise ValueError(kind)


def _npz(out, kind):
    path = out / f"{kind}.npz"
    if not path.exists():
        x, y = _make_data(kind)
        np.savez(path, x_train=x[:N_TRAIN], y_train=y[:N_TRAIN], x_test=x[N_TRAIN:], y_test=y[N_TRAIN:])
    return path


def _data(out, kind):
    from hlsnn.deploy import datasets
    return datasets.load(str(_npz(out, kind)), layout="ncl" if kind == "sig64" else "nchw")


def _fit(torch, model, x, y, epochs, seed=0):
    """Adam at 3e-3, batches of 32 in a seeded order, mean squared error; the model in eval mode."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(32):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval()


def export(out, only=None):
    import onnxruntime as ort
    import torch
    from torch import nn
    from export_torch_models import _export, _ort_outputs
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    manifest["torch"] = torch.__version__
    torch.manual_seed(0)
    for name, (model, kind, epochs) in _models(torch, nn).items():
        if only and name not in only:
            continue
        t0 = time.time()
        ds = _data(out, kind)
        model = _fit(torch, model, ds.x_train, ds.y_train, epochs)
        with torch.no_grad():
            yt = model(torch.from_numpy(ds.x_test)).numpy()
        fit = float(np.mean((yt - ds.y_test) ** 2) / np.var(ds.y_test)) \
            if yt.shape == ds.y_test.shape else None
        example = torch.from_numpy(ds.x_test[:1])
        for variant, kwargs in TWO_WAYS.items():
            key = f"{name}_{variant}"
            path = out / f"{key}.onnx"
            entry = {"layout": kind, "task": "dense", "export": kwargs, "input_shape": list(ds.x_test.shape[1:]),
                     "mse_over_var": fit}
            try:
                entry["files"] = _export(torch, model, example, path, kwargs)
                y = _ort_outputs(ort, path, ds.x_test)
            except Exception as exc:     # noqa: BLE001 - an exporter or onnxruntime that fails is recorded
                entry.update(files=[], export_error=vf._short(exc))
                manifest["models"][key] = entry
                print(f"{key:26s} export failed: {entry['export_error']}", flush=True)
                continue
            vf._fill_entry(entry, torch, model, path, ds, y)
            manifest["models"][key] = entry
            print(f"{key:26s} mse/var {fit if fit is None else round(fit, 3)!s:6s} {time.time() - t0:5.1f}s "
                  f"{' '.join(sorted(set(entry['ops'])))}", flush=True)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _config(out, key, entry):
    """The deploy config: the data set's .npz, its float targets (regression)."""
    kind = entry["layout"]
    text = (f"name: {key}\nmodel: {out / (key + '.onnx')}\ndata: {_npz(out, kind)}\n"
            f"layout: {'ncl' if kind == 'sig64' else 'nchw'}\ntask: regression\n"
            "formats:\n" + "".join(f"  {k}: {v}\n" for k, v in FORMATS.items())
            + "assignments:\n" + "".join(f"  {k}: {{default: {k}}}\n" for k in FORMATS))
    path = out / f"{key}.yaml"
    path.write_text(text)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("export", "deploy", "status", "table"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/hfam6"))
    ap.add_argument("--only", nargs="*", help="these models (name prefixes; export: exact names) only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.step == "export":
        export(args.out, args.only)
        return 0
    # deploy / status / table are variant_fourth's, on this family's data sets and configs
    v4._data, v4._config = _data, _config
    {"deploy": v4.deploy_all, "status": v4.status}.get(args.step, lambda o, *_: v4.table(o))(args.out, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
