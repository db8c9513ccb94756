"""Issue 52's hidden family, a fifth time: another author's classifiers, exported with a dynamic batch.

Nobody here wrote these before (compare ``variant_family.py``, ``variant_fresh.py``,
``variant_fourth.py``). Every model is exported the way deployment tutorials tell a new user to:
``input_names``/``output_names`` and a dynamic batch axis (``dynamic_axes`` for TorchScript at
opset 17, the same for torch's default dynamo exporter), from a batch-2 example. The models: a jet
MLP on the raw (unscaled) breast-cancer features with ``BatchNorm1d`` on its inputs and ``nn.PReLU``;
a jet MLP built from an ``OrderedDict`` with ``nn.SELU`` + ``nn.AlphaDropout``; a keyword spotter
that reads the (N, 1, F, T) "spectrogram" with a full-height ``Conv2d`` then ``squeeze(2)`` into a
dilated ``Conv1d(padding='same')`` residual block, ``AdaptiveMaxPool1d(1)`` and ``torch.flatten``; a
TC-ResNet with an even kernel, ``F.max_pool1d(ceil_mode=True)`` and ``torch.max(x, dim=2)[0]``; a
strided 1-D CNN on 64-step sequences with ``AdaptiveAvgPool1d(4)`` and ``x.view(x.size(0), -1)``; a
nanoGPT block (fused ``c_attn`` split in three, heads by ``view`` + ``transpose``, a causal
``masked_fill`` from a ``tril`` buffer, ``nn.Embedding`` positions on ``torch.arange``, the last
token); a bias-free pre-norm ``nn.TransformerEncoder`` (``batch_first=False``, class token in
front); attention pooling (``softmax`` of a learned score over the tokens, ``(w * h).sum(1)``); a
depthwise CNN with channel multiplier 2, an SE of ``x.mean(-1).mean(-1)`` and ``s[:, :, None, None]``,
``AvgPool2d(count_include_pad=False)`` and ``MaxPool2d(ceil_mode=True)``; and a per-channel
``nn.PReLU`` CNN whose SE is one ``nn.Sequential`` ending in ``nn.Unflatten``, with
``AdaptiveAvgPool2d(2)``. Trained a few epochs on scikit-learn's bundled data (CPU, one thread)::

    python scripts/variant_fifth.py export --out /tmp/hfam5
    python scripts/variant_fifth.py deploy --out /tmp/hfam5
    python scripts/variant_fifth.py status --out /tmp/hfam5
    python scripts/variant_fifth.py table --out /tmp/hfam5
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402
import variant_fourth as v4  # noqa: E402

_V4_DATA, _V4_CONFIG = v4._data, v4._config

FORMATS = vf.FORMATS
TWO_WAYS = vf.TWO_WAYS


def _models(torch, nn):
    """name -> (module, layout, task, epochs); layouts ``bc30`` (bc30.npz, flat) and ``seq64``."""
    F = nn.functional

    # --- jet MLPs
    jet_bnin = nn.Sequential(nn.BatchNorm1d(30), nn.Linear(30, 32), nn.PReLU(), nn.Linear(32, 16), nn.PReLU(16),
                             nn.Linear(16, 2))
    jet_selu = nn.Sequential(OrderedDict([
        ("fc1", nn.Linear(64, 48)), ("act1", nn.SELU()), ("drop1", nn.AlphaDropout(0.1)),
        ("fc2", nn.Linear(48, 32)), ("act2", nn.SELU()), ("drop2", nn.AlphaDropout(0.1)),
        ("fc3", nn.Linear(32, 10))]))

    # --- keyword spotting: a full-height Conv2d over the (F, T) image, squeeze(2), then 1-D
    class KwsSqueeze(nn.Module):
        def __init__(self):
            super().__init__()
            self.front = nn.Conv2d(1, 16, kernel_size=(8, 3), padding=(0, 1), bias=False)
            self.bn0 = nn.BatchNorm2d(16)
            self.conv = nn.Conv1d(16, 16, 3, padding="same", dilation=2, bias=False)
            self.bn1 = nn.BatchNorm1d(16)
            self.pool = nn.AdaptiveMaxPool1d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = F.relu(self.bn0(self.front(x))).squeeze(2)        # (N, 16, T)
            x = F.relu(x + self.bn1(self.conv(x)))
            return self.fc(torch.flatten(self.pool(x), 1))

    class TcMaxDim(nn.Module):         # even kernel, ceil-mode pool on an odd length, max over time by torch.max
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 2)
            self.c2 = nn.Conv1d(16, 24, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm1d(24)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            x = F.max_pool1d(F.leaky_relu(self.c1(x), 0.1), 2, ceil_mode=True)   # 7 -> 4
            x = F.silu(self.bn(self.c2(x)))
            return self.fc(torch.max(x, dim=2)[0])

    class SeqAdapt(nn.Module):         # strided 1-D CNN on 64 steps, AdaptiveAvgPool1d(4), view(size(0), -1)
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv1d(1, 8, 5, stride=2, padding=2), nn.ReLU6(),
                                          nn.Conv1d(8, 16, 3, stride=2, padding=1, groups=2, bias=False),
                                          nn.BatchNorm1d(16), nn.ReLU(), nn.AdaptiveAvgPool1d(4))
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

        def forward(self, x):
            x = self.features(x)
            return self.classifier(x.view(x.size(0), -1))

    # --- nanoGPT's block, run as a classifier on the last token
    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd=16, n_head=2, block_size=8):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.n_head, self.n_embd = n_head, n_embd
            self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                               block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class GptBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(16), CausalSelfAttention(), nn.LayerNorm(16)
            self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(16, 64)), ("gelu", nn.GELU()),
                                                  ("c_proj", nn.Linear(64, 16))]))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Linear(8, 16), nn.Embedding(8, 16)
            self.h = nn.ModuleList([GptBlock()])
            self.ln_f = nn.LayerNorm(16)
            self.lm_head = nn.Linear(16, 10, bias=False)

        def forward(self, idx):
            b, t, _ = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x)[:, -1, :])

    class EncNoBias(nn.Module):        # bias=False pre-norm encoder, (T, N, E), class token in front, h[0]
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(8, 16, bias=False)
            self.cls = nn.Parameter(torch.zeros(1, 1, 16))
            self.pos = nn.Parameter(torch.randn(9, 1, 16) * 0.02)
            layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, activation="gelu", norm_first=True, bias=False)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            h = self.embed(x).permute(1, 0, 2)                    # (T, N, E)
            h = torch.cat([self.cls.expand(-1, h.size(1), -1), h], dim=0) + self.pos
            return self.head(self.encoder(h)[0])

    class AttPool(nn.Module):          # attention pooling: softmax of a learned score over the tokens
        def __init__(self):
            super().__init__()
            self.embed = nn.Sequential(nn.Linear(8, 24), nn.LayerNorm(24), nn.ReLU())
            self.pos = nn.Parameter(torch.zeros(1, 8, 24))
            self.score = nn.Linear(24, 1)
            self.out = nn.Linear(24, 10)

        def forward(self, x):
            h = self.embed(x) + self.pos
            w = torch.softmax(self.score(h), dim=1)               # (N, T, 1)
            return self.out((w * h).sum(dim=1))

    # --- depthwise CNNs on (N, 1, 8, 8)
    class DwMult2(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
            self.dw = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(16),
                                    nn.Hardswish())
            self.fc1, self.fc2 = nn.Linear(16, 4), nn.Linear(4, 16)
            self.avg = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)     # 8 -> 4
            self.pw = nn.Conv2d(16, 24, 1)
            self.mp = nn.MaxPool2d(3, stride=2, ceil_mode=True)                           # 4 -> 2
            self.fc = nn.Linear(24 * 2 * 2, 10)

        def forward(self, x):
            x = self.dw(self.stem(x))
            s = F.hardsigmoid(self.fc2(F.relu(self.fc1(x.mean(-1).mean(-1)))))
            x = self.avg(x * s[:, :, None, None])
            x = self.mp(F.relu6(self.pw(x)))
            return self.fc(torch.flatten(x, 1))

    class DwPrelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 12, 3, padding=1), nn.PReLU(12),
                                      nn.Conv2d(12, 12, 3, stride=2, padding=1, groups=12), nn.PReLU(12),
                                      nn.Conv2d(12, 16, 1), nn.BatchNorm2d(16), nn.PReLU(16))
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4), nn.ReLU(),
                                    nn.Linear(4, 16), nn.Sigmoid(), nn.Unflatten(1, (16, 1, 1)))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, 10))

        def forward(self, x):
            x = self.body(x)
            return self.head(x * self.se(x))

    return {
        "h_jet_bnin": (jet_bnin, "bc30", "classification", 40),
        "h_jet_selu": (jet_selu, "flat", "classification", 25),
        "h_kws_sq": (KwsSqueeze(), "nchw", "classification", 25),
        "h_tc_maxdim": (TcMaxDim(), "ncl", "classification", 25),
        "h_seq_adapt": (SeqAdapt(), "seq64", "classification", 25),
        "h_gpt": (Gpt(), "ntf", "classification", 30),
        "h_enc_nobias": (EncNoBias(), "ntf", "classification", 30),
        "h_att_pool": (AttPool(), "ntf", "classification", 25),
        "h_dw_mult2": (DwMult2(), "nchw", "classification", 25),
        "h_dw_prelu": (DwPrelu(), "nchw", "classification", 25),
    }


def _bc30(out):
    """scikit-learn's breast-cancer table, raw (unscaled) features, as an .npz (layout flat)."""
    path = out / "bc30.npz"
    if not path.exists():
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import train_test_split
        d = load_breast_cancer()
        xa, xb, ya, yb = train_test_split(d.data.astype(np.float32), d.target.astype(np.int64), test_size=0.3,
                                          random_state=0, stratify=d.target)
        np.savez(path, x_train=xa, y_train=ya, x_test=xb, y_test=yb)
    return path


