"""Train a ResNet-8-shaped Brevitas model at W4A4 on digits32 and export it with ``export_qonnx``
(issue 82: the packed 4-bit network kernel): ``configs/models/resnet8_w4a4_digits32.onnx`` and its
``resnet8_w4a4_digits32.MANIFEST.json`` (versions, qonnx's accuracy on the 360 test images).

    pip install torch==2.13.0 brevitas==0.13.4 qonnx==1.0.0 onnxoptimizer==0.4.2 scikit-learn   # CPU wheel of torch
    python scripts/make_resnet8_w4a4.py [--epochs 30]

The shape is scripts/train_resnet8.py's (MLPerf Tiny's ResNet-8: stem 3->16, stages of 16, 32, 64
channels, stride-2 convs with 1x1 stride-2 shortcuts, residual Adds, global average pool, dense 64->10).
Every conv and the dense layer read unsigned 4-bit activations and have signed 4-bit power-of-two
weights (``Int8WeightPerTensorFixedPoint`` at 4 bits, ``Int32Bias``): the input's ``QuantIdentity``,
every ``QuantReLU`` (after a conv, after the first two stages' residual Adds, after the average
pool) is ``Uint8ActPerTensorFixedPoint`` at 4 bits (the last stage's ReLU'd sum goes into the pool
unquantized: the network kernel fuses the pool into that Add). A stage's second conv and its shortcut write 8-bit signed
activations (``Int8ActPerTensorFixedPoint``) into the Add; the classifier's output is 8-bit.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "configs" / "models"
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "scripts"))
from export_torch_models import train  # noqa: E402
from make_qonnx_models import qonnx_outputs  # noqa: E402

NAME = "resnet8_w4a4_digits32"


def resnet8(torch, bits=4):
    import brevitas.nn as qnn
    from brevitas.quant import Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint, Int32Bias, \
        Uint8ActPerTensorFixedPoint
    nn = torch.nn
    kw = dict(weight_quant=Int8WeightPerTensorFixedPoint, weight_bit_width=bits, bias_quant=Int32Bias,
              return_quant_tensor=True)

    def relu():
        return qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, bit_width=bits, max_val=4.0,
                             return_quant_tensor=True)

    def conv(c, z, k=3, s=1, out8=False):
        extra = dict(output_quant=Int8ActPerTensorFixedPoint) if out8 else {}
        return qnn.QuantConv2d(c, z, k, stride=s, padding=(k - 1) // 2, **kw, **extra)

    class Stage(nn.Module):
        def __init__(self, c, z, s, last=False):
            super().__init__()
            self.a, self.ra, self.b = conv(c, z, 3, s), relu(), conv(z, z, 3, 1, out8=True)
            self.sc = conv(c, z, 1, s, out8=True) if (c != z or s != 1) else None
            self.out = nn.ReLU() if last else relu()    # the last stage's sum goes into the pool unquantized

        def forward(self, x):
            y = self.b(self.ra(self.a(x)))
            r = self.sc(x) if self.sc is not None else x
            return self.out(getattr(y, "value", y) + getattr(r, "value", r))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = qnn.QuantIdentity(act_quant=Uint8ActPerTensorFixedPoint, bit_width=bits, max_val=1.0,
                                         return_quant_tensor=True)
            self.stem, self.rs = conv(3, 16), relu()
            self.s1, self.s2, self.s3 = Stage(16, 16, 1), Stage(16, 32, 2), Stage(32, 64, 2, last=True)
            self.pool, self.rp, self.flat = nn.AdaptiveAvgPool2d(1), relu(), nn.Flatten()
            self.fc = qnn.QuantLinear(64, 10, output_quant=Int8ActPerTensorFixedPoint,
                                      **dict(kw, return_quant_tensor=False))

        def forward(self, x):
            x = self.s3(self.s2(self.s1(self.rs(self.stem(self.inp(x))))))
            x = self.pool(getattr(x, "value", x))
            return self.fc(self.flat(self.rp(x)))

    return Net()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import brevitas
    import onnx
    import qonnx
    from brevitas.export import export_qonnx
    from hlsnn.deploy import datasets

    torch.set_num_threads(1)
    ds = datasets.load("digits32", layout="nchw")
    x, y = ds.x_train.astype(np.float32), np.asarray(ds.y_train)
    xt, yt = ds.x_test.astype(np.float32), np.asarray(ds.y_test)
    model = train(torch, resnet8(torch), x, y, epochs=a.epochs)
    out = OUT / f"{NAME}.onnx"
    with torch.no_grad():
        export_qonnx(model, torch.from_numpy(x[:1]), str(out))
    data = Path(str(out) + ".data")
    if data.exists():                         # the dynamo exporter's external weights: one file
        onnx.save(onnx.load(str(out)), str(out))
        data.unlink()
    acc = float(np.mean(np.argmax(qonnx_outputs(out, xt), 1) == yt))
    manifest = {"torch": torch.__version__, "brevitas": brevitas.__version__,
                "qonnx": getattr(qonnx, "__version__", "1.0.0"), "script": "scripts/make_resnet8_w4a4.py",
                "epochs": a.epochs, "files": {out.name: {"weight_bits": 4, "act_bits": 4, "exporter": "dynamo",
                                                         "qonnx_accuracy": acc}}}
    (OUT / f"{NAME}.MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(out.name, acc, out.stat().st_size, flush=True)


if __name__ == "__main__":
    main()
