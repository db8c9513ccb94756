"""What torch's exporters write as nodes hlsnn has no rule for, rewritten into nodes it has.

A pre-pass of the importer (:func:`rewrite`, called once by
:func:`hlsnn.deploy.importer.onnx_import.load_onnx` after :func:`hlsnn.deploy.importer.qimport.float_model`; a
model without these patterns passes unchanged). Each rewrite is exact: the new nodes compute, by
ONNX's definitions, what the old ones did (tested against onnxruntime on files torch wrote).

* ``Einsum`` of two tensors that is a (batched) matrix product, as ``torch.einsum`` writes
  attention or a token-wise weight (``"btd,bsd->bts"``, ``"bts,bsd->btd"``, ``"btf,fo->bto"``,
  ``"bqhd,bkhd->bhqk"``): one summed letter, every other letter in the output; the letters both
  operands and the output share are the batch axes (a MatMul's leading axes; the output's
  ``Transpose`` puts them where the equation has them). It becomes ``Transpose`` (where an operand's
  letters are not already ``batch, free, summed`` / ``batch, summed, free``), ``MatMul`` and a
  ``Transpose`` to the output's letter order; an operand that is a constant (a weight) is taken as
  the second one, so that the ``MatMul`` is a dense layer. Other equations (``...``, a letter
  repeated in one operand, a letter summed over in one operand only, two or more summed letters,
  three or more operands) are left, and the importer names the ``Einsum`` as unsupported.
* The dynamo exporter's 1-D linear upsampling (``nn.Upsample(mode='linear')`` /
  ``F.interpolate`` of an (N, C, L) tensor: no ``Resize`` but two gathers along L and their linear
  blend, ``u0 + (u1 - u0) * w`` with ``u = Transpose(GatherND(Transpose(x, [2, 0, 1]), idx),
  [1, 2, 0])``) becomes the ``Resize`` (mode linear) whose interpolation weights are those of
  the gathers and blend (half_pixel, align_corners, asymmetric or pytorch_half_pixel; scales for
  an integer factor, sizes otherwise). Its 1-D ``mode='nearest-exact'`` (one such gather)
  becomes a nearest ``Resize`` when the gather repeats each position an integer number of times.
  A gather or blend that no ``Resize`` computes is left (the importer names its ``GatherND``).
* ``x * y.expand_as(x)`` (a squeeze-excite gate as many MobileNetV3 ports write it): an ``Expand``
  read only by ``Mul`` / ``Add`` / ``Sub`` / ``Div`` whose other operand has the expanded shape
  (the shape is ``Shape`` of that operand, TorchScript, or a constant equal to its static shape,
  dynamo) is dropped: the op's own broadcasting gives the same tensor. Other ``Expand`` nodes are
  left (named as unsupported).
* Hard sigmoid and hard swish by hand (``F.relu6(x + 3) / 6``, ``x * F.relu6(x + 3) / 6``, as
  MobileNetV3 ports write ``h_sigmoid`` / ``h_swish``): ``Add`` of 3, ``Clip`` to [0, 6], ``Div`` by
  6 (or ``Mul`` by 1/6), and the ``Mul`` by ``x``, each read only there, become ``HardSigmoid``
  (alpha 1/6, beta 1/2) / ``HardSwish`` of ``x``, ONNX's definitions of the same functions (equal
  up to float rounding), which the importer (and the network mode) already take.
* The dynamo export of ``nn.Softplus()``, ``Where(Greater(x, 20), x, Softplus(x))``, becomes
  ``Softplus(x)`` (equal in float32 above the threshold).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr

_COORDS = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel")


def rewrite(model):
    """``model`` with the patterns above rewritten (a copy), or ``model`` itself without them."""
    if not any(n.op_type in ("Einsum", "GatherND", "Expand", "Clip", "Where") for n in model.graph.node):
        return model
    m, fresh = graphindex.copy_fresh(model)
    names = (fresh, graphindex.node_names(m.graph))
    _einsums(m.graph, names)
    _gather_resizes(m, names)
    _expands(m)
    _hard_sigmoids(m.graph)
    _softplus_thresholds(m.graph)
    return m


def _softplus_thresholds(g):
    """``Where(Greater(x, t), x, Softplus(x))`` (the dynamo export of ``nn.Softplus()``, threshold
    ``t`` = 20) becomes ``Softplus(x)``: above ``t >= 15``, ``softplus(x) - x = log1p(exp(-x))`` is
    below float32's half unit in the last place of ``x``."""
    if not any(n.op_type == "Where" for n in g.node):
        return
    consts, producer, users, outputs = graphindex.index(g)
    drop = set()
    for n in g.node:
        if n.op_type != "Where" or len(n.input) != 3:
            continue
        cond, x, sp = (producer.get(n.input[0]), n.input[1], producer.get(n.input[2]))
        if cond is None or sp is None or cond.op_type != "Greater" or sp.op_type != "Softplus" \
                or list(cond.input[:1]) != [x] or list(sp.input) != [x]:
            continue
        t = _scalar(consts, cond.input[1])
        if t is None or t < 15 or any(o in outputs or len(users.get(o, [])) != 1
                                      for o in (cond.output[0], sp.output[0])):
            continue
        sp.output[0] = n.output[0]              # the Softplus computes the Where's output
        drop.update((id(n), id(cond)))
    if drop:
        graphindex.replace(g.node, [k for k in g.node if id(k) not in drop])


