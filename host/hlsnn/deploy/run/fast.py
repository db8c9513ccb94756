"""The integer network mode at the speed of an evaluation loop: :func:`hlsnn.deploy.lower.program.run_ints`
(rules conv_output, max_pool and residual_add of that module, the specification) run by the compiled helper ``native/netint.c``
on int32 maps in NHWC order, bit for bit.

* **conv** (rule conv_output): a direct convolution in int32 with the engine's output rule fused
  (``hlsnn_net_conv``; depthwise convs with the channels in vector lanes, ``hlsnn_net_dwconv``).
  int32 sums are exact when ``2**(B-1) * max_z sum |c[z, ...]| < 2**31`` (``B`` the activation
  bits: every input integer is a ``B``-bit signed value, and the bound holds for every partial
  sum, so the order of the additions does not matter): :class:`FastNet` checks it per op and
  runs an op that fails it with :func:`~hlsnn.deploy.lower.program.conv_ints` (int64) instead.
  A dense layer is the conv netmode makes of it, its weight columns permuted from the NCHW
  flattening to the map's NHWC order.
* **maxpool**, **add** (rules max_pool, residual_add): ``hlsnn_net_maxpool``, ``hlsnn_net_add``; **lut**, **gate**
  (:mod:`hlsnn.engines.network.gate`'s rules unary_table, channel_gate) in numpy on the NHWC maps (a table lookup,
  a product requantized by :func:`~hlsnn.primitives.shift_round_sat`).
* **Data moves and average pools** (:data:`~hlsnn.deploy.lower.program.MOVE_KINDS`: upsample,
  zerostuff, pad, concat, avgpool; rules nearest_upsample, zero_stuff, channel_concat, avg_pool, bilinear_x2, mean_divide and edge_pad) between the compiled convs, so a U-Net runs
  here: their rules written on the NHWC maps (:meth:`FastNet._move`: index
  arithmetic on H and W, a concat along C, a window's exact sum as rows of column sums, the
  requantizations by ``hlsnn_net_add`` of one operand). A **transpose**, a move whose input is
  a view of another shape (a dense output read as a map) and an **add that divides** (rule mean_divide, a
  global mean over a count that is not a power of two) run the very numpy functions
  :func:`~hlsnn.deploy.lower.program.run_ints` calls (:func:`~hlsnn.deploy.lower.program.run_move`,
  :func:`~hlsnn.deploy.lower.program.add_ints`) on the NCHW order of the maps (:meth:`FastNet._numpy`).
  ``tests/deploy/test_netfast_moves.py``: random programs of these ops, and the family's U-Nets
  at random radix points, give ``run_ints``' integers.
* Where the inputs fit int16 and the weights too (:class:`_Conv`), a conv multiplies two
  input channels per instruction (``hlsnn_net_conv16``: AVX-512 VNNI ``vpdpwssd``, else
  ``vpmaddwd``; two-hot and PoT weights need 16-17 bits and keep the int32 loop).
* The convolutions use AVX-512 (with VNNI) where the CPU has it, else AVX2, else portable loops
  (chosen at run time; integer sums, so the bits do not depend on it).
* The batch runs in slices of :attr:`FastNet.chunk` images, the slices split between
  threads (:mod:`hlsnn.native.parallel`; ctypes releases the GIL during a call). Given the
  float images (``floats=True``), each slice's thread also quantizes its images (rule input_quantize,
  :func:`quantize_nhwc`: ``hlsnn_net_quantize``, the numpy fast path's float64 operations, into
  the NHWC map).

Besides the output integers, a run counts each conv's saturated outputs and each conv
input's non-zero values per pixel (summed over images and channels): what the layer path
reports as ``sat_count`` and ``input_density`` (:meth:`FastNet.run` returns them).

:func:`build` returns None where the compiled helper is unavailable (``HLSNN_NATIVE=0``, no C
compiler), the program is a ``bfp_systolic`` one or has a chained Add's exact sum
(:mod:`hlsnn.engines.network.joins.chain`); the caller then runs the numpy path.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import native
from ...native import parallel
from ...primitives import ROUNDING_CODES
from ..lower import program as netmode

MODES = {"nearest_even": 0, "nearest_away": 1, "truncate": 2}
RULES = {"shift_mac": 0, "sparse_cluster": 1}
ZV = 16                 # output channels per vector (netint.c)


def lib():
    """The loaded ``netint`` library with its signatures set, or None."""
    so = native.load("netint")
    if so is not None and not getattr(so, "_hlsnn_typed", False):
        i64, p, ci = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        so.hlsnn_net_pad.restype = None
        so.hlsnn_net_pad.argtypes = [p, i64, i64, i64, i64, p, i64, i64, i64, i64, p]
        so.hlsnn_net_conv.restype = i64
        # bias, shift, rule, acc_bits, bits, mode, relu, lo, hi, out, limit, counts
        rule = [p, p, ci, ci, ci, ci, ci, i64, i64, p, ci, p]
        so.hlsnn_net_conv.argtypes = [p, i64, i64, i64, p] + [i64] * 12 + rule
        so.hlsnn_net_pad16.restype = None
        so.hlsnn_net_pad16.argtypes = [p, i64, i64, i64, i64, p, i64, i64, i64, i64, i64, p]
        so.hlsnn_net_conv16.restype = i64
        so.hlsnn_net_conv16.argtypes = [p, i64, i64, i64, p] + [i64] * 12 + rule
        so.hlsnn_net_dwconv.restype = i64
        so.hlsnn_net_dwconv.argtypes = [p, i64, i64, i64, p] + [i64] * 9 + rule
        so.hlsnn_net_maxpool.restype = None
        so.hlsnn_net_maxpool.argtypes = [p] + [i64] * 13 + [p]
        so.hlsnn_net_requant.restype = i64
        so.hlsnn_net_requant.argtypes = [p, i64, p, ci, ci, i64, i64, i64, i64, p, ci]
        so.hlsnn_net_add_raw.restype = i64
        so.hlsnn_net_add_raw.argtypes = [p, p, i64, i64, ci, ci, ci, ci, i64, i64, p, p, ci]
        so.hlsnn_net_quantize.restype = i64
        so.hlsnn_net_quantize.argtypes = [p, i64, i64, i64, i64, i64, ci, ci, p]
        so.hlsnn_net_add.restype = i64
        so.hlsnn_net_add.argtypes = [p, p, i64, i64, ci, ci, ci, ci, i64, ci, ci, i64, i64, p, ci]
        so.hlsnn_net_msb_counts.restype = None
        so.hlsnn_net_msb_counts.argtypes = [p, i64, i64, i64, p, ci]
        so._hlsnn_typed = True
    return so


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _p(a):
    """The pointer of an array, or of an ``(array, pointer)`` pair (made once: ``data_as`` costs
    microseconds, a run makes thousands of calls); None stays None."""
    if a is None:
        return None
    return a[1] if type(a) is tuple else _ptr(a)


class _Conv:
    """A conv op's arrays for ``netint.c``: weights (G, kh, kw, Cg, Zs) int32 (or depthwise
    (kh, kw, Cs)), bias and shifts int64, and whether int32 sums are exact (module docstring).

    Where the sums are exact, the inputs have at most 16 bits and the weights fit int16, a
    (non-depthwise) conv whose groups have an even channel count (or that has one group) runs
    on int16 channel pairs (``pairs``): :meth:`pad` writes an int16 padded input of ``cx``
    channels (``C`` rounded up to even; the extra channel's weights are zero) and :meth:`conv`
    multiplies two channels per instruction (``hlsnn_net_conv16``: VNNI ``vpdpwssd``, else
    ``vpmaddwd``), the weights as int16 pairs of one output channel, (G, kh, kw, Cg2, Zs) int32
    words. The integers are the int32 path's: each pair sum is a partial sum the exactness bound
    covers."""

    def __init__(self, op, bits, p, engine):
        f = op.f
        self.op, self.f = op, f
        codes = np.asarray(f["codes"], np.int64)             # (Z, Cg, kh, kw)
        z, cg, kh, kw = codes.shape
        g = f["group"]
        zg = z // g
        self.g, self.cg, self.zg, self.kh, self.kw = g, cg, zg, kh, kw
        self.rowsum = int(np.abs(codes).reshape(z, -1).sum(axis=1).max(initial=0))     # the largest sum |c|
        self.exact32 = (1 << (bits - 1)) * self.rowsum < (1 << 31)
        self.depthwise = cg == 1 and zg == 1 and g > 1
        if self.depthwise:
            cs = -(-z // ZV) * ZV
            w = np.zeros((kh, kw, cs), np.int32)
            w[:, :, :z] = codes[:, 0].transpose(1, 2, 0)
            self.zs = cs
        else:
            zs = -(-zg // ZV) * ZV
            w = np.zeros((g, kh, kw, cg, zs), np.int32)
            w[..., :zg] = codes.reshape(g, zg, cg, kh, kw).transpose(0, 3, 4, 2, 1)
            self.zs = zs
        self.w = np.ascontiguousarray(w) if self.exact32 else None
        self.pairs = bool(self.exact32 and not self.depthwise and bits <= 16 and (g == 1 or cg % 2 == 0)
                          and codes.min(initial=0) >= -(1 << 15) and codes.max(initial=0) < (1 << 15))
        self.cx = f["c"]                                    # channels of the padded input
        if self.pairs:
            cg2 = -(-cg // 2)
            self.cg2, self.cx = cg2, g * 2 * cg2
            w16 = np.zeros((g, kh, kw, 2 * cg2, self.zs), np.int16)
            w16[:, :, :, :cg] = self.w
            # (.., Cg2, Zs, 2) int16: a channel pair of one output channel in one int32 word
            w16 = np.ascontiguousarray(w16.reshape(g, kh, kw, cg2, 2, self.zs).transpose(0, 1, 2, 3, 5, 4))
            self.w16 = w16.view(np.int32).reshape(g, kh, kw, cg2, self.zs)
        self.bias = np.ascontiguousarray(np.broadcast_to(np.asarray(f["bias"], np.int64).reshape(-1), (z,)))
        self.shift = np.ascontiguousarray(np.broadcast_to(np.asarray(f["shift"], np.int64).reshape(-1), (z,)))
        self.rule = RULES[engine]
        self.acc_bits = int(p.get("acc_bits", 62)) if engine == "shift_mac" else 62
        self.bits = bits if engine == "shift_mac" else 8
        self.mode = MODES[p["rounding"]]
        self.lo, self.hi = (int(v) for v in f["clip"])
        pt, pl, pb, pr = f["pads"]
        self.hp, self.wp = f["h"] + pt + pb, f["w"] + pl + pr
        self.xdtype = np.int16 if self.pairs else np.int32
        # the constant arrays' pointers, made once (each holds its array: numpy's data_as)
        self.p_bias, self.p_shift = _ptr(self.bias), _ptr(self.shift)
        self.p_w = _ptr(self.w16 if self.pairs else self.w) if self.exact32 else None

    def pad(self, so, x, b, xp, nz):
        """The padded copy of ``x`` (``b`` images, (b, H, W, C) int32) into ``xp`` (b, hp, wp,
        cx) of :attr:`xdtype`, zeroed once; ``nz`` (H*W int64) gets the non-zero counts added.
        Each array may come as ``(array, pointer)`` (:meth:`FastNet._buf`'s pairs)."""
        f = self.f
        if self.pairs:
            so.hlsnn_net_pad16(_p(x), b, f["h"], f["w"], f["c"], _p(xp), self.hp, self.wp, self.cx,
                               f["pads"][0], f["pads"][1], _p(nz))
        else:
            so.hlsnn_net_pad(_p(x), b, f["h"], f["w"], f["c"], _p(xp), self.hp, self.wp, f["pads"][0],
                             f["pads"][1], _p(nz))

    def conv(self, so, xp, q0, q1, rule):
        """The outputs of pixels [q0, q1) from the padded input ``xp`` (an array or ``(array,
        pointer)``); ``rule`` the output-stage arguments of ``hlsnn_net_conv`` (bias, shift, rule,
        acc_bits, bits, mode, relu, lo, hi, out, limit, counts). Returns the saturation count."""
        f = self.f
        if self.depthwise:
            return so.hlsnn_net_dwconv(_p(xp), self.hp, self.wp, f["c"], self.p_w, self.zs, self.kh, self.kw,
                                       f["sh"], f["sw"], f["oh"], f["ow"], q0, q1, *rule)
        if self.pairs:
            return so.hlsnn_net_conv16(_p(xp), self.hp, self.wp, self.cx, self.p_w, self.g, self.kh, self.kw,
                                       self.cg2, self.zg, self.zs, f["sh"], f["sw"], f["oh"], f["ow"], q0, q1, *rule)
        return so.hlsnn_net_conv(_p(xp), self.hp, self.wp, f["c"], self.p_w, self.g, self.kh, self.kw, self.cg,
                                 self.zg, self.zs, f["sh"], f["sw"], f["oh"], f["ow"], q0, q1, *rule)


def quantize_nhwc(net, so, x, out):
    """Rule input_quantize (:func:`~hlsnn.deploy.lower.program.quantize_input`, its bits) of float64 images ``x``
    (B, C, H, W) or (B, K), C-contiguous, into ``out``, their (B, H, W, C) int32 maps:
    ``netint.c``'s ``hlsnn_net_quantize`` (the numpy fast path's float64 operations) where that
    path applies to every value, else ``quantize_input`` (which then takes ``to_fixed``). Each
    value's integer depends on that value alone, so a batch may be quantized in slices."""
    b = x.shape[0]
    c, h, w = netmode._chw(net.input["shape"])
    i = net.input
    f, bits, rounding = i["f"], i["bits"], i["rounding"]
    g = max(f + 24, 0)
    if i["signed"] and rounding in ("nearest_away", "nearest_even") and bits + 1 + g - f <= 52:
        ch, hw = (1, c * h * w) if c == 1 or h * w == 1 else (c, h * w)      # NCHW is NHWC already
        if not so.hlsnn_net_quantize(_ptr(x), b, ch, hw, g, g - f, bits, int(rounding == "nearest_away"),
                                     _ptr(out)):
            return out
    np.copyto(out, netmode.quantize_input(net, x).reshape(b, c, h, w).transpose(0, 2, 3, 1), casting="unsafe")
    return out


class FastNet:
    """A lowered integer :class:`~hlsnn.engines.network.program.NetProgram` ready for ``netint.c``.

    :meth:`run` takes the input integers (B, C, H, W) or (B, K) and returns what
    :func:`~hlsnn.deploy.lower.program.run_ints` returns, plus per-conv statistics."""

    #: images per slice: a layer's maps stay in the CPU's caches
    chunk = 16

    def __init__(self, net, so, *, isa=3):
        self.net, self.so, self.isa = net, so, int(isa)
        bits = net.input["bits"]
        self.convs = {op.name: _Conv(op, bits, net.params, net.engine) for op in net.ops if op.kind == "conv"}
        # each tensor's map shape in the NHWC buffers: (H, W, C)
        self.maps = {net.input["name"]: self._hwc(net.input["shape"])}
        for op in net.ops:
            f = op.f
            if op.kind == "conv":
                self.maps[op.out] = (f["oh"], f["ow"], f["z"])
            elif op.kind == "maxpool":
                self.maps[op.out] = (f["oh"], f["ow"], f["c"])
            elif op.kind in ("lut", "gate", "lnorm"):   # hlsnn.engines.network.gate, .layernorm: the map's shape
                self.maps[op.out] = self.maps[self._src(op.ins[0])]
            elif op.kind in netmode.MOVE_KINDS:   # the program's shape of the tensor
                self.maps[op.out] = self._hwc(net.shapes[op.out])
            else:
                self.maps[op.out] = (1, 1, f["c"]) if f["gap"] else self.maps[self._src(op.ins[0])]
        for op in net.ops:                       # every op reads a map of the shape it expects
            hwc = self.maps[self._src(op.ins[0])]
            if op.kind in netmode.MOVE_KINDS:     # its numpy rule reshapes its inputs (and checks their size)
                continue
            f = op.f
            want = hwc if f.get("same") else (hwc[0], hwc[1], 1) if f.get("pix") else (1, 1, f["c"])  # pix: rule spatial_gate
            if op.kind == "gate" and self.maps[self._src(op.ins[1])] != want:
                raise ValueError(f"op {op.name} gates by a map of shape {self.maps[self._src(op.ins[1])]}")
            if op.kind in ("add", "lut", "gate", "lnorm"):
                ok = hwc[2] == f["c"] and hwc[0] * hwc[1] == f["hw"]
            else:                                # an alias's view of the same NHWC pixels (an Unsqueeze's 1 x W)
                ok = hwc[2] == f["c"] and hwc[0] * hwc[1] == f["h"] * f["w"]
            if not ok:
                raise ValueError(f"op {op.name} reads a map of shape {hwc} (H, W, C)")

    @staticmethod
    def _hwc(shape):
        c, h, w = netmode._chw(shape)
        return (h, w, c)

    def _src(self, name):
        return self.net.aliases.get(name, name)

    def run(self, xq, *, floats=False):
        """``(out, sat, nz)``: the output integers as :func:`~hlsnn.deploy.lower.program.run_ints`
        gives them (int64), each conv op's saturation count and its input's non-zero counts per
        pixel (H*W int64, over images and channels). With ``floats``, ``xq`` is the float batch
        and each slice is quantized in its thread (:func:`quantize_nhwc`, rule input_quantize's bits)."""
        xq = np.ascontiguousarray(xq, np.float64) if floats else np.asarray(xq)
        b = xq.shape[0]
        ranges = [(a, min(a + self.chunk, b)) for a in range(0, b, self.chunk)]
        per = parallel.split(len(ranges), max(1, min(parallel.threads(), len(ranges))))
        out_shape = tuple(self.net.output["shape"])
        out = np.empty((b,) + out_shape, np.int64)

        def work(r0, r1):
            sat = {k: 0 for k in self.convs}
            nz = {k: np.zeros(c.f["h"] * c.f["w"], np.int64) for k, c in self.convs.items()}
            ws = {}                   # this thread's buffers, used again by each slice
            for a, e in ranges[r0:r1]:
                out[a:e] = self._slice(xq[a:e], sat, nz, ws, floats)
            return sat, nz
        res = parallel.run(work, [r for r in per if r[1] > r[0]] or [(0, 0)])
        sat = {k: sum(r[0][k] for r in res) for k in self.convs}
        nz = {k: sum(r[1][k] for r in res) for k in self.convs}
        return out, sat, nz

    @staticmethod
    def _buf(ws, key, shape, dtype=np.int32):
        """A buffer of ``ws`` (zeroed when first made) and its pointer: ``(array, pointer)``."""
        got = ws.get(key)
        if got is None or got[0].shape != shape or got[0].dtype != dtype:
            a = np.zeros(shape, dtype)
            got = ws[key] = (a, _ptr(a))
        return got

    def _slice(self, xq, sat, nz, ws, floats=False):
        net, so = self.net, self.so
        b = xq.shape[0]
        h, w, c = self.maps[net.input["name"]]
        if floats:
            x = self._buf(ws, "/x", (b, h, w, c))
            quantize_nhwc(net, so, xq, x[0])
            if net.input.get("clip"):            # the input Quant's clamp (netprefix._fold_clip)
                np.clip(x[0], *net.input["clip"], out=x[0])
        else:
            x = np.ascontiguousarray(np.asarray(xq, np.int32).reshape(b, c, h, w).transpose(0, 2, 3, 1))
            x = (x, _ptr(x))
        env = {net.input["name"]: x}              # tensor -> (array, pointer)
        for op in net.ops:
            src = env[self._src(op.ins[0])]
            f = op.f
            if op.kind == "conv":
                cv = self.convs[op.name]
                y, s = self._conv(cv, src, nz[op.name], ws)
                sat[op.name] += s
            elif op.kind in netmode.MOVE_KINDS or "div" in f or "split" in f or op.kind == "add" and "clip" in f:  # mixed_concat, add_clip
                y = self._move(op, env, b)
            elif op.kind == "lnorm":             # rule layer_norm in numpy on the NHWC maps: channels last already
                from ...engines.network.tokens.layernorm import run_last
                a = np.ascontiguousarray(run_last(src[0], f, net.input["bits"]).astype(np.int32))
                y = (a, _ptr(a))
            elif op.kind in ("lut", "gate"):     # rules unary_table, channel_gate in numpy on the NHWC maps (the same integers)
                from ...engines.network import gate as netgate
                if op.kind == "lut":
                    t = np.asarray(op.f["table"], np.int32)
                    a = t[np.arange(t.shape[0]), src[0] - f["lo"]] if t.ndim == 2 else t[src[0] - f["lo"]]   # channel_table: C last
                else:
                    g = env[self._src(op.ins[1])][0]
                    g = g if f.get("same") else g.reshape(src[0].shape[:3] + (1,)) if f.get("pix") else \
                        g.reshape(b, 1, 1, f["c"])
                    a = netgate.gate_ints(src[0], g, f, net.input["bits"]).astype(np.int32)
                a = np.ascontiguousarray(a)
                y = (a, _ptr(a))
            elif op.kind == "maxpool":
                y = self._buf(ws, op.name, (b, f["oh"], f["ow"], f["c"]))
                so.hlsnn_net_maxpool(src[1], f["h"], f["w"], f["c"], f["kh"], f["kw"], f["sh"], f["sw"],
                                     f["pads"][0], f["pads"][1], f["oh"], f["ow"], 0, b, y[1])
            else:
                other = env[self._src(op.ins[1])] if len(op.ins) > 1 else None
                y = self._buf(ws, op.name, (b,) + self.maps[op.out])
                so.hlsnn_net_add(src[1], None if other is None else other[1], f["hw"], f["c"], f["sa"], f["sb"],
                                 int(f["relu"]), int(f["gap"]), int(f["shift"]), net.input["bits"],
                                 MODES[f["rounding"]], 0, b, y[1], self.isa)
            env[op.out] = y
        y = env[self._src(net.output["tensor"])][0]
        return y.transpose(0, 3, 1, 2).reshape((b,) + tuple(net.output["shape"]))

    def _requant(self, v, shift, rounding):
        """``shift_round_sat(v, shift, B, rounding)`` of an int32 array (``hlsnn_net_add`` of one
        operand: rule residual_add's requantization, element by element), a new int32 array."""
        v = np.ascontiguousarray(v, np.int32)
        out = np.empty_like(v)
        n = v.shape[0]
        self.so.hlsnn_net_add(_ptr(v), None, v.size // max(n, 1), 1, 0, 0, 0, 0, int(shift), self.net.input["bits"],
                              MODES[rounding], 0, n, _ptr(out), self.isa)
        return out

    def _move(self, op, env, b):
        """A data move or an average pool (rules nearest_upsample, zero_stuff, channel_concat, avg_pool, bilinear_x2, edge_pad of :mod:`hlsnn.engines.network.move`
        and :mod:`~hlsnn.engines.network.pools.linpool`) written on the NHWC maps: the same index
        arithmetic on the H and W axes, a concat along C, the window's exact sum (integer sums:
        their order does not matter, so row by row of column sums) and the requantizations by
        :meth:`_requant` (an average pool whose sums are scaled or divided, rules avg_pool_uncounted and mean_divide,
        or might not fit int32: in int64, then :func:`~hlsnn.primitives.shift_round_sat`), where
        every input's map is the op's ``(H, W, C)``; a transpose, an input that is a view of
        another shape (a dense layer's ``(1, 1, K)`` output viewed as a ``C x H x W`` map: its
        values are in NCHW order) and an add that divides go to :meth:`_numpy`.
        Returns the output map ``(array, pointer)``."""
        from ...engines.network.move import pad_index
        f = op.f
        bits = self.net.input["bits"]
        x = env[self._src(op.ins[0])][0]
        cs = f["cs"] if op.kind == "concat" else [f.get("c")] * len(op.ins)
        if any(self.maps[self._src(t)] != (f.get("h"), f.get("w"), c) for t, c in zip(op.ins, cs)):
            return self._numpy(op, env, b)       # a view of another shape (a dense output's (1, 1, K)): NCHW order
        if op.kind == "upsample":
            ey, ex = f.get("edge", (0, 0))
            iy = np.clip((np.arange(f["oh"]) - ey) // f["fh"], 0, f["h"] - 1)
            ix = np.clip((np.arange(f["ow"]) - ex) // f["fw"], 0, f["w"] - 1)
            a = x.reshape(b, f["h"], f["w"], f["c"])[:, iy][:, :, ix]
        elif op.kind == "pad":
            t, left, bot, r = f["pads"]
            a = x.reshape(b, f["h"], f["w"], f["c"])[:, pad_index(f["h"], t, bot, f["mode"])][
                :, :, pad_index(f["w"], left, r, f["mode"])]
        elif op.kind == "zerostuff":
            a = np.zeros((b, f["oh"], f["ow"], f["c"]), np.int32)
            a[:, ::f["sh"], ::f["sw"]] = x.reshape(b, f["h"], f["w"], f["c"])
        elif op.kind == "concat":
            parts = [env[self._src(t)][0].reshape(b, f["h"], f["w"], cs) for t, cs in zip(op.ins, f["cs"])]
            a = np.concatenate([p if s == 0 else self._requant(p, s, f["rounding"]) for p, s in
                                zip(parts, f["shifts"])], axis=3)
        elif op.kind == "avgpool":              # linpool.run's rule on the NHWC windows
            t, left, bot, r = f["pads"]
            # int32 sums while |sum| <= taps * 2**(B-1) * 4 (tap weights <= 4) fits
            small = f["kh"] * f["kw"] << (bits + 1) < 1 << 31
            xp = np.pad(x.reshape(b, f["h"], f["w"], f["c"]).astype(np.int32 if small else np.int64, copy=False),
                        ((0, 0), (t, bot), (left, r), (0, 0)))
            ye, xe = f["sh"] * (f["oh"] - 1) + 1, f["sw"] * (f["ow"] - 1) + 1
            # the window's weights 2**(ty + tx) are a product: its exact sum is a sum over rows of
            # the rows' sums over columns (integer sums, any order), a tap of weight 2 added twice
            rows = np.zeros((b, xp.shape[1], f["ow"], f["c"]), xp.dtype)
            for kx in range(f["kw"]):
                for _ in range(1 << ((f["mx"] >> kx) & 1)):
                    rows += xp[:, :, kx:kx + xe:f["sw"]]
            s = np.zeros((b, f["oh"], f["ow"], f["c"]), xp.dtype)
            for ky in range(f["kh"]):
                for _ in range(1 << ((f["my"] >> ky) & 1)):
                    s += rows[:, ky:ky + ye:f["sh"]]
            if small and "div" not in f and not f.get("uncounted"):
                a = self._requant(s, f["shift"], f["rounding"])
            else:
                from ...engines.network.pools.mean import divide
                from ...primitives import shift_round_sat
                s = s.astype(np.int64)
                if f.get("uncounted"):             # rule avg_pool_uncounted (.uncounted): the sum over L values
                    from ...engines.network.pools.uncounted import scale
                    s = s * scale(f)[None, :, :, None]
                if "div" in f:                     # rule mean_divide (.mean)
                    s = divide(s, f["div"])
                a = shift_round_sat(s, f["shift"], bits, f["rounding"])[0]
        else:
            return self._numpy(op, env, b)
        a = np.ascontiguousarray(a, dtype=np.int32)
        return a, _ptr(a)

    def _numpy(self, op, env, b):
        """A data move, transpose or average pool (:data:`~hlsnn.deploy.lower.program.MOVE_KINDS`), or
        an add that divides (rule mean_divide), by its numpy rule (:func:`~hlsnn.deploy.lower.program.run_move`,
        :func:`~hlsnn.deploy.lower.program.add_ints`, what :func:`~hlsnn.deploy.lower.program.run_ints` runs)
        on the NCHW order of the NHWC maps: the same integers, each a ``B``-bit value (a move's
        is an input's, the others' are requantized to ``B`` bits), so int32 holds them.
        Returns the output map ``(array, pointer)``."""
        def get(name):                      # (b, C, H, W): each image's values in the tensor's CHW order
            return env[self._src(name)][0].transpose(0, 3, 1, 2)
        f = op.f
        if op.kind == "gate":               # a gate of a mixed map (rule mixed_concat, netcatmix): its numpy rule
            from ...engines.network import gate as netgate
            y = netgate.run(op, get, b, self.net.input["bits"])
        elif op.kind == "add":
            y = netmode.add_ints(get(op.ins[0]).reshape(b, f["c"], f["hw"]),
                                 get(op.ins[1]).reshape(b, f["c"], f["hw"]) if len(op.ins) > 1 else None, f,
                                 self.net.input["bits"])
        else:
            y = netmode.run_move(self.net, op, get, b)
        h, w, c = self.maps[op.out]
        a = np.ascontiguousarray(y.reshape(b, c, h, w).transpose(0, 2, 3, 1), dtype=np.int32)
        return a, _ptr(a)

    def _conv(self, cv, x, nz, ws):
        """``(y, saturations)`` of one conv op on ``x`` (B, H, W, C); ``x`` and ``y`` (B, OH, OW,
        Z) int32 as ``(array, pointer)``."""
        f, so = cv.f, self.so
        b = x[0].shape[0]
        xp = self._buf(ws, cv.op.name + "/in", (b, cv.hp, cv.wp, cv.cx), cv.xdtype)
        cv.pad(so, x, b, xp, nz)
        if not cv.exact32:                      # int32 sums might wrap: the numpy rule (int64)
            acc = netmode.conv_acc(x[0].transpose(0, 3, 1, 2), f)
            y, sat = _output(cv, acc.reshape(-1, f["z"]), self.net.params["rounding"])
            y = np.ascontiguousarray(y.reshape(acc.shape), dtype=np.int32)
            return (y, _ptr(y)), sat
        y = self._buf(ws, cv.op.name, (b, f["oh"], f["ow"], f["z"]))
        q1 = b * f["oh"] * f["ow"]
        rule = (cv.p_bias, cv.p_shift, cv.rule, cv.acc_bits, cv.bits, cv.mode, int(f["relu"]), cv.lo, cv.hi, y[1],
                self.isa, None)
        return y, int(cv.conv(so, xp, 0, q1, rule))


def _output(cv, acc, rounding):
    """The engine's output rule and the clamp on accumulators (N, Z) int64, in numpy:
    ``(y, saturations)`` (``netint.c``'s ``out_rule``; the numpy twin for an op whose sums
    need int64)."""
    from ...primitives import saturate, shift_round_sat
    v = acc + cv.bias[None, :]
    if cv.rule == 0:
        v = saturate(v, cv.acc_bits)
    if cv.f["relu"]:
        v = np.maximum(v, 0)
    y, sat = shift_round_sat(v, cv.shift[None, :], cv.bits, rounding)
    return np.clip(y, cv.lo, cv.hi), int(sat.sum())


def build(net, *, isa=3):
    """A :class:`FastNet` of an integer network program, or None (module docstring). ``isa``
    caps the vector unit the convolutions use (0 the portable loops, 1 AVX2, 2 AVX-512, 3 AVX-512
    VNNI; the best the CPU has up to that): the tests run each, and each gives the same bits."""
    if net.engine not in RULES or not all(r in ROUNDING_CODES for r in MODES):
        return None
    if any(op.f.get("out_bits") for op in net.ops):
        return None                       # and a chained Add's exact sum (hlsnn.engines.network.joins.chain)
    if any(op.f.get("terms", 1) != 1 for op in net.ops):
        return None                       # and two input terms (hlsnn.engines.network.lintwo)
    if any(op.kind in netmode.MOVE_KINDS and op.out not in net.shapes for op in net.ops):
        return None                       # a move's map shape comes from the program's shapes
    so = lib()
    if so is None:
        return None
    return FastNet(net, so, isa=isa)
