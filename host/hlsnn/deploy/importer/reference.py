"""The float reference of an ONNX model: onnx's ``ReferenceEvaluator``, with inference-mode
``BatchNormalization`` as the ONNX spec defines it for every opset (the deploy commands'
float accuracy and the example models' checks use it)."""
from __future__ import annotations

import numpy as np

from ...errors import HlsnnError, ModelError
from . import qimport

BN_EPS = 1e-5


def _why(exc) -> str:
    """The first line of an exception's message, bounded (onnx's messages can hold whole protos)."""
    if isinstance(exc, MemoryError):
        return f"needs more memory than is available ({str(exc).splitlines()[0][:160] if str(exc) else 'MemoryError'})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _node_guard(rt_node, where):
    """``rt_node.run`` whose every failure becomes a :class:`ModelError` naming the node."""
    run, node = rt_node.run, rt_node.onnx_node
    label = f"node {node.name or node.output[0]!r} ({node.op_type})"

    def guarded(*args, **kwargs):
        try:
            return run(*args, **kwargs)
        except ModelError:
            raise
        except HlsnnError as exc:          # hlsnn's own overrides (a pool window larger than the map)
            raise ModelError(f"{where}: onnx's reference evaluation failed at {label}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - onnx's reference raises anything: one error type
            raise ModelError(f"{where}: onnx's reference evaluation failed at {label}: {_why(exc)}") from None
    return guarded


def guard(sess, where="float reference"):
    """Make every failure of ``sess`` (a ReferenceEvaluator) a :class:`~hlsnn.errors.ModelError`
    that names the node, instead of whatever numpy or onnx raised (channel mismatches,
    kernels larger than the map, impossible reshapes, pool stride 0, out-of-memory pads)."""
    for rt in getattr(sess, "rt_nodes_", ()):
        if getattr(rt, "onnx_node", None) is not None:
            rt.run = _node_guard(rt, where)
    return sess


def run(sess, output_names, feeds, where="float reference", **kwargs):
    """``sess.run(output_names, feeds)`` with onnx's and numpy's exceptions turned into
    :class:`~hlsnn.errors.ModelError` (the nodes are guarded by :func:`guard`; this catches the rest:
    a missing input, a wrong feed dtype)."""
    try:
        return sess.run(output_names, feeds, **kwargs)
    except HlsnnError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{where}: onnx's reference evaluation failed: {_why(exc)}") from None


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
    where = "float reference" + (f" of {model}" if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__")
                                 else "")
    try:
        sess = ReferenceEvaluator(str(model) if isinstance(model, (str, bytes)) or not hasattr(model, "graph")
                                  else model, new_ops=reference_ops())
    except HlsnnError:
        raise
    except Exception as exc:  # noqa: BLE001 - an attribute onnx's reference cannot take, an unknown op
        raise ModelError(f"{where}: onnx's reference evaluator cannot load the model: {_why(exc)}") from None
    sess.hlsnn_where = where
    return guard(sess, where)


def reference_ops():
    """The operators hlsnn's float reference puts in place of onnx's stock ones (each function's
    docstring says why): for :func:`reference_evaluator` and the ``--host-fallback`` nodes' sessions."""
    return [_inference_batchnorm_op(), _zipmap_op(), *_pool_ops(), _conv_transpose_op(), _global_max_pool_op(),
            *_recurrent_ops(), *qimport.reference_ops()]


def _recurrent_ops():
    """``GRU``, ``LSTM`` and ``RNN`` with ``layout=1`` (batch first: X (N, T, F), Y (N, T, D, H),
    ``Y_h``/``Y_c`` and ``initial_h``/``initial_c`` (N, D, H)) as ONNX defines them: the stock
    ``layout=0`` computation on the tensors with their first two axes swapped, the outputs swapped
    back (Y from (T, D, N, H)). onnx 1.22's stock implementations take the batch size from X's
    second axis before they swap X, and the GRU's takes ``Y_h`` from the wrong axis, so a
    ``layout=1`` node fails (a broadcast error, batch 1 included) or gives wrong values; onnxruntime
    refuses ``layout=1``
    (tests/deploy/test_fallback_rnn.py holds this to onnxruntime on the ``layout=0`` node)."""
    from onnx.reference.ops.op_gru import GRU
    from onnx.reference.ops.op_lstm import LSTM
    from onnx.reference.ops.op_rnn import RNN_14

    def batch_first(stock, name, states):
        def _run(self, X, *args, layout=None, **kwargs):
            if not layout:
                return stock._run(self, X, *args, layout=layout, **kwargs)
            args = [np.swapaxes(a, 0, 1) if i in states and a is not None else a for i, a in enumerate(args, 1)]
            self.layout = 0                  # the stock steps read the node's attribute, not the argument
            try:
                outs = stock._run(self, np.swapaxes(X, 0, 1), *args, layout=0, **kwargs)
            finally:
                self.layout = layout
            # Y (T, D, N, H) -> (N, T, D, H); Y_h, Y_c (D, N, H) -> (N, D, H)
            return tuple(np.transpose(y, (2, 0, 1, 3)) if k == 0 else np.swapaxes(y, 0, 1)
                         for k, y in enumerate(outs))
        return type(name, (stock,), {"op_domain": "", "_run": _run})

    # the state inputs' positions: X 0, W 1, R 2, B 3, sequence_lens 4, initial_h 5 (, initial_c 6, LSTM)
    return [batch_first(GRU, "GRU", {5}), batch_first(LSTM, "LSTM", {5, 6}), batch_first(RNN_14, "RNN", {5})]


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


def _pool_ops():
    """``MaxPool`` and ``AveragePool`` (1-D or 2-D, no dilation, one output) as ONNX defines them, from
    :func:`hlsnn.deploy.run.pooling._pool` (a 1-D pool as the (k, 1) pool of (N, C, L, 1)); other cases
    run onnx's stock implementation (whose 1-D ``MaxPool`` at stride 1 with pads, InceptionTime's
    ``nn.MaxPool1d(3, stride=1, padding=1)``, fails with an IndexError in onnx 1.22).

    onnx's reference pools (onnx 1.22) disagree with onnxruntime when the pads are asymmetric
    or with ``ceil_mode`` (another shape, other values or an exception); ``_pool`` agrees with
    onnxruntime (tests/deploy/test_fuzz_onnx.py)."""
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_average_pool import AveragePool_11, AveragePool_19
    from onnx.reference.ops.op_max_pool import MaxPool as StockMaxPool

    def ours(node, x, a):
        dil = a.get("dilations")
        ks = a.get("kernel_shape")
        pad = a.get("auto_pad") or "NOTSET"
        pad = pad.decode() if isinstance(pad, bytes) else pad
        return (x.ndim in (3, 4) and ks is not None and len(ks) == x.ndim - 2 and pad in ("NOTSET", "VALID")
                and (dil is None or all(int(d) == 1 for d in dil)) and len([o for o in node.output if o]) == 1
                and x.dtype.kind == "f")

    def run(self, stock, op, x, kwargs):
        if not ours(self.onnx_node, x, kwargs):
            return stock(self.onnx_node, self.run_params)._run(x, **kwargs)
        if x.ndim == 3:            # a 1-D pool: the (k, 1) 2-D pool of (N, C, L, 1) (the stock 1-D MaxPool
            kw = dict(kwargs)      # fails at stride 1 with pads, onnx 1.22: IndexError)
            kw["kernel_shape"] = [int(kwargs["kernel_shape"][0]), 1]
            kw["strides"] = [int((kwargs.get("strides") or [1])[0]), 1]
            p = [int(v) for v in (kwargs.get("pads") or [0, 0])]
            kw["pads"] = [p[0], 0, p[1], 0]
            kw.pop("dilations", None)
            return (run(self, stock, op, x[..., None], kw)[0][..., 0],)
        from ..run.pooling import _pool
        a = {"kernel_shape": [int(k) for k in kwargs["kernel_shape"]],
             "strides": [int(v) for v in (kwargs.get("strides") or [1, 1])],
             "pads": [int(v) for v in (kwargs.get("pads") or [0, 0, 0, 0])] if (kwargs.get("auto_pad") or "NOTSET")
             in ("NOTSET", b"NOTSET") else [0, 0, 0, 0],
             "ceil_mode": int(kwargs.get("ceil_mode") or 0), "count_include_pad": int(kwargs.get("count_include_pad") or 0)}
        return (_pool(np.asarray(x, np.float64), a, op).astype(x.dtype),)

    class MaxPool(OpRun):
        op_domain = ""

        def _run(self, x, **kwargs):
            return run(self, StockMaxPool, "MaxPool", x, kwargs)

    class AveragePool(OpRun):
        op_domain = ""

        def _run(self, x, **kwargs):
            stock = AveragePool_19 if "dilations" in kwargs else AveragePool_11
            return run(self, stock, "AveragePool", x, kwargs)

    return MaxPool, AveragePool


def _global_max_pool_op():
    """``GlobalMaxPool`` as ONNX defines it for any rank: the maximum over every axis after the
    channels, kept as size-1 axes. onnx's stock reference (onnx 1.22) reduces axes ``(r - 2, r - 1)``
    with ``r - 2`` spatial axes, right for (N, C, H, W) only: for TorchScript's
    ``nn.AdaptiveMaxPool1d(1)`` on (N, C, L) it takes the maximum over the channels and L, a
    (N, 1) tensor, where onnxruntime gives (N, C, 1) (tests/deploy/test_reference_pools.py)."""
    from onnx.reference.op_run import OpRun

    class GlobalMaxPool(OpRun):
        op_domain = ""

        def _run(self, x):
            return (np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True),)

    return GlobalMaxPool