# --- relu6(x + 3) / 6 and x * relu6(x + 3) / 6 written by hand ----------------------------------

def _scalar(consts, name):
    v = consts.get(name)
    return None if v is None or np.size(v) != 1 else float(np.asarray(v).reshape(-1)[0])


def _hard_sigmoids(g):
    """``Div(Clip(Add(x, 3), 0, 6), 6)`` (or ``Mul`` by 1/6) becomes ``HardSigmoid(x, 1/6, 1/2)``,
    and ``Mul(x, that)`` / ``Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)`` ``HardSwish(x)``: ONNX's
    definitions of the same function (equal up to float rounding)."""
    from onnx import helper
    if not any(n.op_type == "Clip" for n in g.node):
        return
    consts, producer, users, outputs = graphindex.index(g)

    def other(node, name):
        return node.input[1] if node.input[0] == name else node.input[0]

    def sixth(node, src):          # node divides src by 6 (or multiplies it by 1/6)
        if node is None or len(node.input) != 2 or src not in node.input:
            return False
        c = _scalar(consts, other(node, src))
        return c is not None and ((node.op_type == "Div" and node.input[0] == src and c == 6.0)
                                  or (node.op_type == "Mul" and abs(c - 1 / 6) < 1e-7))

    def relu6_plus3(t):            # t = Clip(Add(x, 3), 0, 6): x and the two nodes, or None
        clip = producer.get(t)
        if clip is None or clip.op_type != "Clip" or len(clip.input) != 3:
            return None
        if _scalar(consts, clip.input[1]) != 0.0 or _scalar(consts, clip.input[2]) != 6.0:
            return None
        add = producer.get(clip.input[0])
        if add is None or add.op_type != "Add" or len(add.input) != 2:
            return None
        for x, c in (add.input, add.input[::-1]):
            if _scalar(consts, c) == 3.0 and x not in consts:
                return x, [add, clip]
        return None

    def private(nodes, keep):
        ids = {id(n) for n in nodes}
        return all(o == keep or (o not in outputs and all(id(u) in ids for u in users.get(o, [])))
                   for n in nodes for o in n.output)

    replace, drop = {}, set()
    for n in g.node:
        if n.op_type not in ("Div", "Mul") or id(n) in drop or id(n) in replace:
            continue
        for src in n.input:
            hit = relu6_plus3(src)
            if hit is not None and sixth(n, src):             # a hard sigmoid of x
                x, nodes = hit
                nodes = nodes + [n]
                out, final = n.output[0], n
                rd = users.get(out, [])
                if len(rd) == 1 and rd[0].op_type == "Mul" and other(rd[0], out) == x:   # x * hsig(x)
                    nodes, out, final = nodes + [rd[0]], rd[0].output[0], rd[0]
                if not private(nodes, out) or any(id(k) in drop or id(k) in replace for k in nodes):
                    break
                op = "HardSwish" if final is not n else "HardSigmoid"
                kw = {} if op == "HardSwish" else dict(alpha=1 / 6, beta=0.5)
                replace[id(final)] = helper.make_node(op, [x], [out], name=final.name or out, **kw)
                drop.update(id(k) for k in nodes if k is not final)
                break
            mul = producer.get(src)                            # (x * relu6(x + 3)) / 6
            if mul is not None and mul.op_type == "Mul" and len(mul.input) == 2 and sixth(n, src):
                for t in mul.input:
                    hit = relu6_plus3(t)
                    if hit is not None and other(mul, t) == hit[0]:
                        nodes = hit[1] + [mul, n]
                        if private(nodes, n.output[0]) and not any(id(k) in drop or id(k) in replace
                                                                   for k in nodes):
                            replace[id(n)] = helper.make_node("HardSwish", [hit[0]], [n.output[0]],
                                                              name=n.name or n.output[0])
                            drop.update(id(k) for k in nodes if k is not n)
                        break
                break
    if replace:
        graphindex.replace(g.node, [replace.get(id(n), n) for n in g.node if id(n) not in drop])


