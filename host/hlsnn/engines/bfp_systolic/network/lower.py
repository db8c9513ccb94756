"""The network mode of a ``bfp_systolic`` network (:mod:`hlsnn.deploy.lower.program`, dispatched
by :func:`hlsnn.deploy.lower.program.engine_rules`): the specification of its network path, one
kernel start per batch. Its layers are lowered by the one walk of every engine
(:func:`hlsnn.deploy.lower.program.lower`) with this engine's steps (:class:`BfpSteps`).

Layer by layer (:class:`hlsnn.deploy.run.executors.BfpExec`), a BFP layer quantizes each im2col
patch of its float64 input to BFP (one exponent per patch), runs the GEMM with the engine's
rules and returns the dequantized outputs ``ym * 2**ye`` as float64; the host runs ``Add``,
``Relu``, ``MaxPool``, ``GlobalAveragePool`` in float64 between layers. Every one of those
float values is exact (a few significant bits at a power-of-two scale), so the same bits come
from integer rules on *(mantissa, exponent)* pairs, which are the rules below (value of an
element: ``m * 2**e``; ``M`` = ``mantissa_bits``, ``E`` = ``exponent_bits``, ``[emin, emax] =
[-2**(E-1), 2**(E-1)-1]``, ``rnd`` the accel config's ``rounding``):

Rule bfp_input: **Input** (host). The float input must be exact in float32 (the data sets are float32;
   :class:`NotExact` otherwise). The host writes it as float32 words; each word is decoded
   to ``(m, e)`` with ``|m| < 2**24`` (IEEE 754: the significand with its hidden bit and the
   biased exponent minus 150; a subnormal's fraction and -149). Its value is the float's.
Rule bfp_pairs: **Activations** between ops are per-element pairs ``(m, e)``: a conv's output has one ``e``
   per output pixel and chunk of output channels (the engine's output exponent) and ``|m| <
   2**(M-1)``, the input's ``|m| < 2**24``; an Add or a global pool makes ``m`` wider (rules bfp_add,
   bfp_global_pool). A zero has ``m = 0`` (its ``e`` means nothing; no rule reads it).
Rule bfp_conv: **conv** (a dense layer is a conv whose kernel covers its input map, NCHW-flattened). For
   each output pixel, the *patch* is the ``C x kh x kw`` window's taps (zero padding by
   ``pads``, ``strides`` as such; a dilated window's taps ``dh``, ``dw`` apart and nothing
   between them, as the layer path's im2col; a grouped conv the layer path runs as one GEMM
   over all its input channels, block-diagonal weights, is this conv with those weights; one
   it runs as ``packs`` GEMMs, each over a pack of groups, is ``packs`` such convs side by side,
   each on its ``C / packs`` input channels to its ``Z / packs`` outputs, with patches,
   exponents and free exponent of its own). Its exponent (:func:`hlsnn.formats.bfp.shared_exponent`
   as integers): ``L = max over m != 0 of msb_index(|m|) + e``, ``xe = clamp(L - (M - 2),
   emin, emax)``; its mantissas ``xm = shift_round_sat(m, xe - e, M, rnd)`` (a right shift
   with rounding, or an exact left shift, saturated: exactly ``round(x * 2**-xe)`` of the
   float). A patch with no non-zero element gets, as the layer's GEMM call gives it
   (``Kernel.gemm_rows``), the emulator's rule 0 exponent of its output chunk,
   ``xz = clamp(be - max(we), emin, emax)``
   (:func:`~hlsnn.engines.bfp_systolic.emulator.zero_row_exponent`): a value of the layer
   alone, so that the patch's outputs are exactly the bias and no image's bits depend on the
   images that share its batch (or the layer path's GEMM call).
Rule bfp_gemm: **GEMM and epilogue**: the engine's rules 1-6 (:mod:`hlsnn.engines.bfp_systolic.emulator`,
   run by its :func:`~hlsnn.engines.bfp_systolic.emulator.emulate`) per output chunk (``chunks`` of the compiled layer: the outputs
   ``rows[0]:rows[1]`` with their weight mantissas ``wm``, row exponents ``we``, bias
   mantissas ``bm`` and exponent ``be``): ``acc = sum xm * wm`` exact, ``e3 = xe + we``,
   ``b' = shift_round_sat(bm, e3 - be, A, rnd)``, ``acc = sat_A(acc + b')``, ReLU, the max
   rule ``e4 = clamp(max over acc != 0 of msb_index(|acc|) + e3 - (M - 2), emin, emax)``
   (``emin`` for an all-zero row), ``ym = shift_round_sat(acc, e4 - e3, M, rnd)``. The
   output elements are ``(ym, e4)``.
Rule bfp_add: **add** (a residual ``Add``, with the ``Relu`` after it fused): ``s = a + b`` exactly: at
   ``e = min`` of the two non-zero operands' exponents, ``m = (ma << (ea - e)) + (mb << (eb -
   e))``; ReLU ``m = max(m, 0)``. The float64 sum of the layer path is this value when ``|ma|
   2**(ea - e) + |mb| 2**(eb - e) < 2**53``; the network kernel keeps it in a 26-bit mantissa
   (:data:`ELEM_BITS`), so :func:`run` requires the bound ``2**25`` (:class:`NotExact`
   otherwise; ResNet-8's residual sums take at most 23 bits). A program with rule bfp_prelu_exact
   (:mod:`.prelu`: an exact PRelu product read by a pool or a gate) has 53-bit elements: its
   bound, and bfp_gate's and avg_pool's, is ``2**52`` (:func:`elem_bits`).
Rule bfp_global_pool: **global average pool** (after an add, or of one tensor as an add whose second operand is
   zero, power-of-two ``H*W = 2**p`` pixels): per channel
   the exact sum at ``e = min`` over its non-zero elements, then ``e - p``. The float mean is
   this value when the sum of the magnitudes is below ``2**53`` at ``e`` (then every partial
   sum of any order is exact); checked as in rule bfp_add, with ``2**53`` (the kernel sums in 54-bit
   mantissas, then holds each sum rounded to odd at 25 bits, an element, for the conv that
   reads it: rule bfp_round_odd's argument of :mod:`hlsnn.engines.bfp_systolic.network.reduce`, ``K = 25 >= M + 1``, so that conv rounds it
   as the exact sum. Where a rule bfp_mean mean reads a pool, the kernel keeps the 54-bit
   sums). A mean over a count ``n = 2**a * d`` that is
   not a power of two (``d`` odd; also an ``AveragePool``, a ``ReduceMean``) is the sum at
   ``e - a`` read as over ``d``: rule bfp_mean of :mod:`.anymean` (the reading conv's leading one and
   mantissa of ``s * 2**e / d`` as integer steps; sums below ``2**52``).
Rule bfp_pool: **maxpool**: the element of the largest value of each window (padding never wins); ties
   are equal values. ``Flatten``, ``Reshape``, ``Identity`` change nothing. A ``Relu`` on a
   conv's output is ``m = max(m, 0)``.
   An ``AveragePool`` of ``2**p`` taps and a bilinear ``Resize`` by 2 (``half_pixel``) are
   :mod:`hlsnn.engines.network.pools.linpool`'s rules avg_pool and bilinear_x2 on pairs (:func:`avgpool_pairs`:
   each window's exact sum at the smallest exponent of its non-zero elements, that exponent
   less ``p``; the sum within :data:`ELEM_BITS`, else :class:`NotExact`).
Rule bfp_elementwise: **Tables, HardSwish, Clip and the gate** (rules bfp_table, bfp_hardswish, bfp_clip, bfp_gate of
   :mod:`hlsnn.engines.bfp_systolic.network.gate`, shared with the layer path): a
   ``HardSigmoid`` or ``Sigmoid`` of a BFP layer's output writes each pair as a ``b``-bit code
   at a radix point calibrated by the layer path, ``q = round(m * 2**(e + F))`` saturated, and
   looks it up in the fixed-point table of :mod:`hlsnn.engines.network.gate` rule unary_table (output
   pairs ``(T[q], -F_o)``); a ``HardSwish`` is exact on the pair (rule bfp_hardswish), so is a ``Clip(0,
   hi)`` (ReLU6; rule bfp_clip); a
   squeeze-excite ``Mul`` of a map by a per-channel vector is the exact product ``(ma * mg,
   ea + eg)``, re-blocked by the next layer's rule bfp_conv. CBAM's spatial attention (a channel
   ``ReduceMean`` / ``ReduceMax``, a gate by a ``1 x H x W`` map) is rules channel_reduce, bfp_round_odd and spatial_gate of
   :mod:`hlsnn.engines.bfp_systolic.network.reduce`.
Rule bfp_output: **Output**: the last engine layer's ``(ym, e4)``; the host returns ``ym * 2**e4`` (float64,
   exact) and runs the host layers after it (a final ``Softmax``) in float64.

:func:`~hlsnn.deploy.lower.program.lower` refuses, naming the layer: a config whose output exponent is not the *max*
rule (*stats*, mean + k sigma of a row's results, is an integer rule too but not written here
yet; *rolling* carries state from sample to sample across the batch and the calls, which one
image at a time cannot reproduce), ``stochastic`` rounding (a random draw per element on the
host), dilated pools, host ops other than those above, and more than one accelerator. Several
engine layers may read the float input (a TCN block's conv and its 1x1 shortcut): each forms its
patches from the same pairs (rule bfp_input).
"""
from __future__ import annotations

