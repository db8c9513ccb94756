"""Recurrent cells (ONNX ``GRU``, ``LSTM``, ``RNN``) unrolled into ops the engines run.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
before the shape rewrites; a model without a recurrent node passes unchanged). A node with a
static sequence length ``T`` becomes, for each step ``t``, ONNX's own equations of the cell written
with the ops hlsnn already runs on an engine or in the network mode:

* the input products ``X_t W_k^T`` as dense layers (``Gemm``, constant weights) of the flattened
  input ``(N, T*F)``, one per gate ``k`` (the gate's channel range of ``W``), whose weight reads
  step ``t``'s ``F`` features only (zeros elsewhere: the step's slice of the input is in the
  weights, not a data move); the biases ``Wb_k + Rb_k`` in it;
* the recurrent products ``H_{t-1} R_k^T`` as dense layers of the state (``Gemm``), added to the
  input products (``Add`` of two tensors);
* ``Sigmoid`` and ``Tanh`` (tables in the network mode, rule unary_table), the gates' elementwise products
  (``Mul`` of two tensors: rule channel_gate's product of two maps) and sums (``Add``), ``1 - z`` as a
  dense layer of weights ``-I`` and bias 1 (an affine op every engine runs);
* the state carried to the next step by name; a state that is a sum and that a product of the
  next step reads (a GRU's ``H_t``, an LSTM's ``C_t``) through a dense layer of identity weights
  (exact in float): an engine layer, so every reader of the state reads the same codes, the sum
  requantized once (the network mode takes a gate ``Mul`` of codes, not of a pending ``Add``).

The equations, as ONNX defines them (gate order in ``W``, ``R``, ``B``: GRU ``z, r, h``; LSTM
``i, o, f, c``; RNN one gate), with ``x_k = X_t W_k^T + Wb_k``, ``h_k = H_{t-1} R_k^T + Rb_k``::

    GRU   z = sigmoid(x_z + h_z)   r = sigmoid(x_r + h_r)
          n = tanh(x_h + r * h_h)                                  (linear_before_reset = 1)
          n = tanh(x_h + (r * H_{t-1}) R_h^T + Rb_h)               (linear_before_reset = 0)
          H_t = (1 - z) * n + z * H_{t-1}
    LSTM  i = sigmoid(x_i + h_i)   f = sigmoid(x_f + h_f)   o = sigmoid(x_o + h_o)
          C_t = f * C_{t-1} + i * tanh(x_c + h_c)          H_t = o * tanh(C_t)
    RNN   H_t = tanh(x_i + h_i)

A constant initial state (absent: zeros; an initializer; or computed from the input's *shape*
only, as TorchScript builds ``zeros(1, N, H)``, with one value per hidden unit for every sample) is
folded: its products are constants, added to the biases, and a product by zero drops out. Both
layouts (0: ``X (T, N, F)``, 1: ``X (N, T, F)``) and both directions ``forward`` and ``reverse``
(the steps in the other order) are taken.

The outputs: the readers of ``Y``, ``Y_h`` and ``Y_c`` through data moves (``Transpose``,
``Squeeze``, ``Unsqueeze``, ``Reshape``, ``Flatten``, ``Gather`` / ``Slice`` by constants) are
followed, on an index array of the file's shapes, to the first tensor that is not such a move:
where it is (N, K) with each sample's row its own states, one step's state (``h_n[-1]``,
``out[:, -1]``) is that step's ``H_t`` and the steps' states in order (``out.flatten(1)``) their
``Concat``; a second recurrent node reading the whole sequence (stacked layers) reads that
``Concat`` as its flattened input. Any other reading of them is the ONNX tensor itself, built with
``Unsqueeze`` and ``Concat``.

Refused, with the node and attribute named (or, with ``--host-fallback``, left to run on the host
in float): ``direction: bidirectional``, peepholes ``P`` (other than zeros), ``clip``,
``input_forget``, activations other than the defaults, a ``sequence_lens`` input, an initial
state computed from the input's values, a sequence length that the file does not fix.
The rewritten float graph equals onnxruntime's node to float rounding
(``tests/deploy/test_rnnunroll.py``).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr
from ...errors import UnsupportedModelError

OPS = ("GRU", "LSTM", "RNN")
#: gates and default activations per op
_GATES = {"GRU": 3, "LSTM": 4, "RNN": 1}
_DEFAULT_ACTS = {"GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"], "RNN": ["Tanh"]}
#: the data moves :func:`_follow` carries an index array through
_MOVES = ("Transpose", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Gather", "Slice", "Identity")


def rewrite(model, host_fallback=False, path="model"):
    """``model`` with each recurrent node unrolled (a copy), or ``model`` itself without any.
    An unsupported node raises :class:`UnsupportedModelError` naming it and why, or with
    ``host_fallback`` is left as it is (it then runs on the host)."""
    if not any(n.op_type in OPS and n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model
    m, fresh = graphindex.copy_fresh(model)
    node_name = graphindex.node_names(m.graph)
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=13)
    shapes = graphindex.shapes(m, data_prop=True)
    refused, flats = [], {}
    for node in [n for n in m.graph.node if n.op_type in OPS and n.domain in ("", "ai.onnx")]:
        plan = _plan(m, node, shapes, flats.get(id(node)))
        if isinstance(plan, str):
            refused.append((node.name or node.output[0], node.op_type, plan + "; --host-fallback runs it on the "
                            "host in float"))
            continue
        _unroll(m, node, plan, _Emit(m.graph, fresh, node_name, opset, node.name or node.op_type), flats)
    if refused and not host_fallback:
        raise UnsupportedModelError(path, refused)
    _drop_dead(m.graph)
    return m


# --- what a node asks for --------------------------------------------------------------------------

def _plan(m, node, shapes, flat=None):
    """The node's unrolling parameters (a dict), or why it is refused (a string). ``flat``: its
    input as an earlier recurrent node's states, ``(tensor (N, T*F), T)`` (stacked layers)."""
    op, g = node.op_type, m.graph
    consts = graphindex.constants(g)
    ins = list(node.input) + [""] * (8 - len(node.input))
    direction = _s(_attr(node, "direction", b"forward"))
    if direction not in ("forward", "reverse"):
        return f"direction {direction!r} is not supported (forward and reverse are)"
    acts = [_s(a) for a in (_attr(node, "activations") or [])]
    if acts and [a.lower() for a in acts] != [a.lower() for a in _DEFAULT_ACTS[op]]:
        return f"activations {acts} are not supported (only the defaults {_DEFAULT_ACTS[op]})"
    if _attr(node, "activation_alpha") or _attr(node, "activation_beta"):
        return "activation_alpha / activation_beta are not supported (the default activations take none)"
    if _attr(node, "clip") is not None:
        return "clip is not supported (a cell without clipping is)"
    if op == "LSTM" and _attr(node, "input_forget", 0):
        return "input_forget=1 is not supported (0 is)"
    if ins[4]:
        return "a sequence_lens input is not supported (every sequence runs the file's static length)"
    for i, what in ((1, "W"), (2, "R")) + (((3, "B"),) if ins[3] else ()):
        if ins[i] not in consts:
            return f"{what} {ins[i]!r} is not a constant"
    W, R = (np.asarray(consts[ins[i]], np.float64) for i in (1, 2))
    hidden, gates = int(_attr(node, "hidden_size", R.shape[-1])), _GATES[op]
    if W.ndim != 3 or W.shape[0] != 1 or W.shape[1] != gates * hidden or R.shape != (1, gates * hidden, hidden):
        return f"W {W.shape} / R {R.shape} do not have the shapes of one direction, {gates} gates of {hidden}"
    B = np.asarray(consts[ins[3]], np.float64).reshape(1, -1) if ins[3] else np.zeros((1, 2 * gates * hidden))
    if op == "LSTM" and ins[7]:
        if ins[7] not in consts or np.any(np.asarray(consts[ins[7]]) != 0):
            return "peepholes (input P) are not supported (an LSTM without them is)"
    layout = int(_attr(node, "layout", 0))
    xs = shapes.get(ins[0]) if flat is None else ((flat[1], 1, W.shape[2]) if layout == 0 else (1, flat[1], W.shape[2]))
    if xs is None or len(xs) != 3 or not isinstance(xs[layout], int) or xs[2] != W.shape[2]:
        return f"the input's shape {xs} does not fix the sequence length (a static T is needed)"
    states = []
    for i in (5, 6) if op == "LSTM" else (5,):
        v = _state(m, ins[i], hidden, layout)
        if isinstance(v, str):
            return f"initial state {ins[i]!r}: {v}"
        states.append(v)
    return {"W": W[0], "R": R[0], "B": B[0], "H": hidden, "T": xs[layout], "F": W.shape[2], "layout": layout,
            "reverse": direction == "reverse", "states": states, "lbr": int(_attr(node, "linear_before_reset", 0)),
            "flat": None if flat is None else flat[0], "N": xs[1 - layout] if isinstance(xs[1 - layout], int) else 1}


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _state(m, name, hidden, layout):
    """An initial state as one (H,) vector for every sample, or why not (a string)."""
    if not name:
        return np.zeros(hidden)
    g = m.graph
    consts, producer, _, _ = graphindex.index(g)
    if name in consts:
        v = np.asarray(consts[name], np.float64)
    else:                               # computed: from the input's shape only (TorchScript's zeros)
        todo, seen = [(name, False)], set()
        inputs = {i.name for i in g.input} - set(consts)
        while todo:                     # (tensor, read through a Shape only)
            t, shaped = todo.pop()
            if t in inputs and not shaped:
                return "it is computed from the input's values"
            n = producer.get(t)
            if n is None or (id(n), shaped) in seen:
                continue
            seen.add((id(n), shaped))
            todo.extend((i, shaped or n.op_type == "Shape") for i in n.input if i)
        seen = {k for k, _ in seen}
        v = _evaluate(m, [n for n in g.node if id(n) in seen], name)
        if v is None:
            return "it is computed by nodes whose value is not known before the run"
    if v.ndim != 3 or v.shape[-1] != hidden or v.shape[layout] != 1:
        return f"its shape {v.shape} is not one direction's (H {hidden})"
    rows = v.reshape(-1, hidden)
    if np.any(rows != rows[:1]):
        return "it differs between samples"
    return rows[0]


