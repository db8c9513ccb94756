"""The network kernel's host side in C: one ``ctypes`` call per kernel start
(``native/netin.c``, portable C that builds for the boards' ARM cores).

* :func:`quantize` / :func:`quantize_into`: rule input_quantize (:func:`hlsnn.deploy.lower.program.quantize_input`,
  i.e. :func:`hlsnn.deploy.quantize.quant.to_fixed`) on an image as the data set stores it (float32,
  float64 or uint8), written as int8 (int16 above 8 bits) straight into the kernel's input buffer; bit-exact with the
  Python rule (``tests/deploy/test_nethost.py``: ties, saturation, negatives, tiny values).
* :class:`CHost`: the per-start step of a :class:`~hlsnn.network.board.NetBoard` in one call
  (``hlsnn_in_run(ctx, x)``, through :class:`ctypes.PyDLL` with two ``byref`` pointers; the
  context :class:`Ctx` made once per batch size and dtype): quantize each image into its row of
  the input buffer, flush it (a callback into pynq, only for cacheable buffers; by default they
  are uncached), ``ap_start`` (one write of ``CTRL``), the poll of ``ap_done``, invalidate, the
  output integers read once (and dequantized). :meth:`CHost.run_pipelined`: double-buffered
  starts of one image each (``hlsnn_in_pipeline``). The registers are
  reached through a volatile pointer to pynq's mapping of the IP (a board: its ``MMIO.array``) or,
  on the simulated board (whose registers are Python models), through two callbacks into the IP
  driver, so the same C code runs in the simulation as on a board.

The buffers and the kernel's argument registers (the two buffer addresses and the batch) are
written once, when :meth:`NetBoard._buffers` allocates the buffers, as one block write of the
register span (:func:`write_block`), so a start costs one MMIO write and the polls.

Without a C compiler (or with ``HLSNN_NATIVE=0``) :func:`available` is False and the board
runner keeps its numpy path.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import InputError

MODES = {"nearest_even": 0, "nearest_away": 1, "truncate": 2}
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.uint8): 2}

WRITE_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)
READ_FN = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32)
SYNC_FN = ctypes.CFUNCTYPE(None, ctypes.c_int)
CTRL_IDLE = 0x4
_byref, _from_buffer = ctypes.byref, ctypes.c_char.from_buffer

_LIB = []


class Ctx(ctypes.Structure):
    """``hlsnn_in_ctx`` of ``netin.c``: a start's parameters, set once per batch size and dtype."""
    _fields_ = [("dtype", ctypes.c_int64), ("batch", ctypes.c_int64), ("n", ctypes.c_int64), ("f", ctypes.c_int64),
                ("bits", ctypes.c_int64), ("mode", ctypes.c_int64), ("inbuf", ctypes.c_void_p),
                ("in_stride", ctypes.c_int64), ("regs", ctypes.c_void_p), ("wr", WRITE_FN), ("rd", READ_FN),
                ("sync", SYNC_FN), ("timeout_s", ctypes.c_double), ("outbuf", ctypes.c_void_p),
                ("out_stride", ctypes.c_int64), ("out_n", ctypes.c_int64), ("f_out", ctypes.c_int64),
                ("y", ctypes.c_void_p), ("q", ctypes.c_void_p), ("polls", ctypes.c_int64),
                ("table", ctypes.c_void_p), ("kernel_s", ctypes.c_double), ("words", ctypes.c_int64),
                ("elems", ctypes.c_int64), ("pm", ctypes.c_void_p), ("pe", ctypes.c_void_p), ("status", ctypes.c_int64),
                ("lane16", ctypes.c_int64), ("softmax", ctypes.c_int64), ("exp_table", ctypes.c_void_p),
                ("sm_emin", ctypes.c_int64), ("sm_ne", ctypes.c_int64), ("sm_w", ctypes.c_int64),
                ("sm_left", ctypes.c_int64)]


