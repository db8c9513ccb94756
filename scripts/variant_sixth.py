"""Issue 52's hidden family, a sixth time: idioms the first five families did not use.

Nobody here wrote these before (compare ``variant_family.py``, ``variant_fresh.py``,
``variant_fourth.py``, ``variant_fifth.py``, ``variant_dense.py``). Exported as ``variant_fifth.py``
exports (``input_names``/``output_names``, a dynamic batch axis, TorchScript at opset 17 and the
dynamo exporter, from a batch-2 example). The models: a WaveNet (causal ``Conv1d`` padded on both
sides then cropped by ``x[:, :, :-pad]`` as locuslab's ``Chomp1d``, ``torch.chunk`` into
``tanh(f) * sigmoid(g)``, summed skip outputs, ``AdaptiveAvgPool1d(1)`` + ``squeeze(-1)``); an
InceptionTime block (a 1x1 bottleneck, parallel k = 3/5/7 convs and a ``MaxPool1d(3, 1, 1)`` + 1x1
branch, ``torch.cat``, a 1x1 residual shortcut); ECA-Net's channel attention on a 2-D CNN (the pooled
vector ``squeeze(-1).transpose(-1, -2)`` through a ``Conv1d(1, 1, 3)`` across the channels, back by
``transpose`` + ``unsqueeze(-1)``, ``x * y.expand_as(x)``); ShuffleNet's channel shuffle on a
grouped ``Conv1d`` net (``view(b, g, c // g, l).transpose(1, 2).contiguous().view(b, c, l)``); a
Conformer block (macaron ``x + 0.5 * ff(x)`` with SiLU, ``nn.MultiheadAttention(batch_first=True)``,
the convolution module: LayerNorm, ``transpose(1, 2)``, pointwise ``Conv1d`` to 2E, ``F.glu``,
depthwise ``Conv1d``, ``BatchNorm1d``, SiLU, pointwise, transpose back); attention pooling by a
learned query (``nn.MultiheadAttention(batch_first=False)`` with ``query.expand(-1, N, -1)``,
``GELU(approximate='tanh')``); attention by hand with ``x @ self.Wq.T`` Parameters, a class token by
``self.cls.repeat(N, 1, 1)``, ``torch.bmm``; flat features into ``x.unsqueeze(1)`` ``Conv1d``s and a
gated head (``chunk(2, dim=-1)``, ``a * F.hardsigmoid(b)``); a 1-D autoencoder (strided ``Conv1d``,
``ConvTranspose1d(k=3, s=2, p=1, output_padding=1)``, an additive skip,
``F.interpolate(mode='linear')``); and a frequency-only U-Net on (N, 1, 8, 8)
(``MaxPool2d((2, 1))``, ``nn.Upsample(scale_factor=(2, 1))``, ``ConvTranspose2d((2, 1), (2, 1))``,
additive skips). Trained a few epochs on scikit-learn's bundled digits (CPU, one thread)::

    python scripts/variant_sixth.py export --out /tmp/hfam7
    python scripts/variant_sixth.py deploy --out /tmp/hfam7
    python scripts/variant_sixth.py status --out /tmp/hfam7
    python scripts/variant_sixth.py table --out /tmp/hfam7
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import variant_family as vf  # noqa: E402
import variant_fifth as v5  # noqa: E402
import variant_fourth as v4  # noqa: E402

FORMATS = vf.FORMATS
TWO_WAYS = vf.TWO_WAYS


def _models(torch, nn):
    """name -> (module, layout, task, epochs); layouts as ``variant_fifth`` (``seq64`` is (N, 1, 64))."""
    F = nn.functional

    # --- WaveNet: Chomp1d causal convs, chunk into tanh * sigmoid, summed skips
    class Chomp1d(nn.Module):
        def __init__(self, chomp):
            super().__init__()
            self.chomp = chomp

        def forward(self, x):
            return x[:, :, :-self.chomp].contiguous()

    class WaveBlock(nn.Module):
        def __init__(self, c, d):
            super().__init__()
            self.conv = nn.Conv1d(c, 2 * c, 2, padding=d, dilation=d)
            self.chomp = Chomp1d(d)
            self.res, self.skip = nn.Conv1d(c, c, 1), nn.Conv1d(c, c, 1)

        def forward(self, x):
            f, g = torch.chunk(self.chomp(self.conv(x)), 2, dim=1)
            z = torch.tanh(f) * torch.sigmoid(g)
            return x + self.res(z), self.skip(z)

    class WaveNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(8, 12, 1)
            self.blocks = nn.ModuleList(WaveBlock(12, d) for d in (1, 2, 4))
            self.post = nn.Conv1d(12, 16, 1)
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.inp(x)
            skips = 0
            for b in self.blocks:
                x, s = b(x)
                skips = skips + s
            h = F.relu(self.post(F.relu(skips)))
            return self.fc(self.pool(h).squeeze(-1))

    # --- InceptionTime: bottleneck, k = 3/5/7 branches and a max-pool branch, concatenated, residual
    class Inception(nn.Module):
        def __init__(self, c, nf=6, b=8):
            super().__init__()
            self.bottleneck = nn.Conv1d(c, b, 1, bias=False)
            self.convs = nn.ModuleList(nn.Conv1d(b, nf, k, padding=k // 2, bias=False) for k in (3, 5, 7))
            self.mp = nn.MaxPool1d(3, stride=1, padding=1)
            self.mpconv = nn.Conv1d(c, nf, 1, bias=False)
            self.bn = nn.BatchNorm1d(4 * nf)

        def forward(self, x):
            b = self.bottleneck(x)
            h = torch.cat([conv(b) for conv in self.convs] + [self.mpconv(self.mp(x))], dim=1)
            return F.relu(self.bn(h))

    class InceptionTime(nn.Module):
        def __init__(self):
            super().__init__()
            self.i1, self.i2 = Inception(8), Inception(24)
            self.shortcut = nn.Sequential(nn.Conv1d(8, 24, 1, bias=False), nn.BatchNorm1d(24))
            self.gap = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            h = F.relu(self.i2(self.i1(x)) + self.shortcut(x))
            return self.fc(nn.Flatten(1)(self.gap(h)))

    # --- ECA-Net channel attention: a Conv1d across the pooled channels
    class Eca(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
            self.conv = nn.Conv1d(1, 1, kernel_size=k, padding=(k - 1) // 2, bias=False)
            self.sigmoid = nn.Sigmoid()

        def forward(self, x):
            y = self.avg_pool(x)
            y = self.conv(y.squeeze(-1).transpose(-1, -2)).transpose(-1, -2).unsqueeze(-1)
            return x * self.sigmoid(y).expand_as(x)

    class EcaNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.eca1 = Eca()
            self.c2 = nn.Sequential(nn.Conv2d(16, 24, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(24),
                                    nn.ReLU())
            self.eca2 = Eca()
            self.fc = nn.Linear(24 * 4 * 4, 10)

        def forward(self, x):
            x = self.eca2(self.c2(self.eca1(self.c1(x))))
            return self.fc(x.view(x.size(0), -1))

    # --- ShuffleNet's channel shuffle between grouped Conv1d
    def channel_shuffle(x, groups):
        b, c, length = x.size()
        x = x.view(b, groups, c // groups, length)
        return torch.transpose(x, 1, 2).contiguous().view(b, c, length)

    class ShuffleTc(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 3, padding=1)
            self.g1 = nn.Sequential(nn.Conv1d(16, 16, 3, padding=1, groups=4, bias=False), nn.BatchNorm1d(16))
            self.g2 = nn.Sequential(nn.Conv1d(16, 24, 3, stride=2, padding=1, groups=4, bias=False),
                                    nn.BatchNorm1d(24))
            self.fc = nn.Linear(24 * 4, 10)

        def forward(self, x):
            x = F.relu(self.c1(x))
            x = F.relu(x + self.g1(channel_shuffle(x, 4)))
            x = F.relu(self.g2(channel_shuffle(x, 4)))
            return self.fc(torch.flatten(x, 1))

    # --- a Conformer block on (N, T, F) tokens
    class ConvModule(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.dw = nn.Conv1d(d, d, 3, padding=1, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)

        def forward(self, x):
            h = self.ln(x).transpose(1, 2)
            h = F.glu(self.pw1(h), dim=1)
            h = self.pw2(F.silu(self.bn(self.dw(h))))
            return h.transpose(1, 2)

    class Conformer(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.inp = nn.Linear(8, d)
            self.ff1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
            self.ln_att = nn.LayerNorm(d)
            self.att = nn.MultiheadAttention(d, 2, batch_first=True)
            self.conv = ConvModule(d)
            self.ff2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
            self.ln_out = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 10)

        def forward(self, x):
            x = self.inp(x)
            x = x + 0.5 * self.ff1(x)
            h = self.ln_att(x)
            x = x + self.att(h, h, h, need_weights=False)[0]
            x = x + self.conv(x)
            x = self.ln_out(x + 0.5 * self.ff2(x))
            return self.fc(x.mean(dim=1))

    # --- attention pooling by a learned query (PMA), nn.MultiheadAttention with (T, N, E)
    class QueryPool(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.embed = nn.Sequential(nn.Linear(8, d), nn.GELU(approximate="tanh"), nn.Linear(d, d))
            self.query = nn.Parameter(torch.randn(1, 1, d) * 0.1)
            self.mha = nn.MultiheadAttention(d, 4)
            self.fc = nn.Linear(d, 10)

        def forward(self, x):
            h = self.embed(x).transpose(0, 1)                      # (T, N, E)
            q = self.query.expand(-1, h.size(1), -1)                 # (1, N, E)
            out, _ = self.mha(q, h, h)
            return self.fc(out.squeeze(0))

    # --- attention by hand: x @ W.T Parameters, class token by repeat, torch.bmm
    class BmmCls(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.emb = nn.Linear(8, d)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, 9, d) * 0.02)
            self.Wq, self.Wk, self.Wv = (nn.Parameter(torch.randn(d, d) / d ** 0.5) for _ in range(3))
            self.norm = nn.LayerNorm(d)
            self.fc = nn.Linear(d, 10)
            self.scale = d ** -0.5

        def forward(self, x):
            h = self.emb(x)
            h = torch.cat((self.cls.repeat(x.size(0), 1, 1), h), dim=1) + self.pos
            q, k, v = h @ self.Wq.T, h @ self.Wk.T, h @ self.Wv.T
            a = torch.softmax(torch.bmm(q, k.permute(0, 2, 1)) * self.scale, dim=-1)
            h = self.norm(h + torch.bmm(a, v))
            return self.fc(h[:, 0, :])

    # --- flat features into Conv1d by unsqueeze(1), a gated head
    class FlatConvGate(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(1, 8, 5, stride=2, padding=2), nn.ReLU(),
                                      nn.Conv1d(8, 8, 3, stride=2, padding=1), nn.ReLU())
            self.fc1 = nn.Linear(128, 64)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            h = self.conv(x.unsqueeze(1)).flatten(1)
            a, b = self.fc1(h).chunk(2, dim=-1)
            return self.fc2(a * F.hardsigmoid(b))

    # --- a 1-D autoencoder on (N, 1, 64): strided convs, ConvTranspose1d(output_padding=1), linear up
    class Ae1dLin(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1 = nn.Conv1d(1, 8, 5, stride=2, padding=2)          # 32
            self.e2 = nn.Conv1d(8, 16, 3, stride=2, padding=1)         # 16
            self.d2 = nn.ConvTranspose1d(16, 8, 3, stride=2, padding=1, output_padding=1)   # 32
            self.out = nn.Conv1d(8, 1, 3, padding=1)

        def forward(self, x):
            a = F.relu(self.e1(x))
            h = F.relu(self.d2(F.relu(self.e2(a))) + a)
            return self.out(F.interpolate(h, scale_factor=2, mode="linear", align_corners=False))

    # --- a frequency-only U-Net on (N, 1, 8, 8): pool and upsample along H alone
    class FreqUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1 = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.e2 = nn.Sequential(nn.MaxPool2d((2, 1)), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.e3 = nn.Sequential(nn.MaxPool2d((2, 1)), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
            self.up3 = nn.ConvTranspose2d(16, 16, kernel_size=(2, 1), stride=(2, 1))
            self.up2 = nn.Sequential(nn.Upsample(scale_factor=(2, 1)), nn.Conv2d(16, 8, 1))
            self.out = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(a)
            c = self.e3(b)
            d = F.relu(self.up3(c) + b)
            e = F.relu(self.up2(d) + a)
            return self.out(e)

    return {
        "k_wavenet": (WaveNet(), "ncl", "classification", 25),
        "k_inception": (InceptionTime(), "ncl", "classification", 25),
        "k_eca": (EcaNet(), "nchw", "classification", 20),
        "k_shuffle": (ShuffleTc(), "ncl", "classification", 25),
        "k_conformer": (Conformer(), "ntf", "classification", 30),
        "k_query_pool": (QueryPool(), "ntf", "classification", 30),
        "k_bmm_cls": (BmmCls(), "ntf", "classification", 30),
        "k_flat_conv": (FlatConvGate(), "flat", "classification", 30),
        "k_ae_lin": (Ae1dLin(), "seq64", "dense", 30),
        "k_unet_freq": (FreqUNet(), "nchw", "dense", 30),
    }


#: the seed each builder's model is built from (``build``); training draws from its own seed too
#: (``export_torch_models.train``/``_train_ae`` reseed), so such a model's weights are its own
BUILD_SEED = 0


def build(torch, builder):
    """``builder()`` from seed ``BUILD_SEED``: the model's initial weights whatever was drawn before."""
    torch.manual_seed(BUILD_SEED)
    return builder()