# --- x * y.expand_as(x): the Expand is the Mul's own broadcasting --------------------------------

_BROADCASTING = ("Mul", "Add", "Sub", "Div")


def _expands(model):
    g = model.graph
    if not any(n.op_type == "Expand" for n in g.node):
        return
    consts, producer, users, outputs = graphindex.index(g)
    shapes = None
    drop = set()
    for n in g.node:
        if n.op_type != "Expand" or len(n.input) != 2 or n.output[0] in outputs:
            continue
        readers = users.get(n.output[0], [])
        if not readers or any(u.op_type not in _BROADCASTING or len(u.input) != 2 or u.input[0] == u.input[1]
                              for u in readers):
            continue
        others = [u.input[1] if u.input[0] == n.output[0] else u.input[0] for u in readers]
        sh = producer.get(n.input[1])
        if sh is not None and sh.op_type == "Shape" and not sh.attribute:   # y.expand_as(x): Shape(x)
            ok = all(o == sh.input[0] for o in others)
        else:            # dynamo: the shape a constant, or (dynamic batch) Concat(Shape(x, 0, 1), C, H, W)
            if shapes is None:
                shapes = graphindex.shapes(model, symbols=True)
            target = _shape_value(n.input[1], consts, producer, shapes)
            ok = target is not None and all(_dominated(target, shapes.get(o)) for o in others)
        if not ok:
            continue
        for u in readers:                      # the reader broadcasts y to x's shape itself
            for j, i in enumerate(u.input):
                if i == n.output[0]:
                    u.input[j] = n.input[0]
        drop.add(id(n))
        if sh is not None and sh.op_type == "Shape" and len(users.get(sh.output[0], [])) == 1 \
                and sh.output[0] not in outputs:
            drop.add(id(sh))
    if drop:
        graphindex.replace(g.node, [n for n in g.node if id(n) not in drop])


# --- Einsum as MatMul ------------------------------------------------------------------------------

