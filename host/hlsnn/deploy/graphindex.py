"""What the importer's ONNX rewrites look up in a graph (:mod:`hlsnn.deploy.torchdecomp`,
:mod:`hlsnn.deploy.repeatup`, :mod:`hlsnn.deploy.unshuffle`, :mod:`hlsnn.deploy.meanfold`): its
constants, each tensor's producing node, each tensor's reading nodes and the graph's output names."""


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
