"""Train small PyTorch classifiers of the bundled digits and export them as a PyTorch user would.

Issue 16's "done when": a model exported by ``torch.onnx.export`` deploys without edits or
``--host-fallback``, with the default exporter (dynamo) and with ``dynamo=False`` at opsets 13
and 17, with and without constant folding. This script makes those files; it needs PyTorch
(and onnxscript for the dynamo exporter), which hlsnn does not depend on, so the files are
committed under ``tests/data/torch/`` and the tests deploy them without PyTorch:

    pip install torch==2.13.0 onnxscript scikit-learn
    python scripts/export_torch_models.py            # writes tests/data/torch/*.onnx

Models (trained with Adam on scikit-learn's digits, the split of ``hlsnn.deploy.datasets``):

* ``mlp``: Linear 64->128, ReLU, Linear 128->10 (a 128-wide K, as in the issue).
* ``lenet``: Conv 1->8 3x3 pad 1, BatchNorm, ReLU, MaxPool 2, Flatten (128), Linear 128->64,
  ReLU, Linear 64->10: the flatten the default exporter writes as ``Reshape`` to ``[1, 128]``.
* ``strided``: Conv 1->8 3x3 pad 1, ReLU, Conv 8->16 3x3 stride 2 pad 1, BatchNorm, ReLU,
  Flatten (256), Linear 256->10.

Each is exported with a batch-1 example input and no ``dynamic_axes``, the way the PyTorch
tutorials do it, so the batch is fixed at 1 in every file. The outputs are logits. The float
accuracy of each model on the test split (onnxruntime) goes into ``tests/data/torch/MANIFEST.json``
with the exporter settings and the torch version, so a test can check the deployed accuracy
against it.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "torch"


def _models(nn):
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    lenet = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    strided = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                            nn.Flatten(), nn.Linear(256, 10))
    return {"mlp": (mlp, "flat"), "lenet": (lenet, "nchw"), "strided": (strided, "nchw")}


def _train(torch, model, x, y, *, epochs=60, seed=0):
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    return model


def _sklearn(ort, datasets):
    """skl2onnx's MLPClassifier export, with its defaults (two outputs: ``label`` and the
    probabilities as a ZipMap sequence of maps) and with ``zipmap=False`` (a float tensor)."""
    try:
        import skl2onnx
        from skl2onnx.common.data_types import FloatTensorType
        from sklearn.neural_network import MLPClassifier
    except ImportError:
        print("skl2onnx is not installed: the scikit-learn MLP is not exported", file=sys.stderr)
        return {}
    ds = datasets.load("digits", layout="flat")
    clf = MLPClassifier(hidden_layer_sizes=(32,), max_iter=600, random_state=0).fit(ds.x_train, ds.y_train)
    out = {}
    for variant, options in {"zipmap": None, "nozipmap": {"zipmap": False}}.items():
        path = OUT / f"skl_mlp_{variant}.onnx"
        onx = skl2onnx.convert_sklearn(clf, initial_types=[("input", FloatTensorType([None, 64]))],
                                       options={id(clf): options} if options else None, target_opset=17)
        path.write_bytes(onx.SerializeToString())
        sess = ort.InferenceSession(str(path))
        label = sess.run([sess.get_outputs()[0].name], {"input": ds.x_test.astype(np.float32)})[0]
        acc = float(np.mean(label == ds.y_test))
        out[f"skl_mlp_{variant}"] = {"layout": "flat", "export": {"skl2onnx": skl2onnx.__version__,
                                                                  "options": options or {}},
                                     "files": [path.name], "outputs": [o.name for o in sess.get_outputs()],
                                     "float_accuracy": acc}
        print(f"skl_mlp_{variant:8s} {acc:.4f}  {path.name}  outputs {[o.name for o in sess.get_outputs()]}")
    return out


def main() -> int:
    try:
        import torch
        from torch import nn
    except ImportError:
        print("this script needs PyTorch: pip install torch==2.13.0 onnxscript", file=sys.stderr)
        return 2
    import onnxruntime as ort
    from hlsnn.deploy import datasets

    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": {}}
    variants = {
        "dynamo": dict(),                                                     # today's default
        "ts13": dict(dynamo=False, opset_version=13),
        "ts13_nofold": dict(dynamo=False, opset_version=13, do_constant_folding=False),
        "ts17": dict(dynamo=False, opset_version=17),
        "ts17_nofold": dict(dynamo=False, opset_version=17, do_constant_folding=False),
    }
    torch.manual_seed(0)                       # the initial weights, so that a rerun writes the same models
    for name, (model, layout) in _models(nn).items():
        ds = datasets.load("digits", layout="nchw" if layout == "nchw" else "flat")
        x_train = ds.x_train.astype(np.float32)
        model = _train(torch, model, x_train.reshape(len(x_train), -1) if layout == "flat" else x_train, ds.y_train)
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in variants.items():
            path = OUT / f"{name}_{variant}.onnx"
            for old in OUT.glob(f"{name}_{variant}.onnx*"):
                old.unlink()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (example,), str(path), **kwargs)
            sess = ort.InferenceSession(str(path))
            inp = sess.get_inputs()[0].name
            logits = np.concatenate([sess.run(None, {inp: ds.x_test[i:i + 1].astype(np.float32)})[0]
                                     for i in range(len(ds.x_test))])
            acc = float(np.mean(np.argmax(logits, axis=1) == ds.y_test))
            files = sorted(p.name for p in OUT.glob(f"{name}_{variant}.onnx*"))
            manifest["models"][f"{name}_{variant}"] = {"layout": layout, "export": {k: v for k, v in kwargs.items()},
                                                      "files": files, "float_accuracy": acc}
            print(f"{name}_{variant:12s} {acc:.4f}  {' '.join(files)}")
    manifest["models"].update(_sklearn(ort, datasets))
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
