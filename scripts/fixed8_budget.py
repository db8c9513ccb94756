"""Where a fixed8 U-Net's error comes from, outside hlsnn: a float64 PyTorch model of the ONNX
graph (Conv, Relu, MaxPool 2x2, ConvTranspose2d stride 2, Concat) with fake quantization the way
``fixed8`` (``{type: fixed, accel: sparse8_pynq-z2}``) quantizes, so that each source of error can
be switched off or changed alone (issue 52, g_unet_bn of
``tests/fixtures/torch_families/variant_fourth.py``).

The model of the rules (the same radix points as hlsnn's per-layer report, one layer apart where
``weight_scale: auto`` takes per-channel scales, which keep DETERMINE's output radix):

* weights: 8-bit signed, one power-of-two scale per tensor (``--weight-scale channel``: per
  output channel), the largest magnitude fitting;
* activations: every stored tensor 8-bit signed (the sparse cluster's int8 values: a ReLU output
  keeps 7 magnitude bits; ``--unsigned-relu`` gives it 8), one radix per tensor, chosen on the
  calibration images by least squared error from DETERMINE's to 3 bits finer (``radix: lse``),
  DETERMINE's for the network's output; a Concat requantized at one radix;
* ``--greedy``: then each tensor's radix moved by one bit at a time while the *network output's*
  error on the calibration images drops (an end-to-end search, a bound on what any per-tensor
  radix rule can reach);
* ``--keep T``: tensor T left in float (its quantization's share of the error); ``--float weights``
  (``activations``): every weight (activation) left in float.

Relative error = ||y_q - y_float|| / ||y_float|| on the first 360 test digits::

    python scripts/fixed8_budget.py /tmp/hfam4/g_unet_bn_ts17.onnx [--greedy] [--unsigned-relu]
"""
from __future__ import annotations

import argparse

import numpy as np


def main(argv=None):
    import onnx
    import torch
    import torch.nn.functional as F
    from hlsnn.deploy import datasets
    from onnx import numpy_helper

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--calibration", type=int, default=128)
    ap.add_argument("--weight-scale", choices=("tensor", "channel"), default="tensor")
    ap.add_argument("--unsigned-relu", action="store_true")
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--keep", action="append", default=[])
    ap.add_argument("--float", choices=("weights", "activations"), help="leave every weight (activation) in float")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    m = onnx.load(a.model)
    W = {i.name: torch.tensor(numpy_helper.to_array(i).astype(np.float64)) for i in m.graph.initializer}
    nodes = list(m.graph.node)
    ds = datasets.load("digits", layout="nchw")
    xc = torch.tensor(np.asarray(ds.x_train[:a.calibration], np.float64))
    xt = torch.tensor(np.asarray(ds.x_test[:360], np.float64))
    relu_of = {n.input[0] for n in nodes if n.op_type == "Relu"}
    out_name = m.graph.output[0].name

    def wq1(w):
        amax = w.abs().max().item()
        f = 0
        while round(amax * 2 ** f) > 127:
            f -= 1
        while round(amax * 2 ** (f + 1)) <= 127:
            f += 1
        return torch.round(w * 2 ** f) / 2 ** f

    def wq(w):
        return torch.stack([wq1(c) for c in w]) if a.weight_scale == "channel" else wq1(w)

    def aq(v, f, signed):
        hi, lo = (127, -128) if signed else (255, 0)
        return torch.clamp(torch.round(v * 2 ** f), lo, hi) / 2 ** f

    def lse(v, signed, depth):
        amax = v.abs().max().item()
        f0 = (7 if signed else 8) - int(np.floor(np.log2(amax))) - 1
        return min(range(f0, f0 + depth + 1), key=lambda f: float(((aq(v, f, signed) - v) ** 2).sum()))

    def run(x, quant, radix, cal=False):
        T = {}

        def Q(name, v, signed):
            signed = signed or not a.unsigned_relu
            if not quant or name in a.keep or a.float == "activations":
                return v
            if cal:
                radix[name] = lse(v, signed, 0 if name == out_name else 3)
            return aq(v, radix[name], signed)

        T[m.graph.input[0].name] = Q(m.graph.input[0].name, x, not a.unsigned_relu)
        for n in nodes:
            i, o = [T.get(k) for k in n.input], n.output[0]
            at = {t.name: onnx.helper.get_attribute_value(t) for t in n.attribute}
            w = (wq if quant and a.float != "weights" else (lambda t: t))
            if n.op_type == "Conv":
                y = F.conv2d(i[0], w(W[n.input[1]]), W[n.input[2]], padding=at["pads"][0])
                y = torch.relu(y) if o in relu_of else y
                T[o] = Q(o, y, o not in relu_of)
            elif n.op_type == "Relu":
                T[o] = i[0]                                        # applied with its conv
            elif n.op_type == "MaxPool":
                T[o] = F.max_pool2d(i[0], 2)
            elif n.op_type == "ConvTranspose":
                T[o] = Q(o, F.conv_transpose2d(i[0], w(W[n.input[1]]), W[n.input[2]], stride=2), True)
            elif n.op_type == "Concat":
                T[o] = Q(o, torch.cat(i, 1), True)
            else:
                raise SystemExit(f"{n.op_type}: not modelled")
        return T[out_name]

    def rel(y, yr):
        return 100 * float((y - yr).norm() / yr.norm())

    y_t, y_c = run(xt, False, {}), run(xc, False, {})
    radix = {}
    run(xc, True, radix, cal=True)
    print(f"lse radix points: test {rel(run(xt, True, radix), y_t):.2f} %  {radix}")
    if a.greedy:
        best = rel(run(xc, True, radix), y_c)
        for _ in range(3):
            for k in list(radix):
                for d in (-1, 1):
                    r2 = dict(radix, **{k: radix[k] + d})
                    e = rel(run(xc, True, r2), y_c)
                    if e < best - 1e-9:
                        best, radix = e, r2
        print(f"end-to-end search: test {rel(run(xt, True, radix), y_t):.2f} %  {radix}")


if __name__ == "__main__":
    main()
