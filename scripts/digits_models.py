"""Numpy-only training and ONNX export of the shipped digits example models (issue 6); an example,
not part of the hlsnn package (``scripts/train_digits.py`` runs it).

Two small classifiers of scikit-learn's bundled 8 x 8 digits (:func:`hlsnn.deploy.datasets.load`):

* MLP, input (N, 64): ``fc1`` Gemm 64->32, ``relu1``, ``fc2`` Gemm 32->10, ``softmax``.
* CNN, input (N, 1, 8, 8): ``conv1`` Conv 1->8 3x3 pad 1, ``bn1``, ``relu1``, ``pool1`` MaxPool
  2x2/2, ``conv2`` Conv 8->16 3x3 pad 1, ``bn2``, ``relu2``, ``pool2``, ``flatten``,
  ``fc`` Gemm 64->10, ``softmax``.

Training is mini-batch Adam on the softmax cross-entropy, He-initialised, deterministic for a
seed (one ``numpy.random.default_rng(seed)`` draws the initial weights and the batch order).
Convolutions are im2col matrix products.

Batch normalization is trained as such: in training each BN normalizes with the statistics of
the mini-batch, and gamma and beta are learned. After training the inference mean and
variance are set to the exact per-channel statistics of the conv outputs over the whole
training set (bn1 first, then bn2 with bn1 fixed), so the exported model is a plain
inference-mode graph whose every parameter is real. The conv biases are drawn at
initialization and not trained (a bias in front of a BN has no effect on the loss); they are
exported, and absorbed by the BN means, so the ONNX Conv nodes carry a non-zero B input.

The exported graphs use opset 15, float32 initializers, input ``input``, output ``probs`` and
a symbolic batch dimension ``N``; :meth:`Mlp.predict_proba` and :meth:`Cnn.predict_proba` are
the numpy forward passes they compute. From opset 14 on the stock ``ReferenceEvaluator`` is
right; :func:`hlsnn.deploy.importer.reference.reference_evaluator` also evaluates older models (onnx's
reference BatchNormalization of opsets 9-13 is wrong in inference mode, see there).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict

import numpy as np

from hlsnn.deploy.importer.reference import reference_evaluator, reference_probs  # noqa: F401 (re-exported)

OPSET = 15
IR_VERSION = 8            # the IR version of opset 15 (ONNX 1.10)
BN_EPS = 1e-5
INPUT_NAME, OUTPUT_NAME = "input", "probs"


# --------------------------------------------------------------------------------------------
# numpy building blocks

def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def accuracy(probs: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(probs, axis=1) == y))


def im2col3(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> (N*H*W, C*9): the 3x3, pad-1, stride-1 patches in (C, kh, kw) order."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, h, w, c, 3, 3), dtype=x.dtype)
    for i in range(3):
        for j in range(3):
            cols[:, :, :, :, i, j] = xp[:, :, i:i + h, j:j + w].transpose(0, 2, 3, 1)
    return cols.reshape(n * h * w, c * 9)


def col2im3(dcols: np.ndarray, shape) -> np.ndarray:
    """The adjoint of :func:`im2col3`: scatter-add (N*H*W, C*9) patch gradients onto (N, C, H, W)."""
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, 3, 3)
    dxp = np.zeros((n, c, h + 2, w + 2), dtype=dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1]


def conv3(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """3x3, pad-1 convolution (ONNX Conv semantics, i.e. cross-correlation); w is (F, C, 3, 3)."""
    n, _, h, wd = x.shape
    out = im2col3(x) @ w.reshape(len(w), -1).T + b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2)


def maxpool2(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def batchnorm(x: np.ndarray, gamma, beta, mean, var, eps: float = BN_EPS) -> np.ndarray:
    """Inference-mode BatchNormalization over axis 1 (ONNX semantics)."""
    s = (1, -1, 1, 1)
    return ((x - mean.reshape(s)) / np.sqrt(var.reshape(s) + eps)) * gamma.reshape(s) + beta.reshape(s)


def he(rng, shape, fan_in) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


class Adam:
    def __init__(self, params: Dict[str, np.ndarray], lr: float, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay: float = 0.0):
        self.params, self.lr, self.b1, self.b2, self.eps, self.wd = params, lr, beta1, beta2, eps, weight_decay
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads: Dict[str, np.ndarray], lr: float = None):
        self.t += 1
        lr = self.lr if lr is None else lr
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for k, g in grads.items():
            p = self.params[k]
            if self.wd and p.ndim > 1:                     # decay weights, not biases / BN
                g = g + self.wd * p
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            p -= (lr * (self.m[k] / c1) / (np.sqrt(self.v[k] / c2) + self.eps)).astype(p.dtype)


def _batches(rng, n: int, batch_size: int):
    order = rng.permutation(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def _cosine(lr: float, epoch: int, epochs: int) -> float:
    return lr * 0.5 * (1 + np.cos(np.pi * epoch / epochs))


# --------------------------------------------------------------------------------------------
# models

@dataclass(eq=False)
class Mlp:
    params: Dict[str, np.ndarray]
    history: list = field(default_factory=list)
    seconds: float = 0.0

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = self.params
        h = np.maximum(x.reshape(len(x), -1) @ p["fc1.weight"].T + p["fc1.bias"], 0)
        return softmax(h @ p["fc2.weight"].T + p["fc2.bias"])


@dataclass(eq=False)
class Cnn:
    params: Dict[str, np.ndarray]          # conv/fc weights and biases, BN gamma/beta/mean/var
    history: list = field(default_factory=list)
    seconds: float = 0.0

    def features(self, x: np.ndarray, upto: str = "") -> np.ndarray:
        p = self.params
        z = conv3(x, p["conv1.weight"], p["conv1.bias"])
        if upto == "conv1":
            return z
        h = maxpool2(np.maximum(batchnorm(z, *(p[f"bn1.{k}"] for k in ("gamma", "beta", "mean", "var"))), 0))
        z = conv3(h, p["conv2.weight"], p["conv2.bias"])
        if upto == "conv2":
            return z
        h = maxpool2(np.maximum(batchnorm(z, *(p[f"bn2.{k}"] for k in ("gamma", "beta", "mean", "var"))), 0))
        return h.reshape(len(h), -1)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        p = self.params
        return softmax(self.features(x) @ p["fc.weight"].T + p["fc.bias"])


def train_mlp(ds, seed: int = 0, *, epochs: int = 60, batch_size: int = 32, lr: float = 3e-3,
              hidden: int = 32, weight_decay: float = 1e-4, verbose: bool = False) -> Mlp:
    """Train the 64-32-10 MLP on ``ds`` (a :class:`~hlsnn.deploy.datasets.Dataset`, flat or NCHW)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x = ds.x_train.reshape(len(ds.x_train), -1).astype(np.float32)
    y = ds.y_train
    n_in, n_out = x.shape[1], 10
    p = {"fc1.weight": he(rng, (hidden, n_in), n_in), "fc1.bias": np.zeros(hidden, np.float32),
         "fc2.weight": he(rng, (n_out, hidden), hidden), "fc2.bias": np.zeros(n_out, np.float32)}
    opt = Adam(p, lr, weight_decay=weight_decay)
    model = Mlp(p)
    for epoch in range(epochs):
        for idx in _batches(rng, len(x), batch_size):
            xb, yb = x[idx], y[idx]
            a1 = xb @ p["fc1.weight"].T + p["fc1.bias"]
            h1 = np.maximum(a1, 0)
            d = softmax(h1 @ p["fc2.weight"].T + p["fc2.bias"])
            d[np.arange(len(yb)), yb] -= 1
            d /= len(yb)
            dh = (d @ p["fc2.weight"]) * (a1 > 0)
            opt.step({"fc2.weight": d.T @ h1, "fc2.bias": d.sum(0),
                      "fc1.weight": dh.T @ xb, "fc1.bias": dh.sum(0)}, _cosine(lr, epoch, epochs))
        _log(model, ds, epoch, epochs, verbose)
    model.seconds = time.perf_counter() - t0
    return model