def export(out, only=None, models=None):
    """Train and export each model of ``models(torch, nn)`` (default: this family's) both ways.

    A ``classification`` model is trained as a classifier, a ``dense`` one as an autoencoder, any
    other task (``tokens``) is exported untrained. A model given as a builder (a class or function
    of no arguments, ``variant_seventh``'s table) is built here from its own seed (:func:`build`),
    so its weights do not depend on which models the table builds before it or on ``only``; a
    model given built (this family's table) was drawn from the one stream seeded before the table.
    """
    import onnxruntime as ort
    import torch
    from torch import nn
    from export_torch_models import _ort_outputs, _train_ae, train
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    v4._seq64(out)
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
    manifest["torch"] = torch.__version__
    torch.manual_seed(0)
    for name, (model, layout, task, epochs) in (models or _models)(torch, nn).items():
        if only and name not in only:
            continue
        if not isinstance(model, nn.Module):
            model = build(torch, model)
        t0 = time.time()
        ds = v5._data(out, layout)
        x_train = ds.x_train.astype(np.float32)
        if task == "classification":
            model = train(torch, model, x_train, ds.y_train, epochs=epochs)
        elif task == "dense":
            model = _train_ae(torch, model, x_train, epochs=epochs)
        model.eval()
        example = torch.from_numpy(ds.x_test[:2].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            key = f"{name}_{variant}"
            path = out / f"{key}.onnx"
            entry = {"layout": layout, "task": task, "export": dict(kwargs, dynamic_batch=True),
                     "input_shape": list(ds.x_test.shape[1:])}
            try:
                entry["files"] = v5._export(torch, model, example, path, kwargs)
            except Exception as exc:     # noqa: BLE001 - an exporter that fails is recorded
                entry.update(files=[], export_error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                manifest["models"][key] = entry
                print(f"{key:24s} export failed: {entry['export_error']}", flush=True)
                continue
            try:
                y = _ort_outputs(ort, path, ds.x_test)
            except Exception as exc:     # noqa: BLE001 - onnxruntime cannot run the file: onnx's evaluator
                entry["ort_error"] = vf._short(exc)[:300]
                y = v5._reference(path, ds.x_test)
            vf._fill_entry(entry, torch, model, path, ds, y)
            manifest["models"][key] = entry
            print(f"{key:24s} {entry.get('float_accuracy', '')!s:8.6s} {time.time() - t0:5.1f}s "
                  f"{' '.join(sorted(set(entry['ops'])))}", flush=True)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main(argv=None):
    return v5.run_steps(argv, __doc__, "/tmp/hfam7", export)


if __name__ == "__main__":
    sys.exit(main())
