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

Issue 32 adds two sets, each exported both ways users export (the default dynamo exporter and
``dynamo=False`` at opset 17), with ``--only patterns`` / ``--only tiny``:

* ``tests/data/torch/patterns/``: one tiny untrained module per import pattern
  (``AdaptiveAvgPool2d``, ``AdaptiveMaxPool2d``, ``ReLU6``, ``Hardswish``/``Hardsigmoid``/
  ``Sigmoid``, ``Linear`` without bias, ``Flatten``, depthwise with ReLU6, ``ZeroPad2d``,
  ``Upsample``, ``cat`` with ``*`` and ``/`` by constants), with the op types each export wrote.
* ``tests/data/torch/tiny/``: the model shapes of MLPerf Tiny at tiny widths, trained briefly:
  a DS-CNN (10x4 stride-2 stem, three depthwise-separable blocks), a MobileNetV1-like net with
  ReLU and with ReLU6, a ResNet-8 with BatchNorm (on ``digits32``, 3x32x32), and a fully
  connected autoencoder 64-32-8-32-64 (MSE on ``digits``).

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


def train(torch, model, x, y, *, epochs=60, seed=0):
    """Adam at 3e-3, batches of 64 in a seeded order, cross-entropy; the model in eval mode."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            out = model(xt[idx])                   # a Brevitas QuantTensor carries its .value
            torch.nn.functional.cross_entropy(getattr(out, "value", out), yt[idx]).backward()
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


#: the two ways users export (issue 32): today's default (dynamo, opset 18+, the batch fixed at 1,
#: weights in .onnx.data) and the TorchScript exporter at opset 17
TWO_WAYS = {"dynamo": dict(), "ts17": dict(dynamo=False, opset_version=17)}
PATTERNS = OUT / "patterns"
TINY = OUT / "tiny"


def _patterns(nn):
    """One tiny untrained module per pattern issue 32 names (and the other import rules), each
    between layers that run on an engine: (module, input shape without the batch)."""
    import torch

    class Cat(nn.Module):               # Concat on channels, Mul and Div by constants
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(1, 3, 1)

        def forward(self, x):
            return torch.cat([self.a(x), nn.functional.relu(self.b(x)) * 0.5], 1) / 4.0

    conv = (1, 8, 8)
    return {
        "adaptiveavgpool": (nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                          nn.Linear(4, 3)), conv),
        "adaptivemaxpool": (nn.Sequential(nn.Conv2d(1, 4, 3), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
                                          nn.Linear(4, 3)), conv),
        "relu6": (nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU6(), nn.Conv2d(4, 2, 3)), conv),
        "hardswish": (nn.Sequential(nn.Conv2d(1, 4, 3), nn.Hardswish(), nn.Conv2d(4, 4, 1), nn.Hardsigmoid(),
                                    nn.Conv2d(4, 2, 1), nn.Sigmoid()), conv),
        "linear_nobias": (nn.Sequential(nn.Flatten(), nn.Linear(64, 8, bias=False), nn.ReLU(),
                                        nn.Linear(8, 3, bias=False)), conv),
        "flatten": (nn.Sequential(nn.Conv2d(1, 2, 3, stride=2), nn.Flatten(), nn.Linear(18, 3)), conv),
        "depthwise_relu6": (nn.Sequential(nn.Conv2d(2, 4, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4),
                                          nn.BatchNorm2d(4), nn.ReLU6()), (2, 8, 8)),
        "zeropad": (nn.Sequential(nn.ZeroPad2d((1, 2, 0, 1)), nn.Conv2d(1, 2, 3)), conv),
        "upsample": (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Upsample(scale_factor=2), nn.Conv2d(2, 2, 3)), conv),
        "concat_scale": (Cat(), conv),
    }


def _residual_block(nn):
    """ResNet-8's residual stack (two 3x3 convs and a shortcut), a module-level class once made
    (``ResidualBlock``: torch.save pickles a model by its classes' names)."""
    global ResidualBlock
    if "ResidualBlock" not in globals():
        class ResidualBlock(nn.Module):
            def __init__(self, c, z, stride):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(c, z, 3, stride, 1, bias=False), nn.BatchNorm2d(z), nn.ReLU(),
                                          nn.Conv2d(z, z, 3, 1, 1, bias=False), nn.BatchNorm2d(z))
                self.short = (nn.Sequential(nn.Conv2d(c, z, 1, stride, bias=False), nn.BatchNorm2d(z))
                              if stride != 1 or c != z else nn.Identity())

            def forward(self, x):
                return nn.functional.relu(self.body(x) + self.short(x))
        ResidualBlock.__qualname__ = "ResidualBlock"
        globals()["ResidualBlock"] = ResidualBlock
    return globals()["ResidualBlock"]