def train_cnn(ds, seed: int = 0, *, epochs: int = 30, batch_size: int = 32, lr: float = 3e-3,
              channels=(8, 16), weight_decay: float = 1e-4, verbose: bool = False) -> Cnn:
    """Train the conv-BN-relu-pool x2 -> fc CNN on ``ds`` (NCHW (N, 1, 8, 8) or flat (N, 64))."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x = ds.x_train.reshape(len(ds.x_train), 1, 8, 8).astype(np.float32)
    y = ds.y_train
    c1, c2 = channels
    p = {"conv1.weight": he(rng, (c1, 1, 3, 3), 9),
         "conv1.bias": (0.1 * rng.standard_normal(c1)).astype(np.float32),
         "bn1.gamma": np.ones(c1, np.float32), "bn1.beta": np.zeros(c1, np.float32),
         "conv2.weight": he(rng, (c2, c1, 3, 3), 9 * c1),
         "conv2.bias": (0.1 * rng.standard_normal(c2)).astype(np.float32),
         "bn2.gamma": np.ones(c2, np.float32), "bn2.beta": np.zeros(c2, np.float32),
         "fc.weight": he(rng, (10, 4 * c2), 4 * c2), "fc.bias": np.zeros(10, np.float32)}
    trainable = {k: v for k, v in p.items() if not k.endswith("conv1.bias") and not k.endswith("conv2.bias")}
    opt = Adam(trainable, lr, weight_decay=weight_decay)
    model = Cnn(p)
    for epoch in range(epochs):
        for idx in _batches(rng, len(x), batch_size):
            grads = _cnn_step(p, x[idx], y[idx])
            opt.step(grads, _cosine(lr, epoch, epochs))
        if verbose or epoch == epochs - 1:
            calibrate_bn(model, x)
        _log(model, ds, epoch, epochs, verbose)
    model.seconds = time.perf_counter() - t0
    return model


def _bn_train_forward(z, gamma, beta):
    mu = z.mean(axis=(0, 2, 3), keepdims=True)
    var = z.var(axis=(0, 2, 3), keepdims=True)
    inv = 1.0 / np.sqrt(var + BN_EPS)
    zhat = (z - mu) * inv
    return zhat * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1), (zhat, inv)


def _bn_train_backward(dy, gamma, cache):
    zhat, inv = cache
    m = dy.shape[0] * dy.shape[2] * dy.shape[3]
    dgamma = (dy * zhat).sum(axis=(0, 2, 3))
    dbeta = dy.sum(axis=(0, 2, 3))
    dzhat = dy * gamma.reshape(1, -1, 1, 1)
    dz = inv / m * (m * dzhat - dzhat.sum(axis=(0, 2, 3), keepdims=True)
                    - zhat * (dzhat * zhat).sum(axis=(0, 2, 3), keepdims=True))
    return dz, dgamma, dbeta


def _pool_forward(a):
    """2x2 max pool and, per window, a one-hot (N, C, H/2, W/2, 4) mask of the winner (the first
    maximum in row-major order), where the gradient goes."""
    n, c, h, w = a.shape
    windows = a.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    win = np.arange(4) == windows.argmax(axis=-1)[..., None]
    return windows.max(axis=-1), win


def _pool_backward(dout, win, shape):
    n, c, h, w = shape
    d = win * dout[..., None]
    return d.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(shape)


def _cnn_step(p, xb, yb):
    """One training forward/backward pass (BN on batch statistics); returns the gradients."""
    n = len(xb)
    cols1 = im2col3(xb)
    z1 = (cols1 @ p["conv1.weight"].reshape(len(p["conv1.weight"]), -1).T + p["conv1.bias"])
    z1 = z1.reshape(n, 8, 8, -1).transpose(0, 3, 1, 2)
    b1, bn1c = _bn_train_forward(z1, p["bn1.gamma"], p["bn1.beta"])
    r1 = np.maximum(b1, 0)
    h1, win1 = _pool_forward(r1)
    cols2 = im2col3(h1)
    z2 = (cols2 @ p["conv2.weight"].reshape(len(p["conv2.weight"]), -1).T + p["conv2.bias"])
    z2 = z2.reshape(n, 4, 4, -1).transpose(0, 3, 1, 2)
    b2, bn2c = _bn_train_forward(z2, p["bn2.gamma"], p["bn2.beta"])
    r2 = np.maximum(b2, 0)
    h2, win2 = _pool_forward(r2)
    f = h2.reshape(n, -1)
    d = softmax(f @ p["fc.weight"].T + p["fc.bias"])
    d[np.arange(n), yb] -= 1
    d /= n
    g = {"fc.weight": d.T @ f, "fc.bias": d.sum(0)}
    dh2 = (d @ p["fc.weight"]).reshape(h2.shape)
    db2 = _pool_backward(dh2, win2, r2.shape) * (b2 > 0)
    dz2, g["bn2.gamma"], g["bn2.beta"] = _bn_train_backward(db2, p["bn2.gamma"], bn2c)
    dz2f = dz2.transpose(0, 2, 3, 1).reshape(-1, dz2.shape[1])
    g["conv2.weight"] = (dz2f.T @ cols2).reshape(p["conv2.weight"].shape)
    dh1 = col2im3(dz2f @ p["conv2.weight"].reshape(len(p["conv2.weight"]), -1), h1.shape)
    db1 = _pool_backward(dh1, win1, r1.shape) * (b1 > 0)
    dz1, g["bn1.gamma"], g["bn1.beta"] = _bn_train_backward(db1, p["bn1.gamma"], bn1c)
    dz1f = dz1.transpose(0, 2, 3, 1).reshape(-1, dz1.shape[1])
    g["conv1.weight"] = (dz1f.T @ cols1).reshape(p["conv1.weight"].shape)
    return {k: v.astype(np.float32) for k, v in g.items()}


def calibrate_bn(model: Cnn, x: np.ndarray) -> None:
    """Set the BN inference mean/var to the per-channel conv-output statistics over ``x``
    (population variance, as BN's training-time normalization uses), bn1 first, then bn2."""
    p = model.params
    for name in ("conv1", "conv2"):
        z = model.features(x, upto=name).astype(np.float64)
        bn = "bn1" if name == "conv1" else "bn2"
        p[f"{bn}.mean"] = z.mean(axis=(0, 2, 3)).astype(np.float32)
        p[f"{bn}.var"] = z.var(axis=(0, 2, 3)).astype(np.float32)


def _log(model, ds, epoch, epochs, verbose):
    if not verbose and epoch != epochs - 1:
        return
    shape = (-1, 1, 8, 8) if isinstance(model, Cnn) else (-1, 64)
    tr = accuracy(model.predict_proba(ds.x_train.reshape(shape)), ds.y_train)
    te = accuracy(model.predict_proba(ds.x_test.reshape(shape)), ds.y_test)
    model.history.append({"epoch": epoch + 1, "train_acc": tr, "test_acc": te})
    if verbose:
        print(f"  epoch {epoch + 1:3d}/{epochs}: train {tr:.4f}  test {te:.4f}")


# --------------------------------------------------------------------------------------------
# ONNX export

def _graph_io(helper, TensorProto, in_shape):
    inp = helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["N", *in_shape])
    out = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["N", 10])
    return inp, out


