"""Train tiny Brevitas models on scikit-learn's digits (quantization-aware) and export them to
QONNX (issue 50): the files under ``tests/data/qonnx/`` that ``tests/deploy/test_qonnx_import.py``
deploys, with qonnx's own executor as the reference.

    pip install torch==2.13.0 brevitas==0.13.4 qonnx==1.0.0 onnxoptimizer==0.4.2 scikit-learn   # CPU wheel of torch
    python scripts/make_qonnx_models.py                       # writes tests/data/qonnx/*.onnx
    python scripts/make_qonnx_models.py res_pot mlp_w4        # only these (the others' entries kept)
    python scripts/make_qonnx_models.py cnv_w4a4 cnv_w2a2 cnv_w1a1

Models (Adam, 15 epochs, the split of ``hlsnn.deploy.datasets``, inputs in [0, 1]; every quantized layer
returns a QuantTensor so that its int32 bias quantizer sees the input's scale):

* ``mlp``: QuantIdentity, Flatten, QuantLinear 64->64, QuantReLU, QuantLinear 64->10 (output
  quantized).
* ``cnn``: QuantIdentity, QuantConv 1->8 3x3 pad 1, QuantReLU, MaxPool 2, Flatten,
  QuantLinear 128->10 (output quantized).
* ``res``: QuantIdentity, QuantConv 1->8, QuantReLU, QuantConv 8->8, QuantReLU, QuantConv 8->8
  (output quantized), Add of the first ReLU's output, QuantReLU, MaxPool 2, Flatten,
  QuantLinear 128->10 (output quantized).

Variants: ``<m>_pot``: ``Int8WeightPerTensorFixedPoint`` weights, ``Int8ActPerTensorFixedPoint``
activations (power-of-two scales, 8 bits), ``Int32Bias``; ``mlp_w4``: the same with 4-bit weights;
``mlp_float``, ``res_float``: Brevitas' defaults (``Int8WeightPerTensorFloat``, ``Int8ActPerTensorFloat``:
scales that are not powers of two) with ``Int32Bias``; ``cnv_w4a4``, ``cnv_w2a2``, ``cnv_w1a1``: the
CNV-style network of :func:`_cnv` (issue 82: low-bit weights and activations; W1A1 binary weights and
sign activations, ``BipolarQuant``), each exported twice: with ``export_qonnx``'s default (dynamo) and, as
``cnv_*_ts.onnx``, with its TorchScript exporter (``dynamo=False``). ``MANIFEST.json`` records qonnx's accuracy
of each file (``qonnx.core.onnx_exec.execute_onnx``) on the 360 test images.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "qonnx"
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "scripts"))
from export_torch_models import train  # noqa: E402  (one training loop for the generators)


def _models(torch, pot, wbits=8):
    import brevitas.nn as qnn
    from brevitas.quant import (Int8ActPerTensorFixedPoint, Int8ActPerTensorFloat, Int8WeightPerTensorFixedPoint,
                                Int8WeightPerTensorFloat, Int32Bias)
    nn = torch.nn
    act = Int8ActPerTensorFixedPoint if pot else Int8ActPerTensorFloat
    wq = Int8WeightPerTensorFixedPoint if pot else Int8WeightPerTensorFloat
    kw = dict(weight_quant=wq, weight_bit_width=wbits, bias_quant=Int32Bias, return_quant_tensor=True)

    def ident():
        return qnn.QuantIdentity(act_quant=act, return_quant_tensor=True)

    def relu():
        return qnn.QuantReLU(act_quant=act, return_quant_tensor=True)

    class Res(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = ident()
            self.c1, self.r1 = qnn.QuantConv2d(1, 8, 3, padding=1, **kw), relu()
            self.c2, self.r2 = qnn.QuantConv2d(8, 8, 3, padding=1, **kw), relu()
            self.c3 = qnn.QuantConv2d(8, 8, 3, padding=1, output_quant=act, **kw)
            self.r3 = relu()
            self.pool, self.flat = nn.MaxPool2d(2), nn.Flatten()
            self.fc = qnn.QuantLinear(128, 10, output_quant=act, **dict(kw, return_quant_tensor=False))

        def forward(self, x):
            a = self.r1(self.c1(self.inp(x)))
            b = self.c3(self.r2(self.c2(a)))
            s = getattr(a, "value", a) + getattr(b, "value", b)    # (plain tensors while exporting)
            return self.fc(self.flat(self.pool(self.r3(s))))

    mlp = nn.Sequential(ident(), nn.Flatten(), qnn.QuantLinear(64, 64, **kw), relu(),
                        qnn.QuantLinear(64, 10, output_quant=act, **dict(kw, return_quant_tensor=False)))
    cnn = nn.Sequential(ident(), qnn.QuantConv2d(1, 8, 3, padding=1, **kw), relu(), nn.MaxPool2d(2), nn.Flatten(),
                        qnn.QuantLinear(128, 10, output_quant=act, **dict(kw, return_quant_tensor=False)))
    return {"mlp": mlp, "cnn": cnn, "res": Res()}


def _cnv(torch, wbits, abits):
    """A CNV-style network (FINN's CNV, shrunk to the 8x8 digits): 8-bit input, three 3x3 convs
    (16, 16, 32 channels) and a 64-wide dense layer, each followed by a ``abits``-bit activation,
    max pools after the second and third conv, an 8-bit output. ``abits`` 1: binary weights and
    sign activations (``SignedBinary*PerTensorConst``, the weights' constant scale 1/8: ``BipolarQuant``
    nodes); otherwise
    ``wbits``-bit power-of-two weights and ``abits``-bit unsigned ReLU activations
    (``Uint8ActPerTensorFixedPoint``)."""
    import brevitas.nn as qnn
    from brevitas.quant import (Int8ActPerTensorFixedPoint, Int8WeightPerTensorFixedPoint, Int32Bias,
                                SignedBinaryActPerTensorConst, SignedBinaryWeightPerTensorConst,
                                Uint8ActPerTensorFixedPoint)
    nn = torch.nn
    if abits == 1:
        # Brevitas' constant 0.1 is no power of two: +-1/8 instead (FINN's CNV-W1A1 has batch norms after)
        kw = dict(weight_quant=SignedBinaryWeightPerTensorConst.let(scaling_const=0.125), bias_quant=Int32Bias,
                  return_quant_tensor=True)

        def act():
            return qnn.QuantIdentity(act_quant=SignedBinaryActPerTensorConst, return_quant_tensor=True)
    else:
        kw = dict(weight_quant=Int8WeightPerTensorFixedPoint, weight_bit_width=wbits, bias_quant=Int32Bias,
                  return_quant_tensor=True)

        def act():
            return qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, bit_width=abits, return_quant_tensor=True)
    return nn.Sequential(
        qnn.QuantIdentity(act_quant=Int8ActPerTensorFixedPoint, return_quant_tensor=True),
        qnn.QuantConv2d(1, 16, 3, padding=1, **kw), act(),
        qnn.QuantConv2d(16, 16, 3, padding=1, **kw), act(), nn.MaxPool2d(2),
        qnn.QuantConv2d(16, 32, 3, padding=1, **kw), act(), nn.MaxPool2d(2), nn.Flatten(),
        qnn.QuantLinear(128, 64, **kw), act(),
        qnn.QuantLinear(64, 10, output_quant=Int8ActPerTensorFixedPoint, **dict(kw, return_quant_tensor=False)))


def qonnx_outputs(path, x):
    """qonnx's executor on the file, one image a call (the export fixes the batch at 1)."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes
    m = ModelWrapper(str(path)).transform(InferShapes())      # the TorchScript export declares no shapes
    inp, out = m.graph.input[0].name, m.graph.output[0].name
    return np.concatenate([execute_onnx(m, {inp: x[i:i + 1].astype(np.float32)})[out] for i in range(len(x))])


def main():
    warnings.filterwarnings("ignore")
    import torch
    import brevitas
    import qonnx
    from brevitas.export import export_qonnx
    from hlsnn.deploy import datasets

    ds = datasets.load("digits", layout="nchw")
    x, y = ds.x_train.astype(np.float32), np.asarray(ds.y_train)
    xt, yt = ds.x_test.astype(np.float32), np.asarray(ds.y_test)
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "brevitas": brevitas.__version__,
                "qonnx": getattr(qonnx, "__version__", "1.0.0"), "files": {}}
    only = set(sys.argv[1:])          # e.g. res_pot mlp_w4: remake these, keep the others' entries
    if only and (OUT / "MANIFEST.json").exists():
        manifest["files"] = json.loads((OUT / "MANIFEST.json").read_text())["files"]
    todo = [(m, "pot", True, 8) for m in ("mlp", "cnn", "res")] + [("mlp", "w4", True, 4)] + \
        [(m, "float", False, 8) for m in ("mlp", "res")] + [("cnv", f"w{b}a{b}", True, b) for b in (4, 2, 1)]
    for name, variant, pot, wbits in todo:
        if only and f"{name}_{variant}" not in only:
            continue
        model = _cnv(torch, wbits, wbits) if name == "cnv" else _models(torch, pot, wbits)[name]
        train(torch, model, x, y, epochs=15)
        # the cnv files also with Brevitas' other exporter (TorchScript, dynamo=False): the same trained model
        for suffix, how in [("", {})] + ([("_ts", {"dynamo": False})] if name == "cnv" else []):
            out = OUT / f"{name}_{variant}{suffix}.onnx"
            with torch.no_grad():
                export_qonnx(model, torch.from_numpy(x[:1]), str(out), **how)
            data = Path(str(out) + ".data")
            if data.exists():                         # the dynamo exporter's external weights: one file
                import onnx
                onnx.save(onnx.load(str(out)), str(out))
                data.unlink()
            acc = float(np.mean(np.argmax(qonnx_outputs(out, xt), 1) == yt))
            manifest["files"][out.name] = {"model": name, "variant": variant, "weight_bits": wbits,
                                           "qonnx_accuracy": acc,
                                           **({"act_bits": wbits, "exporter": "torchscript" if suffix else "dynamo"}
                                              if name == "cnv" else {})}
            print(out.name, acc, out.stat().st_size, flush=True)
            (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