def _conv_transpose_op():
    """``ConvTranspose`` with ``group`` > 1, which onnx's stock reference (onnx 1.22) cannot
    evaluate (it reshapes the grouped weight as if ungrouped and fails): each group's input
    channels and weight through the stock implementation, the outputs joined on the channel
    axis, as ONNX defines a grouped transposed convolution (onnxruntime agrees,
    tests/deploy/test_torch_variants.py). ``group`` 1 runs the stock implementation."""
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_conv_transpose import ConvTranspose as Stock

    class ConvTranspose(OpRun):
        op_domain = ""

        def _run(self, x, w, b=None, group=None, **kwargs):
            stock = Stock(self.onnx_node, self.run_params)
            g = int(group or 1)
            if g == 1:
                return stock._run(x, w, b, group=1, **kwargs)
            c, zg = w.shape[0] // g, w.shape[1]
            ys = [stock._run(x[:, i * c:(i + 1) * c], w[i * c:(i + 1) * c], None if b is None else
                             b[i * zg:(i + 1) * zg], group=1, **kwargs)[0] for i in range(g)]
            return (np.concatenate(ys, axis=1).astype(x.dtype),)

    return ConvTranspose


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
    return np.concatenate([run(sess, None, {sess.input_names[0]: x[i:i + step]}, sess.hlsnn_where)[0]
                           for i in range(0, len(x), step)])