def einsum_plan(equation, swap=False):
    """How ``Einsum(equation)`` of two operands is a MatMul: ``(swap, perm_a, perm_b, perm_out)``
    (swap: the operands taken in the other order; a perm None: no Transpose), or why not (a string)."""
    eq = equation.replace(" ", "")
    if "..." in eq or "->" not in eq:
        return f"equation {equation!r}: only explicit equations ('ij,jk->ik') without '...'"
    lhs, out = eq.split("->")
    ops = lhs.split(",")
    if len(ops) != 2:
        return f"equation {equation!r}: only two operands"
    a, b = ops
    if any(len(set(s)) != len(s) for s in (a, b, out)):
        return f"equation {equation!r}: a letter repeated in one operand (a diagonal)"
    if set(out) - set(a) - set(b):
        return f"equation {equation!r}: an output letter in no operand"
    if swap:                                        # the first operand is the constant: it goes second
        a, b = b, a
    summed = [c for c in a if c in b and c not in out]
    if len(summed) != 1 or (set(a) ^ set(b)) - set(out):
        return f"equation {equation!r}: one letter summed over, in both operands"
    k = summed[0]
    batch = [c for c in out if c in a and c in b]
    fa = [c for c in out if c in a and c not in b]
    fb = [c for c in out if c in b and c not in a]
    if len(fb) != 1 or (batch and len(fa) != 1) or len(fa) < 1:
        return f"equation {equation!r}: not a matrix product (one free letter per operand)"
    want_a, want_b = batch + fa + [k], batch + [k] + fb
    res = batch + fa + fb                            # MatMul's output letters
    pa = [a.index(c) for c in want_a]
    pb = [b.index(c) for c in want_b]
    po = [res.index(c) for c in out]
    ident = lambda p: p if p != list(range(len(p))) else None   # noqa: E731
    return swap, ident(pa), ident(pb), ident(po)


def _einsums(g, names):
    """Each matrix-product ``Einsum`` as ``MatMul`` and ``Transpose`` nodes; ``names``: new tensor
    and node names (:func:`hlsnn.deploy.importer.graphindex.copy_fresh`, :func:`~hlsnn.deploy.importer.graphindex.node_names`;
    the node computing the output keeps the ``Einsum``'s name)."""
    from onnx import helper
    fresh, fresh_node = names
    consts = graphindex.constants(g)
    new, changed = [], False
    for n in g.node:
        if n.op_type != "Einsum" or len(n.input) != 2:
            new.append(n)
            continue
        first_const = n.input[0] in consts and n.input[1] not in consts
        plan = einsum_plan(_attr(n, "equation", b"").decode(), swap=first_const)
        if isinstance(plan, str):
            new.append(n)
            continue
        swap, pa, pb, po = plan
        changed = True
        x, y = (n.input[1], n.input[0]) if swap else (n.input[0], n.input[1])
        base = n.name or n.output[0]
        if pa is not None:
            t = fresh(f"{base}/a_t")
            new.append(helper.make_node("Transpose", [x], [t], name=fresh_node(t), perm=pa))
            x = t
        if pb is not None:
            t = fresh(f"{base}/b_t")
            new.append(helper.make_node("Transpose", [y], [t], name=fresh_node(t), perm=pb))
            y = t
        mm = n.output[0] if po is None else fresh(f"{base}/mm")
        new.append(helper.make_node("MatMul", [x, y], [mm], name=base if po is None else fresh_node(mm)))
        if po is not None:
            new.append(helper.make_node("Transpose", [mm], [n.output[0]], name=base, perm=po))
    if changed:
        graphindex.replace(g.node, new)


# --- the dynamo exporter's 1-D upsampling as Resize -------------------------------------------------

def _gathers(g, consts, producer):
    """{output of a Transpose-GatherND-Transpose triple: (x, idx, [the three nodes])} for gathers
    along the last axis of x (any rank >= 2)."""
    out = {}
    for n in g.node:
        if n.op_type != "Transpose":
            continue
        gnd = producer.get(n.input[0])
        if gnd is None or gnd.op_type != "GatherND" or _attr(gnd, "batch_dims", 0) != 0 \
                or gnd.input[1] not in consts:
            continue
        t = producer.get(gnd.input[0])
        if t is None or t.op_type != "Transpose":
            continue
        p, q = list(_attr(t, "perm", [])), list(_attr(n, "perm", []))
        r = len(p)
        if r < 2 or p != [r - 1] + list(range(r - 1)) or q != list(range(1, r)) + [0]:
            continue
        idx = np.asarray(consts[gnd.input[1]])
        if idx.ndim != 2 or idx.shape[1] != 1:
            continue
        out[n.output[0]] = (t.input[0], idx[:, 0].astype(np.int64), [t, gnd, n])
    return out