import numpy as np

from ..emulator import emulate, zero_row_exponent
from ....errors import InputError
from ....primitives import msb_index, shift_round_sat


class NotExact(InputError):
    """A batch for which the network mode cannot give the layer-by-layer bits (rules bfp_conv, bfp_add,
    6: data-dependent conditions). ``hlsnn.load(..., network=None)`` on ``emu`` then runs that
    batch layer by layer; ``network=True`` raises it."""
    not_exact = True


# the bounds (a leaf module: the resource model and the sizer read them without the emulator)
from .widths import ELEM_BITS, EXACT_BITS, MEAN_BITS, WIDE_BITS  # noqa: E402,F401


def _op(kind, name, ins, out, **f):
    from ...network.program import Op
    return Op(kind, name, list(ins), out, f)


class BfpSteps:
    """``bfp_systolic``'s steps in the one walk of a network's layers
    (:func:`hlsnn.deploy.lower.program.walk`, which lowers the host ops every engine shares): its
    tensors are pairs (state ``("q", None)``: no radix point), the float input is read as it is
    (rule bfp_input), a ``Relu`` on pairs is an op of its own (rule bfp_pool), an Add is materialized as rule bfp_add
    or bfp_global_pool, a layer as rules bfp_conv and bfp_gemm (module rules)."""
    #: no b-bit activation codes: tables and the gate are rules bfp_table and bfp_gate
    #: (:mod:`hlsnn.engines.bfp_systolic.network.gate`)
    bits = None

    def __init__(self, program, arrays, rules, acc_name):
        p = program["accels"][acc_name]["config"]["bfp_systolic"]
        if p["output_exponent"] != "max":
            raise InputError(f"network kernel: {acc_name} chooses output exponents by the {p['output_exponent']} "
                             f"rule; the network mode has the max rule only (hlsnn.engines.bfp_systolic.network.lower)")
        if p["rounding"] == "stochastic":
            raise InputError(f"network kernel: {acc_name} rounds stochastically (a random draw per element on the "
                             f"host); the network mode needs a deterministic rounding")
        self.p, self.arrays, self.acc_name, self.rounding = p, arrays, acc_name, p["rounding"]
        self.program = program                             # rule bfp_prelu reads a tensor's readers (.prelu)
        self.table_rounding = program["rounding"]          # the deployment's: rule bfp_table's codes and tables
        self.engine, self.formats = rules.engine, rules.formats
        self.read = False

    def pool_source(self, src, w):
        """The tensor a global pool of one tensor reads: the one its alias names."""
        return w.aliases.get(src, src)

    def host(self, j, st, w):
        """No host op but an alias on the float input; a ``Relu`` on pairs (rule bfp_pool)."""
        from ...network.program import ALIAS_OPS, _why
        if st[0] == "input" and j["op"] not in ALIAS_OPS + ("RowsToMap", "Concat"):     # Concat: netmove rule input_concat
            raise _why(j, "a host op on the float input")
        from .gate import lower_host as gate_host
        from .attnpairs import lower_host as attn_host
        if attn_host(self, j, st, w):                      # attention on pairs: the pair attention rules (bfp_attn_gather to bfp_softmax), bfp_layer_norm
            return True
        if gate_host(self, j, st, w):                      # rules bfp_table, bfp_gate: tables and the gate on pairs
            return True
        if j["op"] == "Relu" and st[0] == "q":
            src = j["inputs"][0]
            w.ops.append(_op("relu", j["name"], [src], j["output"]))
            w.state[j["output"]], w.shapes[j["output"]] = ("q", None), w.shapes[src]
            return True
        return False

    def read_input(self, j, src, st, w):
        """Rule bfp_input: the engine layers that read the float input read it as it is (its pairs)."""
        self.read = True
        return st

    def materialize_add(self, j, a, w):
        """The add op of a pending Add (rules bfp_add, bfp_global_pool; one per Add): its tensor."""
        base = a["name"] + "_sum"
        if base not in w.shapes:
            c = w.shapes[a["ins"][0]][0]
            hw = int(np.prod(w.shapes[a["ins"][0]][1:]))
            n = a.get("n") or 1
            ex = {}
            if n & (n - 1):                               # rule bfp_mean: the sum at 2**-a, read as over d
                from .anymean import odd
                ex = dict(mdiv=odd(n)[1])
            w.ops.append(_op("add", a["name"], a["ins"], base, c=c, hw=hw, relu=a["relu"], gap=a["p"] is not None,
                             p=(odd(n)[0] if ex else a["p"] or 0), sa=0, sb=0, shift=0, **ex,
                             shape=(c, 1, 1) if a["p"] is not None else w.shapes[a["ins"][0]]))
            w.shapes[base], w.state[base] = w.ops[-1].f["shape"], ("q", None)
        return base

    def conv(self, j, src, st, chw, geom, w):
        """Rules bfp_conv and bfp_gemm: the conv op of engine layer ``j`` (its output chunks) and its output's state."""
        from ...network.program import _why
        arrays = self.arrays
        c, h, w_ = chw
        packs = int(j.get("groups") or 1) if j["kind"] == "conv" else 1       # GEMMs (packs of groups)
        if c % packs or j["w_shape"][0] % packs:
            raise _why(j, f"{packs} packs of groups for {c} input and {j['w_shape'][0]} output channels")
        kh, kw = geom["kh"], geom["kw"]                     # the taps; dilated (dh, dw) apart
        dh, dw = geom["dilations"]
        z = j["w_shape"][0]
        chunks = []
        for i, ch in enumerate(j["chunks"]):
            r0, r1 = ch["rows"]
            wm = np.asarray(arrays[f"{j['name']}/w{i}_mantissas"], np.int64)
            if wm.shape != (r1 - r0, c // packs * kh * kw) or r0 // (z // packs) != (r1 - 1) // (z // packs):
                raise _why(j, f"weights {wm.shape} (outputs {r0}..{r1 - 1}) for {packs} pack(s) of patches of "
                              f"{c // packs}x{kh}x{kw}")
            we = np.broadcast_to(np.asarray(arrays[f"{j['name']}/w{i}_exponents"], np.int64).reshape(-1), (r1 - r0,))
            bm = np.asarray(arrays[f"{j['name']}/b{i}_mantissas"], np.int64).reshape(-1)
            be = int(np.asarray(arrays[f"{j['name']}/b{i}_exponents"]).reshape(-1)[0])
            chunks.append(dict(rows=(r0, r1), wm=wm.reshape(r1 - r0, c // packs, kh, kw), we=np.array(we), bm=bm,
                               be=be))
        if not chunks or chunks[-1]["rows"][1] != z:
            raise _why(j, "its output chunks do not cover its outputs")
        sh, sw = geom["strides"]
        pads = tuple(geom["pads"])
        kh, kw = dh * (kh - 1) + 1, dw * (kw - 1) + 1       # the window's extent
        oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w_ + pads[1] + pads[3] - kw) // sw + 1
        return _op("conv", j["name"], [src], j["output"], c=c, h=h, w=w_, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh,
                   sw=sw, dh=dh, dw=dw, pads=pads, group=1, packs=packs, chunks=chunks, relu=bool(j["relu"]),
                   dense=j["kind"] == "dense", engine="bfp_systolic"), ("q", None)

    def finish(self, program, host_after, w):
        """The program: float32 input words (rule bfp_input), the last layer's pairs out (rule bfp_output)."""
        from ...network.program import NetProgram
        out_name, p, inp = w.out_name, self.p, program["input"]
        if w.state.get(out_name, ("",))[0] != "q":
            raise InputError(f"network kernel: the output {out_name} is not an engine layer's output")
        if not self.read:
            raise InputError("network kernel: no engine layer reads the input")
        from .anymean import mark
        mark(w.ops, w.aliases, out_name)                  # rule bfp_mean: which convs read a mean
        from .reduce import check_odd
        check_odd(w.ops, w.aliases, out_name)             # rule bfp_round_odd: a channel mean rounded to odd, read by convs
        from .gatero import mark as gate_odd
        gate_odd(w.ops, w.aliases, out_name, p["mantissa_bits"])   # rule bfp_gate_odd: tanh(f) * sigmoid(g), read by convs
        return NetProgram(program["name"], w.ops, w.shapes,
                          dict(name=inp["name"], shape=tuple(inp["shape"]), f=None, bits=p["mantissa_bits"],
                               signed=True, rounding=p["rounding"], format="float32"),
                          dict(tensor=out_name, f=None, name=program["output"]["name"], shape=w.shapes[out_name]),
                          host_after, dict(p), self.acc_name, w.aliases, "bfp_systolic")


class BfpRules:
    """``bfp_systolic``'s entry in :func:`hlsnn.deploy.lower.program.engine_rules`: its network
    mode is a program on pairs (:class:`BfpSteps` in the one walk, :func:`run`; module docstring)."""
    engine = "bfp_systolic"
    formats = ("bfp",)
    steps = BfpSteps


# --------------------------------------------------------------------------- the rules, in numpy

def quantize_input(net, x):
    """Rule bfp_input: the float batch ``x`` as ``(m, e)`` int64 pairs (value ``m * 2**e``, ``|m| <
    2**24``), from its float32 words; :class:`NotExact` unless ``x`` is exact in float32."""
    x = np.asarray(x, np.float64)
    x32 = x.astype(np.float32)
    if not np.isfinite(x32).all() or not np.array_equal(x32.astype(np.float64), x):
        raise NotExact("network kernel (bfp): the input must be finite and exact in float32 (the kernel reads "
                         "float32 words); run it with hlsnn.load(..., network=False)")
    return decode_float32(x32.view(np.uint32))


def decode_float32(bits):
    """IEEE 754 binary32 words (uint32) as ``(m, e)`` int64: ``m = +-(2**23 + fraction)``,
    ``e = exponent - 150`` (normal); ``m = +-fraction``, ``e = -149`` (subnormal, zero)."""
    b = np.asarray(bits, np.uint32).astype(np.int64)
    frac, ex, neg = b & 0x7FFFFF, (b >> 23) & 0xFF, (b >> 31) & 1
    normal = ex != 0
    m = np.where(normal, frac | (1 << 23), frac)
    e = np.where(normal, ex - 150, -149)
    return np.where(neg == 1, -m, m), e


def dequantize(pair):
    """``m * 2**e`` as float64 (exact for ``|m| < 2**53``)."""
    m, e = pair
    return np.ldexp(np.asarray(m, np.float64), np.asarray(e, np.int64)) + 0.0


def _lop(m, e):
    """``msb_index(|m|) + e`` where ``m != 0``, the int64 minimum elsewhere."""
    return np.where(m != 0, msb_index(np.abs(m)) + e, np.iinfo(np.int64).min)


def patch_exponent(lop, p):
    """Rule bfp_conv's exponent of a patch whose largest element's leading one is at ``lop``
    (:func:`_lop`'s, the patch's maximum): ``lop - (M - 2)`` within the exponent's range."""
    E = p["exponent_bits"]
    return np.clip(lop - (p["mantissa_bits"] - 2), -(1 << (E - 1)), (1 << (E - 1)) - 1)


def _round_patches(m, s, bits, rounding):
    """``shift_round_sat(m, -s, bits, rounding)``: each mantissa ``m`` scaled by ``2**s`` and
    rounded. Where ``|m| < 2**53`` in float64, which is exact here: ``m * 2**s`` is a dyadic
    value well inside float64's range (``|s|`` is a few hundred at most; beyond the largest
    float it is infinite and saturates alike), and :func:`hlsnn.engines.common.round_into` is
    exactly the three roundings of ``shift_round_sat``; tested against it."""
    if not (np.abs(m).max(initial=0) < 1 << 53):
        return shift_round_sat(m, -s, bits, rounding)[0]
    from ...common import round_into
    with np.errstate(over="ignore"):
        v = np.ldexp(m.astype(np.float64), s)
    round_into(v, rounding, v)
    np.clip(v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1, out=v)
    return v.astype(np.int64)


def taps(f):
    """A conv op's taps ``(kh, kw)``: its window's extent ``f["kh"], f["kw"]`` holds them
    ``f["dh"], f["dw"]`` apart (rule bfp_conv: dilation)."""
    dh, dw = f.get("dh", 1), f.get("dw", 1)
    return (f["kh"] - 1) // dh + 1, (f["kw"] - 1) // dw + 1


def _windows(a, f):
    """The conv ``f``'s patches of the padded (B, C, H, W) array ``a``: (B, C, OH, OW, kh, kw),
    its taps alone (a dilated window's, ``dh``, ``dw`` apart)."""
    v = np.lib.stride_tricks.sliding_window_view(a, (f["kh"], f["kw"]), axis=(2, 3))
    return v[:, :, ::f["sh"], ::f["sw"]][:, :, :f["oh"], :f["ow"]][..., ::f.get("dh", 1), ::f.get("dw", 1)]


def pack(f, j):
    """The conv ``f``'s pack ``j`` of groups (of ``f["packs"]``, one GEMM each layer by layer)
    as a conv of its own: its ``C / packs`` input channels, its ``Z / packs`` outputs, its
    chunks (rows from 0)."""
    n = f.get("packs", 1)
    if n == 1:
        return f
    zp = f["z"] // n
    return dict(f, c=f["c"] // n, z=zp, packs=1, chunks=[dict(ch, rows=(ch["rows"][0] - j * zp, ch["rows"][1] - j * zp))
                                                         for ch in f["chunks"] if ch["rows"][0] // zp == j])


def row_ops(net):
    """``[(op, pack)]``: the op of each descriptor row of the network kernel (a conv of
    ``packs`` packs of groups has a row per pack, every other op one)."""
    return [(op, j) for op in net.ops for j in range(op.f.get("packs", 1) if op.kind == "conv" else 1)]


def conv_pairs(x, f, p):
    """Rules bfp_conv and bfp_gemm on a batch of pairs ``x = (m, e)`` (B, C, H, W): pairs (B, Z, OH, OW)
    (a conv of packs of groups: each pack its own patches and its own GEMM, as layer by layer)."""
    if f.get("packs", 1) > 1:
        n, cp = f["packs"], f["c"] // f["packs"]
        ys = [conv_pairs(tuple(a[:, j * cp:(j + 1) * cp] for a in x), pack(f, j), p) for j in range(n)]
        return tuple(np.concatenate([y[i] for y in ys], axis=1) for i in range(2))
    m, e = (np.asarray(a, np.int64) for a in x)
    bsz = m.shape[0]
    M, E, rnd = p["mantissa_bits"], p["exponent_bits"], p["rounding"]
    t, l, b, r = f["pads"]
    pad = ((0, 0), (0, 0), (t, b), (l, r))
    mp, ep = np.pad(m, pad), np.pad(e, pad)

    def windows(a):
        v = _windows(a, f)                                                    # (B, C, OH, OW, kh, kw)
        return v.transpose(0, 2, 3, 1, 4, 5).reshape(bsz, f["oh"] * f["ow"], -1)
    wm_, we_ = windows(mp), windows(ep)
    dv = f.get("mdiv", 1)                                                     # rule bfp_mean: means over dv
    if dv > 1:
        from .anymean import lop as mean_lop
        lop = windows(mean_lop(mp, ep, dv)).max(axis=2)
    else:
        lop = windows(_lop(mp, ep)).max(axis=2)                               # (B, P)
    nonzero = lop != np.iinfo(np.int64).min
    xe = patch_exponent(lop, p)
    if dv > 1:
        from .anymean import mantissa
        xm = mantissa(wm_, we_, xe[:, :, None], dv, M, rnd)
    else:
        xm = _round_patches(wm_, we_ - xe[:, :, None], M, rnd)
    xm, xe, nonzero = xm.reshape(bsz * f["oh"] * f["ow"], -1), xe.reshape(-1), nonzero.reshape(-1)
    ym = np.empty((xm.shape[0], f["z"]), np.int64)
    ye = np.empty((xm.shape[0], f["z"]), np.int64)
    for ch in f["chunks"]:
        r0, r1 = ch["rows"]
        xz = zero_row_exponent(ch["we"], None if ch["bm"] is None else ch["be"], E)      # rule bfp_conv: the layer's
        y, e4, _ = emulate(p, xm, np.where(nonzero, xe, xz), ch["wm"].reshape(r1 - r0, -1), ch["we"], ch["bm"],
                           ch["be"], relu=f["relu"])
        ym[:, r0:r1], ye[:, r0:r1] = y, e4[:, None]
    shape = (bsz, f["oh"], f["ow"], f["z"])
    return ym.reshape(shape).transpose(0, 3, 1, 2), ye.reshape(shape).transpose(0, 3, 1, 2)



def elem_bits(net):
    """The kernel's element mantissa bits for ``net``: :data:`.prelu.WIDE_ELEM_BITS` with a
    rule bfp_prelu_exact op (:mod:`.prelu`) or a rule bfp_gate_wide gate (:mod:`.gatero`: an LSTM cell's ``i * g``), else
    :data:`ELEM_BITS` (the bound of rules bfp_add, bfp_gate and avg_pool is
    ``2**(bits - 1)``)."""
    from .gatero import wide
    from .prelu import WIDE_ELEM_BITS, is_wide
    return WIDE_ELEM_BITS if any(is_wide(op) for op in getattr(net, "ops", ())) or wide(net) else ELEM_BITS

def _exact_sum_check(parts, e, name, bits=EXACT_BITS, elem=ELEM_BITS):
    """Raise unless ``sum |m_i| 2**(e_i - e) < 2**bits`` (rules bfp_add, bfp_global_pool; ``elem``: the element's bits)."""
    tot = sum(parts)
    if (tot >= (1 << bits)).any():
        why = ("the layer-by-layer float64 result rounds" if bits == EXACT_BITS else
               "rule bfp_mean's mean is not proved equal to the layer path's float64 mean" if bits == MEAN_BITS else
               f"the network kernel keeps an Add's sum in a {elem}-bit mantissa")
        raise NotExact(f"network kernel (bfp): {name}: a sum spans more than {bits} bits, so {why} (rules bfp_add, bfp_global_pool "
                       f"of hlsnn.engines.bfp_systolic.network.lower); run it with network=False")


def _align(m, e, e0):
    """``m << (e - e0)`` (zeros stay 0), with the shift bounded so that nothing overflows
    (a term that would is rejected by :func:`_exact_sum_check` first)."""
    s = np.where(m != 0, e - e0, 0)
    return np.where(s > 62 - msb_index(np.abs(m)) - 1, np.int64(1) << 62, np.abs(m) << np.clip(s, 0, 62)) * \
        np.sign(m)


def add_pairs(a, b, f, name, elem=ELEM_BITS):
    """Rules bfp_add and bfp_global_pool on pairs (B, C, HW): pairs (B, C, HW), or (B, C, 1) with the pool (``elem``:
    the kernel's element bits, :func:`elem_bits`)."""
    ma, ea = (np.asarray(v, np.int64) for v in a)
    mb, eb = (np.asarray(v, np.int64) for v in b)
    big = np.iinfo(np.int64).max
    e0 = np.minimum(np.where(ma != 0, ea, big), np.where(mb != 0, eb, big))
    if f["gap"]:
        e0 = e0.min(axis=2, keepdims=True)
    e0 = np.where(e0 == big, 0, e0)
    ta, tb = _align(ma, ea, e0), _align(mb, eb, e0)
    _exact_sum_check([np.abs(ta), np.abs(tb)], e0, name, *((EXACT_BITS,) if f["gap"] else (elem - 1, elem)))
    s = np.maximum(ta + tb, 0) if f["relu"] else ta + tb
    if not f["gap"]:
        return s, np.broadcast_to(e0, s.shape).copy()
    _exact_sum_check([np.abs(s).sum(axis=2, keepdims=True)], e0, name,
                     EXACT_BITS if f.get("mdiv", 1) == 1 else MEAN_BITS)      # rule bfp_mean: |s| < 2**52
    return s.sum(axis=2, keepdims=True), e0 - f["p"]


def maxpool_pairs(x, f):
    """Rule bfp_pool on pairs (B, C, H, W)."""
    m, e = (np.asarray(a, np.int64) for a in x)
    v = dequantize((m, e))                                         # the values, exactly
    t, l, b, r = f["pads"]
    pad = ((0, 0), (0, 0), (t, b), (l, r))
    vp = np.pad(v, pad, constant_values=-np.inf)
    mp, ep = np.pad(m, pad), np.pad(e, pad)

    def win(a):
        w = _windows(a, f)                                         # (no dilated pools: every tap)
        return w.reshape(w.shape[:4] + (-1,))
    k = win(vp).argmax(axis=-1)[..., None]
    return (np.take_along_axis(win(mp), k, -1)[..., 0], np.take_along_axis(win(ep), k, -1)[..., 0])


def avgpool_pairs(op, get, b, elem=ELEM_BITS):
    """:mod:`hlsnn.engines.network.pools.linpool` rule avg_pool on a batch of ``b`` images of ``(m, e)``
    pairs: each window's exact sum (taps shifted by their weights' bits) at ``e0``, the
    smallest exponent of its non-zero elements (0 when none), as ``(s, e0 - p)`` (the op's
    ``shift`` is ``p``); :class:`NotExact` where the magnitudes' sum reaches ``2**(elem-1)``
    (``elem``: the kernel's element bits, :func:`elem_bits`)."""
    from ...network.pools.linpool import windows
    f = op.f
    m, e = (np.asarray(a, np.int64).reshape(b, f["c"], f["h"], f["w"]) for a in get(op.ins[0]))
    wm, t = windows(m, f)
    we, _ = windows(e, f)
    big = np.iinfo(np.int64).max
    e0 = np.where(wm != 0, we, big).min(axis=(-2, -1))
    e0 = np.where(e0 == big, 0, e0)
    terms = _align(wm, we, e0[..., None, None])
    if f.get("odd"):                               # rule bfp_round_odd (.reduce): CBAM's channel mean, rounded to odd
        from .reduce import SUM_BITS, round_odd
        if (np.abs(terms).sum(axis=(-2, -1)) >= 1 << SUM_BITS).any():
            raise NotExact(f"network kernel (bfp): {op.name}: a channel mean's sum spans more than {SUM_BITS} bits "
                           f"(rule bfp_round_odd of hlsnn.engines.bfp_systolic.network.reduce); run it with network=False")
        return round_odd(terms.sum(axis=(-2, -1)), e0 - f["shift"])
    k = 1
    if f.get("uncounted"):                         # rule avg_pool_uncounted: the sum times L / count, over L (rule bfp_mean)
        from ...network.pools.uncounted import scale
        k = scale(f)
    big_term = (np.abs(terms) >= 1 << (elem - 1)).any()      # (before the sum: 2**62 terms would wrap int64)
    if big_term or ((np.abs(terms) << t).sum(axis=(-2, -1)) * k >= 1 << (elem - 1)).any():
        raise NotExact(f"network kernel (bfp): {op.name}: a pool's sum spans more than {elem - 1} bits (the "
                       f"kernel's element; rule avg_pool of hlsnn.engines.network.pools.linpool); run it with network=False")
    return (terms << t).sum(axis=(-2, -1)) * k, e0 - f["shift"]


#: images per slice of :func:`run` (each image's bits depend on it alone): a layer's patches
#: stay a few tens of MB
CHUNK = 32


def run(net, xq, *, keep=False):
    """Run the ops on a batch of input pairs ``xq = (m, e)`` (B, ...): the output tensor's
    pairs; with ``keep``, ``(out, {tensor: pairs})``. The batch runs in slices of
    :data:`CHUNK` images."""
    m0, e0 = (np.asarray(a, np.int64) for a in xq)
    n = m0.shape[0]
    parts = [_run(net, (m0[i:i + CHUNK], e0[i:i + CHUNK]), keep) for i in range(0, max(n, 1), CHUNK)]
    if len(parts) == 1:
        return parts[0]
    if not keep:
        return tuple(np.concatenate([q[i] for q in parts]) for i in range(2))
    out = tuple(np.concatenate([q[0][i] for q in parts]) for i in range(2))
    return out, {k: tuple(np.concatenate([q[1][k][i] for q in parts]) for i in range(2)) for k in parts[0][1]}


def _run(net, xq, keep):
    """:func:`run` on one slice."""
    m0, e0 = xq
    bsz = m0.shape[0]
    env = {net.input["name"]: (np.asarray(m0, np.int64), np.asarray(e0, np.int64))}
    p = net.params

    def get(name):
        return env[net.aliases.get(name, name)]

    def shaped(pair, shape):
        return tuple(np.reshape(a, (bsz,) + tuple(shape)) for a in pair)
    eb = elem_bits(net)                                     # the element's mantissa (26; 53 with rule bfp_prelu_exact)
    for op in net.ops:
        f = op.f
        x = get(op.ins[0])
        if op.kind == "conv":
            y = conv_pairs(shaped(x, (f["c"], f["h"], f["w"])), f, p)
            env[op.out] = tuple(a.reshape(bsz, -1) for a in y) if f["dense"] else y
        elif op.kind == "maxpool":
            env[op.out] = maxpool_pairs(shaped(x, (f["c"], f["h"], f["w"])), f)
        elif op.kind == "relu":
            env[op.out] = (np.maximum(x[0], 0), x[1])
        elif op.kind in ("upsample", "zerostuff", "pad", "concat"):
            from ...network.move import run_pairs
            if op.f.get("mscale"):                          # rule bfp_mean_concat (.anymean): parts as means over L
                from .anymean import scale_parts
                sget, ok = scale_parts(op, get, eb - 1)
                if not ok:
                    raise NotExact(f"network kernel (bfp): {op.name}: a concat's part times its factor spans more "
                                   f"than {eb - 1} bits (the kernel's element; rule bfp_mean_concat of "
                                   f"hlsnn.engines.bfp_systolic.network.anymean); run it with network=False")
                env[op.out] = run_pairs(op, sget, bsz)
            else:
                env[op.out] = run_pairs(op, get, bsz)
        elif op.kind == "transpose":
            from ...network.tokens.transpose import run_pairs
            env[op.out] = run_pairs(op, get, bsz)
        elif op.kind == "avgpool":
            env[op.out] = avgpool_pairs(op, get, bsz, eb)
        elif op.kind in ("gather", "addc", "actmm", "softmax", "plnorm", "pscale"):
            from .attnpairs import run as attn_run       # attention on pairs: the pair attention rules (bfp_attn_gather to bfp_softmax), bfp_layer_norm
            env[op.out] = attn_run(op, get, bsz, p)
        elif op.kind in ("lut", "gate"):
            from .gate import run as gate_run
            ym, ye, ok = gate_run(op, get, shaped, eb - 1)
            if not ok:
                raise NotExact(f"network kernel (bfp): {op.name}: a gate's product spans more than {eb - 1} "
                               f"bits (the kernel's element; rule bfp_gate of hlsnn.engines.bfp_systolic.network.gate); "
                               f"run it with network=False")
            env[op.out] = (ym, ye) if op.kind == "lut" else shaped((ym, ye), net.shapes[op.out])
        else:
            xa = shaped(x, (f["c"], f["hw"]))
            xb = shaped(get(op.ins[1]), (f["c"], f["hw"])) if len(op.ins) > 1 else tuple(
                np.zeros_like(v) for v in xa)                       # the pool of one tensor: no second operand
            y = add_pairs(xa, xb, f, op.name, eb)
            env[op.out] = shaped(y, f["shape"])
    out = shaped(get(net.output["tensor"]), net.output["shape"])
    return (out, env) if keep else out


#: the rules :func:`hlsnn.deploy.lower.program.engine_rules` finds (:func:`hlsnn.engine_registry.network_part`)
RULES = BfpRules
