"""Fine-tuning an imported ONNX classifier with layers pruned in the sized kernel's shape
(``hlsnn autotune --train``, issue 78): the ONNX graph run as a float torch module
(:class:`OnnxNet`), its pruned layers' zeros held while it trains, its weights written back into
a copy of the ONNX file (node names, graph and every other initializer kept).

What is trained is float: the deployment then quantizes the written file as it quantizes any
model (the int8 of the sized kernel), so the emulator, the C-simulation and the board give the
same bits for it as for any weights. A kernel-pruned layer is written with its zeros in the
kernel's shape; at calibration the deploy masks it again (its zero columns score nothing and
rank last, so the same columns are kept) and refits the kept weights by least squares to the
fine-tuned float network's own outputs (:mod:`hlsnn.deploy.quantize.kprune`).
"""
from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from ..errors import InputError

#: the ONNX operators :class:`OnnxNet` runs (Softmax only as the graph's last node: dropped, logits)
OPS = ("Conv", "Gemm", "Relu", "Add", "BatchNormalization", "MaxPool", "AveragePool", "GlobalAveragePool",
       "Flatten", "Identity", "Softmax")


def _attrs(node):
    import onnx
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class OnnxNet(torch.nn.Module):
    """An ONNX graph of :data:`OPS` as a float torch module: each ``Conv`` / ``Gemm`` node's weight
    and bias a parameter (``weights[i]``, ``biases[i]`` of its index ``i`` among them, :attr:`names`
    its node name), BatchNormalization frozen (eval mode, its statistics as constants); the output
    is the logits (a final ``Softmax`` is left out)."""

    def __init__(self, path):
        super().__init__()
        import onnx
        from onnx import numpy_helper
        self.model = onnx.load(str(path))
        g = self.model.graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        bad = sorted({n.op_type for n in g.node if n.op_type not in OPS})
        if bad:
            raise InputError(f"--train: {path}: operators {', '.join(bad)} are not trained here; allowed: {', '.join(OPS)}")
        self.nodes = list(g.node)
        if self.nodes and self.nodes[-1].op_type == "Softmax":
            self.nodes = self.nodes[:-1]
        if any(n.op_type == "Softmax" for n in self.nodes):
            raise InputError(f"--train: {path}: a Softmax before the last node; allowed only as the last")
        self.input, self.output = g.input[0].name, self.nodes[-1].output[0]
        self.names, ws, bs = [], [], []
        for n in self.nodes:
            if n.op_type in ("Conv", "Gemm"):
                w = self.inits[n.input[1]].astype(np.float32)
                if n.op_type == "Gemm" and not _attrs(n).get("transB", 0):
                    w = w.T.copy()
                b = self.inits[n.input[2]] if len(n.input) > 2 and n.input[2] else np.zeros(w.shape[0])
                self.names.append(n.name)
                ws.append(torch.nn.Parameter(torch.tensor(w, dtype=torch.float32)))
                bs.append(torch.nn.Parameter(torch.tensor(np.asarray(b, np.float32).reshape(-1))))
        self.weights, self.biases = torch.nn.ParameterList(ws), torch.nn.ParameterList(bs)

    def index(self, name):
        return self.names.index(name)

    def forward(self, x):
        env = {self.input: x}
        k = 0
        for n in self.nodes:
            a, ins = _attrs(n), [env.get(i, None) if i in env else self._const(i) for i in n.input]
            op = n.op_type
            if op == "Conv":
                pads = a.get("pads", [0, 0, 0, 0])
                if pads[:2] != pads[2:]:
                    raise InputError(f"--train: {n.name}: asymmetric pads {pads}; allowed: the same on both sides")
                y = F.conv2d(ins[0], self.weights[k], self.biases[k], stride=tuple(a.get("strides", [1, 1])),
                             padding=tuple(pads[:2]), dilation=tuple(a.get("dilations", [1, 1])),
                             groups=int(a.get("group", 1)))
                k += 1
            elif op == "Gemm":
                y = a.get("alpha", 1.0) * (ins[0] @ self.weights[k].T) + a.get("beta", 1.0) * self.biases[k]
                k += 1
            elif op == "Relu":
                y = F.relu(ins[0])
            elif op == "Add":
                y = ins[0] + ins[1]
            elif op == "BatchNormalization":
                y = F.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0, a.get("epsilon", 1e-5))
            elif op in ("MaxPool", "AveragePool"):
                f = F.max_pool2d if op == "MaxPool" else F.avg_pool2d
                pads = a.get("pads", [0, 0, 0, 0])
                y = f(ins[0], tuple(a["kernel_shape"]), tuple(a.get("strides", a["kernel_shape"])), tuple(pads[:2]))
            elif op == "GlobalAveragePool":
                y = ins[0].mean((2, 3), keepdim=True)
            elif op == "Flatten":
                y = ins[0].flatten(int(a.get("axis", 1)))
            else:                                       # Identity
                y = ins[0]
            env[n.output[0]] = y
        return env[self.output]

    def _const(self, name):
        return torch.tensor(self.inits[name], dtype=torch.float32)

    def write(self, path):
        """A copy of the ONNX file with every ``Conv`` / ``Gemm`` weight and bias the module's."""
        import copy
        import onnx
        from onnx import numpy_helper
        m = copy.deepcopy(self.model)
        by_name = {t.name: t for t in m.graph.initializer}
        nodes = {n.name: n for n in m.graph.node}
        for i, name in enumerate(self.names):
            n = nodes[name]
            w = self.weights[i].detach().numpy()
            if n.op_type == "Gemm" and not _attrs(n).get("transB", 0):
                w = w.T
            t = by_name[n.input[1]]
            t.CopyFrom(numpy_helper.from_array(w.astype(numpy_helper.to_array(t).dtype), t.name))
            b = self.biases[i].detach().numpy()
            if len(n.input) > 2 and n.input[2]:
                t = by_name[n.input[2]]
                t.CopyFrom(numpy_helper.from_array(b.astype(numpy_helper.to_array(t).dtype), t.name))
            else:                                       # a bias the node had not: added
                bn = f"{name}_hlsnn_bias"
                m.graph.initializer.append(numpy_helper.from_array(b.astype(np.float32), bn))
                while len(n.input) < 2:
                    n.input.append("")
                n.input.append(bn)
        onnx.save(m, str(path))
        return path


