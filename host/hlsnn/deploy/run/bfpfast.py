"""A network of ``bfp`` layers on the ``emu`` target at the speed of an evaluation loop: the
layer path (:meth:`hlsnn.deploy.run.runner.Deployment.run` with :class:`~hlsnn.deploy.run.executors.BfpExec`
layers) with its per-call host work done once, bit for bit.

Layer by layer, each BFP layer of each slice of :attr:`Deployment.chunk` images is one
``Kernel.gemm_rows`` call: the activations quantized (one exponent per sample or im2col patch;
a grouped convolution of one pack of groups over all its input channels, with the block-diagonal
weights), the exact sums, the all-zero rows given the layer's exponent (the emulator's rule 0),
the engine's epilogue (the max rule), the dequantized outputs as float64. Here the same call is
one C function (``bfp_rows.c``, ``hlsnn_bfp_layer``: the loops of ``hlsnn_bfp_conv_gemm`` or
``hlsnn_bfp_rows_gemm`` with each tile's rows going through ``hlsnn_bfp_epilogue``'s rules as
soon as their sums are formed, the all-zero rows after their exponent is known), on weights
laid out once per layer (:class:`_Layer`), so that a slice costs one C call per layer and no
per-call checks, quantization of weights or reshaping of operands (a depthwise layer sums each
output's own taps; bfp16's sums, beyond int32, as two int32 sums of the mantissas' bytes where
they fit: the same integers). The host layers between them run as the layer path runs them
(:func:`hlsnn.deploy.run.hostops.run` on the same float64 arrays, in the same memory layout: a
conv's output is the NCHW view of its NHWC rows), so their bits are the layer path's too; a
``Clip`` that alone reads a BFP layer runs in its epilogue, and ``Add``, ``Relu`` and ``Clip``
write into a buffer nothing reads later (:meth:`BfpNet._slice`). The slices run in the layer
path's order and grouping, split
between threads (:mod:`hlsnn.native.parallel`; ctypes releases the GIL during a call), each
thread with its own buffers, kept between runs. The calibration pass (``Deployment._run`` on the
whole batch: one call per layer) runs in slices where that gives the same bits
(:meth:`BfpNet._whole_from_slices`), else as one slice, its large layers split between threads
(:meth:`BfpNet._layer`).

Each layer's ``sat_count``, ``input_density``, ``calls`` and ``in_shape`` are set as the layer
path sets them (:meth:`BfpNet.run`). The kernel object's state (the weights it holds on chip,
``last_sat_count``) is not touched.

:func:`build` returns None where this does not apply, and the layer path runs: the compiled
helpers off, a layer that is not ``bfp`` on a ``bfp_systolic`` accelerator of the ``emu``
target's arrays (no transfer limit), an output-exponent rule other than ``max``, ``stochastic``
rounding, a config or K beyond :func:`~hlsnn.engines.bfp_systolic.emulator.gemm_dtype`, a layer
of more than one pack of groups or chunk of outputs, sums that neither int32 nor float64 holds
exactly (:func:`~hlsnn.engines.bfp_systolic.compiled.sums_kind`), quantized host layers,
``dynamic`` radix points. :meth:`BfpNet.run` returns None (the layer path then runs the batch)
for activations with a NaN or an infinity.
``tests/deploy/test_bfpfast_net.py`` holds the two paths equal.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from ...engines import convgeom, tiling
from ...engines.bfp_systolic import compiled
from ...engines.bfp_systolic.emulator import gemm_dtype, zero_row_exponent
from ...native import parallel
from . import hostops

TILE_ROWS = compiled.TILE_ROWS


def lib():
    """``bfp_rows`` (:func:`hlsnn.engines.bfp_systolic.compiled.lib`) with ``hlsnn_bfp_layer``
    typed, or None."""
    so = compiled.lib()
    if so is not None and not getattr(so, "_hlsnn_layer_typed", False):
        i64, p, ci, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_double
        so.hlsnn_bfp_layer.restype = i64
        so.hlsnn_bfp_layer.argtypes = ([ci, p] + [i64] * 18 + [ci, ci, ci, ci, p, i64, i64, ci, p, p]
                                       + [p] * 9 + [p, p, f64, f64, ci, p, p, p, ci, i64, i64, p, ci, f64, f64, p, i64])
        so._hlsnn_layer_typed = True
    return so


def _addr(a):
    """A pointer argument that keeps ``a`` alive (None for None), made once for arrays that stay."""
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


class _Layer:
    """One BFP layer's constant operands for ``hlsnn_bfp_layer``: the weights' mantissas laid out
    for the C tiles (conv: columns in the gathered (i, j, c) order), the epilogue's column scales
    ``2**we`` and bias column ``bm * 2**(be - we)`` (as :func:`~hlsnn.engines.bfp_systolic.emulator.emulate_floats`
    forms them)."""

    def __init__(self, ex):
        layer, p = ex.layer, ex.p
        kern = ex.acc.kernel
        self.ex, self.name, self.dense = ex, layer.name, layer.kind == "dense"
        (_, _, wq, bq), = ex.chunks
        m, e = p["mantissa_bits"], p["exponent_bits"]
        from ...formats import bfp
        one = bfp.BFPTensor._trusted(np.zeros((1, wq.shape[1]), np.int64), np.zeros((1, 1), np.int32), m, e, 1, None)
        _, _, wm, we, bm, be = kern._check_bfp(one, wq, bq)
        wm = np.asarray(wm, np.int64)
        self.n, self.k = wm.shape
        self.kind = compiled.sums_kind(wm, m, np.float64)
        if self.dense:
            cols = wm.T
        else:
            g = layer.geom
            c = self.k // (g.kh * g.kw)
            cols = wm.reshape(self.n, c, g.kh, g.kw).transpose(2, 3, 1, 0).reshape(self.k, self.n)
            self.geom, self.c = g, c
        self.wt, self.wt2, self.wtd, self.npad = (None,) * 4 if self.kind is None else \
            compiled._weights(cols, self.kind, m)
        # float64 sums of mantissas of up to 16 bits, within tile_split_vnni's bound: its int16 pairs
        self.wsplit = None
        if self.kind == "float64" and m <= 16 and 0 <= 255 * compiled.sum_bound(wm, 1) < (1 << 31):
            self.wsplit = compiled._weights(cols, "int32", m)[1]
        # a depthwise convolution of one pack (Z = C, one channel a group) with int32 sums: its
        # taps' weights (kh * kw, npad) for hlsnn_bfp_layer's dw_sums
        self.wdw = None
        if not self.dense and layer.group > 1 and layer.group == self.c == self.n and self.kind == "int32":
            taps = g.kh * g.kw
            z = np.arange(self.n)
            wdw = np.zeros((taps, self.npad), np.int32)
            wdw[:, :self.n] = wm[z[None, :], z[None, :] * taps + np.arange(taps)[:, None]]
            if np.abs(wm).sum() == np.abs(wdw).sum():         # nothing outside the diagonal blocks
                self.wdw = wdw
        we = np.asarray(we, np.int64)
        self.colscale = np.ldexp(1.0, we)
        self.bcol = None if bm is None else np.ascontiguousarray(
            np.asarray(bm, np.float64).reshape(-1) * np.ldexp(1.0, int(be) - we))
        a = p["acc_bits"]
        self.lo_a, self.hi_a = float(-(1 << (a - 1))), float((1 << (a - 1)) - 1)
        self.m, self.emin, self.emax = m, -(1 << (e - 1)), (1 << (e - 1)) - 1
        # the all-zero rows' exponent (the emulator's rule 0: the layer's, batch-free)
        self.zexp = zero_row_exponent(we, None if bm is None else be, e)
        self.mode = compiled.MODES.get(p["rounding"])
        self.relu = int(bool(layer.relu))
        self.ptrs = None            # the constant arrays' pointers (BfpNet._layer)

    def usable(self):
        return self.kind is not None and self.mode is not None


_local = threading.local()


def _workspaces(count):
    """The calling thread's first ``count`` workspaces (dicts of buffers, kept between runs so
    that a run does not fault in fresh pages): the first for its own slices, the others for the
    pool threads that share a slice with it (one run at a time per calling thread)."""
    ws = getattr(_local, "ws", None)
    if ws is None:
        ws = _local.ws = []
    while len(ws) < count:
        ws.append({})
    return ws[:count]


#: host ops :meth:`BfpNet._slice` may run into an input's buffer
IN_PLACE = ("Add", "Relu", "Clip")


def _in_place(layer, ins, j):
    """:func:`hostops.run` of an ``IN_PLACE`` op written into ``ins[j]`` (the same ufunc)."""
    x, a = ins[j], layer.attrs
    if layer.op == "Add":
        return np.add(ins[0], ins[1], out=x)
    if layer.op == "Relu":
        return np.maximum(x, 0, out=x)
    return np.clip(x, -np.inf if a["lo"] is None else a["lo"], np.inf if a["hi"] is None else a["hi"], out=x)


class BfpNet:
    """The deployment's network with its BFP layers as :class:`_Layer` (module docstring)."""

    #: the C kernels' variant (``compiled.ISAS``; tests): all give the same bits
    isa = "auto"
    #: None, or ``before(layer, x)`` called before each BFP layer of a slice with its input,
    #: returning the :class:`_Layer` to run (:func:`hlsnn.deploy.quantize.biascorr.calibrate`: the
    #: layer with its corrected bias, on the whole batch as one slice)
    before = None

    def __init__(self, deploy, layers, so):
        self.deploy, self.net, self.layers, self.so = deploy, deploy.net, layers, so
        # buffer reuse (_slice): each tensor's last reader, and the tensors whose arrays a host
        # op other than IN_PLACE may hand on (a view: Flatten, Reshape, ...) or the caller keeps
        self.last = {t: i for i, layer in enumerate(self.net.layers) for t in layer.inputs}
        self.pinned = {t for layer in self.net.layers if layer.kind == "host" and layer.op not in IN_PLACE
                       for t in layer.inputs} | {self.net.output}
        # a Clip that alone reads a BFP layer's output runs in that layer's epilogue (hlsnn_bfp_layer's
        # clip: the same clamp on the same values): {BFP layer: (clo, chi)}, and the Clips skipped
        readers = {}
        for layer in self.net.layers:
            for t in layer.inputs:
                readers.setdefault(t, []).append(layer)
        self.clip, self.fused = {}, set()
        for layer in self.net.layers:
            r = readers.get(layer.output, [])
            if layer.name in layers and len(r) == 1 and r[0].kind == "host" and r[0].op == "Clip" \
                    and len(r[0].inputs) == 1 and layer.output != self.net.output:
                a = r[0].attrs
                self.clip[layer.name] = (-np.inf if a["lo"] is None else float(a["lo"]),
                                         np.inf if a["hi"] is None else float(a["hi"]))
                self.fused.add(r[0].name)

    def run(self, x, whole=False):
        """:meth:`Deployment.run` of ``x`` (float64, not ``keep``): the output, with each layer's
        statistics set as the layer path sets them; None (nothing set) when an activation is NaN
        or infinite. The batch runs in slices of ``Deployment.chunk`` images as the layer path
        slices it, or with ``whole`` as one call per layer (the calibration pass:
        ``Deployment._run`` on the whole batch).

        ``whole`` runs in slices too where that gives the same bits (:meth:`_whole_from_slices`),
        else as one slice."""
        n = x.shape[0]
        if whole and n > self.deploy.chunk:
            got = self._run(x, self.deploy.chunk)
            if got is None:
                return None
            if self._whole_from_slices(*got[1:]):
                return self._finish(x, got[0], [(0, n)], [self._merge(got[1], got[2])])
        step = n if whole else self.deploy.chunk
        got = self._run(x, step)
        return None if got is None else self._finish(x, got[0], got[1], got[2])

    def _run(self, x, step):
        """The slices of ``step`` images through the network: ``(outputs, ranges, counts)``,
        ``counts[i][layer] = (nnz, saturations, rows * K, in_shape, all-zero rows, their
        exponent)``; None for a NaN or an infinity."""
        n = x.shape[0]
        ranges = [(a, min(a + step, n)) for a in range(0, n, step)]
        outs = [None] * len(ranges)
        info = [None] * len(ranges)
        # one slice: its large layers split between threads (phases 1 and 2 of hlsnn_bfp_layer)
        share = _workspaces(parallel.threads()) if len(ranges) == 1 and parallel.threads() > 1 else None

        def work(r0, r1):
            ws = _workspaces(1)[0] if share is None else share[0]
            for i in range(r0, r1):
                a, b = ranges[i]
                got = self._slice(x[a:b], ws, share)
                if got is None:
                    return False
                outs[i], info[i] = np.array(got[0]), got[1]      # a copy: the buffers serve the next slice
            return True
        per = parallel.split(len(ranges), max(1, min(parallel.threads(), len(ranges))))
        if not all(parallel.run(work, [r for r in per if r[1] > r[0]])):
            return None
        return outs, ranges, info

    def _whole_from_slices(self, ranges, info):
        """Whether the slices' results are those of one call per layer over the whole batch:
        always. Each row is quantized on its own and an all-zero row (every mantissa 0) takes
        the layer's exponent (the emulator's rule 0, :attr:`_Layer.zexp`), not one of the call's
        other rows, so every row's outputs and saturations are the same in any grouping."""
        return True

    def _merge(self, ranges, info):
        """The slices' counts as one call's (:meth:`_whole_from_slices` holds)."""
        n = ranges[-1][1]
        merged = {}
        for name in self.layers:
            rows = [info[i][name] for i in range(len(ranges))]
            shape = (n,) + tuple(rows[-1][3][1:])
            merged[name] = (sum(r[0] for r in rows), sum(r[1] for r in rows) % (1 << 32), sum(r[2] for r in rows),
                            shape, None, None)
        return merged

    def _finish(self, x, outs, ranges, info):
        """Each layer's statistics as the layer path leaves them, and the output."""
        dep, n = self.deploy, x.shape[0]
        sliced = len(ranges) > 1
        collect = getattr(dep, "collect_stats", True)
        for name, ly in self.layers.items():
            st = ly.ex.stats
            sat, dens = 0, 0.0
            for i, (a, b) in enumerate(ranges):
                nnz, s, size, shape = info[i][name][:4]
                st.calls += 1
                if collect:
                    st.input_density = float(np.mean([nnz / size]))
                sat += s
                dens += st.input_density * (b - a)
                ly.ex.in_shape = shape
            st.sat_count = sat
            if sliced:
                st.input_density = dens / n
            ly.ex.in_shape = (n,) + tuple(ly.ex.in_shape[1:])
        return np.concatenate(outs) if len(outs) > 1 else outs[0]

    def _slice(self, x, ws, share=None):
        """One slice through the network (Deployment._run): ``(output, per-layer counts)``.

        The BFP layers write into the thread's pool of buffers, and a buffer goes back to the
        pool after its tensor's last reader. ``Add``, ``Relu`` and ``Clip`` (:data:`IN_PLACE`)
        write into an input's buffer when that input is read by nobody after them (and, for an
        Add, both inputs have one memory layout): the same ufunc on the same values as
        :func:`hostops.run`, into an array of the memory layout numpy gives a new one, so the
        same bits downstream. Anything else runs :func:`hostops.run`."""
        env, info = {self.net.input: x}, {}
        pool = ws.setdefault("pool", [])            # [array, in use]
        for entry in pool:
            entry[1] = False
        owned = {}                                  # tensor -> its pool entry

        def take(size):
            free = [e for e in pool if not e[1] and e[0].size >= size]
            e = min(free, key=lambda e: e[0].size) if free else None
            if e is None:
                e = [np.empty(size), False]
                pool.append(e)
            e[1] = True
            return e

        def reusable(t, i):
            return t in owned and t not in self.pinned and self.last.get(t) == i
        for i, layer in enumerate(self.net.layers):
            ins = [env[t] for t in layer.inputs]
            if layer.name in self.fused:          # its clamp ran in the BFP layer before it
                env[layer.output] = ins[0]
                if layer.inputs[0] in owned:
                    owned[layer.output] = owned.pop(layer.inputs[0])
                continue
            if layer.kind == "host":
                y = None
                if layer.op in IN_PLACE and not (layer.op == "Add" and (
                        len(ins) != 2 or ins[0].shape != ins[1].shape or ins[0].strides != ins[1].strides)):
                    j = next((j for j in range(1 if layer.op != "Add" else 2) if reusable(layer.inputs[j], i)), None)
                    if j is not None:
                        y = _in_place(layer, ins, j)
                        owned[layer.output] = owned.pop(layer.inputs[j])
                if y is None:
                    y = hostops.run(layer, ins)
                env[layer.output] = y
            else:
                ly = self.layers[layer.name] if self.before is None else self.before(layer, ins[0])
                e = take(self._out_size(ly, ins[0]))
                got = self._layer(ly, ins[0], ws, share, e[0], self.clip.get(layer.name))
                if got is None:
                    return None
                env[layer.output], info[layer.name] = got
                owned[layer.output] = e
            for t in set(layer.inputs):
                if reusable(t, i):
                    owned.pop(t)[1] = False
        return env[self.net.output], info

    @staticmethod
    def _out_size(ly, x):
        if ly.dense:
            return x.shape[0] * ly.n
        oh, ow = convgeom._out_hw_checked(ly.geom, x.shape[2], x.shape[3])
        return x.shape[0] * oh * ow * ly.n

    @staticmethod
    def _ptr(ws, key, size, dtype):
        """The pointer of :meth:`_buf`'s buffer (made with it)."""
        a = BfpNet._buf(ws, key, size, dtype)
        p = ws.get(("ptr", key))
        if p is None or p[0] is not a:
            p = ws[("ptr", key)] = (a, _addr(a))
        return p[1]

    @staticmethod
    def _buf(ws, key, size, dtype):
        a = ws.get(key)
        if a is None or a.size < size or a.dtype != dtype:
            a = ws[key] = np.empty(max(size, 1), dtype)
        return a

    #: a layer's rows times K from which :meth:`_layer` splits one slice between threads
    SHARE_ELEMS = 1 << 18

    def _layer(self, ly, x, ws, share, out, clip=None):
        """``BfpExec.run`` of one layer on ``x`` (a slice's float64 input; ``clip``: the fused
        Clip's bounds, or None): ``(output values,
        (nnz, saturations, rows * K, x.shape, all-zero rows, largest exponent of the others or
        None))``, or None for a NaN or an infinity. With
        ``share`` (one workspace per thread) and enough rows, phase 1 (the rows with a non-zero
        mantissa) runs on parts of the images in threads, then the all-zero rows get their
        exponent and phase 2 their outputs (hlsnn_bfp_layer)."""
        b = x.shape[0]
        k, n, npad = ly.k, ly.n, ly.npad
        if ly.dense:
            xr = x.reshape(b, -1)
            if xr.strides[1] != 8 or xr.strides[0] % 8:
                xr = np.ascontiguousarray(xr)
            rows, hw = b, 1
            geo = (0, 0, 0, k, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1)
            sb = xr.strides[0] // 8
        else:
            g = ly.geom
            _, c, h, w = x.shape
            oh, ow = convgeom._out_hw_checked(g, h, w)
            if any(s % 8 for s in x.strides) or x.strides[1] != 8:     # channels last: rows read in runs
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            xr, rows, hw = x, b * oh * ow, h * w
            sb, sc, sh_, sw_ = (s // 8 for s in x.strides)
            geo = (sc, sh_, sw_, c, h, w, g.kh, g.kw, g.sh, g.sw, g.pads[0], g.pads[1], g.dh, g.dw, oh, ow)
        exps = self._buf(ws, "exps", rows, np.int64)
        nonzero = self._buf(ws, "nonzero", rows, np.uint8)
        ep, nzp = self._ptr(ws, "exps", rows, np.int64), self._ptr(ws, "nonzero", rows, np.uint8)
        yep = self._ptr(ws, "ye", rows, np.int64)
        if ly.ptrs is None:
            ly.ptrs = tuple(_addr(a) for a in (ly.wt, ly.wt2, ly.wtd, ly.colscale, ly.bcol, ly.wdw, ly.wsplit))
        wt, wt2, wtd, colscale, bcol, wdw, wsplit = ly.ptrs
        out = out[:rows * n].reshape(rows, n)
        xp, op = _addr(xr), _addr(out)

        def call(wsp, phase, b0, b1, images):
            """hlsnn_bfp_layer with ``wsp``'s scratch: ``(status, res)``."""
            scratch = (self._ptr(wsp, "buf", TILE_ROWS * k, np.float64), self._ptr(wsp, "xm", TILE_ROWS * k, np.int32),
                       self._ptr(wsp, "tacc", 2 * TILE_ROWS * npad, np.int32),
                       self._ptr(wsp, "taccd", TILE_ROWS * npad, np.float64),
                       self._ptr(wsp, "pmax", images * hw, np.int64),
                       self._ptr(wsp, "x16", 2 * TILE_ROWS * ((k + 1) // 2 * 2), np.int16))
            res = self._buf(wsp, "res", 4, np.int64)
            got = self.so.hlsnn_bfp_layer(int(ly.dense), xp, sb, *geo, b, ly.m, ly.emin, ly.emax, ly.mode,
                                          wt, n, npad, compiled.ISAS[self.isa], wt2, wtd,
                                          self._ptr(wsp, "tile", (TILE_ROWS + 3) * n + 8, np.float64),
                                          ep, nzp, *scratch, colscale, bcol, ly.lo_a, ly.hi_a, ly.relu, op, yep,
                                          self._ptr(wsp, "res", 4, np.int64), phase, b0, b1, wdw,
                                          int(clip is not None), *(clip or (0.0, 0.0)), wsplit, ly.zexp)
            return got, (int(res[0]), int(res[1]), int(res[2]), int(res[3]))
        parts = None if share is None or rows * k < self.SHARE_ELEMS else parallel.split(b, min(len(share), b))
        if parts is None or len(parts) < 2:
            got, (nnz, sat, zeros, top) = call(ws, 0, 0, b, b)
            if got < 0:
                return None
            top = None if top == np.iinfo(np.int64).min else top
        else:
            done = parallel.run(lambda i, _: call(share[i], 1, *parts[i], parts[i][1] - parts[i][0]),
                                [(i, i + 1) for i in range(len(parts))])
            if any(got < 0 for got, _ in done):
                return None
            nnz, sat = sum(r[0] for _, r in done), sum(r[1] for _, r in done)
            nz = nonzero[:rows].view(bool)
            zeros, top = rows - int(np.count_nonzero(nz)), (int(exps[:rows][nz].max()) if nz.any() else None)
            if not nz.all():                       # Kernel.gemm_rows' all-zero rows, then their outputs
                exps[:rows][~nz] = ly.zexp
                sat += call(ws, 2, 0, rows, 0)[1][1]
        counts = (nnz, sat % (1 << 32), rows * k, x.shape, zeros, top)
        if not ly.dense:
            out = out.reshape(b, geo[14], geo[15], n).transpose(0, 3, 1, 2)
        return out, counts


def build(deploy, bfp_exec):
    """A :class:`BfpNet` of ``deploy`` (its layers all of the executor class ``bfp_exec``,
    :class:`hlsnn.deploy.run.executors.BfpExec`), or None (module docstring)."""
    from .gatecodes import any_layer
    if deploy.dynamic or deploy.host or getattr(deploy, "actmm", None) or not deploy.execs or deploy.bfp_luts() \
            or any_layer(deploy.net):
        return None                     # (tables of BFP values, netbfp rule 9b; rule 10c: the layer path's loop)
    layers = {}
    for name, ex in deploy.execs.items():
        p = ex.p
        target = ex.acc.target
        if type(ex) is not bfp_exec or target.name != "emu" or not getattr(target, "arrays", False) \
                or tiling.transfer_limit(target) is not None or p["output_exponent"] != "max" \
                or p["rounding"] not in compiled.MODES or ex.groups != 1 or len(ex.chunks) != 1 \
                or gemm_dtype(p, ex.chunks[0][2].shape[1]) is None:
            return None
        if ex.layer.kind == "conv" and ex.gp * (ex.layer.w.shape[1]) * ex.layer.geom.kh * ex.layer.geom.kw \
                != ex.chunks[0][2].shape[1]:
            return None
        ly = _Layer(ex)
        if not ly.usable():
            return None
        layers[name] = ly
    so = lib()
    if so is None:
        return None
    return BfpNet(deploy, layers, so)
