"""ONNX import: a model file becomes a :class:`Network`, a list of layers in execution order.

Rules (these are what :func:`load_onnx` does, in order):

* Constants (initializers and ``Constant`` nodes) are folded into the layers that use them. A
  node whose inputs are all constants (e.g. the ``Transpose`` of a weight that an export without
  constant folding leaves before ``MatMul``) is evaluated once, at import, with onnx's own
  reference implementation of that op, and its output becomes a constant too.
* ``Cast`` to float or double is a no-op (activations are float64 here; skl2onnx emits
  float->float casts); a cast to any other type is unsupported.
* ``ZipMap`` (skl2onnx's default probabilities output, a sequence of {class: probability}
  maps) is read as its input tensor when its class labels are the integers 0..n-1, so that
  column j is class j; with other labels it is unsupported.
* ``Gemm`` (``alpha``, ``beta``, ``transB``; ``transA = 0``) and ``MatMul`` by a constant
  matrix, followed by an ``Add`` of a constant vector (the bias), become a **dense** layer
  ``y = x @ w.T + b`` with ``w`` of shape (N, K). A ``MatMul`` on a tensor of rank > 2 (a
  ``Linear`` on each token of an (N, T, F) tensor) multiplies every row of its last axis, as
  ONNX defines it: it becomes the same GEMM over all the rows, a 1x1 **conv** on the rows as the
  pixels of a ``K x T x 1`` map, between the exact host ops ``RowsToMap`` and ``MapToRows``
  (:mod:`hlsnn.deploy.rewrite.rowsmaps`). A ``MatMul`` on an input of unknown rank is unsupported (its rows
  are unknown), and a ``BatchNormalization`` after a token-wise layer (axis 1 is then the
  tokens, not the layer's outputs) is never folded into it.
* ``Conv`` (2-D: any stride, explicit pads, dilation, rectangular kernels, groups including
  depthwise; ``auto_pad`` NOTSET, VALID or SAME_UPPER/SAME_LOWER, TorchScript's ``padding='same'``,
  as the explicit pads ONNX defines for it) becomes a **conv** layer; :mod:`hlsnn.engines.convgeom`
  says how each engine runs it.
* A ``BatchNormalization`` whose input is produced only for it by a dense or conv layer is
  folded into that layer: ``s = gamma / sqrt(var + eps)``, ``w' = w * s`` (per output
  channel), ``b' = (b - mean) * s + beta``; after a channel ``Concat`` of such layers, each
  branch's channels into that branch (and a ``Relu`` after it into every branch:
  :mod:`hlsnn.deploy.rewrite.catfold`). Elsewhere it runs on the host.
* Before this, a pruned model's dead channels (all-zero weights: constants) are folded into the
  unpadded ``Conv`` or ``Gemm`` that reads them (:mod:`hlsnn.deploy.rewrite.constchan`; not in an
  :func:`hlsnn.train.export` file): no variance-free BatchNorm folds into weights of hundreds.
* A ``Relu`` whose input is produced only for it by a dense or conv layer is fused into the
  layer (every engine has a ReLU in its output stage). Elsewhere it runs on the host.
* ``MaxPool``, ``AveragePool`` (with pads and ceil_mode; no dilation), ``GlobalAveragePool``, ``Flatten``, ``Reshape``,
  ``Add`` (of two tensors), ``Relu``, ``BatchNormalization``, ``Softmax``, ``Identity`` and
  ``Dropout`` (inference: identity) run on the host in numpy (:mod:`hlsnn.deploy.run.hostops`).
* Global pooling written as ``ReduceMean``/``ReduceMax``, ``Clip`` (ReLU6: its ReLU fused),
  ``Sigmoid``, ``HardSigmoid``, ``HardSwish``, ``Tanh``, ``Pad``, ``Concat`` on channels,
  ``Resize``/``Upsample`` by integer nearest factors and ``Mul``/``Div`` by constants (folded
  into the preceding layer where exact): the rules of :mod:`hlsnn.deploy.importer.import_rules`. A
  zero ``Pad`` of H and W that only a ``Conv`` reads becomes that conv's padding.
* Attention: a graph with ``Shape`` nodes, a ``MatMul`` of two computed tensors, a
  ``Gather`` of a computed tensor, a ``Transpose`` of a computed tensor or a ``Concat`` of computed
  tensors on axis 2 or -1 (``torch.cat(dim=-1)`` of tokens) gets static batch-1
  shapes (:mod:`hlsnn.deploy.rewrite.shapefold`: the shape arithmetic folds to constants), and the ops
  on tensors that merge the batch with other axes run per sample (:mod:`hlsnn.deploy.run.samplewise`:
  ``SwMove``, ``SwCompute``, ``MatMulAct``; a ``MatMul``/``Gemm`` by a constant there is a
  token-wise GEMM).
* The exporters' idioms (``Einsum`` products, dynamo's upsampling gathers, ``repeat_interleave``,
  pixel (un)shuffles, ``F.glu``'s ``Split``, ``x - conv(x)``, ``torch.maximum(x, c * x)``, a
  BatchNorm1d between two Linears, recurrent cells, ...) are first rewritten into the ops above
  by the passes of :mod:`hlsnn.deploy.rewrite.passes`, one ordered list, each pass's contract in
  its module.
* An input whose batch dimension is fixed at 1 (``torch.onnx.export``'s default) gets a
  symbolic batch: the leading 1 of the input and of every constant ``Reshape`` target that
  starts with 1 (``[1, 128]`` before a classifier) stands for the batch.
* Control flow (``Loop``, ``Scan``, ``If``: any node with a subgraph) is unsupported, also with ``host_fallback``.
* Bounds: an initializer holds at most :data:`MAX_INITIALIZER_ELEMENTS` values, every
  tensor whose size shape inference knows at most :data:`MAX_TENSOR_ELEMENTS` per sample, and a
  constant-folded node's output at most :data:`MAX_TENSOR_ELEMENTS`. Weights, biases and
  BatchNormalization parameters must be finite floats (a variance also >= 0); each failure names
  the initializer or node.
* Anything else is unsupported: :class:`~hlsnn.errors.UnsupportedModelError` lists every
  unsupported node (name, op type, why), unless ``host_fallback=True``, which runs such nodes
  on the host with onnx's reference implementation (one node at a time).

The importer reads weights as float64. It never changes a layer's arithmetic beyond the
exact algebra above, so the float reference of the imported network equals onnx's own
evaluation up to float rounding (tested against ``onnx.reference.ReferenceEvaluator``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...errors import InputError, MissingDependency, ModelError, UnsupportedModelError, printable
from ..rewrite import constmm, maxleaky, passes
from ..run import samplewise
from . import graphindex, onnx_attrs, qimport
from . import import_rules as rules
from .graph import Layer, Network
from .onnx_nodes import (_check_layer_names, _conv1d_unsupported, _conv_transpose, _conv_unsupported, _dims,
                         _explicit_pads, _host_unsupported, _matmul_rows, _one_d_as_2d, _shapes,
                         _zipmap_unsupported)

#: the most values an initializer may hold (32 Mi: far beyond any model an FPGA of hlsnn's boards holds)
MAX_INITIALIZER_ELEMENTS = 1 << 25
#: the most values of one tensor per sample (and of one constant-folded tensor): 128 Mi, 1 GiB as float64
MAX_TENSOR_ELEMENTS = 1 << 27
#: ops with subgraphs: never folded nor run at import
CONTROL_FLOW = ("Loop", "Scan", "If", "SequenceMap")

HOST_OPS = ("MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Add", "Relu",
            "BatchNormalization", "Softmax", "Identity", "Dropout")


def _onnx():
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise MissingDependency('importing ONNX models needs the onnx package: pip install "hlsnn[deploy]"') from None
    return onnx, numpy_helper


def _attrs(node):
    onnx, _ = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _fold_size(node, consts, opset):
    """The number of values ``node``'s first output would hold on its constant inputs, from
    onnx's shape inference (None when it cannot tell): folding is refused above
    :data:`MAX_TENSOR_ELEMENTS` before anything is evaluated (a ``Range`` to 10^12, a
    ``ConstantOfShape`` of [10^6, 10^6])."""
    from onnx import helper, numpy_helper, shape_inference
    try:
        inits = [numpy_helper.from_array(np.asarray(consts[i]), i) for i in dict.fromkeys(x for x in node.input if x)]
        g = helper.make_graph([node], "fold", [], [helper.make_empty_tensor_value_info(node.output[0])],
                              initializer=inits)
        m = shape_inference.infer_shapes(helper.make_model(g, opset_imports=opset), data_prop=True)
        dims = m.graph.output[0].type.tensor_type.shape.dim
        if not m.graph.output[0].type.tensor_type.HasField("shape") or \
                not all(d.HasField("dim_value") for d in dims):
            return None
        return int(np.prod([d.dim_value for d in dims], dtype=object))
    except Exception:  # noqa: BLE001 - shape inference cannot tell
        return None


def _fold_constant(node, consts, opset=None):
    """The output of ``node`` on constant inputs, from onnx's reference implementation of the
    op (None when it cannot be evaluated, so the node is then judged like any other). Raises
    :class:`ModelError` when the output would hold more than :data:`MAX_TENSOR_ELEMENTS` values."""
    size = _fold_size(node, consts, opset or [])
    if size is not None and size > MAX_TENSOR_ELEMENTS:
        raise ModelError(f"node {node.name or node.output[0]!r} ({node.op_type}) on constant inputs would make a "
                         f"tensor of {size:,} values (at most {MAX_TENSOR_ELEMENTS:,})")
    try:
        from onnx.reference import ReferenceEvaluator
        feeds = {i: np.asarray(consts[i]) for i in node.input if i}
        out = ReferenceEvaluator(node).run(None, feeds)[0]
    except Exception:  # noqa: BLE001 - any failure (MemoryError too): leave the node to the normal rules
        return None
    out = np.asarray(out)
    return out.astype(np.float64) if out.dtype.kind == "f" else out


def check_model_path(path):
    """A model path must name a regular file: a folder, a FIFO or a device (``/dev/zero`` reads for
    ever) gets its own message, not "does not exist"."""
    import stat
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"model file {printable(path)} does not exist") from None
    except OSError as exc:
        raise InputError(f"model file {printable(path)}: cannot read it ({exc.strerror or exc})") from None
    except ValueError:                       # a NUL character: no path the OS can take
        raise InputError(f"model file {str(path)!r}: not a path (it holds a NUL character)") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"model file {printable(path)} is a folder; give the path of an .onnx file")
    if not stat.S_ISREG(mode):
        raise InputError(f"model file {printable(path)} is not a regular file (a FIFO, device or socket); give an "
                         ".onnx file")


def _initializer(path, t):
    """Initializer ``t`` as an array (floats as float64), bounded by :data:`MAX_INITIALIZER_ELEMENTS`;
    data that do not decode (external data shorter than declared, ``raw_data`` of the wrong
    length, a type numpy cannot hold) is a :class:`ModelError` naming the initializer."""
    _, numpy_helper = _onnx()
    n = int(np.prod([int(d) for d in t.dims], dtype=object)) if len(t.dims) else 1
    if n > MAX_INITIALIZER_ELEMENTS:
        raise ModelError(f"{printable(path)}: initializer {t.name!r} declares {n:,} values (shape {list(t.dims)}); "
                         f"hlsnn takes at most {MAX_INITIALIZER_ELEMENTS:,} per initializer")
    try:
        arr = numpy_helper.to_array(t)
    except MemoryError:
        raise ModelError(f"{printable(path)}: initializer {t.name!r} ({n:,} values) does not fit in memory") from None
    except Exception as exc:  # noqa: BLE001 - onnx/numpy raise several types for bad data
        msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{printable(path)}: initializer {t.name!r}: its data cannot be read as {list(t.dims)} values "
                         f"({msg}); is its raw_data or external data file the declared size?") from None
    if arr.size != n:
        raise ModelError(f"{printable(path)}: initializer {t.name!r} holds {arr.size} values; its shape {list(t.dims)} "
                         f"declares {n}")
    return arr.astype(np.float64) if arr.dtype.kind == "f" else arr


def _check_sizes(path, model):
    """Every tensor whose size onnx's shape inference knows holds at most :data:`MAX_TENSOR_ELEMENTS`
    values (symbolic dimensions, the batch, count as 1): pads of 30,000 would otherwise ask numpy for
    tens of GiB in the float reference. Names the node that makes the tensor."""
    from onnx import shape_inference
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model shape inference cannot handle: the evaluator judges it
        return
    producer = {o: n for n in inferred.graph.node for o in n.output}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        n = int(np.prod([d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim], dtype=object))
        if any(d.HasField("dim_value") and d.dim_value <= 0 for d in tt.shape.dim):
            node = producer.get(vi.name)
            who = f"node {node.name or node.output[0]!r} ({node.op_type})" if node is not None else "the graph"
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
            raise ModelError(f"{printable(path)}: {who} makes an empty tensor {vi.name!r} of shape {dims}: its "
                             "kernel or window is larger than its padded input, or a shape is 0")
        if n > MAX_TENSOR_ELEMENTS:
            node = producer.get(vi.name)
            who = f"node {node.name or node.output[0]!r} ({node.op_type})" if node is not None else "the graph"
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
            raise ModelError(f"{printable(path)}: {who} makes tensor {vi.name!r} of shape {dims}, {n:,} values per "
                             f"evaluation (at most {MAX_TENSOR_ELEMENTS:,}): check its pads, strides and shapes")


def _float_param(value, name, node, what):
    """A weight, bias or BatchNormalization parameter: finite floats, else a :class:`ModelError`
    naming the initializer and the node."""
    arr = np.asarray(value)
    where = f"node {node.name or node.output[0]!r} ({node.op_type}): {what} {name!r}"
    if arr.dtype.kind != "f":
        raise ModelError(f"{where} has dtype {arr.dtype}; hlsnn takes float weights (float16, float32 or float64)")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ModelError(f"{where} has {int(bad.sum())} non-finite value(s) (NaN or Inf), e.g. at index "
                         f"{tuple(int(i) for i in np.argwhere(bad)[0])}")
    return arr


def _as_identity(node):
    from onnx import helper
    return helper.make_node("Identity", [node.input[0]], list(node.output), name=node.name or node.output[0])


def _check_names(path, g):
    """Every node, tensor and initializer name, op type and op domain of graph ``g`` printable and bounded
    (:func:`hlsnn.names.check_label`): names reach reports, generated kernels'
    comments and compiled models, so a newline or control character in one is refused here."""
    from ...names import check_label
    for what, names in (("initializer", (t.name for t in g.initializer)),
                        ("graph input", (v.name for v in g.input)), ("graph output", (v.name for v in g.output)),
                        ("node", (n.name for n in g.node if n.name)),
                        ("tensor", (t for n in g.node for t in list(n.input) + list(n.output) if t)),
                        # the op type and domain head the unsupported-node list and a host fallback's layer
                        ("op type", (n.op_type for n in g.node)),
                        ("op domain", (n.domain for n in g.node if n.domain))):
        for name in names:
            try:
                check_label(what, name)
            except InputError as e:
                raise ModelError(f"{printable(path)}: {e}") from None


def load_onnx(path, *, host_fallback=False, output=None) -> Network:
    """Import ``path`` (an .onnx file) as a :class:`Network` (see the module docstring).
    ``output``: the graph output to use when the model has several (a deployment config's
    ``output:``); only the nodes it depends on are imported."""
    onnx, numpy_helper = _onnx()
    path = Path(path)
    check_model_path(path)
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:  # onnx raises several types for a broken file
        raise InputError(f"{printable(path)}: not a valid ONNX model "
                         f"({str(e).splitlines()[0] if str(e) else type(e).__name__}){qimport.checker_hint(e)}")
    onnx_attrs.check_model(model)                 # the spec's bounds on attributes, also for --host-fallback
    model = qimport.float_model(model, path)      # QDQ pairs folded (a no-op without them)
    ctx = passes.Context(path, host_fallback, fold=_fold_constant)
    model = passes.run_graph(model, ctx)          # the rewrites (hlsnn.deploy.rewrite.passes), in order
    fs = ctx.fs                # static shapes at batch 1 for attention and shape ops (None: none needed)
    g = model.graph
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=13)
    _check_names(path, g)
    consts = {t.name: _initializer(path, t) for t in g.initializer}
    _check_sizes(path, model)
    graph_inputs = [i for i in g.input if i.name not in consts]
    names = [o.name for o in g.output]
    if len(graph_inputs) != 1:
        raise InputError(f"{printable(path)}: the model must have one input; it has {len(graph_inputs)}")
    if output is None and len(names) != 1:
        raise InputError(f"{printable(path)}: the model has {len(names)} outputs ({', '.join(names)}); name the one "
                         f"to deploy with `output:` in the deployment config")
    output = names[0] if output is None else output
    if output not in names:
        raise InputError(f"{printable(path)}: output {output!r} is not an output of the model; it has "
                         f"{', '.join(names)}")
    # only what the chosen output depends on (skl2onnx's label branch, ArgMax/ZipMap, is left out)
    producer = {o: n for n in g.node for o in n.output}
    needed, todo = set(), [output]
    while todo:
        n = producer.get(todo.pop())
        if n is not None and id(n) not in needed:
            needed.add(id(n))
            todo.extend(i for i in n.input if i)
    consumers = {}
    for node in g.node:
        for i in node.input:
            consumers.setdefault(i, []).append(node)
    outputs = {o.name for o in g.output}
    shapes = _shapes(model)
    if fs is not None:
        shapes = {k: ((None,) + v[1:] if v and v[0] == 1 else v) for k, v in fs.items()}

    def sole_user(name):
        users = consumers.get(name, [])
        return users[0] if len(users) == 1 and name not in outputs else None

    layers, unsupported, produced = [], [], {}
    skip = set()
    layer_name = graphindex.layer_names(g)
    # the importer's own names ({layer}/stuffed, {layer}/map ...): none a tensor or layer of the file has
    fresh = graphindex.namer(graphindex.tensor_names(g) | {layer_name(n) for n in g.node})

    def reject(node, why):
        """An unsupported node: listed in the error, or (host_fallback) run on the host."""
        name = layer_name(node)
        if node.domain in qimport.QONNX_DOMAINS:      # onnx's reference has no QONNX op: no fallback either
            return unsupported.append((name, node.op_type, why + qimport.QONNX_UNREAD))
        # the outputs something reads (a GRU's Y_h or an LSTM's Y_c that nothing reads is left out)
        used = [o for o in node.output if o and (o == output or any(id(u) in needed for u in consumers.get(o, ())))]
        if not host_fallback or len(used) != 1:
            if host_fallback and len(used) > 1:
                why += (f"; --host-fallback runs a node of one used output only, and {len(used)} of its outputs "
                        f"are read ({', '.join(used)})")
            unsupported.append((name, node.op_type, why))
            return
        if [o for o in node.output if o] != used:      # the unread outputs left out (optional in ONNX's RNNs)
            node = graphindex.with_outputs(node, [o if o in used else "" for o in node.output])
        ins = [i for i in node.input if i and i not in consts]
        attrs = {"consts": {i: consts[i] for i in node.input if i in consts}, "why": why,
                 "opset": [(o.domain, o.version) for o in model.opset_import]}
        if fs is not None and all(i in fs for i in ins) and used[0] in fs:
            # a file whose batch is fixed at 1: the node runs on each sample as the file's own computation
            # (hlsnn.deploy.run.samplewise: a lifted tensor (N, *S), a normal one (N, *S[1:]))
            attrs["sw"] = {"in_shapes": [list(fs[i]) for i in ins], "out_shape": list(fs[used[0]])}
        layer = Layer(name, "host", ins, used[0], op="fallback", node=node, attrs=attrs)
        layers.append(layer)
        produced[layer.output] = layer

    def const(name, node, what):
        if name not in consts:
            reject(node, f"{what} {name!r} is not a constant")
            return None
        return _float_param(consts[name], name, node, what)

    for node in g.node:
        if id(node) in skip or id(node) not in needed:
            continue
        name = layer_name(node)
        op = node.op_type
        a = _attrs(node)
        if op == "Constant":
            if "value" not in a:
                reject(node, "only tensor-valued Constant nodes are supported")
                continue
            arr = numpy_helper.to_array(a["value"])
            consts[node.output[0]] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
            continue
        if op in CONTROL_FLOW or any(at.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                                     for at in node.attribute):
            unsupported.append((name, op, "control flow (a node with a subgraph) is not supported, also not "
                                          "with --host-fallback: hlsnn runs straight-line graphs"))
            continue
        ins = [i for i in node.input if i]
        if ins and all(i in consts for i in ins) and len(node.output) == 1:
            folded = _fold_constant(node, consts, list(model.opset_import))   # an initializer-only subgraph
            if folded is not None:
                consts[node.output[0]] = folded
                continue
        if op == "Split" and ins and all(i in consts for i in ins):
            parts = constmm.fold_split(node, consts)      # a constant's parts (dynamo's MHA in_proj_weight, q != k)
            if parts is not None:
                consts.update(parts)
                continue
        if op == "Cast" and a.get("to") in (1, 11):          # FLOAT, DOUBLE: float64 already
            node = _as_identity(node)
            op, a = "Identity", {}
        if op == "Pad" and rules.zero_pads(node, a, consts):     # pads nothing: the identity
            node = _as_identity(node)
            op, a = "Identity", {}
        if op == "ZipMap" and node.domain == "ai.onnx.ml":
            why = _zipmap_unsupported(a)
            if why:
                reject(node, why)
                continue
            node = _as_identity(node)                        # the probabilities, column j = class j
            op, a = "Identity", {}
        layer = None
        parts = samplewise.split(node, a, fs) if fs is not None and op == "Split" else None
        if parts:                                   # one exact move per output (q, k, v of a fused Linear)
            for i, (sop, sins, sout, sat) in enumerate(parts):
                layers.append(Layer(fresh(f"{name}/{i}"), "host", sins, sout, op=sop, attrs=sat))
                produced[sout] = layers[-1]
            continue
        sw = None if fs is None else samplewise.rule(node, op, a, consts, fs,
                                                                 users=consumers.get(node.output[0], []))
        if isinstance(sw, str):
            reject(node, sw)
            continue
        if sw is not None:
            layer = Layer(name, "host", sw[1], node.output[0], op=sw[0], attrs=sw[2])
            layers.append(layer)
            produced[layer.output] = layer
            continue
        if op in ("Gemm", "MatMul"):
            wname = node.input[1]
            w = const(wname, node, "weight")
            if w is None:
                continue
            if op == "Gemm":
                if a.get("transA", 0):
                    reject(node, "transA = 1 is not supported")
                    continue
                w = w.T if a.get("transB", 0) else w
                w = w * a.get("alpha", 1.0)
                b = None
                if len(node.input) > 2 and node.input[2]:
                    b = const(node.input[2], node, "bias")
                    if b is None:
                        continue
                    n_out = w.shape[1] if w.ndim == 2 else None
                    if n_out is not None and np.size(b) not in (1, n_out):
                        reject(node, f"bias {node.input[2]!r} of shape {list(np.shape(b))}: a Gemm's bias (C) has "
                                     f"1 or N = {n_out} values here")
                        continue
                    b = np.broadcast_to(b * a.get("beta", 1.0), (w.shape[1],)).copy()
            else:
                b = None
            if w.ndim != 2:
                reject(node, f"weight of rank {w.ndim} (need a matrix)")
                continue
            rows = None
            if fs is not None and node.input[0] in fs:
                rows = samplewise.rows(fs[node.input[0]])
            elif op == "MatMul":
                rows = _matmul_rows(shapes.get(node.input[0]), w.shape[0])
                if isinstance(rows, str):
                    reject(node, rows)
                    continue
            wt = np.ascontiguousarray(w.T)  # (N, K)
            out = node.output[0]
            if op == "MatMul":
                nxt = sole_user(out)
                if nxt is not None and nxt.op_type == "Add":
                    other = nxt.input[1] if nxt.input[0] == out else nxt.input[0]
                    c = np.asarray(consts[other]) if other in consts else None
                    if c is not None and c.size == wt.shape[0] and c.shape[-1:] == (wt.shape[0],):
                        b = np.asarray(consts[other], np.float64).reshape(-1)
                        skip.add(id(nxt))
                        out = nxt.output[0]
            layer = Layer(name, "dense", [node.input[0]], out, op=op, w=wt,
                          b=np.zeros(wt.shape[0]) if b is None else np.asarray(b, np.float64).reshape(-1),
                          attrs={} if rows is None else {"rows": rows})
        elif op == "Conv":
            w = const(node.input[1], node, "weight")
            if w is None:
                continue
            one_d = w.ndim == 3
            a = _explicit_pads(a, shapes.get(node.input[0]), w.shape[2:])
            if isinstance(a, str):
                reject(node, a)
                continue
            if one_d:                               # Conv1d: the (k, 1) 2-D convolution of an (N, C, L, 1) map
                why = _conv1d_unsupported(a)
                if why:
                    reject(node, why)
                    continue
                w = w[..., None]
                a = dict(a, pads=[int(v) for v in a.get("pads", [0, 0])], strides=list(a.get("strides", [1])) + [1],
                         dilations=list(a.get("dilations", [1])) + [1])
                a["pads"] = [a["pads"][0], 0, a["pads"][1], 0]
                if "kernel_shape" in a:
                    a["kernel_shape"] = list(a["kernel_shape"]) + [1]
            why = _conv_unsupported(w, a)
            if why:
                reject(node, why)
                continue
            b = np.zeros(w.shape[0])
            if len(node.input) > 2 and node.input[2]:
                b = const(node.input[2], node, "bias")
                if b is None:
                    continue
            pads = [int(v) for v in a.get("pads", [0, 0, 0, 0])]      # ONNX: top, left, bottom, right
            src, folded = node.input[0], []
            prev = produced.get(src)
            rank = 6 if one_d else 8
            if prev is not None and prev.op == "Pad" and prev.attrs["value"] == 0 \
                    and "mode" not in prev.attrs \
                    and len(prev.attrs["pads"]) == rank \
                    and not any(prev.attrs["pads"][i] for i in (0, 1, rank // 2, rank // 2 + 1)) \
                    and sole_user(src) is node:
                pp = prev.attrs["pads"]                 # a zero Pad of H and W (of L) only: the conv's own padding
                pads = ([pads[0] + pp[2], pads[1] + pp[3], pads[2] + pp[6], pads[3] + pp[7]] if not one_d else
                        [pads[0] + pp[2], 0, pads[2] + pp[5], 0])     # F.pad(x, (k - 1, 0)): a causal Conv1d
                layers.remove(prev)
                src, folded = prev.inputs[0], [prev.name]
            hw = shapes.get(src, ())[2:4]
            if one_d:
                hw = tuple(hw) + (1,) if len(hw) == 1 else ()
            layer = Layer(name, "conv", [src], node.output[0], op=op, w=np.asarray(w, np.float64), folded=folded,
                          attrs={"conv1d": True} if one_d else {},
                          in_hw=tuple(hw) if len(hw) == 2 and None not in hw else None,
                          b=np.asarray(b, np.float64).reshape(-1).copy(), pads=tuple(pads),
                          strides=tuple(int(v) for v in a.get("strides", [1, 1])),
                          dilations=tuple(int(v) for v in a.get("dilations", [1, 1])), group=int(a.get("group", 1)))
        elif op == "ConvTranspose":
            w = const(node.input[1], node, "weight")
            if w is None:
                continue
            shp, one_d = shapes.get(node.input[0]), w.ndim == 3
            if one_d:                               # ConvTranspose1d: the (k, 1) 2-D one on the (N, C, L, 1) map
                w, a, shp = _one_d_as_2d(w, a, shp)
            spec = _conv_transpose(w, a, shp)
            if isinstance(spec, str):
                reject(node, spec)
                continue
            wc, strides, pads, dil, group = spec
            b = np.zeros(wc.shape[0])
            if len(node.input) > 2 and node.input[2]:
                b = const(node.input[2], node, "bias")
                if b is None:
                    continue
            src, out = node.input[0], node.output[0]
            if strides != (1, 1):              # the stride's zeros between the pixels: an exact host op
                stuff = Layer(fresh(f"{name}/zero_stuff"), "host", [src], fresh(f"{name}/stuffed"), op="ZeroStuff",
                              attrs={"strides": strides, "map_1d": True} if one_d else {"strides": strides})
                layers.append(stuff)
                produced[stuff.output] = stuff
                src = stuff.output
            hw = (shp or ())[2:4]
            in_hw = None if len(hw) != 2 or None in hw else ((hw[0] - 1) * strides[0] + 1,
                                                             (hw[1] - 1) * strides[1] + 1)
            layer = Layer(name, "conv", [src], out, op=op, w=wc,
                          b=np.asarray(b, np.float64).reshape(-1).copy(), pads=pads, strides=(1, 1), dilations=dil,
                          group=group, in_hw=in_hw, attrs={"conv1d": True} if one_d else {})
        elif op in rules.OPS:
            spec = rules.host_rule(node, a, consts, shapes)
            if isinstance(spec, str):
                reject(node, (op == "Max" and maxleaky.why(node, g)) or spec)
                continue
            if spec.op == "Upsample" and len(spec.attrs["factors"]) == 1:     # nearest on (N, C, L): on the map
                spec.attrs = {"factors": (spec.attrs["factors"][0], 1), "map_1d": True}
            prev = produced.get(spec.inputs[0])
            fusable = prev is not None and prev.is_engine and sole_user(spec.inputs[0]) is node
            if spec.op == "Clip" and fusable and not prev.relu and spec.attrs["lo"] is not None \
                    and spec.attrs["lo"] >= 0:
                prev.relu = True                    # clip(relu(x), lo, hi) = clip(x, lo, hi) for lo >= 0
                if spec.attrs["lo"] == 0 and spec.attrs["hi"] is None:
                    prev.folded.append(name)
                    prev.output = node.output[0]
                    produced[prev.output] = prev
                    continue
                prev.folded.append(f"{name} (its ReLU)")
                if spec.attrs["lo"] == 0:
                    spec.attrs = dict(spec.attrs, lo=None)
            if spec.op == "Scale" and fusable:
                c = rules.channel_scale(spec.attrs["c"], prev.kind, prev.w.shape[0])
                if c is not None and (not prev.relu or (c > 0).all()):
                    c = 1.0 / c if spec.attrs["divide"] else c
                    prev.w = prev.w * c.reshape((-1,) + (1,) * (prev.w.ndim - 1))
                    prev.b = prev.b * c
                    prev.folded.append(name)
                    prev.output = node.output[0]
                    produced[prev.output] = prev
                    continue
            layer = Layer(name, "host", spec.inputs, node.output[0], op=spec.op, attrs=spec.attrs)
        elif op in HOST_OPS:
            prev = produced.get(node.input[0])
            if op == "BatchNormalization" and all(i in consts for i in node.input[1:5]):
                for i, what in zip(node.input[1:5], ("scale", "bias", "mean", "variance")):
                    _float_param(consts[i], i, node, what)
                if np.any(np.asarray(consts[node.input[4]]) < 0):
                    raise ModelError(f"node {name!r} (BatchNormalization): variance {node.input[4]!r} has "
                                     f"{int(np.sum(np.asarray(consts[node.input[4]]) < 0))} negative value(s); a "
                                     "variance is >= 0")
            if op == "BatchNormalization" and prev is not None and prev.is_engine and not prev.relu \
                    and "rows" not in prev.attrs \
                    and sole_user(node.input[0]) is node and all(i in consts for i in node.input[1:5]):
                gamma, beta, mean, var = (np.asarray(consts[i], np.float64).reshape(-1) for i in node.input[1:5])
                s = gamma / np.sqrt(var + a.get("epsilon", 1e-5))
                prev.w = prev.w * s.reshape((-1,) + (1,) * (prev.w.ndim - 1))
                prev.b = (prev.b - mean) * s + beta
                prev.folded.append(name)
                prev.output = node.output[0]
                produced[prev.output] = prev
                continue
            if op == "Relu" and prev is not None and prev.is_engine and not prev.relu \
                    and sole_user(node.input[0]) is node:
                prev.relu = True
                prev.folded.append(name)
                prev.output = node.output[0]
                produced[prev.output] = prev
                continue
            why = _host_unsupported(op, a, node, consts)
            if why:
                reject(node, why)
                continue
            if op == "Reshape":
                a = dict(a, shape=tuple(int(v) for v in np.asarray(consts[node.input[1]]).reshape(-1)))
            if op == "Softmax" and opset < 13:     # opset 1-12: the axes from `axis` (default 1) on, as one
                a = dict(a, axis=int(a.get("axis", 1)), coerce_2d=True)
            if op == "BatchNormalization":
                a = dict(a, params=[np.asarray(consts[i], np.float64).reshape(-1) for i in node.input[1:5]])
            if op == "Add":
                if all(i in consts for i in node.input):
                    reject(node, "Add of two constants")
                    continue
                if any(i in consts for i in node.input):     # a constant offset (GELU's + 1, a positional table)
                    x_in, c_in = (node.input[0], node.input[1]) if node.input[1] in consts else node.input[::-1]
                    c = np.asarray(consts[c_in], np.float64)
                    shp = shapes.get(x_in)
                    if shp is not None and c.ndim >= len(shp) and c.shape[c.ndim - len(shp)] not in (1,) + (
                            (shp[0],) if shp[0] is None else ()):
                        reject(node, f"Add of a constant of shape {c.shape} to a tensor of shape {tuple(shp)}: the "
                                     "constant would broadcast over the batch")
                        continue
                    _float_param(c, c_in, node, "constant")
                    layer = Layer(name, "host", [x_in], node.output[0], op="AddConst", attrs={"c": c})
                else:
                    layer = Layer(name, "host", list(node.input), node.output[0], op=op, attrs=a)
            else:
                layer = Layer(name, "host", [node.input[0]], node.output[0], op=op, attrs=a)
        else:
            reject(node, f"no engine or host rule for {op}")
            continue
        if layer is not None:
            layers.append(layer)
            produced[layer.output] = layer
    if unsupported:
        raise UnsupportedModelError(str(path), unsupported, host_fallback)
    ctx.fresh = fresh
    layers = passes.run_layers(layers, output, ctx)   # bn(cat(convs)), rows as maps, gates, unary chains
    if output not in produced and output != graph_inputs[0].name:
        raise InputError(f"{printable(path)}: cannot trace the graph output {output!r} to a layer")
    _check_layer_names(path, layers)
    input_shape = _dims(graph_inputs[0])
    if input_shape and input_shape[0] == 1:
        # an export with the batch fixed at 1 (torch.onnx.export's default): the leading 1 is the
        # batch, in the input and in every constant Reshape target that starts with it
        input_shape = (None,) + tuple(input_shape[1:])
        for layer in layers:
            if layer.op == "Reshape" and layer.attrs.get("shape", (0,))[0] == 1:
                layer.attrs = dict(layer.attrs, batch_leading=True)
    return Network(name=path.stem, path=str(path), input=graph_inputs[0].name,
                   input_shape=input_shape, output=output, layers=layers,
                   fixed_batch_one=_dims(graph_inputs[0])[:1] == (1,))


