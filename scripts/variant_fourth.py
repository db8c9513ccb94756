"""Issue 52's hidden family, a fourth time: the same kinds written the way other code bases write them.

Nobody here wrote these before (compare ``variant_family.py``, ``variant_fresh.py``,
``export_torch_attention.py``, ``cbam_spatial.py``): a ViT-tiny (Conv patch embedding, a class token
concatenated in front, learned positions, a pre-norm ``nn.TransformerEncoderLayer``), an MLP-Mixer
(token mixing by transpose + Linear), a GLU-gated 1-D conv (``F.glu``, grouped ``Conv1d``), a dilated
causal TCN (left padding by ``F.pad``) and a ``ConvTranspose1d`` autoencoder on 64-step sequences, a
U-Net with BatchNorm, ``ConvTranspose2d(k=2, s=2)`` and concatenated skips trained to denoise, a
diffusion-style U-Net (GroupNorm + SiLU, ``F.interpolate(scale_factor=2, mode='bilinear')``, a
learned residual scale), a depthwise-separable CNN with an ``nn.Hardsigmoid`` SE block and
``x + block(x) * gamma``, a ConvNeXt block (LayerNorm over channels via permute, layer scale), a
jet MLP with LayerNorm + GELU, and token-wise models (RMSNorm by hand + SwiGLU; ``F.linear`` with
Parameters).

Each is trained for a few epochs on the digits (CPU, one thread), exported by torch's dynamo exporter
and by TorchScript at opset 17, deployed with ``hlsnn.evaluation.run.deploy`` (what ``hlsnn deploy``
runs) on emu in bfp8 / two-hot / fixed8 without host fallback, and compiled (``hlsnn compile``) and run
on the network path, counting kernel starts::

    python scripts/variant_fourth.py export --out /tmp/hfam4
    python scripts/variant_fourth.py deploy --out /tmp/hfam4
    python scripts/variant_fourth.py status --out /tmp/hfam4
    python scripts/variant_fourth.py table --out /tmp/hfam4

The 64-step models read ``seq64.npz`` (written by ``export``: the digits flattened, (N, 1, 64)
with layout ``ncl``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402

FORMATS = vf.FORMATS
TWO_WAYS = vf.TWO_WAYS


def _models(torch, nn):
    """name -> (module, layout, task, epochs); layout ``seq64`` is (N, 1, 64) from seq64.npz."""
    F = nn.functional

    # --- ViT-tiny: 2x2 patches by a strided conv, a class token in front, learned positions
    class ViT(nn.Module):
        def __init__(self, dim=16, patch=2):
            super().__init__()
            self.patch_embed = nn.Conv2d(1, dim, kernel_size=patch, stride=patch)
            n = (8 // patch) ** 2
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
            self.blocks = nn.Sequential(*[nn.TransformerEncoderLayer(dim, 2, 2 * dim, dropout=0.0, activation="gelu",
                                                                     batch_first=True, norm_first=True)
                                          for _ in range(2)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, 10)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)          # (N, 16, dim)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            x = self.norm(self.blocks(x))
            return self.head(x[:, 0])

    # --- MLP-Mixer on (N, T=8, F=8): token mixing by transpose + Linear over the tokens
    class MixerBlock(nn.Module):
        def __init__(self, tokens, dim, hidden):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.token_mlp = nn.Sequential(nn.Linear(tokens, hidden), nn.GELU(), nn.Linear(hidden, tokens))
            self.channel_mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(self, x):
            x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.channel_mlp(self.norm2(x))

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(8, 16)
            self.blocks = nn.Sequential(MixerBlock(8, 16, 16), MixerBlock(8, 16, 16))
            self.norm = nn.LayerNorm(16)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            return self.head(self.norm(self.blocks(self.stem(x))).mean(dim=1))

    # --- GLU-gated 1-D conv (gated CNN / wav2letter style), grouped Conv1d
    class GluBlock(nn.Module):
        def __init__(self, c, k, groups=1):
            super().__init__()
            self.conv = nn.Conv1d(c, 2 * c, k, padding=k // 2, groups=groups)

        def forward(self, x):
            return x + F.glu(self.conv(x), dim=1)

    class GluNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(8, 16, 1)
            self.b1, self.b2 = GluBlock(16, 3), GluBlock(16, 5, groups=4)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.b2(self.b1(self.inp(x)))
            return self.fc(x.mean(-1))

    # --- dilated causal TCN (Bai et al. / locuslab style without weight norm) on (N, 1, 64)
    class CausalConv(nn.Module):
        def __init__(self, c, z, k, d):
            super().__init__()
            self.pad = (k - 1) * d
            self.conv = nn.Conv1d(c, z, k, dilation=d)

        def forward(self, x):
            return self.conv(F.pad(x, (self.pad, 0)))

    class TemporalBlock(nn.Module):
        def __init__(self, c, z, d):
            super().__init__()
            self.c1, self.c2 = CausalConv(c, z, 3, d), CausalConv(z, z, 3, d)
            self.drop = nn.Dropout(0.1)
            self.down = nn.Conv1d(c, z, 1) if c != z else None

        def forward(self, x):
            y = self.drop(F.relu(self.c2(self.drop(F.relu(self.c1(x))))))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class Tcn(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(TemporalBlock(1, 12, 1), TemporalBlock(12, 12, 2), TemporalBlock(12, 16, 4),
                                     TemporalBlock(16, 16, 8))
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(self.net(x)[:, :, -1])

    # --- ConvTranspose1d autoencoder on (N, 1, 64)
    class Ae1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Conv1d(1, 8, 4, stride=2, padding=1), nn.ReLU(True),
                                         nn.Conv1d(8, 16, 4, stride=2, padding=1), nn.ReLU(True))
            self.decoder = nn.Sequential(nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1), nn.ReLU(True),
                                         nn.ConvTranspose1d(8, 1, 4, stride=2, padding=1), nn.Sigmoid())

        def forward(self, x):
            return self.decoder(self.encoder(x))

    # --- U-Net: BatchNorm, ConvTranspose2d(k=2, s=2), torch.cat skips (the "pytorch-unet" tutorials)
    def double_conv(c, z):
        return nn.Sequential(nn.Conv2d(c, z, 3, padding=1), nn.BatchNorm2d(z), nn.ReLU(inplace=True),
                             nn.Conv2d(z, z, 3, padding=1), nn.BatchNorm2d(z), nn.ReLU(inplace=True))

    class UNetBN(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1, self.down2, self.bottom = double_conv(1, 8), double_conv(8, 16), double_conv(16, 32)
            self.maxpool = nn.MaxPool2d(2)
            self.up2 = nn.ConvTranspose2d(32, 16, kernel_size=2, stride=2)
            self.up1 = nn.ConvTranspose2d(16, 8, kernel_size=2, stride=2)
            self.dec2, self.dec1 = double_conv(32, 16), double_conv(16, 8)
            self.final = nn.Conv2d(8, 1, 1)

        def forward(self, x):
            c1 = self.down1(x)
            c2 = self.down2(self.maxpool(c1))
            b = self.bottom(self.maxpool(c2))
            d2 = self.dec2(torch.cat((self.up2(b), c2), dim=1))
            d1 = self.dec1(torch.cat((self.up1(d2), c1), dim=1))
            return self.final(d1)

    # --- a diffusion-style U-Net: GroupNorm + SiLU res blocks with a learned scale, bilinear interpolate
    class ResBlock(nn.Module):
        def __init__(self, c, z):
            super().__init__()
            self.block = nn.Sequential(nn.GroupNorm(4, c), nn.SiLU(), nn.Conv2d(c, z, 3, padding=1),
                                       nn.GroupNorm(4, z), nn.SiLU(), nn.Conv2d(z, z, 3, padding=1))
            self.skip = nn.Conv2d(c, z, 1) if c != z else nn.Identity()
            self.gamma = nn.Parameter(torch.tensor(0.5))

        def forward(self, x):
            return self.skip(x) + self.block(x) * self.gamma

    class UNetGN(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = nn.Conv2d(1, 8, 3, padding=1)
            self.e1, self.e2 = ResBlock(8, 8), ResBlock(8, 16)
            self.mid = ResBlock(16, 16)
            self.d2, self.d1 = ResBlock(32, 8), ResBlock(16, 8)
            self.out = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x):
            h1 = self.e1(self.inc(x))
            h2 = self.e2(F.avg_pool2d(h1, 2))
            m = self.mid(F.avg_pool2d(h2, 2))
            u = F.interpolate(m, scale_factor=2, mode="bilinear")
            u = self.d2(torch.cat([u, h2], dim=1))
            u = F.interpolate(u, scale_factor=2, mode="bilinear")
            return self.out(self.d1(torch.cat([u, h1], dim=1)))

    # --- depthwise-separable CNN, SE with nn.Hardsigmoid + AdaptiveAvgPool2d(1), x + block(x) * gamma
    class SqueezeExcite(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.reduce, self.expand = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)
            self.act, self.gate = nn.ReLU(inplace=True), nn.Hardsigmoid()

        def forward(self, x):
            return x * self.gate(self.expand(self.act(self.reduce(self.avg_pool(x)))))

    class DSConv(nn.Module):
        def __init__(self, c, z, stride):
            super().__init__()
            self.dw = nn.Sequential(nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False), nn.BatchNorm2d(c),
                                    nn.Hardswish())
            self.se = SqueezeExcite(c)
            self.pw = nn.Sequential(nn.Conv2d(c, z, 1, bias=False), nn.BatchNorm2d(z))
            self.gamma = nn.Parameter(torch.ones(1)) if stride == 1 and c == z else None

        def forward(self, x):
            y = self.pw(self.se(self.dw(x)))
            return x + y * self.gamma if self.gamma is not None else y

    class DwSe(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
            self.layers = nn.Sequential(DSConv(16, 16, 1), DSConv(16, 24, 2), DSConv(24, 24, 1))
            self.classifier = nn.Linear(24, 10)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.classifier(x.mean((2, 3)))

    # --- ConvNeXt: depthwise conv, LayerNorm over channels via permute, Linear MLP, layer scale
    class ConvNeXtBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, 5, padding=2, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pwconv1, self.act, self.pwconv2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
            self.gamma = nn.Parameter(0.1 * torch.ones(dim))

        def forward(self, x):
            y = self.dwconv(x).permute(0, 2, 3, 1)          # (N, H, W, C)
            y = self.pwconv2(self.act(self.pwconv1(self.norm(y))))
            return x + (self.gamma * y).permute(0, 3, 1, 2)

    class ConvNeXt(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(1, 16, 2, stride=2)
            self.stem_norm = nn.LayerNorm(16, eps=1e-6)
            self.stage = nn.Sequential(ConvNeXtBlock(16), ConvNeXtBlock(16))
            self.norm = nn.LayerNorm(16, eps=1e-6)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            x = self.stage(x)
            return self.head(self.norm(x.mean([-2, -1])))

    # --- a jet-tagging MLP written as a ModuleList loop with LayerNorm + GELU
    class JetLN(nn.Module):
        def __init__(self, sizes=(64, 64, 32, 32)):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
            self.norms = nn.ModuleList(nn.LayerNorm(b) for b in sizes[1:])
            self.out = nn.Linear(sizes[-1], 10)

        def forward(self, x):
            x = x.reshape(x.size(0), -1)
            for lin, ln in zip(self.layers, self.norms):
                x = F.gelu(ln(lin(x)))
            return self.out(x)

    # --- token-wise: RMSNorm by hand + SwiGLU (LLaMA's feed-forward), residual
    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class SwiGLU(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = RMSNorm(8)
            self.w1, self.w3 = nn.Linear(8, 16, bias=False), nn.Linear(8, 16, bias=False)
            self.w2 = nn.Linear(16, 8, bias=False)

        def forward(self, x):
            h = self.norm(x)
            return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    # --- token-wise: F.linear with Parameters (weight (out, in)), tanh, a second projection
    class TokFLinear(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(12, 8) * 0.3)
            self.bias = nn.Parameter(torch.zeros(12))
            self.proj = nn.Linear(12, 6)

        def forward(self, x):
            return self.proj(torch.tanh(F.linear(x, self.weight, self.bias)))

    return {
        "g_vit": (ViT(), "nchw", "classification", 30),
        "g_mixer": (Mixer(), "ntf", "classification", 30),
        "g_glu": (GluNet(), "ncl", "classification", 25),
        "g_tcn": (Tcn(), "seq64", "classification", 25),
        "g_ae_ct1d": (Ae1d(), "seq64", "dense", 30),
        "g_unet_bn": (UNetBN(), "nchw", "denoise", 25),
        "g_unet_gn": (UNetGN(), "nchw", "dense", 25),
        "g_dw_se": (DwSe(), "nchw", "classification", 25),
        "g_convnext": (ConvNeXt(), "nchw", "classification", 25),
        "g_jet_ln": (JetLN(), "flat", "classification", 25),
        "g_tok_swiglu": (SwiGLU(), "ntf", "tokens", 0),
        "g_tok_flinear": (TokFLinear(), "ntf", "tokens", 0),
    }


def _seq64(out):
    """The digits as 64-step sequences (N, 1, 64) in an .npz (layout ncl)."""
    from hlsnn.deploy import datasets
    path = out / "seq64.npz"
    if not path.exists():
        ds = datasets.load("digits", layout="flat")
        np.savez(path, x_train=ds.x_train[:, None, :], y_train=ds.y_train, x_test=ds.x_test[:, None, :],
                 y_test=ds.y_test)
    return path


def _data(out, layout):
    from hlsnn.deploy import datasets
    if layout == "seq64":
        return datasets.load(str(_seq64(out)), layout="ncl")
    return datasets.load("digits", layout=layout)


def export(out, only=None):
    import onnxruntime as ort
    import torch
    from torch import nn
    from export_torch_models import _export, _ort_outputs, _train_ae, train
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    _seq64(out)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    manifest["torch"] = torch.__version__
    torch.manual_seed(0)
    for name, (model, layout, task, epochs) in _models(torch, nn).items():
        if only and name not in only:
            continue
        t0 = time.time()
        ds = _data(out, layout)
        x_train = ds.x_train.astype(np.float32)
        if task == "classification":
            model = train(torch, model, x_train, ds.y_train, epochs=epochs)
        elif task == "dense":
            model = _train_ae(torch, model, x_train, epochs=epochs)
        elif task == "denoise":
            model = _train_ae(torch, model, x_train, epochs=epochs, sigma=0.2)   # denoising
        model.eval()
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            key = f"{name}_{variant}"
            path = out / f"{key}.onnx"
            entry = {"layout": layout, "task": "dense" if task == "denoise" else task, "export": kwargs,
                     "input_shape": list(ds.x_test.shape[1:])}
            try:
                entry["files"] = _export(torch, model, example, path, kwargs)
                y = _ort_outputs(ort, path, ds.x_test)
            except Exception as exc:     # noqa: BLE001 - an exporter or onnxruntime that fails is recorded
                entry.update(files=[], export_error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                manifest["models"][key] = entry
                print(f"{key:24s} export failed: {entry['export_error']}", flush=True)
                continue
            vf._fill_entry(entry, torch, model, path, ds, y)
            manifest["models"][key] = entry
            print(f"{key:24s} {entry.get('float_accuracy', '')!s:8.6s} {time.time() - t0:5.1f}s "
                  f"{' '.join(sorted(set(entry['ops'])))}", flush=True)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _config(out, key, entry):
    e = dict(entry, task="dense") if entry["task"] == "tokens" else entry
    if entry["layout"] == "seq64":
        return vf._config(out, key, e, data=_seq64(out), layout="ncl")
    return vf._config(out, key, e)


def _tokens(out, key, entry):
    """A token-wise model: (N, T, F') in every format, near the float model's values."""
    from hlsnn.deploy.config import load_deploy_config
    cfg = load_deploy_config(_config(out, key, entry))
    ds = _data(out, entry["layout"])
    return vf._format_errors(cfg, ds.x_train[:128], ds.x_test[:96])


def deploy_all(out, only=None):
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    manifest = json.loads((out / "MANIFEST.json").read_text())
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for key, entry in sorted(manifest["models"].items()):
        if only and not any(key.startswith(o) for o in only):
            continue
        t0 = time.time()
        row = {"task": entry["task"]}
        if "network" in results.get(key, {}):
            row["network"] = results[key]["network"]
        results[key] = row
        if "export_error" in entry:
            row["export_error"] = entry["export_error"]
            continue
        path = out / f"{key}.onnx"
        try:
            net = load_onnx(path)
            x = _data(out, entry["layout"]).x_test[:8]
            ref = vf._ort_reference(path, x)
            y = float_forward(net, x)
            row["import_vs_ort"] = float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-9)) \
                if y.shape == ref.shape else f"shape {y.shape} vs {ref.shape}"
        except Exception as exc:        # noqa: BLE001
            row["import_error"] = vf._short(exc)
            if not type(exc).__module__.startswith("hlsnn"):
                row["traceback"] = traceback.format_exc()[-1500:]
            print(f"{key:24s} import: {row['import_error']}", flush=True)
            results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
            continue
        if entry["task"] == "tokens":
            row["formats"] = _tokens(out, key, entry)
        else:
            vf._deploy_formats(row, _config(out, key, entry), entry["task"])
        row["seconds"] = round(time.time() - t0, 1)
        print(f"{key:24s} {vf._cells(row)}  ({row['seconds']} s)", flush=True)
        results_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return results


def status(out, only=None):
    """``hlsnn compile`` of each model in each format, then a run of 16 test inputs on emu through
    ``hlsnn.network.load`` (what ``hlsnn run`` does): the path (network or layers), the kernel
    starts per batch, or the reason for the layer path; results.json's ``network`` field."""
    from hlsnn.commands.network import _kernel_calls, _starts
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    from hlsnn.network.loader import kernel_network, load
    manifest = json.loads((out / "MANIFEST.json").read_text())
    res_path = out / "results.json"
    results = json.loads(res_path.read_text()) if res_path.exists() else {}
    for key, entry in sorted(manifest["models"].items()):
        if (only and not any(key.startswith(o) for o in only)) or "export_error" in entry:
            continue
        cfg = _config(out, key, entry)
        x = _data(out, entry["layout"]).x_test[:16]
        row = results.setdefault(key, {"task": entry["task"]}).setdefault("network", {})
        for fmt in FORMATS:
            o = out / f"{key}-{fmt}.hlsnn"
            try:
                compile_model(str(cfg), fmt, str(o), check_samples=2)
            except Exception as exc:    # noqa: BLE001
                row[fmt] = "COMPILE " + vf._short(exc)
                print(f"{key:24s} {fmt:7s} {row[fmt][:200]}", flush=True)
                continue
            try:
                kernel_network(*artifact.read(str(o)))
                why = None
            except Exception as exc:    # noqa: BLE001
                why = str(exc)[:300]
            try:
                with load(str(o), "emu") as net:
                    c0 = _kernel_calls(net)
                    net.run(x)
                    starts = _starts(net, c0)
                    # emu's network mode counts no kernel start (it has no kernel): one start on csim / a board
                    row[fmt] = ("network 1" if net.network is not None else f"layers {starts}") \
                        + ("" if why is None else ": " + why)
            except Exception as exc:    # noqa: BLE001
                row[fmt] = "RUN " + vf._short(exc)
            print(f"{key:24s} {fmt:7s} {row[fmt][:200]}", flush=True)
        res_path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def table(out):
    results = json.loads((out / "results.json").read_text())
    lines = ["| model | float | bfp8 | two-hot | fixed8 | starts (bfp8 / two-hot / fixed8) |",
             "|---|---|---|---|---|---|"]
    for key, row in sorted(results.items()):
        net = " / ".join(str(row.get("network", {}).get(f, "-"))[:90] for f in FORMATS).replace("|", "/")
        err = next((row[k] for k in ("export_error", "import_error", "deploy_error") if k in row), None)
        if err:
            lines.append(f"| {key} | {err[:160].replace('|', '/')} | | | | {net} |")
            continue
        fl = f"{100 * row['float_accuracy']:.1f}" if row.get("float_accuracy") is not None else row["task"]
        cells = []
        for f in FORMATS:
            r = row.get("formats", {}).get(f, {})
            cells.append(("ERR " + r["error"][:160]) if "error" in r else vf._cell(row, f))
        lines.append(f"| {key} | {fl} | " + " | ".join(c.replace("|", "/") for c in cells) + f" | {net} |")
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("export", "deploy", "status", "table"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/hfam4"))
    ap.add_argument("--only", nargs="*", help="these models (name prefixes) only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    {"export": export, "deploy": deploy_all, "status": status}.get(args.step, lambda o, *_: table(o))(args.out,
                                                                                                     args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