def _last_known(shape):
    """A shape whose last dimension (the one a 1-D gather indexes) is a number."""
    return bool(shape) and isinstance(shape[-1], int)


def _dominated(target, shape):
    """Whether broadcasting to ``target`` within a tensor of ``shape`` changes nothing: ``target``'s
    rank at most ``shape``'s and each of its dimensions (right-aligned) 1 or equal to ``shape``'s
    (two symbolic dimensions equal when they have one name; an unknown one equals nothing)."""
    if target is None or shape is None or len(target) > len(shape):
        return False
    return all(t == 1 or (t is not None and t == s) for t, s in zip(target[::-1], shape[::-1]))


def _shape_value(name, consts, producer, shapes):
    """The value of a shape tensor as a tuple of ints and symbolic names: a constant, ``Shape``
    (with ``start``/``end``) of a tensor whose shape is known, or a ``Concat`` of those (the
    dynamo export's ``expand_as`` under a dynamic batch: ``Concat(Shape(x, 0, 1), [C], [H], [W])``);
    None otherwise."""
    if name in consts:
        return tuple(int(v) for v in np.asarray(consts[name]).reshape(-1))
    n = producer.get(name)
    if n is None:
        return None
    if n.op_type == "Shape":
        full = shapes.get(n.input[0])
        if full is None:
            return None
        r = len(full)
        start, end = _attr(n, "start", 0), _attr(n, "end", r)
        start, end = (min(max(v + r if v < 0 else v, 0), r) for v in (start, end))
        return tuple(full[start:end])
    if n.op_type == "Concat" and _attr(n, "axis", 0) in (0, -1):
        parts = [_shape_value(i, consts, producer, shapes) for i in n.input]
        return None if any(p is None for p in parts) else tuple(v for p in parts for v in p)
    return None


