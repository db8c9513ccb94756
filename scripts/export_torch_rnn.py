"""Export issue 79's recurrent keyword spotters with PyTorch 2.13 (both exporters, opset 17)
into tests/data/torch/rnn/ with its MANIFEST.json (beside tests/data/torch/beyond/, whose tests
iterate over every model of theirs).

The digits as 8 steps of 8 features (``layout: ntf``), ``nn.GRU(8, 32, batch_first=True)`` /
``nn.LSTM(8, 32, batch_first=True)``, and ``Linear(32, 10)`` on the last step's hidden state:

* ``gru_kws`` / ``lstm_kws``: the classifier reads ``h_n[-1]`` (the node's ``Y_h``);
* ``gru_seq_kws``: it reads ``out[:, -1]`` (the node's whole sequence ``Y``, its last step taken).

    python scripts/export_torch_rnn.py
"""
import json
import sys

import numpy as np

from export_torch_models import OUT, export_entry, train

RNN = OUT / "rnn"

#: both exporters at opset 17 (issue 79)
TWO_WAYS_17 = {"dynamo": dict(dynamo=True, opset_version=17), "ts17": dict(dynamo=False, opset_version=17)}


def _models(nn):
    class Kws(nn.Module):
        def __init__(self, cell, last_of_sequence=False):
            super().__init__()
            self.rnn = cell(8, 32, batch_first=True)
            self.head = nn.Linear(32, 10)
            self.seq = last_of_sequence

        def forward(self, x):
            out, state = self.rnn(x)
            h = out[:, -1] if self.seq else (state[0] if isinstance(state, tuple) else state)[-1]
            return self.head(h)

    return {"gru_kws": Kws(nn.GRU), "lstm_kws": Kws(nn.LSTM), "gru_seq_kws": Kws(nn.GRU, True)}


def main():
    try:
        import torch
        from torch import nn
    except ImportError:
        print("this script needs PyTorch: pip install torch==2.13.0 onnxscript", file=sys.stderr)
        return 2
    import onnxruntime as ort
    from hlsnn.deploy import datasets
    RNN.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": {}}
    torch.manual_seed(0)
    ds = datasets.load("digits", layout="ntf")
    for name, model in _models(nn).items():
        model = train(torch, model, ds.x_train.astype(np.float32), ds.y_train, epochs=40)
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in TWO_WAYS_17.items():
            path = RNN / f"{name}_{variant}.onnx"
            entry, _ = export_entry(torch, ort, model, example, path, kwargs, ds, "ntf")
            manifest["models"][f"{name}_{variant}"] = entry
            print(f"{name}_{variant:8s} {entry['float_accuracy']:.4f}  {' '.join(entry['ops'])}")
    (RNN / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
