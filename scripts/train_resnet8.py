#!/usr/bin/env python3
"""Train the ResNet-8-shaped example model on digits at 32x32x3 and export it to ONNX.

    python scripts/train_resnet8.py [--out configs/models] [--seed 0] [--epochs 12]   # needs ".[deploy]"
    python scripts/train_resnet8.py --holdout 400 --epochs 20   # resnet8_digits32_holdout.onnx (autotune's)

The network has the shape of MLPerf Tiny's image-classification ResNet-8 (without batch
normalization, which a model this small on this data does not need):

* ``stem``: Conv 3->16 3x3 pad 1, ReLU;
* stage 1: Conv 16->16 3x3, ReLU, Conv 16->16 3x3, Add (identity), ReLU;
* stage 2: Conv 16->32 3x3 stride 2, ReLU, Conv 32->32 3x3, Add (a 1x1 stride-2 Conv 16->32
  shortcut), ReLU;
* stage 3: the same with 32->64;
* GlobalAveragePool, Flatten, Gemm 64->10, Softmax.

All 3x3 convolutions pad 1 on every side; the stride-2 ones give 16x16 and 8x8 maps.

Data: ``hlsnn.deploy.datasets.load("digits32")`` (scikit-learn's bundled digits, every pixel
repeated 4x4, three tinted channels; the 1437/360 split of the digits examples). With
``--holdout N`` the last ``N`` training images are held out of training (a validation split the
network never saw: the deployment config's ``validation: N``, what ``hlsnn autotune`` chooses on)
and the file is ``resnet8_digits32_holdout.onnx``; without it every training image trains
``resnet8_digits32.onnx``. Training is
numpy only: mini-batch Adam on the softmax cross-entropy, He-initialised weights, zero
biases, deterministic for a seed. Convolutions are im2col matrix products
(``hlsnn.engines.convgeom.im2col``) and their gradients the matching col2im. The export is
opset 17 with float32 initializers, input ``input`` (N, 3, 32, 32) and output ``probs``; the
script prints the accuracy that onnx's ReferenceEvaluator computes from the file.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.engines.convgeom import ConvGeom, im2col  # noqa: E402

OPSET = 17
# name: (in, out, kernel, stride)
CONVS = {
    "stem": (3, 16, 3, 1),
    "s1a": (16, 16, 3, 1), "s1b": (16, 16, 3, 1),
    "s2a": (16, 32, 3, 2), "s2b": (32, 32, 3, 1), "s2s": (16, 32, 1, 2),
    "s3a": (32, 64, 3, 2), "s3b": (64, 64, 3, 1), "s3s": (32, 64, 1, 2),
}


def geom(name):
    _, _, k, s = CONVS[name]
    p = (k - 1) // 2
    return ConvGeom(k, k, s, s, (p, p, p, p))


def init(seed):
    rng = np.random.default_rng(seed)
    params = {}
    for name, (c, z, k, _) in CONVS.items():
        params[name + ".w"] = rng.normal(0, np.sqrt(2.0 / (c * k * k)), (z, c, k, k))
        params[name + ".b"] = np.zeros(z)
    params["fc.w"] = rng.normal(0, np.sqrt(1.0 / 64), (10, 64))
    params["fc.b"] = np.zeros(10)
    return params, rng


def conv_fwd(x, w, b, g):
    rows, (oh, ow) = im2col(x, g)
    y = rows @ w.reshape(w.shape[0], -1).T + b
    return y.reshape(x.shape[0], oh, ow, -1).transpose(0, 3, 1, 2), rows


def conv_bwd(dy, x_shape, w, rows, g):
    """Gradients of the input, weight and bias of ``conv_fwd``."""
    b_, c, h, wd = x_shape
    z = w.shape[0]
    oh, ow = dy.shape[2:]
    d2 = dy.transpose(0, 2, 3, 1).reshape(-1, z)
    dw = (d2.T @ rows).reshape(w.shape)
    db = d2.sum(axis=0)
    drows = (d2 @ w.reshape(z, -1)).reshape(b_, oh, ow, c, g.kh, g.kw)
    t, l, bo, r = g.pads
    dxp = np.zeros((b_, c, h + t + bo, wd + l + r))
    for i in range(g.kh):
        for j in range(g.kw):
            dxp[:, :, i:i + g.sh * (oh - 1) + 1:g.sh, j:j + g.sw * (ow - 1) + 1:g.sw] += \
                drows[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, t:t + h, l:l + wd], dw, db


BLOCKS = (("s1a", "s1b", None), ("s2a", "s2b", "s2s"), ("s3a", "s3b", "s3s"))


def forward(params, x, cache=None):
    """Class probabilities; with a ``cache`` dict, what :func:`backward` needs."""
    def conv(name, inp):
        y, rows = conv_fwd(inp, params[name + ".w"], params[name + ".b"], geom(name))
        if cache is not None:
            cache[name] = (inp.shape, rows)
        return y

    a = np.maximum(conv("stem", x), 0)
    if cache is not None:
        cache["stem.out"] = a
    for na, nb, ns in BLOCKS:
        ha = np.maximum(conv(na, a), 0)
        pre = conv(nb, ha) + (conv(ns, a) if ns else a)
        a = np.maximum(pre, 0)
        if cache is not None:
            cache[na + ".out"], cache[nb + ".pre"] = ha, pre
    pooled = a.mean(axis=(2, 3))
    logits = pooled @ params["fc.w"].T + params["fc.b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    if cache is not None:
        cache["pooled"], cache["hw"] = pooled, a.shape[2] * a.shape[3]
        cache["a.shape"] = a.shape
    return e / e.sum(axis=1, keepdims=True)


def backward(params, cache, probs, y):
    """Gradients of the mean cross-entropy over the batch."""
    grads = {}
    dlogits = probs.copy()
    dlogits[np.arange(len(y)), y] -= 1
    dlogits /= len(y)
    grads["fc.w"], grads["fc.b"] = dlogits.T @ cache["pooled"], dlogits.sum(axis=0)
    da = np.broadcast_to((dlogits @ params["fc.w"])[:, :, None, None] / cache["hw"], cache["a.shape"])

    def conv_back(name, dy):
        shape, rows = cache[name]
        dx, grads[name + ".w"], grads[name + ".b"] = conv_bwd(dy, shape, params[name + ".w"], rows, geom(name))
        return dx

    for na, nb, ns in reversed(BLOCKS):
        dpre = da * (cache[nb + ".pre"] > 0)
        dx = conv_back(na, conv_back(nb, dpre) * (cache[na + ".out"] > 0))
        da = dx + (conv_back(ns, dpre) if ns else dpre)
    conv_back("stem", da * (cache["stem.out"] > 0))
    return grads


def train(ds, seed, epochs, batch=64, lr=2e-3, verbose=False, holdout=0):
    """Adam on the training images but the last ``holdout``."""
    params, rng = init(seed)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    n_fit = len(ds.x_train) - int(holdout)
    x, y = ds.x_train[:n_fit].astype(np.float64), ds.y_train[:n_fit]
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            cache = {}
            probs = forward(params, x[idx], cache)
            grads = backward(params, cache, probs, y[idx])
            step += 1
            for k in params:                                # Adam
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                mh, vh = m[k] / (1 - 0.9 ** step), v[k] / (1 - 0.999 ** step)
                params[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
        if verbose:
            acc = np.mean(forward(params, ds.x_test.astype(np.float64)).argmax(1) == ds.y_test)
            print(f"  epoch {epoch + 1}: test accuracy {acc:.4f}", flush=True)
    return params


def export(params, path, opset=OPSET, name="resnet8_digits32"):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits, nodes = [], []

    def conv(name, inp, out):
        _, _, k, s = CONVS[name]
        p = (k - 1) // 2
        inits.append(numpy_helper.from_array(params[name + ".w"].astype(np.float32), name + ".w"))
        inits.append(numpy_helper.from_array(params[name + ".b"].astype(np.float32), name + ".b"))
        nodes.append(helper.make_node("Conv", [inp, name + ".w", name + ".b"], [out], name=name,
                                      kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p]))
        return out

    def relu(name, inp):
        nodes.append(helper.make_node("Relu", [inp], [name], name=name))
        return name

    a = relu("stem_relu", conv("stem", "input", "stem_out"))
    for i, (na, nb, ns) in enumerate(BLOCKS, start=1):
        ha = relu(f"{na}_relu", conv(na, a, f"{na}_out"))
        short = conv(ns, a, f"{ns}_out") if ns else a
        nodes.append(helper.make_node("Add", [conv(nb, ha, f"{nb}_out"), short], [f"add{i}"], name=f"add{i}"))
        a = relu(f"stage{i}_relu", f"add{i}")
    nodes.append(helper.make_node("GlobalAveragePool", [a], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    inits += [numpy_helper.from_array(params["fc.w"].astype(np.float32), "fc.w"),
              numpy_helper.from_array(params["fc.b"].astype(np.float32), "fc.b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1))
    graph = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="hlsnn")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "configs" / "models", help="output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial weights and batch order (default: 0)")
    ap.add_argument("--epochs", type=int, default=12, help="training epochs (default: %(default)s)")
    ap.add_argument("--holdout", type=int, default=0, help="hold the last N training images out of training "
                    "(written as resnet8_digits32_holdout.onnx; default: 0, every image, resnet8_digits32.onnx)")
    ap.add_argument("--verbose", action="store_true", help="print the test accuracy after every epoch")
    args = ap.parse_args(argv)
    from onnx.reference import ReferenceEvaluator
    ds = datasets.load("digits32")
    if not 0 <= args.holdout < len(ds.x_train):
        ap.error(f"--holdout {args.holdout}: 0..{len(ds.x_train) - 1} training images")
    n_fit = len(ds.x_train) - args.holdout
    print(f"digits32: {n_fit} train (+{args.holdout} held out) / {len(ds.x_test)} test images, seed {args.seed}")
    t = time.perf_counter()
    params = train(ds, args.seed, args.epochs, verbose=args.verbose, holdout=args.holdout)
    name = "resnet8_digits32_holdout" if args.holdout else "resnet8_digits32"
    path = args.out / f"{name}.onnx"
    args.out.mkdir(parents=True, exist_ok=True)
    export(params, path, name=name)
    ref = ReferenceEvaluator(str(path))
    splits = {"train": (ds.x_train[:n_fit], ds.y_train[:n_fit]), "held-out": (ds.x_train[n_fit:], ds.y_train[n_fit:]),
              "test": (ds.x_test, ds.y_test)}
    acc = {k: float(np.mean(ref.run(None, {"input": x})[0].argmax(1) == y)) for k, (x, y) in splits.items() if len(x)}
    print(f"{name}: trained in {time.perf_counter() - t:.0f} s; ONNX reference accuracy "
          + " ".join(f"{k} {a:.4f}" for k, a in acc.items()) + f" -> {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