def _lib():
    """The loaded ``netin`` library with its signatures set, or None (module docstring).
    ``hlsnn_in_run`` is also loaded through :class:`ctypes.PyDLL` without argument types
    (two pointers, passed as ``byref``): the cheapest call ``ctypes`` makes, the GIL kept
    for its few microseconds (:attr:`run_fast`)."""
    if _LIB:
        return _LIB[0]
    from .. import native
    so = native.load("netin")
    if so is not None:
        p, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        so.hlsnn_in_quantize.argtypes = [p, i32, i64, i32, i32, i32, p]
        so.hlsnn_in_quantize.restype = i64
        so.hlsnn_in_quantize16.argtypes = [p, i32, i64, i32, i32, i32, p]     # 16-bit lanes (9..16 bits)
        so.hlsnn_in_quantize16.restype = i64
        so.hlsnn_in_run.argtypes = [ctypes.POINTER(Ctx), p]
        so.hlsnn_in_run.restype = i64
        so.hlsnn_in_pipeline.argtypes = [ctypes.POINTER(Ctx), p, i64, ctypes.c_uint64, ctypes.c_uint64, p, p]
        so.hlsnn_in_pipeline.restype = i64
        so.hlsnn_in_softmax.argtypes = [p, i64, i64, p, p]
        so.hlsnn_in_softmax.restype = i64
        so.hlsnn_in_softmax_bfp.argtypes = [p, p, i64, i64, i64, i64, p, p]
        so.hlsnn_in_softmax_bfp.restype = i64
        fast = ctypes.PyDLL(so._name).hlsnn_in_run
        fast.restype = i64
        so.run_fast = fast
    _LIB.append(so)
    return so


def available():
    """True when the C host path can run here (a C compiler, ``HLSNN_NATIVE`` not off)."""
    return _lib() is not None


def input_rule(net):
    """``(f, bits, mode)`` of a lowered network's input (rule input_quantize), or None when the C path does
    not cover it (a ``bfp_systolic`` network, an unsigned input, more than 16 bits, a rounding
    other than the three). Above 8 bits the values go into 16-bit lanes
    (:mod:`hlsnn.engines.network.words`)."""
    if net.engine == "bfp_systolic":
        return None
    i = net.input
    if not i["signed"] or not 2 <= int(i["bits"]) <= 16 or i["rounding"] not in MODES:
        return None
    return int(i["f"]), int(i["bits"]), MODES[i["rounding"]]


def covers(net):
    """True when the C host path runs ``net``'s starts: an integer input rule it covers
    (:func:`input_rule`), or a ``bfp_systolic`` network (float32 words in, its words out)."""
    return input_rule(net) is not None or net.engine == "bfp_systolic"


#: a ``bfp_systolic`` network's Softmax table (:func:`bfp_exp_table`) at most this many entries
#: (``2**(M + E)``: bfp8's 8-bit mantissas and 8-bit exponents, 512 KB of float64)
BFP_TABLE_MAX = 1 << 16


def softmax_rule(net):
    """True when the C call can apply the network's host layers after the logits itself
    (the bits of :func:`hlsnn.deploy.run.hostops.run`'s Softmax): they are one ``Softmax`` over
    each image's output vector (axis 1 or -1 of a (B, n) output), and the outputs are integers
    (``hlsnn_in_softmax`` of ``netin.c``) or a ``bfp_systolic`` network's words whose table
    (:func:`bfp_exp_table`, ``2**(M + E)`` entries) is at most :data:`BFP_TABLE_MAX`
    (``bfp_softmax`` of ``netin.c``: an image whose values the table does not cover gets the
    numpy Softmax in :meth:`CHost.run`)."""
    after = getattr(net, "host_after", None) or []
    if net.engine == "bfp_systolic":
        p = getattr(net, "params", None) or {}
        if "mantissa_bits" not in p or 1 << (int(p["mantissa_bits"]) + int(p["exponent_bits"])) > BFP_TABLE_MAX:
            return False
    elif input_rule(net) is None:
        return False
    if len(after) != 1 or len(tuple(net.output["shape"])) != 1:
        return False
    j = after[0]
    return (j["op"] == "Softmax" and int(j.get("attrs", {}).get("axis", -1)) in (1, -1)
            and list(j.get("inputs", ())) == [net.output["tensor"]])


def exp_table(f_out, lane16):
    """``exp(-d * 2**-f_out)`` for every difference ``d`` of two output lanes (256, or 65,536 for
    16-bit lanes), by numpy's ``exp`` on those float64 values: what the host Softmax's
    ``exp(v - max v)`` computes on the dequantized outputs (``hlsnn_in_softmax``)."""
    return np.exp(np.ldexp(-np.arange(1 << (16 if lane16 else 8), dtype=np.float64), -int(f_out)))