def _model(helper, graph, opset):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="hlsnn.deploy.train")
    model.ir_version = IR_VERSION
    return model


def _init(numpy_helper, name, a):
    return numpy_helper.from_array(np.ascontiguousarray(a, dtype=np.float32), name)


def export_mlp(model: Mlp, path=None, *, opset: int = OPSET):
    """The MLP as an ONNX ModelProto (written to ``path`` if given, after onnx.checker)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    p = model.params
    nodes = [helper.make_node("Gemm", [INPUT_NAME, "fc1.weight", "fc1.bias"], ["fc1_out"], name="fc1", transB=1),
             helper.make_node("Relu", ["fc1_out"], ["relu1_out"], name="relu1"),
             helper.make_node("Gemm", ["relu1_out", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1),
             helper.make_node("Softmax", ["logits"], [OUTPUT_NAME], name="softmax", axis=1)]
    inits = [_init(numpy_helper, k, p[k]) for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]
    inp, out = _graph_io(helper, TensorProto, [p["fc1.weight"].shape[1]])
    graph = helper.make_graph(nodes, "digits_mlp", [inp], [out], initializer=inits)
    m = _model(helper, graph, opset)
    onnx.checker.check_model(m, full_check=True)
    if path is not None:
        onnx.save(m, str(path))
    return m


def export_cnn(model: Cnn, path=None, *, opset: int = OPSET):
    """The CNN as an ONNX ModelProto with Conv + BatchNormalization (inference mode, epsilon 1e-5)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    p = model.params
    mk = helper.make_node
    nodes = [
        mk("Conv", [INPUT_NAME, "conv1.weight", "conv1.bias"], ["conv1_out"], name="conv1",
           kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        mk("BatchNormalization", ["conv1_out", "bn1.gamma", "bn1.beta", "bn1.mean", "bn1.var"], ["bn1_out"],
           name="bn1", epsilon=BN_EPS),
        mk("Relu", ["bn1_out"], ["relu1_out"], name="relu1"),
        mk("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        mk("Conv", ["pool1_out", "conv2.weight", "conv2.bias"], ["conv2_out"], name="conv2",
           kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        mk("BatchNormalization", ["conv2_out", "bn2.gamma", "bn2.beta", "bn2.mean", "bn2.var"], ["bn2_out"],
           name="bn2", epsilon=BN_EPS),
        mk("Relu", ["bn2_out"], ["relu2_out"], name="relu2"),
        mk("MaxPool", ["relu2_out"], ["pool2_out"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        mk("Flatten", ["pool2_out"], ["flat"], name="flatten", axis=1),
        mk("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
        mk("Softmax", ["logits"], [OUTPUT_NAME], name="softmax", axis=1),
    ]
    names = ["conv1.weight", "conv1.bias", "bn1.gamma", "bn1.beta", "bn1.mean", "bn1.var",
             "conv2.weight", "conv2.bias", "bn2.gamma", "bn2.beta", "bn2.mean", "bn2.var", "fc.weight", "fc.bias"]
    inp, out = _graph_io(helper, TensorProto, [1, 8, 8])
    graph = helper.make_graph(nodes, "digits_cnn", [inp], [out],
                              initializer=[_init(numpy_helper, k, p[k]) for k in names])
    m = _model(helper, graph, opset)
    onnx.checker.check_model(m, full_check=True)
    if path is not None:
        onnx.save(m, str(path))
    return m