def _resize_for(mat, shape):
    """(mode, coord, nearest_mode, scales or None, sizes or None) of the Resize of the last axis
    whose (n_out, n_in) weights are ``mat``, or None."""
    from ..run.hostextra import _axis_matrix
    n_out, n_in = mat.shape
    r = len(shape)
    if n_out % n_in == 0:
        scales, sizes = np.array([1.0] * (r - 1) + [n_out / n_in], np.float32), None
    elif all(isinstance(d, int) for d in shape[:-1]):
        scales, sizes = None, np.array(list(shape[:-1]) + [n_out], np.int64)
    else:
        return None                 # sizes need every dimension (a dynamic batch: no constant sizes)
    if np.array_equal(mat, mat.astype(bool)) and (mat.sum(1) == 1).all():        # one position per output
        src = mat.argmax(1)
        f = n_out // n_in
        if n_out % n_in == 0 and np.array_equal(src, np.arange(n_out) // f):
            return "nearest", "asymmetric", "floor", scales, None
        return None
    for coord in _COORDS:
        if np.allclose(_axis_matrix(n_in, n_out, n_out / n_in, coord), mat, rtol=0, atol=1e-6):
            return "linear", coord, None, scales, sizes
    return None


def _gather_resizes(model, names):
    from onnx import helper, numpy_helper
    fresh = names[0]
    g = model.graph
    if not any(n.op_type == "GatherND" for n in g.node):
        return
    consts, producer, users, outputs = graphindex.index(g)
    gathers = _gathers(g, consts, producer)
    if not gathers:
        return
    shapes = graphindex.shapes(model, symbols=True)
    replace, drop = {}, set()          # id(node) -> the new nodes in its place; nodes removed

    def private(nodes, keep):
        """Every output of ``nodes`` (but ``keep``) is read only by ``nodes`` and is no graph output."""
        ids = {id(n) for n in nodes}
        return all(o == keep or (o not in outputs and all(id(u) in ids for u in users.get(o, [])))
                   for n in nodes for o in n.output)

    def emit(at, x, mat, out, nodes):
        shape = shapes.get(x)
        if not _last_known(shape) or shape[-1] != mat.shape[1] or not private(nodes, out):
            return
        how = _resize_for(mat, shape)
        if how is None:
            return
        mode, coord, nearest, scales, sizes = how
        base = at.name or out
        ins = [x, fresh(f"{base}/roi"), fresh(f"{base}/scales")]
        g.initializer.extend([numpy_helper.from_array(np.zeros(0, np.float32), ins[1]),
                              numpy_helper.from_array(np.zeros(0, np.float32) if scales is None else scales, ins[2])])
        if sizes is not None:
            ins.append(fresh(f"{base}/sizes"))
            g.initializer.append(numpy_helper.from_array(sizes, ins[3]))
        kw = dict(mode=mode, coordinate_transformation_mode=coord)
        if nearest:
            kw["nearest_mode"] = nearest
        replace[id(at)] = [helper.make_node("Resize", ins, [out], name=base, **kw)]
        drop.update(id(n) for n in nodes if n is not at)

    done = set()
    for n in g.node:                    # u0 + (u1 - u0) * w
        if n.op_type != "Add" or len(n.input) != 2:
            continue
        for u0, other in (n.input, n.input[::-1]):
            mul = producer.get(other)
            if u0 not in gathers or mul is None or mul.op_type != "Mul":
                continue
            sub_out, w_name = (mul.input[0], mul.input[1]) if mul.input[1] in consts else mul.input[::-1]
            sub = producer.get(sub_out)
            if w_name not in consts or sub is None or sub.op_type != "Sub" or sub.input[1] != u0 \
                    or sub.input[0] not in gathers:
                continue
            (x0, i0, n0), (x1, i1, n1) = gathers[u0], gathers[sub.input[0]]
            w = np.asarray(consts[w_name], np.float64)
            if x0 != x1 or len(i0) != len(i1) or w.size not in (1, len(i0)) or w.ndim > 1:
                continue
            shape = shapes.get(x0)
            if not _last_known(shape):
                continue
            w = np.broadcast_to(w.reshape(-1), i0.shape)
            mat = np.zeros((len(i0), shape[-1]))
            if (i0 < 0).any() or (i1 < 0).any() or max(i0.max(), i1.max()) >= shape[-1]:
                continue
            np.add.at(mat, (np.arange(len(i0)), i0), 1 - w)
            np.add.at(mat, (np.arange(len(i0)), i1), w)
            nodes = list({id(k): k for k in n0 + n1 + [sub, mul, n]}.values())     # each node once
            emit(n, x0, mat, n.output[0], nodes)
            done.update(id(k) for k in nodes)
            break
    for out, (x, idx, nodes) in gathers.items():   # a gather alone (nearest-exact)
        if any(id(k) in done for k in nodes) or any(id(k) in replace or id(k) in drop for k in nodes):
            continue
        shape = shapes.get(x)
        if not _last_known(shape) or (idx < 0).any() or idx.max() >= shape[-1]:
            continue
        mat = np.zeros((len(idx), shape[-1]))
        mat[np.arange(len(idx)), idx] = 1.0
        emit(nodes[-1], x, mat, out, nodes)
    if not replace:
        return
    new, gone = [], set()
    for n in g.node:
        if id(n) in replace:
            new.extend(replace[id(n)])
        if id(n) in replace or id(n) in drop:
            gone.update(n.input)
        else:
            new.append(n)
    graphindex.replace(g.node, new)
    read = {i for n in g.node for i in n.input} | outputs
    kept = [t for t in g.initializer if t.name in read or t.name not in gone]   # the gathers' indices, weights
    graphindex.replace(g.initializer, kept)
