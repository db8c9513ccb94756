"""Export issue 52's attention models and patterns with PyTorch 2.13 (both exporters) into
tests/data/torch/beyond/, merged into its MANIFEST.json (the other entries are kept).

* ``mha_clf``: the digits as 8 tokens of 8 features (``layout: ntf``), a token-wise
  ``Linear(8, 16)`` plus a learned positional table, a residual ``nn.MultiheadAttention(16, 2)``,
  ``nn.LayerNorm``, the mean over the tokens, ``Linear(16, 10)``.
* ``encoder_clf``: the same embedding, one ``nn.TransformerEncoderLayer(16, 2, 32, dropout=0,
  activation="gelu")`` called with ``is_causal=False`` (without it torch 2.13's TorchScript
  exporter fails: ``p_encoder_ts17``), the mean over the tokens, ``Linear(16, 10)``.
* patterns ``p_mha_nomask`` / ``p_encoder_call``: the modules alone, untrained.

    python scripts/export_torch_attention.py
"""
import json
import sys

import numpy as np

from export_torch_models import BEYOND, TWO_WAYS, _export, export_entry, train


def _models(torch, nn):
    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 16)
            self.pos = nn.Parameter(0.1 * torch.randn(1, 8, 16))

        def forward(self, x):
            return self.lin(x) + self.pos

    class MhaClf(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.att, self.norm = Embed(), nn.MultiheadAttention(16, 2, batch_first=True), nn.LayerNorm(16)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            h = self.emb(x)
            h = self.norm(h + self.att(h, h, h, need_weights=False)[0])
            return self.head(h.mean(1))

    class EncClf(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = Embed()
            self.enc = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            return self.head(self.enc(self.emb(x), is_causal=False).mean(1))

    return {"mha_clf": MhaClf(), "encoder_clf": EncClf()}


def _patterns(nn):
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

        def forward(self, x):
            return self.e(x, is_causal=False)

    return {"p_encoder_call": (Enc(), (4, 8))}


def main():
    try:
        import torch
        from torch import nn
    except ImportError:
        print("this script needs PyTorch: pip install torch==2.13.0 onnxscript", file=sys.stderr)
        return 2
    import onnx
    import onnxruntime as ort
    from hlsnn.deploy import datasets
    manifest = json.loads((BEYOND / "MANIFEST.json").read_text())
    torch.manual_seed(0)
    ds = datasets.load("digits", layout="ntf")
    for name, model in _models(torch, nn).items():
        model = train(torch, model, ds.x_train.astype(np.float32), ds.y_train, epochs=40)
        model.eval()
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            path = BEYOND / f"{name}_{variant}.onnx"
            entry, _ = export_entry(torch, ort, model, example, path, kwargs, ds, "ntf")
            manifest["models"][f"{name}_{variant}"] = entry
            print(f"{name}_{variant:8s} {entry['float_accuracy']:.4f}  {' '.join(entry['ops'])}")
    for name, (model, shape) in _patterns(nn).items():
        model.eval()
        example = torch.randn(1, *shape)
        for variant, kwargs in TWO_WAYS.items():
            path = BEYOND / f"{name}_{variant}.onnx"
            entry = {"task": "pattern", "export": kwargs, "input_shape": list(shape),
                     "files": _export(torch, model, example, path, kwargs)}
            entry["ops"] = [n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node]
            manifest["models"][f"{name}_{variant}"] = entry
            print(f"{name}_{variant:8s} {' '.join(entry['ops'])}")
    (BEYOND / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