def bfp_exp_table(mantissa_bits, exponent_bits):
    """``(emin, rows, width, table)`` of a ``bfp_systolic`` network's Softmax in the C call: row
    ``e - emin`` holds ``exp(-d * 2**e)`` for ``d < width = 2**M`` (two M-bit mantissas differ by
    less), one row for each exponent ``e`` of ``[emin, emax]`` (``E`` bits), by numpy's ``exp`` on
    those float64 values: what the host Softmax's ``exp(v - max v)`` computes when an image's
    values share one exponent (a conv's output pixel), as ``v - max v = -(mmax - m) 2**e``."""
    m, e = int(mantissa_bits), int(exponent_bits)
    emin, rows, width = -(1 << (e - 1)), 1 << e, 1 << m
    d = np.arange(width, dtype=np.float64)
    ex = np.arange(emin, emin + rows)
    return emin, rows, width, np.ascontiguousarray(np.exp(np.ldexp(-d[None, :], ex[:, None])).ravel())


def softmax(q, f_out, table=None):
    """The C Softmax (``hlsnn_in_softmax``) of the output integers ``q`` (B, n) int8 or int16 at
    radix ``f_out``, per row: float64 (B, n). For tests and benchmarks; :class:`CHost` applies it
    in its call."""
    q = np.ascontiguousarray(q)
    lane16 = q.dtype == np.int16
    table = exp_table(f_out, lane16) if table is None else table
    y = np.empty(q.shape, np.float64)
    for b in range(q.shape[0]):
        _lib().hlsnn_in_softmax(q[b].ctypes, q.shape[1], int(lane16), table.ctypes, y[b].ctypes)
    return y


def softmax_bfp(pm, pe, mantissa_bits, exponent_bits, table=None):
    """The C Softmax of a ``bfp_systolic`` network's output pairs (``hlsnn_in_softmax_bfp``):
    ``pm``, ``pe`` (B, n) int64, per row, float64 (B, n), and a bool per row: False where the
    table (:func:`bfp_exp_table`) does not cover the row (its output left NaN; :class:`CHost`
    then applies numpy's). For tests and benchmarks; :class:`CHost` applies it in its call."""
    pm, pe = (np.ascontiguousarray(a, np.int64) for a in (pm, pe))
    emin, rows, width, t = bfp_exp_table(mantissa_bits, exponent_bits) if table is None else table
    y = np.full(pm.shape, np.nan)
    done = np.zeros(pm.shape[0], bool)
    for b in range(pm.shape[0]):
        done[b] = _lib().hlsnn_in_softmax_bfp(pm[b].ctypes, pe[b].ctypes, pm.shape[1], emin, rows, width,
                                              t.ctypes, y[b].ctypes) == 0
    return y, done


def _as_stored(x):
    """``x`` as a C-contiguous float32, float64 or uint8 array (another dtype as float64)."""
    x = np.asarray(x)
    if x.dtype not in DTYPES:
        x = x.astype(np.float64)
    return np.ascontiguousarray(x)


def _ptr(a):
    """The address of array ``a`` for a field of :class:`Ctx`: the caller keeps ``a`` alive for as
    long as the context (a struct of addresses) can be used."""
    return a.ctypes.data_as(ctypes.c_void_p)


def quantize_into(x, f, bits, mode, dst):
    """Rule input_quantize on ``x`` (any shape; float32, float64 or uint8) into the int8 array ``dst`` (int16
    for ``bits`` above 8; as many elements, contiguous). :class:`InputError` on NaN or infinite
    values."""
    x = _as_stored(x)
    lane = np.int8 if bits <= 8 else np.int16
    if dst.dtype != lane or not dst.flags.c_contiguous or dst.size != x.size:
        raise ValueError(f"quantize_into: dst must be a contiguous {np.dtype(lane).name} array of x's size")
    fn = _lib().hlsnn_in_quantize if bits <= 8 else _lib().hlsnn_in_quantize16
    bad = fn(x.ctypes, DTYPES[x.dtype], x.size, f, bits, mode, dst.ctypes)
    if bad:
        raise InputError(f"input: {bad} non-finite value(s) (NaN or Inf)")
    return dst