def _evaluate(m, nodes, name):
    """``name`` computed by ``nodes`` (which read the graph's input through ``Shape`` only) with
    onnx's reference at the file's input shape (a dynamic size taken as 1), or None."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    g = m.graph
    consts = graphindex.constants(g)
    feeds = {}
    for i in g.input:
        if i.name not in consts:
            dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = np.zeros(dims, helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
    used = {i for n in nodes for i in n.input}
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items() if k in used]
    gi = [helper.make_tensor_value_info(k, TensorProto.FLOAT if v.dtype == np.float32 else
                                        helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for k, v in feeds.items() if k in used]
    try:
        sub = helper.make_graph(nodes, "state", gi, [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)],
                                initializer=inits)
        model = helper.make_model(sub, opset_imports=list(m.opset_import))
        return np.asarray(ReferenceEvaluator(model).run(None, {k: feeds[k] for k in feeds if k in used})[0],
                          np.float64)
    except Exception:                   # noqa: BLE001 - onnx raises many types: the value is unknown
        return None


# --- the nodes that compute it ---------------------------------------------------------------------

class _Emit:
    """New nodes in place of one recurrent node. A value is a tensor name or an (H,) constant
    (the folded initial state and what it makes); constants fold, a product by zero drops out,
    a product by one value per hidden unit is a dense layer of diagonal weights."""

    def __init__(self, g, fresh, node_name, opset, base):
        self.g, self.fresh, self.node_name, self.opset, self.base = g, fresh, node_name, opset, base
        self.nodes, self.inits = [], []
        self.ones = None                # (H,) ones: set by _unroll

    def const(self, value, what):
        from onnx import numpy_helper
        name = self.fresh(f"{self.base}/{what}")
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(self, op, inputs, what, **attrs):
        from onnx import helper
        out = self.fresh(f"{self.base}/{what}")
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.node_name(f"{self.base}/{what}"), **attrs))
        return out

    def gemm(self, a, w, b, what):
        """``a @ w.T + b`` (``w`` (out, in)); of a constant ``a``: the constant."""
        if not isinstance(a, str):
            return w @ a + b
        return self.node("Gemm", [a, self.const(w, what + "_w"), self.const(b, what + "_b")], what, transB=1)

    def add(self, a, b, what):
        if not isinstance(a, str) and not isinstance(b, str):
            return a + b
        if not isinstance(a, str):
            a, b = b, a
        if not isinstance(b, str):
            return a if not np.any(b) else self.node("Add", [a, self.const(b, what + "_c")], what)
        return self.node("Add", [a, b], what)

    def mul(self, a, b, what):
        if not isinstance(a, str) and not isinstance(b, str):
            return a * b
        if not isinstance(a, str):
            a, b = b, a
        if not isinstance(b, str):
            if not np.any(b):
                return np.zeros_like(b)
            if np.all(b == 1):
                return a
            if np.all(b == b.flat[0]):  # one number: a scale (a table in the network mode)
                return self.node("Mul", [a, self.const(np.float32(b.flat[0]), what + "_c")], what)
            return self.gemm(a, np.diag(b), np.zeros(b.size), what)   # one per unit: a diagonal dense layer
        return self.node("Mul", [a, b], what)

    def act(self, op, a, what):
        if not isinstance(a, str):
            return 1 / (1 + np.exp(-a)) if op == "Sigmoid" else np.tanh(a)
        return self.node(op, [a], what)

    def one_minus(self, z, what):
        """``1 - z`` as a dense layer of weights ``-I`` and bias 1 (exact in float; an engine layer,
        which every engine's network mode takes after a table, BFP's too)."""
        if not isinstance(z, str):
            return 1 - z
        return self.gemm(z, -np.eye(len(self.ones)), self.ones, what)

    def axes_node(self, op, a, axes, what):
        if self.opset >= 13:
            return self.node(op, [a, self.const_i64(axes, what + "_axes")], what)
        return self.node(op, [a], what, axes=list(axes))

    def const_i64(self, value, what):
        from onnx import numpy_helper
        name = self.fresh(f"{self.base}/{what}")
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.int64), name))
        return name


def _unroll(m, node, p, e, flats):
    """Replace ``node`` in ``m``'s graph by the steps of plan ``p`` emitted through ``e``."""
    g, op = m.graph, node.op_type
    H, T, F, W, R, B = p["H"], p["T"], p["F"], p["W"], p["R"], p["B"]
    G = _GATES[op]
    e.ones = np.ones(H)
    Wb, Rb = B[:G * H], B[G * H:]
    rows = [slice(k * H, (k + 1) * H) for k in range(G)]
    _, producer, _, _ = graphindex.index(g)
    x = node.input[0]
    src = producer.get(x)
    if p["flat"] is not None:
        pass
    elif p["layout"] == 0:      # (T, N, F): batch first by the Transpose that made it, or a new one
        if src is not None and src.op_type == "Transpose" and list(_attr(src, "perm", [])) == [1, 0, 2]:
            x = src.input[0]
        else:
            x = e.node("Transpose", [x], "batch_first", perm=[1, 0, 2])
    flat = p["flat"] or e.node("Flatten", [x], "steps", axis=1)

    def x_part(k, t, what, bias):
        w = np.zeros((H, T * F))
        w[:, t * F:(t + 1) * F] = W[rows[k]]
        return e.gemm(flat, w, bias, what)

    h = p["states"][0]
    c = p["states"][1] if op == "LSTM" else None
    hs, cs = [], []
    order = range(T - 1, -1, -1) if p["reverse"] else range(T)
    for t in order:
        s = f"t{t}"
        if op == "GRU":
            z = e.act("Sigmoid", e.add(x_part(0, t, s + "/xz", Wb[rows[0]] + Rb[rows[0]]),
                                       e.gemm(h, R[rows[0]], np.zeros(H), s + "/hz"), s + "/az"), s + "/z")
            r = e.act("Sigmoid", e.add(x_part(1, t, s + "/xr", Wb[rows[1]] + Rb[rows[1]]),
                                       e.gemm(h, R[rows[1]], np.zeros(H), s + "/hr"), s + "/ar"), s + "/r")
            if p["lbr"]:
                hh = e.mul(r, e.gemm(h, R[rows[2]], Rb[rows[2]], s + "/hh"), s + "/rhh")
                xh = x_part(2, t, s + "/xh", Wb[rows[2]])
            else:
                hh = e.gemm(e.mul(r, h, s + "/rh"), R[rows[2]], np.zeros(H), s + "/hh")
                xh = x_part(2, t, s + "/xh", Wb[rows[2]] + Rb[rows[2]])
            n = e.act("Tanh", e.add(xh, hh, s + "/ah"), s + "/n")
            h = e.add(e.mul(e.one_minus(z, s + "/1mz"), n, s + "/zn"), e.mul(z, h, s + "/zh"), s + "/h")
        elif op == "LSTM":
            pre = [e.add(x_part(k, t, s + f"/x{k}", Wb[rows[k]] + Rb[rows[k]]),
                         e.gemm(h, R[rows[k]], np.zeros(H), s + f"/h{k}"), s + f"/a{k}") for k in range(4)]
            i, o, f = (e.act("Sigmoid", pre[k], s + "/" + g_) for k, g_ in ((0, "i"), (1, "o"), (2, "f")))
            cand = e.act("Tanh", pre[3], s + "/g")
            c = e.add(e.mul(f, c, s + "/fc"), e.mul(i, cand, s + "/ig"), s + "/c")
            if t != order[-1] and isinstance(c, str):   # read by a product next step: a copy layer
                c = e.gemm(c, np.eye(H), np.zeros(H), s + "/c_copy")
            h = e.mul(o, e.act("Tanh", c, s + "/tc"), s + "/h")
        else:
            h = e.act("Tanh", e.add(x_part(0, t, s + "/x", Wb + Rb), e.gemm(h, R, np.zeros(H), s + "/hh"),
                                    s + "/a"), s + "/h")
        hs.append(h)
        cs.append(c)
        if t != order[-1] and op == "GRU" and isinstance(h, str):   # read by a product next step: a copy layer
            h = e.gemm(h, np.eye(H), np.zeros(H), s + "/h_copy")
    if p["reverse"]:
        hs, cs = hs[::-1], cs[::-1]
    last = 0 if p["reverse"] else T - 1
    _outputs(m, node, p, e, [_tensor(e, v, f"t{t}/h_state") for t, v in enumerate(hs)],
             _tensor(e, cs[last], "c_last") if op == "LSTM" else None, last, flats)
    at = list(g.node).index(node)
    kept = list(g.node[:at]) + e.nodes + list(g.node[at + 1:])
    graphindex.replace(g.node, kept)
    g.initializer.extend(e.inits)