def resnet8_of(nn, widths):
    """ResNet-8 (MLPerf Tiny's image-classification shape): a 3x3 stem to ``widths[0]`` channels,
    three residual stacks to ``widths[1:]`` (two 3x3 convs, the first of the second and third
    strided 2, a 1x1 strided shortcut where the shape changes), a global average pool and a dense
    classifier of ten. The tiny model is (8, 8, 16, 24); MLPerf's, and
    configs/models/resnet8_digits32's, (16, 16, 32, 64)."""
    Block = _residual_block(nn)
    w0, w1, w2, w3 = widths
    return nn.Sequential(nn.Conv2d(3, w0, 3, 1, 1, bias=False), nn.BatchNorm2d(w0), nn.ReLU(),
                         Block(w0, w1, 1), Block(w1, w2, 2), Block(w2, w3, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w3, 10))


def _tiny_models(nn):
    """The model shapes of issue 32 at tiny widths (a few thousand weights each):
    (module, data set, layout, task)."""
    def dw(c, z, stride, act):
        return [nn.Conv2d(c, c, 3, stride=stride, padding=1, groups=c, bias=False), nn.BatchNorm2d(c), act(),
                nn.Conv2d(c, z, 1, bias=False), nn.BatchNorm2d(z), act()]

    def mobilenet(act):
        return nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), act(),
                             *dw(8, 16, 1, act), *dw(16, 32, 2, act), *dw(32, 32, 1, act), *dw(32, 64, 2, act),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    dscnn = nn.Sequential(nn.Conv2d(3, 16, (10, 4), stride=2, padding=(4, 1)), nn.BatchNorm2d(16),
                          nn.ReLU(), *dw(16, 16, 1, nn.ReLU), *dw(16, 16, 1, nn.ReLU), *dw(16, 16, 1, nn.ReLU),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    resnet8 = resnet8_of(nn, (8, 8, 16, 24))
    autoencoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8), nn.ReLU(),
                                nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))
    return {"dscnn": (dscnn, "digits32", "nchw", "classification"),
            "mobilenet_relu": (mobilenet(nn.ReLU), "digits32", "nchw", "classification"),
            "mobilenet_relu6": (mobilenet(nn.ReLU6), "digits32", "nchw", "classification"),
            "resnet8": (resnet8, "digits32", "nchw", "classification"),
            "autoencoder": (autoencoder, "digits", "flat", "regression")}