def finetune(onnx_path, masks, x, y, out, *, inits=None, epochs=4, lr=1e-3, batch=64, seed=0, alpha=0.5,
             log=None):
    """Fine-tune the ONNX classifier ``onnx_path`` on ``(x, y)`` with the zeros of ``masks``
    (``{node name: 0/1 array of its weight's shape}``) held, and write it to ``out``.

    ``inits`` (``{node name: (w, b)}``) start those layers from other float weights (autotune's
    refitted ones); their zeros must be the mask's. Adam at ``lr`` on a cosine over ``epochs``,
    batches of ``batch`` in a seeded order; the loss is cross entropy and (``alpha``) the
    distillation of the untouched float model's outputs (:func:`hlsnn.train.distillation_loss`).
    After every step the masked weights are multiplied by their masks. Returns ``out``."""
    from .distill import distillation_loss
    if int(epochs) < 1:
        raise InputError(f"--train-epochs {epochs!r}: a whole number of epochs, at least 1")
    torch.manual_seed(int(seed))
    net, teacher = OnnxNet(onnx_path), OnnxNet(onnx_path).eval()
    for name, (w, b) in (inits or {}).items():
        i = net.index(name)
        with torch.no_grad():
            net.weights[i].copy_(torch.tensor(np.asarray(w, np.float32).reshape(net.weights[i].shape)))
            net.biases[i].copy_(torch.tensor(np.asarray(b, np.float32).reshape(-1)))
    held = [(net.weights[net.index(n)], torch.tensor(np.asarray(m, np.float32).reshape(net.weights[net.index(n)].shape)))
            for n, m in masks.items()]
    xt, yt = torch.tensor(np.asarray(x, np.float32)), torch.tensor(np.asarray(y, np.int64))
    steps = int(epochs) * ((len(xt) + batch - 1) // batch)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    rng = np.random.default_rng(int(seed))
    with torch.no_grad():
        for p, m in held:
            p.mul_(m)
    for e in range(int(epochs)):
        net.train()
        total, perm = 0.0, torch.tensor(rng.permutation(len(xt)))
        for s in range(0, len(xt), batch):
            idx = perm[s:s + batch]
            xb, yb = xt[idx], yt[idx]
            with torch.no_grad():
                tb = teacher(xb)
            loss = distillation_loss(net(xb), tb, yb, alpha=alpha)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            with torch.no_grad():
                for p, m in held:
                    p.mul_(m)
            total += float(loss.detach()) * len(idx)
        if log:
            log(f"train epoch {e + 1}/{epochs}: loss {total / len(xt):.4f}")
    return net.eval().write(out)