def _tensor(e, v, what):
    """A value as a tensor (a constant state: refused, no step computes it)."""
    if isinstance(v, str):
        return v
    raise UnsupportedModelError(e.base, [(e.base, "recurrent", "a state that no step computes (T = 0)")])


def _outputs(m, node, p, e, hs, c_last, last, flats):
    """Rename the readers of the node's outputs to the steps' states (module docstring); a
    recurrent node reading the whole sequence as its input gets it flattened batch first in
    ``flats`` (the Concat of the states)."""
    T, H, layout, nb = p["T"], p["H"], p["layout"], p["N"]
    outs = list(node.output) + [""] * 3
    # each output as an index array of its file shape: sample n, slot s (step t's H; slot T: C), unit j
    # as n * (T + 1) * H + s * H + j
    per = (T + 1) * H
    samples = (np.arange(nb) * per).reshape(1, nb, 1)
    idx = {0: (np.arange(T)[:, None, None] * H + samples + np.arange(H)).reshape(T, 1, nb, H),
           1: (last * H + samples + np.arange(H)), 2: (T * H + samples + np.arange(H))}
    if layout == 1:
        idx = {0: idx[0].transpose(2, 0, 1, 3), 1: idx[1].transpose(1, 0, 2), 2: idx[2].transpose(1, 0, 2)}
    slots = hs + ([c_last] if c_last is not None else [])

    def rows(where):
        """(N, K) samples by rows, each row the same slots: row 0 less its sample offset, or None."""
        if where.ndim != 2 or where.shape[0] != nb or np.any(where - where[:1] != (np.arange(nb) * per)[:, None]):
            return None
        return where[0]

    for k in range(3):
        name = outs[k]
        if not name:
            continue
        raw = False                     # the output itself is read: built as ONNX defines it
        for reader, tensor, where in _follow(m.graph, name, idx[k]):
            if reader is not None and reader.op_type in OPS and reader.input[0] == tensor and where.ndim == 3:
                lay = int(_attr(reader, "layout", 0))
                order = rows((where.transpose(1, 0, 2) if lay == 0 else where).reshape(where.shape[1 - lay], -1))
                if order is not None and np.array_equal(order, np.arange(T * H)):
                    flats[id(reader)] = (e.node("Concat", hs, "seq_flat", axis=1), T)
            flat = rows(where)
            if flat is not None and flat.size % H == 0 and all(
                    flat[j * H] % H == 0 and np.array_equal(flat[j * H:(j + 1) * H], flat[j * H] + np.arange(H))
                    for j in range(flat.size // H)):
                parts = [slots[flat[j * H] // H] for j in range(flat.size // H)]
                _redirect(m.graph, reader, tensor,
                          parts[0] if len(parts) == 1 else e.node("Concat", parts, f"seq{len(parts)}", axis=1))
            else:
                raw = True
        if raw:
            e.nodes.append(_identity(_as_onnx(e, k, hs, c_last, last, layout), name))


def _identity(src, name):
    from onnx import helper
    return helper.make_node("Identity", [src], [name], name=name + "/value")


def _as_onnx(e, k, hs, c_last, last, layout):
    """The node's output ``k`` as ONNX defines it, from the steps' states (each (N, H))."""
    if k == 0:
        parts = [e.axes_node("Unsqueeze", h, [0, 1] if layout == 0 else [1, 2], "y_step") for h in hs]
        return e.node("Concat", parts, "y", axis=0 if layout == 0 else 1)
    return e.axes_node("Unsqueeze", hs[last] if k == 1 else c_last, [0] if layout == 0 else [1], "y_last")


def _follow(g, name, where):
    """``(reader, tensor, index array)`` for each end of the data moves from ``name``: the index
    array (``where``, of ``name``'s file shape) carried through single-reader moves to the tensor a
    reader that is not such a move reads (the graph's output: reader None)."""
    consts, _, readers, outputs = graphindex.index(g)
    ends, todo = [], [(name, where)]
    while todo:
        t, w = todo.pop()
        users = readers.get(t, [])
        if t in outputs:
            ends.append((None, t, w))
        for u in users:
            nxt = _move(u, w, consts)
            if nxt is None:
                ends.append((u, t, w))
            else:
                todo.append((u.output[0], nxt))
    return ends


def _move(n, w, consts):
    """``w`` carried through data move ``n`` (constant parameters), or None."""
    op = n.op_type
    if op not in _MOVES or n.domain not in ("", "ai.onnx"):
        return None
    c = [np.asarray(consts[i]) if i in consts else None for i in n.input[1:]]
    if any(v is None for i, v in zip(n.input[1:], c) if i):
        return None
    try:
        if op == "Identity":
            return w
        if op == "Transpose":
            return w.transpose(_attr(n, "perm", list(range(w.ndim))[::-1]))
        if op in ("Squeeze", "Unsqueeze"):
            axes = c[0] if c and c[0] is not None else _attr(n, "axes")
            if axes is None:
                return np.squeeze(w) if op == "Squeeze" else None
            axes = [int(a) % (w.ndim + (len(axes) if op == "Unsqueeze" else 0)) for a in np.ravel(axes)]
            return np.squeeze(w, tuple(axes)) if op == "Squeeze" else np.expand_dims(w, tuple(axes))
        if op == "Reshape":
            shape = [w.shape[i] if s == 0 else int(s) for i, s in enumerate(c[0])]
            return w.reshape(shape)
        if op == "Flatten":
            a = int(_attr(n, "axis", 1)) % max(w.ndim, 1)
            return w.reshape(int(np.prod(w.shape[:a])), -1)
        if op == "Gather":
            return np.take(w, c[0].astype(np.int64), axis=int(_attr(n, "axis", 0)))
        if op == "Slice":
            starts, ends = c[0], c[1]
            axes = c[2] if len(c) > 2 and c[2] is not None else np.arange(len(starts))
            steps = c[3] if len(c) > 3 and c[3] is not None else np.ones(len(starts), np.int64)
            sl = [slice(None)] * w.ndim
            for s, e_, a, st in zip(starts, ends, axes, steps):
                sl[int(a)] = slice(int(s), int(e_), int(st))
            return w[tuple(sl)]
    except (ValueError, IndexError, TypeError):
        return None
    return None


def _redirect(g, reader, tensor, new):
    """``reader`` reads ``new`` where it read ``tensor`` (None: the graph's output ``tensor`` is
    computed as ``new`` by an Identity)."""
    if reader is None:
        for n in g.node:                # the moves' last node no longer writes it (left dead)
            for i, o in enumerate(n.output):
                if o == tensor:
                    n.output[i] = tensor + "/moved"
        g.node.append(_identity(new, tensor))
        return
    for i, name in enumerate(reader.input):
        if name == tensor:
            reader.input[i] = new


def _drop_dead(g):
    """Nodes whose outputs nothing reads (the replaced node's moves and initial-state nodes)."""
    outputs = {o.name for o in g.output}
    while True:
        read = {i for n in g.node for i in n.input} | outputs
        kept = [n for n in g.node if any(o in read for o in n.output if o)]
        if len(kept) == len(g.node):
            break
        graphindex.replace(g.node, kept)
    used = {i for n in g.node for i in n.input} | {i.name for i in g.input}
    kept_init = [t for t in g.initializer if t.name in used or t.name in outputs]
    graphindex.replace(g.initializer, kept_init)