def _train_ae(torch, model, x, *, epochs=150, seed=0, sigma=0.0):
    """The input as the target (mean squared error); with ``sigma`` > 0 denoising: Gaussian noise of
    that deviation on the inputs, the clean image as the target."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt = torch.from_numpy(x)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            clean = xt[idx]
            noisy = clean + sigma * torch.randn(clean.shape, generator=gen) if sigma else clean
            loss = torch.nn.functional.mse_loss(model(noisy), clean)
            loss.backward()
            opt.step()
    model.eval()
    return model


def _export(torch, model, example, path, kwargs):
    for old in path.parent.glob(path.name + "*"):
        old.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), str(path), **kwargs)
    return sorted(p.name for p in path.parent.glob(path.name + "*"))


def _ort_outputs(ort, path, x):
    sess = ort.InferenceSession(str(path))
    inp = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {inp: x[i:i + 1].astype(np.float32)})[0] for i in range(len(x))])


def export_entry(torch, ort, model, example, path, kwargs, ds, layout, task="classification"):
    """Export ``model`` to ``path`` one way (``kwargs``: TWO_WAYS' exporters) and return its MANIFEST
    entry: layout, task, exporter, files, shapes, ops, and for a classifier its float accuracy on
    ``ds``'s test split (onnxruntime's outputs)."""
    import onnx
    files = _export(torch, model, example, path, kwargs)
    g = onnx.load(str(path), load_external_data=False).graph
    y = _ort_outputs(ort, path, ds.x_test)
    entry = {"layout": layout, "task": task, "export": kwargs, "files": files,
             "input_shape": list(ds.x_test.shape[1:]), "output_shape": list(y.shape[1:]),
             "ops": [n.op_type for n in g.node]}
    if task == "classification":
        entry["float_accuracy"] = float(np.mean(np.argmax(y, axis=1) == ds.y_test))
    return entry, y


def export_patterns(torch, nn, ort):
    """tests/data/torch/patterns/: each pattern module exported both ways (untrained, seeded)."""
    import onnx
    PATTERNS.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": {}}
    torch.manual_seed(0)
    for name, (model, shape) in _patterns(nn).items():
        model.eval()
        for m in model.modules():                     # BatchNorm statistics that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                with torch.no_grad():
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
        example = torch.randn(1, *shape)
        for variant, kwargs in TWO_WAYS.items():
            files = _export(torch, model, example, PATTERNS / f"{name}_{variant}.onnx", kwargs)
            g = onnx.load(str(PATTERNS / f"{name}_{variant}.onnx"), load_external_data=False).graph
            manifest["models"][f"{name}_{variant}"] = {"export": kwargs, "files": files, "input_shape": list(shape),
                                                      "ops": [n.op_type for n in g.node]}
            print(f"{name}_{variant:8s} {' '.join(n.op_type for n in g.node)}")
    (PATTERNS / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def write_config(name, data, task):
    """The deployment config beside a tiny model: bfp8, two-hot and fixed8 (issue 32's "done when")."""
    extra = "task: regression\ntargets: inputs           # an autoencoder: its targets are its inputs\n" \
        if task == "regression" else "task: classification\n"
    (TINY / f"{name}.yaml").write_text(
        f"# written by scripts/export_torch_models.py --only tiny\nname: {name}\nmodel: {name}.onnx\n"
        f"data: {data}\n{extra}calibration: {{samples: 64}}\nformats:\n"
        "  bfp8:   {type: bfp, accel: bfp8_zcu104}\n"
        "  twohot: {type: twohot, accel: shift8_pynq-z2}\n"
        "  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")


def export_tiny(torch, nn, ort, datasets):
    """tests/data/torch/tiny/: the DS-CNN, MobileNet (ReLU and ReLU6), ResNet-8 and FC
    autoencoder shapes, trained briefly on the digits, exported both ways."""
    TINY.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": {}}
    torch.manual_seed(0)
    for name, (model, data, layout, task) in _tiny_models(nn).items():
        ds = datasets.load(data, layout=layout)
        x_train = ds.x_train.astype(np.float32)
        if task == "regression":
            model = _train_ae(torch, model, x_train)
        else:
            model = train(torch, model, x_train, ds.y_train, epochs=12)
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            path = TINY / f"{name}_{variant}.onnx"
            files = _export(torch, model, example, path, kwargs)
            y = _ort_outputs(ort, path, ds.x_test)
            entry = {"data": data, "layout": layout, "task": task, "export": kwargs, "files": files}
            if task == "regression":
                entry["float_mse_vs_input"] = float(np.mean((y - ds.x_test) ** 2))
            else:
                entry["float_accuracy"] = float(np.mean(np.argmax(y, axis=1) == ds.y_test))
            manifest["models"][f"{name}_{variant}"] = entry
            write_config(f"{name}_{variant}", data, task)
            print(f"{name}_{variant:8s} {entry.get('float_accuracy', entry.get('float_mse_vs_input')):.4f}  "
                  f"{' '.join(files)}")
    (TINY / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


BEYOND = OUT / "beyond"


def _beyond_models(nn):
    """Issue 52's family beyond 2-D CNNs, at tiny widths: (module, data set layout, task).

    * ``tokenwise``: a ``Linear`` on each token of an (N, 8, 8) input (8 tokens of 8 features),
      ReLU, another per token: the output is (N, 8, 4), untrained (its values are checked).
    * ``tokens_clf``: the flat digits reshaped inside the model to (N, 8, 8) (the issue's
      ``Reshape`` before a rank-3 ``MatMul``), two token-wise Linears, Flatten, Linear -> 10.
    * ``tcresnet``: a 1-D TC-ResNet on (N, 8, 8) (the image's rows as channels): Conv1d 3 taps,
      a residual block with a strided and a dilated Conv1d and a 1x1 shortcut, a grouped
      Conv1d, AdaptiveAvgPool1d(1), Linear -> 10.
    * ``kws1d``: Conv1d, MaxPool1d, a strided Conv1d with BatchNorm1d, AdaptiveAvgPool1d(1),
      Linear: a 1-D network every layer of which the network kernels run (no dilation).
    * ``unet_upsample`` / ``unet_convtranspose``: a one-level U-Net (Conv, MaxPool 2, Conv, up
      by ``nn.Upsample(scale_factor=2)`` and a Conv, or by ``ConvTranspose2d(16, 8, 2,
      stride=2)``, Concat with the skip, two Convs), trained to reconstruct the digits (MSE).
    * ``se_cnn``: a depthwise CNN with Hardswish and a squeeze-excite block (``x *
      sigmoid(...)``: a ``Mul`` of two computed tensors).
    """
    import torch

    class Tokens(nn.Module):
        def __init__(self, head):
            super().__init__()
            self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(32, 10)) if head else None

        def forward(self, x):
            y = self.b(torch.relu(self.a(x.reshape(x.shape[0], 8, 8))))
            return y if self.head is None else self.head(y)

    class TcBlock(nn.Module):
        def __init__(self, c, z):
            super().__init__()
            self.body = nn.Sequential(nn.Conv1d(c, z, 3, stride=2, padding=1, bias=False), nn.BatchNorm1d(z),
                                      nn.ReLU(), nn.Conv1d(z, z, 3, padding=2, dilation=2, bias=False),
                                      nn.BatchNorm1d(z))
            self.short = nn.Sequential(nn.Conv1d(c, z, 1, stride=2, bias=False), nn.BatchNorm1d(z))

        def forward(self, x):
            return torch.relu(self.body(x) + self.short(x))

    tcresnet = nn.Sequential(nn.Conv1d(8, 16, 3, padding=1, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                             TcBlock(16, 24), nn.Conv1d(24, 24, 3, padding=1, groups=4), nn.ReLU(),
                             nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(24, 10))
    class UNet(nn.Module):              # one level: encoder, a 2x down and up, a skip Concat
        def __init__(self, transposed):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
            self.mid = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
            self.up = (nn.ConvTranspose2d(16, 8, 2, stride=2) if transposed
                       else nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(16, 8, 3, padding=1)))
            self.dec = nn.Sequential(nn.Conv2d(16, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

        def forward(self, x):
            e = self.enc(x)
            return self.dec(torch.cat([torch.relu(self.up(self.mid(e))), e], 1))

    class SE(nn.Module):                # squeeze-excite: x * sigmoid(fc(relu(fc(mean(x)))))
        def __init__(self, c, r):
            super().__init__()
            self.fc = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, r, 1), nn.ReLU(), nn.Conv2d(r, c, 1),
                                    nn.Sigmoid())

        def forward(self, x):
            return x * self.fc(x)

    se_cnn = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Hardswish(),
                           nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.Hardswish(), SE(8, 4),
                           nn.Conv2d(8, 16, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    kws1d = nn.Sequential(nn.Conv1d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
                          nn.Conv1d(16, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 10))
    return {"tokenwise": (Tokens(False), "ntf", "tokens"),
            "kws1d": (kws1d, "ncl", "classification"),
            "unet_upsample": (UNet(False), "nchw", "regression"),
            "unet_convtranspose": (UNet(True), "nchw", "regression"),
            "se_cnn": (se_cnn, "nchw", "classification"),
            "tokens_clf": (Tokens(True), "flat", "classification"),
            "tcresnet": (tcresnet, "ncl", "classification")}


def _beyond_patterns(nn):
    """The modules whose ONNX patterns docs/deploy-beyond-cnn.md records (untrained, seeded):
    (module, input shape without the batch)."""
    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            return self.m(x, x, x, need_weights=False)[0]

    return {"p_conv1d": (nn.Conv1d(4, 4, 3, padding=1), (4, 8)),
            "p_convtranspose2d": (nn.ConvTranspose2d(4, 2, 2, stride=2), (4, 4, 4)),
            "p_upsample": (nn.Upsample(scale_factor=2), (2, 4, 4)),
            "p_layernorm": (nn.LayerNorm(8), (4, 8)),
            "p_gelu": (nn.GELU(), (4, 8)),
            "p_mha": (MHA(), (4, 8)),
            "p_encoder": (nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (4, 8))}


def export_beyond(torch, nn, ort, datasets):
    """tests/data/torch/beyond/: issue 52's models, trained briefly on the digits (the
    classifiers), exported both ways, with the op types each export wrote."""
    import onnx
    BEYOND.mkdir(parents=True, exist_ok=True)
    manifest = {"torch": torch.__version__, "models": {}}
    torch.manual_seed(0)
    for name, (model, layout, task) in _beyond_models(nn).items():
        ds = datasets.load("digits", layout=layout)
        if task == "classification":
            model = train(torch, model, ds.x_train.astype(np.float32), ds.y_train,
                           epochs=60 if name == "se_cnn" else 20)
        elif task == "regression":
            model = _train_ae(torch, model, ds.x_train.astype(np.float32), epochs=40)
        model.eval()
        example = torch.from_numpy(ds.x_test[:1].astype(np.float32))
        for variant, kwargs in TWO_WAYS.items():
            path = BEYOND / f"{name}_{variant}.onnx"
            entry, y = export_entry(torch, ort, model, example, path, kwargs, ds, layout, task)
            if task == "regression":
                entry["float_mse_vs_input"] = float(np.mean((y - ds.x_test) ** 2))
            manifest["models"][f"{name}_{variant}"] = entry
            print(f"{name}_{variant:8s} {entry.get('float_accuracy', '')}  {' '.join(entry['ops'])}")
    for name, (model, shape) in _beyond_patterns(nn).items():
        model.eval()
        example = torch.randn(1, *shape)
        for variant, kwargs in TWO_WAYS.items():
            path = BEYOND / f"{name}_{variant}.onnx"
            entry = {"task": "pattern", "export": kwargs, "input_shape": list(shape)}
            try:
                entry["files"] = _export(torch, model, example, path, kwargs)
            except Exception as exc:      # noqa: BLE001 - an exporter that fails is what we record
                entry.update(files=[], export_error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
                print(f"{name}_{variant:8s} export failed: {entry['export_error']}")
                manifest["models"][f"{name}_{variant}"] = entry
                continue
            entry["ops"] = [n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node]
            manifest["models"][f"{name}_{variant}"] = entry
            print(f"{name}_{variant:8s} {' '.join(entry['ops'])}")
    (BEYOND / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("classic", "patterns", "tiny", "beyond"), action="append",
                    help="export only these sets (default: all): classic = issue 16's files, patterns and "
                         "tiny = issue 32's, beyond = issue 52's")
    args = ap.parse_args(argv)
    sets = set(args.only or ("classic", "patterns", "tiny", "beyond"))
    try:
        import torch
        from torch import nn
    except ImportError:
        print("this script needs PyTorch: pip install torch==2.13.0 onnxscript", file=sys.stderr)
        return 2
    import onnxruntime as ort
    from hlsnn.deploy import datasets
    if "patterns" in sets:
        export_patterns(torch, nn, ort)
    if "tiny" in sets:
        export_tiny(torch, nn, ort, datasets)
    if "beyond" in sets:
        export_beyond(torch, nn, ort, datasets)
    if "classic" not in sets:
        return 0

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
        model = train(torch, model, x_train.reshape(len(x_train), -1) if layout == "flat" else x_train, ds.y_train)
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