def quantize(net, x):
    """Rule input_quantize of the lowered network ``net`` on the batch ``x`` in C: int64 integers of x's
    shape (the bits of :func:`hlsnn.deploy.lower.program.quantize_input`)."""
    rule = input_rule(net)
    if rule is None:
        raise InputError(f"the C input rule does not cover {net.engine}'s input {net.input}")
    x = _as_stored(x)
    return quantize_into(x, *rule, np.empty(x.shape, np.int8 if rule[1] <= 8 else np.int16)).astype(np.int64)


def write_block(ip, offsets, values):
    """Write the kernel arguments ``values`` ``{argument: int}`` (each in its 32-bit words, low
    word first, at ``offsets`` ``{argument: (offset, ...)}``) as ONE write of the register span
    they cover: a slice of pynq's mapped register array on a board (one numpy copy), one
    ``write_registers`` of the span's bytes on a register-level device (the simulated board).
    The span's words that belong to no argument (Vitis HLS's reserved words between them) are
    written 0, which the ``s_axilite`` slave ignores. Returns the number of words written."""
    words = {}
    for name, value in values.items():
        value = int(value)
        offs = offsets[name]
        if value < 0 or value >> (32 * len(offs)):
            raise ValueError(f"register {name}: {value:#x} does not fit {32 * len(offs)} bits")
        for i, off in enumerate(offs):
            words[off] = (value >> (32 * i)) & 0xFFFFFFFF
    lo, hi = min(words), max(words)
    block = np.zeros((hi - lo) // 4 + 1, np.uint32)
    for off, w in words.items():
        block[(off - lo) // 4] = w
    mmio = ip.mmio
    if isinstance(mmio.array, np.ndarray):           # a mapped register file (a board)
        mmio.array[lo // 4:lo // 4 + block.size] = block
    elif block.size == 1:
        mmio.write(lo, int(block[0]))
    else:                                            # a register-level device: one access
        mmio.write(lo, block.tobytes())
    return int(block.size)


class CHost:
    """The C host path of a :class:`~hlsnn.network.board.NetBoard` (module docstring):
    :meth:`run` takes a batch of images as stored and returns ``(q, y)``: the output integers
    (B, out_elems) int64 and their float64 values, in one ``ctypes`` call per kernel start."""

    def __init__(self, board, *, null_registers=False, u8_values=None):
        self.board, self.rule = board, input_rule(board.net)
        self.words = board.net.engine == "bfp_systolic"    # float32 words in, 64-bit words out
        if not covers(board.net) or not available():
            raise InputError("the C host path needs a C compiler and a network with a signed input of at most "
                             "16 bits, or a bfp_systolic network")
        if self.words:
            self.rule = (0, 8, 0)
        self.f_out = 0 if self.words else int(board.net.output["f"])
        if getattr(board, "cacheable", None) is None and hasattr(board, "_alloc_kw"):
            # uncached buffers: no flush or invalidate per start (pynq's own default on a board)
            board._alloc_kw = {"cacheable": False}
            if board.inb is not None:
                board._free()
        mmio = board.ip.mmio if board.ip is not None else None
        self._keep = []                               # the callbacks must outlive the calls
        if null_registers:                            # benchmarks: netin.c's null register file
            self.regs = None
            self.wr = ctypes.cast(_lib().hlsnn_in_null_write, WRITE_FN)
            self.rd = ctypes.cast(_lib().hlsnn_in_null_read, READ_FN)
        elif isinstance(mmio.array, np.ndarray):      # a board: the mapped register file
            self.regs = _ptr(mmio.array)                # pynq's MMIO object holds the mapping
            self.wr, self.rd = ctypes.cast(None, WRITE_FN), ctypes.cast(None, READ_FN)
        else:                                         # the simulated board: its register models
            self.regs = None
            self.wr = WRITE_FN(self._guard(lambda off, v: mmio.write(int(off), int(v)), None))
            self.rd = READ_FN(self._guard(lambda off: int(mmio.read(int(off))) & 0xFFFFFFFF, CTRL_IDLE))
            self._keep += [self.wr, self.rd]
        self.polls, self._err, self.key, self._inb = 0, None, None, None
        self._fast = _lib().run_fast
        # uint8 images: each code's integer, made once by the Python rule (to_fixed) from the
        # value the code stands for (u8_values, 256 values; by default the code itself)
        v = np.arange(256, dtype=np.float64) if u8_values is None else np.asarray(u8_values, np.float64)
        if v.shape != (256,):
            raise InputError(f"u8_values: {v.shape} values; give the 256 values the uint8 codes stand for")
        self.lane = np.int8 if self.words or int(board.net.input["bits"]) <= 8 else np.int16   # (words)
        self.table = np.zeros(256, self.lane)
        # the Softmax after the logits, applied in the call when the caller asks (run(softmax=True));
        # a bfp_systolic network's table: one row per exponent (bfp_exp_table)
        self.exps, self.sm_rows = None, (0, 0, 0)
        if softmax_rule(board.net):
            if self.words:
                p = board.net.params
                *self.sm_rows, self.exps = bfp_exp_table(p["mantissa_bits"], p["exponent_bits"])
            else:
                self.exps = exp_table(self.f_out, self.lane == np.int16)
        self._sm = False
        if not self.words:
            from ..deploy.quantize.quant import to_fixed
            i = board.net.input
            self.table = to_fixed(v, i["f"], i["bits"], True, i["rounding"]).astype(self.lane)

    def _guard(self, fn, on_error):
        """``fn`` for a C callback: an exception (a simulated bus error, a cache check) is kept
        and raised after the call (ctypes would print and drop it), and the poll ends."""
        def call(*a):
            if self._err is not None:
                return on_error
            try:
                return fn(*a)
            except BaseException as e:  # noqa: BLE001 - re-raised after the C call
                self._err = e
                return on_error
        return call

    def _sync_fn(self):
        b = self.board
        if getattr(b, "_alloc_kw", {}).get("cacheable") is False or getattr(b.inb, "coherent", False):
            return ctypes.cast(None, SYNC_FN)        # uncached buffers: no cache maintenance
        fn = SYNC_FN(self._guard(lambda which: (b.inb.flush if which == 0 else b.outb.invalidate)(), None))
        self._keep.append(fn)
        return fn

    def _setup(self, x, timeout):
        """The context for batches shaped and typed like ``x`` (and the board's buffers)."""
        b = self.board
        n = int(np.prod(x.shape[1:]))
        batch = x.shape[0]
        if n != b.n_in:
            raise InputError(f"network kernel: an image of {n} values; the network takes {b.n_in}")
        b._buffers(batch)
        f, bits, mode = self.rule
        out_n = b.out_words * 8 if self.words else b.n_out      # bfp: the output words' bytes
        self.q8 = np.empty((batch, out_n), self.lane)
        self.y = np.empty((batch, b.n_out), np.float64)
        self.pm = np.empty((batch, b.n_out), np.int64)
        self.pe = np.empty((batch, b.n_out), np.int64)
        self._keep = [k for k in self._keep if k is self.wr or k is self.rd]
        # the context's pointers: arrays this object (y, q8, table, pm, pe) or the board (_x8, _y8) holds
        # for as long as the context lives
        self.ctx = Ctx(DTYPES[x.dtype], batch, n, f, bits, mode, _ptr(b._x8), b.in_words * 8, self.regs,
                       self.wr, self.rd, self._sync_fn(), float(timeout), _ptr(b._y8), b.out_words * 8,
                       out_n, self.f_out, _ptr(self.y), _ptr(self.q8), 0, _ptr(self.table), 0.0,
                       int(self.words), b.n_out, _ptr(self.pm), _ptr(self.pe), 0, int(self.lane == np.int16), 0,
                       None if self.exps is None else _ptr(self.exps), *self.sm_rows, 0)
        self._sm = False
        self.ref = ctypes.byref(self.ctx)
        self._inb = b.inb
        self.key = (x.dtype, x.shape, True, b._batch, timeout)

    def run(self, x, *, timeout=10.0, ints=True, softmax=False):
        """One start: ``(q, y)`` of the batch ``x`` (module docstring). The context is made
        again only when the batch's shape or dtype (or the board's buffers) change.
        ``ints=False``: ``q`` is None, the integers not copied out (the caller reads ``y``).
        ``softmax=True`` (a network :func:`softmax_rule` accepts): ``y`` is the Softmax of each
        image's values, the network's output, computed in the call."""
        if x.__class__ is not np.ndarray or not x.flags.c_contiguous or x.dtype not in DTYPES:
            x = _as_stored(x)
        b = self.board
        if self.key != (x.dtype, x.shape, b.inb is self._inb, b._batch, timeout):
            self._setup(x, timeout)
        if softmax != self._sm:
            if softmax and self.exps is None:
                raise InputError("the C call applies a Softmax only for a network whose one host layer after the "
                                 "logits is a Softmax over each image's output vector (nethost.softmax_rule)")
            self.ctx.softmax, self._sm = int(bool(softmax)), bool(softmax)
        self._err = None
        try:
            xp = _byref(_from_buffer(x))
        except TypeError:                            # a read-only array
            xp = x.ctypes                            # x outlives the call
        rc = self._fast(self.ref, xp)
        if rc or self._err is not None:
            self._finish(rc, x)
        b.starts += 1
        self.polls = self.ctx.polls
        if self.words:                               # the pairs (m, e) unpacked in C, the status checked
            if self.ctx.status & 1:                  # a status bit: NotExact raised there
                from ..engines.bfp_systolic.network.kernel import finish_words
                finish_words(b.net, None, self.q8.view(np.uint64).copy())
            y = self.y.copy()
            if self._sm and self.ctx.sm_left:        # an image the table does not cover: numpy's Softmax
                from ..deploy.lower.netafter import host_stubs
                for f in host_stubs(b.net):
                    y = f(y, None)
            return ((self.pm.copy(), self.pe.copy()) if ints else None), y
        return (self.q8.astype(np.int64) if ints else None), self.y.copy()

    def run_pipelined(self, x, *, timeout=10.0):
        """Double-buffered starts of one image each (``hlsnn_in_pipeline``): while the kernel
        runs image i the host quantizes image i + 1 into the other half of the buffers; per
        start after the first, the two low address words and ``ap_start`` (three register
        writes) and the poll. ``(q, y)`` as :meth:`run`. Uncached buffers only."""
        b = self.board
        if self.words:
            raise InputError("double-buffered starts: not for a bfp_systolic network (its words) yet")
        if b._alloc_kw.get("cacheable") is not False:
            raise InputError("double-buffered starts take uncached buffers (cacheable=None or False)")
        x = _as_stored(x)
        images = x.shape[0]
        if images < 2:
            return self.run(x, timeout=timeout)
        if b.inb is None or b.inb.shape[0] < 2 * b.in_words or b.outb.shape[0] < 2 * b.out_words:
            b._buffers(2)                             # two rows each: the two slots
        if b._batch != 1:
            write_block(b.ip, b.offsets, {"batch": 1})
            b._batch = 1
        self._setup(x[:1], timeout)
        q8 = np.empty((images, b.n_out), self.lane)
        y = np.empty((images, b.n_out), np.float64)
        self._err = None
        rc = _lib().hlsnn_in_pipeline(self.ref, x.ctypes, images, b.inb.device_address, b.outb.device_address,
                                      y.ctypes, q8.ctypes)
        if rc or self._err is not None:
            self._finish(rc)
        b.starts += images
        self.polls = self.ctx.polls
        return q8.astype(np.int64), y

    def _forget(self):
        """Drop the context and every reference to the board's buffers (they were freed)."""
        self.board._free()
        self.key = self._inb = self.ctx = self.ref = None

    def _finish(self, rc, x=None):
        """Raise the error of a call that returned ``rc`` (not 0): its own, a timeout, or bad input
        values. With words (a ``bfp_systolic`` network) the C call counts a value that is not finite
        or not exact in float32; ``x``, the batch as the call read it, tells the two apart (here,
        after the refusal only): non-finite values raise the :class:`InputError` every engine's C
        call raises, so ``net.run`` makes no finiteness pass of its own before the call."""
        b = self.board
        self.polls, timeout, batch = self.ctx.polls, self.ctx.timeout_s, self.ctx.batch
        if self._err is not None:
            err, self._err = self._err, None
            self._forget()
            raise err
        if rc == -1:
            self._forget()
            from ..runtime.pynq_target import DeviceTimeout
            raise DeviceTimeout(f"network kernel {b.cfg.name}_net did not finish within {timeout:g} s "
                                f"(a batch of {batch}); its buffers were freed")
        if self.words and x is not None and x.dtype.kind == "f" and not np.isfinite(x).all():
            rc = int((~np.isfinite(x)).sum())
        elif self.words:
            from ..engines.bfp_systolic.network.lower import NotExact
            raise NotExact("network kernel (bfp): the input must be finite and exact in float32 (the kernel reads "
                           "float32 words); run it with hlsnn.load(..., network=False)")
        raise InputError(f"input: {rc} non-finite value(s) (NaN or Inf)")
