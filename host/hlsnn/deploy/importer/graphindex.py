"""What the importer's ONNX rewrites (:mod:`hlsnn.deploy.rewrite`) look up in a graph: a node's
attributes (:func:`attr`), its constants, each tensor's producing node, each tensor's reading nodes and the graph's output names;
each tensor's shape from onnx's shape inference (:func:`shapes`); where a chain of moves
carries each element (:func:`run_moves`); and the copy a rewrite edits, with new names that no
tensor has (:func:`copy_fresh`)."""


def attr(node, name, default=None):
    """The value of ``node``'s attribute ``name`` (onnx's ``get_attribute_value``), or ``default``
    where the node has none of that name."""
    from onnx import helper
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def shapes(model, data_prop=False, symbols=False, declared=False):
    """``{tensor: shape}`` from onnx's shape inference (the graph's inputs, outputs and
    ``value_info``): each dimension an int; where inference knows no number, the name of a
    symbolic dimension with ``symbols`` (``"batch"`` of an export with a dynamic batch axis: the
    same name is the same size), else None. ``data_prop`` propagates shape values (a ``Reshape``
    to a computed shape is known). Where inference fails: ``{}`` (a rewrite that needs a shape
    does nothing), or with ``declared`` the shapes the file itself declares."""
    import onnx
    try:
        g = onnx.shape_inference.infer_shapes(model, data_prop=data_prop).graph
    except Exception:                   # noqa: BLE001 - onnx raises many types: nothing is known
        if not declared:
            return {}
        g = model.graph
    out = {}
    for v in list(g.input) + list(g.value_info) + list(g.output):
        t = v.type.tensor_type if v.type.HasField("tensor_type") else None
        if t is not None and t.HasField("shape"):
            out[v.name] = tuple(int(d.dim_value) if d.HasField("dim_value") else ((d.dim_param or None) if symbols else None)
                                for d in t.shape.dim)
    return out


def copy_fresh(model):
    """``(m, fresh)``: a copy of ``model`` for a rewrite to edit, and ``fresh(base)``, a name for a
    new tensor: ``base``, with ``_`` appended until no tensor of the copy as it was (an
    initializer, graph input, output or ``value_info``, a node's input or output, also inside a
    node's subgraphs, which :mod:`hlsnn.deploy.rewrite.iffold` inlines) and no earlier ``fresh`` name has
    it. A user's file may hold any name: a new tensor that took one would be a second tensor of
    that name (the wrong weights, or a graph onnx refuses)."""
    m = copied(model)
    return m, namer(tensor_names(m.graph))


def copied(message):
    """A copy of the protobuf ``message`` (a model for a rewrite to edit, a node)."""
    out = type(message)()
    out.CopyFrom(message)
    return out


def tensor_names(g):
    """Every tensor name graph ``g`` uses, its nodes' subgraphs included (:func:`copy_fresh`)."""
    import onnx
    taken = {t.name for t in g.initializer} | {v.name for v in list(g.input) + list(g.output) + list(g.value_info)}
    for n in g.node:
        taken.update(n.input)
        taken.update(n.output)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                taken |= tensor_names(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    taken |= tensor_names(sub)
    return taken


def layer_names(g):
    """``name(node)``: the importer's layer name of a node of ``g``: its name (or, unnamed, its
    first output's), with ``_`` appended where an earlier node of ``g`` has the same one, or a
    later node has it as its own (a file's duplicate node names, or a node named like another's
    output, would otherwise give two layers of one name: one's weights stored over the other's)."""
    bases = [n.name or (n.output[0] if n.output else "") for n in g.node]
    taken, names = set(bases), {}
    seen = set()
    for n, base in zip(g.node, bases):
        name = base
        if base in seen:
            while name in taken:
                name += "_"
            taken.add(name)
        seen.add(base)
        names[tuple(n.output)] = name
    return lambda node: names.get(tuple(node.output), node.name or node.output[0])


def node_names(g):
    """``fresh(base)`` for new nodes' names: ``base`` with ``_`` appended until no node of ``g``
    (as it is now) and no earlier name of this ``fresh`` has it. The importer names its layers
    after the nodes, so a new node does not take a user's node's name."""
    return namer({n.name for n in g.node if n.name})


def namer(taken):
    """``fresh(base)``: ``base``, with ``_`` appended until it is not in ``taken``; each name
    given is added to ``taken``."""
    def fresh(base):
        while base in taken:
            base += "_"
        taken.add(base)
        return base

    return fresh


def constants(g):
    """``{name: numpy array}`` of the graph's initializers and ``Constant`` nodes' ``value``."""
    from onnx import numpy_helper
    out = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    out[n.output[0]] = numpy_helper.to_array(a.t)
    return out


def index(g):
    """``(constants, producer, readers, outputs)``: :func:`constants`, ``{tensor: node}``,
    ``{tensor: [nodes reading it, in graph order]}`` and the set of the graph's output names."""
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    return constants(g), producer, readers, {o.name for o in g.output}


def run_moves(nodes, shape, fs):
    """An index array of ``shape`` (``np.arange``) carried through the data-movement ``nodes``
    (``Transpose`` by its ``perm``; any other node reshapes to its output's per-sample shape in
    ``fs``), or None where a node's rank or size does not match: where each element of the
    start ends up (:mod:`hlsnn.deploy.rewrite.shufflefold`, :mod:`hlsnn.deploy.rewrite.ecafold`)."""
    import numpy as np
    y = np.arange(int(np.prod(shape))).reshape(shape)
    for n in nodes:
        if n.op_type == "Transpose":
            perm = attr(n, "perm")
            if perm is None or len(perm) != y.ndim:
                return None
            y = y.transpose(perm)
        else:
            out = fs.get(n.output[0])
            if out is None or int(np.prod(out)) != y.size:
                return None
            y = y.reshape(out)
    return y


def to_nearest_resize(g, node, x, scales, name):
    """``node`` of graph ``g`` made, in place, ONNX's nearest ``Resize`` of ``x`` by ``scales`` (an
    initializer ``name``), with ``coordinate_transformation_mode`` asymmetric and ``nearest_mode``
    floor: ``y[i] = x[floor(i / f)]`` on each axis of factor ``f``."""
    import numpy as np
    from onnx import helper, numpy_helper
    g.initializer.append(numpy_helper.from_array(np.asarray(scales, np.float32), name))
    replace(node.input, [x, "", name])
    replace(node.attribute, [helper.make_attribute("mode", "nearest"),
                             helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                             helper.make_attribute("nearest_mode", "floor")])
    node.op_type = "Resize"


def replace(field, items):
    """The protobuf repeated ``field`` (a graph's nodes, a node's inputs, ...) holding ``items``
    instead, in their order (the field's own among them too)."""
    items = list(items)
    del field[:]
    field.extend(items)


def with_outputs(node, outputs):
    """A copy of ``node`` writing ``outputs`` ("" for an output left out)."""
    copy = copied(node)
    replace(copy.output, outputs)
    return copy