def _data(out, layout):
    from hlsnn.deploy import datasets
    if layout == "bc30":
        return datasets.load(str(_bc30(out)), layout="flat")
    return _V4_DATA(out, layout)


def _export(torch, model, example, path, kwargs):
    """torch.onnx.export with named inputs and a dynamic batch axis."""
    for old in path.parent.glob(path.name + "*"):
        old.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), str(path), input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **kwargs)
    return sorted(p.name for p in path.parent.glob(path.name + "*"))


def export(out, only=None):
    import onnxruntime as ort
    import torch
    from torch import nn
    from export_torch_models import _ort_outputs, train
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    v4._seq64(out)
    _bc30(out)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    manifest["torch"] = torch.__version__
    torch.manual_seed(0)
    for name, (model, layout, task, epochs) in _models(torch, nn).items():
        if only and name not in only:
            continue
        t0 = time.time()
        ds = _data(out, layout)
        model = train(torch, model, ds.x_train.astype(np.float32), ds.y_train, epochs=epochs)
        model.eval()
        example = torch.from_numpy(ds.x_test[:2].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            key = f"{name}_{variant}"
            path = out / f"{key}.onnx"
            entry = {"layout": layout, "task": task, "export": dict(kwargs, dynamic_batch=True),
                     "input_shape": list(ds.x_test.shape[1:])}
            try:
                entry["files"] = _export(torch, model, example, path, kwargs)
            except Exception as exc:     # noqa: BLE001 - an exporter that fails is recorded
                entry.update(files=[], export_error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                manifest["models"][key] = entry
                print(f"{key:24s} export failed: {entry['export_error']}", flush=True)
                continue
            try:
                y = _ort_outputs(ort, path, ds.x_test)
            except Exception as exc:     # noqa: BLE001 - onnxruntime cannot run the file: onnx's evaluator
                entry["ort_error"] = vf._short(exc)[:300]
                y = _reference(path, ds.x_test)
            vf._fill_entry(entry, torch, model, path, ds, y)
            manifest["models"][key] = entry
            print(f"{key:24s} {entry.get('float_accuracy', '')!s:8.6s} {time.time() - t0:5.1f}s "
                  f"{' '.join(sorted(set(entry['ops'])))}", flush=True)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def _config(out, key, entry):
    if entry["layout"] == "bc30":
        return vf._config(out, key, entry, data=_bc30(out), layout="flat")
    return _V4_CONFIG(out, key, entry)


def _reference(path, x):
    """onnxruntime's outputs, or onnx's reference evaluator's where onnxruntime cannot run the file
    (TorchScript's ``Conv1d(padding='same', dilation=2)`` is ``auto_pad=SAME_UPPER`` with a dilation,
    which onnxruntime 1.2x refuses)."""
    try:
        return _ORT_REFERENCE(path, x)
    except Exception:               # noqa: BLE001
        from hlsnn.deploy.reports.evaluate import float_reference
        return float_reference(path, x).astype(np.float32)


_ORT_REFERENCE = vf._ort_reference


def _patched(fn, out, only):
    """Run one of variant_fourth's steps with this family's data, configs and reference."""
    saved = v4._data, v4._config, vf._ort_reference
    v4._data, v4._config, vf._ort_reference = _data, _config, _reference
    try:
        return fn(out, only)
    finally:
        v4._data, v4._config, vf._ort_reference = saved


def run_steps(argv, doc, default_out, export, extra=None):
    """The command line of this script and of ``variant_sixth`` and ``variant_seventh``: ``export``
    (the family's ``export(out, only)``), ``deploy`` and ``status`` (variant_fourth's, with this
    family's data, configs and reference: :func:`_patched`), ``table`` (variant_fourth's) and
    ``extra`` steps ``{name: fn(out)}``; ``--out`` (default ``default_out``), ``--only``."""
    extra = extra or {}
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("step", choices=("export", "deploy", "status", "table") + tuple(extra))
    ap.add_argument("--out", type=Path, default=Path(default_out))
    ap.add_argument("--only", nargs="*", help="these models (name prefixes) only")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.step == "export":
        export(args.out, args.only)
    elif args.step == "table":
        v4.table(args.out)
    elif args.step in extra:
        extra[args.step](args.out)
    else:
        _patched({"deploy": v4.deploy_all, "status": v4.status}[args.step], args.out, args.only)
    return 0


def main(argv=None):
    return run_steps(argv, __doc__, "/tmp/hfam5", export)


if __name__ == "__main__":
    sys.exit(main())
