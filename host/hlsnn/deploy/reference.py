"""The float reference of an ONNX model: onnx's ``ReferenceEvaluator``, with inference-mode
``BatchNormalization`` as the ONNX spec defines it for every opset (the deploy commands'
float accuracy and the example models' checks use it)."""
from __future__ import annotations

import numpy as np

BN_EPS = 1e-5


def reference_evaluator(model):
    """``onnx.reference.ReferenceEvaluator`` for ``model`` (ModelProto or path), with inference-mode
    BatchNormalization computed as the ONNX spec says for every opset.

    The stock reference ``BatchNormalization_9`` (used for opsets 9-13, onnx <= 1.22 at least)
    chooses training mode whenever ``momentum`` is set, and the schema always fills in its
    default 0.9, so a one-output (inference) node is normalized with a 0.9 / 0.1 blend of the
    given mean/var and the statistics of the current batch: the output depends on the batch
    and disagrees with onnxruntime (onnx/onnx pull request 8442). This override applies
    ``scale * (x - mean) / sqrt(var + epsilon) + B`` whenever the node has one output and is
    not in training mode (opset >= 14 ``training_mode``), and refuses training-mode nodes.
    """
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(str(model) if isinstance(model, (str, bytes)) or not hasattr(model, "graph")
                              else model, new_ops=[_inference_batchnorm_op(), _zipmap_op()])


def _inference_batchnorm_op():
    from onnx.reference.op_run import OpRun

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None, **_):
            if len(self.onnx_node.output) > 1 or training_mode:
                raise NotImplementedError("hlsnn's reference BatchNormalization is inference-only "
                                          f"(node {self.onnx_node.name!r} is in training mode)")
            s = (-1,) + (1,) * (x.ndim - 2)
            eps = BN_EPS if epsilon is None else epsilon
            y = (x - mean.reshape(s)) / np.sqrt(var.reshape(s) + eps) * scale.reshape(s) + bias.reshape(s)
            return (y.astype(x.dtype),)

    return BatchNormalization


def _zipmap_op():
    """skl2onnx's ``ZipMap`` (ai.onnx.ml), which the stock reference lacks, read as the
    probability tensor it zips: with class labels 0..n-1 map j of sample i holds column j of
    row i, so the tensor holds the same numbers in the layout the deploy commands compare."""
    from onnx.reference.op_run import OpRun

    class ZipMap(OpRun):
        op_domain = "ai.onnx.ml"

        def _run(self, x, classlabels_int64s=None, classlabels_strings=None, **_):
            labels = list(classlabels_int64s) if classlabels_int64s is not None else None
            if labels is None or labels != list(range(len(labels))) or len(labels) != x.shape[-1]:
                raise NotImplementedError("hlsnn's reference ZipMap takes integer class labels 0..n-1 only")
            return (x,)

    return ZipMap


def reference_probs(model, x: np.ndarray, batch_size: int = 0) -> np.ndarray:
    """The outputs of an ONNX model (ModelProto or path) under :func:`reference_evaluator`, the float reference."""
    sess = reference_evaluator(model)
    x = np.ascontiguousarray(x, dtype=np.float32)
    step = batch_size or len(x)
    return np.concatenate([sess.run(None, {sess.input_names[0]: x[i:i + step]})[0] for i in range(0, len(x), step)])
