"""Train tiny float models on scikit-learn's digits, export them to ONNX with PyTorch and
quantize them with onnxruntime's static quantizer to QDQ (issue 50): the files under
``tests/data/qdq/`` that ``tests/deploy/test_qimport.py`` deploys.

    pip install torch==2.13.0 onnxruntime scikit-learn     # CPU wheel of torch
    python scripts/make_qdq_models.py                      # writes tests/data/qdq/*.onnx

Models (Adam, the split of ``hlsnn.deploy.datasets``; inputs in [0, 1]):

* ``mlp``: Flatten, Linear 64->64, ReLU, Linear 64->10.
* ``cnn``: Conv 1->8 3x3 pad 1, ReLU, MaxPool 2, Flatten (128), Linear 128->10.
* ``res``: Conv 1->8 3x3 pad 1, ReLU, Conv 8->8 3x3 pad 1, ReLU, Conv 8->8 3x3 pad 1, Add (the
  first conv's output), ReLU, MaxPool 2, Flatten (128), Linear 128->10.

Each is quantized by ``onnxruntime.quantization.quantize_static`` (``QuantFormat.QDQ``, 128
calibration images of the training split, MinMax) three ways:

* ``<m>_u8.onnx``: onnxruntime's defaults: uint8 activations with zero points, int8 weights,
  per tensor (non-power-of-two scales: the approximated path).
* ``<m>_pc.onnx``: int8 symmetric activations and weights, weights per output channel.
* ``<m>_pot.onnx``: int8 symmetric, per tensor, then **rewritten** (onnxruntime has no option
  for power-of-two scales): every activation scale ``s`` becomes ``2**ceil(log2 s)``; every
  weight is requantized from its float values at ``2**ceil(log2(max|w| / 127))`` and every
  int32 bias at the product of its input's and its weight's new scales. The rewrite uses
  ``onnx.numpy_helper`` only; the graph is onnxruntime's.

``MANIFEST.json`` records onnxruntime's accuracy of each file on the 360 test images.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "qdq"
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "scripts"))
from export_torch_models import train  # noqa: E402  (one training loop for the generators)


def _models(torch):
    nn = torch.nn

    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.c3 = nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), \
                nn.Conv2d(8, 8, 3, padding=1)
            self.head = nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10))

        def forward(self, x):
            a = torch.relu(self.c1(x))
            b = self.c3(torch.relu(self.c2(a)))
            return self.head(torch.relu(a + b))

    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(128, 10))
    return {"mlp": mlp, "cnn": cnn, "res": Res()}


def _pot_rewrite(path):
    """The int8 per-tensor QDQ file at ``path`` with power-of-two scales (module docstring)."""
    import onnx
    from onnx import numpy_helper as nh
    m = onnx.load(str(path))
    g = m.graph
    init = {t.name: t for t in g.initializer}
    arr = {k: nh.to_array(v) for k, v in init.items()}
    new = {}
    dq_of = {}
    for n in g.node:
        if n.op_type == "DequantizeLinear":
            dq_of[n.output[0]] = n
    # weights: DQ nodes whose input is an int8 initializer
    for n in g.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in arr or arr[n.input[0]].dtype != np.int8:
            continue
        q, s = arr[n.input[0]], arr[n.input[1]]
        w = q.astype(np.float64) * s.astype(np.float64)
        s2 = np.float32(2.0 ** np.ceil(np.log2(max(np.abs(w).max(), 1e-30) / 127)))
        new[n.input[0]] = np.clip(np.rint(w / s2), -128, 127).astype(np.int8)
        new[n.input[1]] = np.asarray(s2, np.float32)
    # activations: every other scale (Q nodes and non-weight DQ nodes)
    for n in g.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") and n.input[1] not in new \
                and not (n.input[0] in arr and arr[n.input[0]].dtype in (np.int8, np.int32)):
            s = arr[n.input[1]]
            new[n.input[1]] = np.asarray(np.float32(2.0 ** np.ceil(np.log2(float(s))))).reshape(s.shape)
    # int32 biases: scale = input scale * weight scale of the consuming Conv/Gemm
    for n in g.node:
        if n.op_type not in ("Conv", "Gemm") or len(n.input) < 3:
            continue
        xdq, wdq, bdq = (dq_of[i] for i in n.input[:3])
        bq, bs = arr[bdq.input[0]], arr[bdq.input[1]]
        b = bq.astype(np.float64) * bs.astype(np.float64)
        s2 = np.float32(new[xdq.input[1]] * new[wdq.input[1]])
        new[bdq.input[0]] = np.rint(b / float(s2)).astype(np.int32)
        new[bdq.input[1]] = np.asarray(s2, np.float32)
    for k, v in new.items():
        init[k].CopyFrom(nh.from_array(np.asarray(v).reshape(arr[k].shape).astype(arr[k].dtype), k))
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


def main():
    import torch
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from hlsnn.deploy import datasets

    ds = datasets.load("digits", layout="nchw")
    x, y = ds.x_train.astype(np.float32), np.asarray(ds.y_train)
    xt, yt = ds.x_test.astype(np.float32), np.asarray(ds.y_test)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "onnxruntime": ort.__version__, "files": {}}

    class Reader(CalibrationDataReader):
        def __init__(self, name):
            self.it = iter([{name: x[i:i + 16]} for i in range(0, 128, 16)])

        def get_next(self):
            return next(self.it, None)

    for name, model in _models(torch).items():
        train(torch, model, x, y, epochs=40)
        fp = OUT / f"{name}_float.tmp.onnx"
        torch.onnx.export(model, torch.from_numpy(x[:1]), str(fp), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
        variants = {
            "u8": dict(activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=False),
            "pc": dict(activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                       extra_options={"ActivationSymmetric": True, "WeightSymmetric": True}),
            "pot": dict(activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=False,
                        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True}),
        }
        for v, kw in variants.items():
            out = OUT / f"{name}_{v}.onnx"
            quantize_static(str(fp), str(out), Reader("x"), quant_format=QuantFormat.QDQ, **kw)
            if v == "pot":
                _pot_rewrite(out)
            sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            acc = float(np.mean(np.argmax(sess.run(None, {"x": xt})[0], 1) == yt))
            manifest["files"][out.name] = {"model": name, "variant": v, "onnxruntime_accuracy": acc}
            print(out.name, acc, out.stat().st_size)
        fp.unlink()
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
