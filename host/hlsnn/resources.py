"""The resource model: every buffer and multiplier a kernel declares, mapped as Vitis HLS maps it.

Each engine lists its buffers (:class:`Buffer`) and multipliers (:class:`Multiplier`) from the
same template context that renders its C++ (``<engine>/spec.py: buffers(ctx)``), by the names
they have in the C++; ``tests/test_resources.py`` parses every rendered kernel and fails when a
declared array or stream is missing here, or its size, width, partitioning or binding differs.

Mapping rules (a model of Vitis HLS 2020.2 - 2024.x and Vivado, not a synthesis result):

* **Registers.** An array partitioned ``complete`` in every dimension, or a local array of
  fewer than 4 elements (``config_array_partition -complete_threshold``, default 4, UG1399), is
  one register per element: ``elements x width`` flip-flops.
* **FIFOs** (``hls::stream``; depth from ``#pragma HLS STREAM ... depth``, else 2, the default
  of ``hls::stream``). ``BIND_STORAGE type=fifo impl=...`` is obeyed. Otherwise the default
  ``config_storage fifo -impl autosrl`` applies: a FIFO of depth <= 2
  (``-auto_srl_max_depth``) and at most 1024 bits (``-auto_srl_max_bits``) is a shift register
  (SRL, ``width x ceil(depth/32)`` LUTs: one SRLC32E per bit); a larger one is a memory FIFO,
  mapped like a RAM below.
* **RAMs** (each bank after partitioning). ``BIND_STORAGE impl=bram|uram|lutram`` is obeyed.
  Otherwise (``impl=auto``) a bank of at most :data:`LUTRAM_MAX_BITS` bits is LUTRAM and a
  larger one is block RAM. (Vitis leaves this choice to Vivado's inference, whose threshold
  is not documented; the model's 1024 bits is one 16th of a RAMB18.)
* **Block RAM.** A bank of ``depth x width`` takes the fewest RAMB18 over the primitive's
  aspect ratios (UG473 / UG573): 16K x 1, 8K x 2, 4K x 4, 2K x 9, 1K x 18, and 512 x 36 in
  simple dual-port mode (not for ``ram_t2p``, whose two ports both write); each tile of
  ``ceil(depth / d) x ceil(width / w)`` primitives. RAMB36 modes (32K x 1 ... 512 x 72) are two
  RAMB18 each and never need fewer. BRAM36 = RAMB18 / 2, as Vivado's utilization counts them.
* **UltraRAM** (``impl=uram``): fixed 4K x 72 (UG573): ``ceil(depth / 4096) x ceil(width / 72)``.
* **LUTRAM** LUTs per bank: RAM32M (32 x 6 simple dual-port in 4 LUTs) for depth <= 32,
  else RAM64M (64 x 3 in 4 LUTs) tiles: ``4 * ceil(depth/64) * ceil(width/3)``; read muxes of
  deeper banks are not counted.
* **DSPs** by operand width: a signed product of an ``a``-bit and a ``b``-bit operand (an
  unsigned operand counts one bit more) fits one DSP48E1 (25 x 18, Zynq-7000, UG479) or
  DSP48E2 (27 x 18, Zynq UltraScale+, UG579) when its operands fit the ports (either way
  round); a wider product is tiled over several DSPs, ``ceil(a / (A - 1)) x ceil(b / (B - 1))``
  (unsigned partial products), taking the cheaper orientation. Vivado sometimes saves one
  DSP of a tiling by building a small partial product in LUTs, and the binder (``BIND_OP
  impl=auto``) may build a narrow product such as int8 x int8 in LUTs; the model counts DSPs.
  Two int8 products are never packed into one DSP (that needs hand-written packing).

LUT and FF totals stay a documented estimate: each engine's logic formula (in its ``spec.py``)
plus the LUTs of the LUTRAM and SRL buffers and the flip-flops of the register buffers.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional

#: The DSP slice of each PS family: (name, A-port bits, B-port bits), both signed.
DSP_FAMILIES = {"zynq7": ("DSP48E1", 25, 18), "zynqmp": ("DSP48E2", 27, 18)}
#: Default ``config_array_partition -complete_threshold`` (UG1399): local arrays with fewer
#: elements are split into registers.
COMPLETE_THRESHOLD = 4
#: Default ``config_storage fifo -auto_srl_max_depth`` and ``-auto_srl_max_bits`` (UG1399).
AUTO_SRL_MAX_DEPTH = 2
AUTO_SRL_MAX_BITS = 1024
#: Default depth of an ``hls::stream`` without a STREAM pragma.
DEFAULT_STREAM_DEPTH = 2
#: A RAM bank of at most this many bits is LUTRAM under ``impl=auto`` (the model's rule).
LUTRAM_MAX_BITS = 1024
#: RAMB18 aspect ratios (depth, width) in true dual-port mode, and the simple dual-port extra.
BRAM18_TDP = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18))
BRAM18_SDP = ((512, 36),)
#: UltraRAM: one URAM288 block is 4K x 72.
URAM_SHAPE = (4096, 72)
#: The fit budget: a kernel (a layer config's, or a compiled model's network kernel) may take at
#: most this share of each of its board's resources: LUT, FF, DSP, BRAM36 and URAM alike. The
#: rest is left to the block design around the kernel (AXI DMA, interconnect, resets; a few
#: thousand LUTs and FFs on the PYNQ-Z2) and to the gap between this model and synthesis.
#: ``hlsnn info``, ``render``, ``build`` and ``compile`` refuse a kernel above it (``--allow-overfit``
#: goes on deliberately; :func:`hlsnn.network.fit.refusal`); ``hlsnn perf``'s "fits" and the sparse engine's
#: board sizer (:func:`hlsnn.engines.sparse_cluster.netsize.size`) apply the same figure.
FIT_SHARE = 0.90
#: The budget per resource: :data:`FIT_SHARE` of each (one figure, kept as a mapping for the
#: readers that look a resource up).
MARGINS = {k: FIT_SHARE for k in ("dsp", "bram36", "uram", "lut", "ff")}
#: How the messages name the resources.
RESOURCE_NAMES = {"lut": "LUT", "ff": "FF", "dsp": "DSP", "bram36": "BRAM36", "uram": "URAM"}

IMPLS = ("auto", "bram", "uram", "lutram", "srl", "memory")


@dataclass(frozen=True)
class Buffer:
    """One array or stream as the C++ declares it.

    ``dims`` are the declared dimensions (a stream array's length for streams, ``()`` for a
    single stream); ``partition`` maps a dimension (1-based; 0 = all) to ``"complete"``;
    ``instances`` counts the function's copies (template instances); ``depth`` is a stream's
    FIFO depth. ``used=False`` marks a buffer the code declares but never reads (the
    synthesizer removes it; it costs nothing). ``live`` counts the elements of a register
    array that the code reads (a shift register whose tail positions nothing reads: the
    synthesizer removes those); 0 means every element.
    """

    name: str
    function: str
    kind: str                     # "array" | "stream"
    width: int
    dims: tuple = ()
    depth: int = 0
    partition: tuple = ()         # ((dim, "complete" | "cyclic N" | "block N"), ...)
    storage: str = ""             # BIND_STORAGE type (ram_t2p, fifo, ...) or ""
    impl: str = "auto"            # BIND_STORAGE impl
    static: bool = False
    instances: int = 1
    used: bool = True
    note: str = ""
    live: int = 0

    @property
    def elements(self) -> int:
        return math.prod(self.dims) if self.dims else 1

    def banks_and_depth(self):
        """(banks, words per bank) after partitioning (arrays): ``complete`` splits a dimension
        into single elements, ``cyclic N`` / ``block N`` into N banks."""
        parts = dict(self.partition)
        if parts.get(0) == "complete":
            return self.elements, 1
        banks, words = 1, 1
        for d, n in enumerate(self.dims, start=1):
            how = parts.get(d, "")
            if how == "complete":
                banks *= n
            elif how.startswith(("cyclic", "block")):
                f = min(int(how.split()[1]), n)
                banks *= f
                words *= math.ceil(n / f)
            else:
                words *= n
        return banks, words


@dataclass(frozen=True)
class Multiplier:
    """``count`` multiplications of an ``a_bits`` by a ``b_bits`` operand (each signed or not)."""

    name: str
    function: str
    a_bits: int
    b_bits: int
    a_signed: bool = True
    b_signed: bool = True
    count: int = 1
    note: str = ""


@dataclass
class Mapped:
    """A buffer's mapping and its cost (totals over banks, stream array entries and instances)."""

    buffer: Buffer
    storage: str                  # registers | srl | lutram | bram | uram | removed
    bram18: int = 0
    uram: int = 0
    lut: int = 0
    ff: int = 0
    copies: int = 1               # banks x stream entries x instances

    @property
    def bram36(self) -> float:
        return self.bram18 / 2

    def as_dict(self) -> dict:
        b = self.buffer
        banks, words = (b.banks_and_depth() if b.kind == "array" else (1, b.depth))
        part = ", ".join(("all" if d == 0 else f"dim {d}") + f" {how}" for d, how in b.partition) or "none"
        return {"name": b.name, "function": b.function, "kind": "fifo" if b.kind == "stream" else "array",
                "dims": list(b.dims), "depth": words, "width": b.width, "banks": banks,
                "copies": self.copies, "instances": b.instances, "partition": part,
                "bind": f"{b.storage or '-'}/{b.impl}", "storage": self.storage,
                "bram36": self.bram36, "uram": self.uram, "lut": self.lut, "ff": self.ff, "note": b.note}


# --------------------------------------------------------------------------- primitives

def bram18_for(depth: int, width: int, *, true_dual_port: bool = False) -> int:
    """RAMB18 primitives for one ``depth x width`` bank: the cheapest aspect ratio, tiled."""
    shapes = BRAM18_TDP + (() if true_dual_port else BRAM18_SDP)
    return min(math.ceil(depth / d) * math.ceil(width / w) for d, w in shapes)


def uram_for(depth: int, width: int) -> int:
    """URAM288 blocks for one ``depth x width`` bank."""
    return math.ceil(depth / URAM_SHAPE[0]) * math.ceil(width / URAM_SHAPE[1])


def lutram_luts(depth: int, width: int) -> int:
    """LUTs of a LUTRAM bank (RAM32M / RAM64M tiles, 4 LUTs each)."""
    if depth <= 32:
        return 4 * math.ceil(width / 6)
    return 4 * math.ceil(depth / 64) * math.ceil(width / 3)


def srl_luts(depth: int, width: int) -> int:
    """LUTs of a shift-register FIFO: one SRLC32E per bit per 32 words."""
    return width * math.ceil(depth / 32)


def dsp_per_product(a_bits: int, b_bits: int, a_signed: bool, b_signed: bool, ps: str) -> int:
    """DSP slices for one product on the board's DSP family (see the module notes)."""
    _, pa, pb = DSP_FAMILIES[ps]
    sa = a_bits + (0 if a_signed else 1)          # signed width each operand needs
    sb = b_bits + (0 if b_signed else 1)

    def tiles(x_bits, x_s, port_x, y_bits, y_s, port_y):
        nx = 1 if x_s <= port_x else math.ceil(x_bits / (port_x - 1))
        ny = 1 if y_s <= port_y else math.ceil(y_bits / (port_y - 1))
        return nx * ny

    return min(tiles(a_bits, sa, pa, b_bits, sb, pb), tiles(b_bits, sb, pa, a_bits, sa, pb))


# --------------------------------------------------------------------------- mapping

def map_buffer(b: Buffer) -> Mapped:
    """Map one buffer to registers, SRL, LUTRAM, BRAM or URAM and count its cost."""
    if not b.used:
        return Mapped(b, "removed", copies=0)
    if b.kind == "stream":
        copies = b.elements * b.instances
        depth, width = b.depth, b.width
        impl = b.impl
        if impl == "auto":
            impl = "srl" if depth <= AUTO_SRL_MAX_DEPTH and depth * width <= AUTO_SRL_MAX_BITS else "memory"
        if impl == "memory":
            impl = "lutram" if depth * width <= LUTRAM_MAX_BITS else "bram"
        if impl == "srl":
            return Mapped(b, "srl", lut=copies * srl_luts(depth, width), ff=copies * width, copies=copies)
        return _memory(b, impl, depth, width, copies, true_dual_port=False)
    banks, words = b.banks_and_depth()
    copies = banks * b.instances
    small = not b.static and b.elements < COMPLETE_THRESHOLD and b.impl == "auto"
    if words == 1 or small:
        kept = b.live or b.elements
        return Mapped(b, "registers", ff=kept * b.width * b.instances, copies=kept * b.instances)
    impl = b.impl
    if impl in ("auto", "memory"):
        impl = "lutram" if words * b.width <= LUTRAM_MAX_BITS else "bram"
    return _memory(b, impl, words, b.width, copies, true_dual_port=b.storage == "ram_t2p")


def _memory(b, impl, depth, width, copies, *, true_dual_port):
    if impl == "uram":
        return Mapped(b, "uram", uram=copies * uram_for(depth, width), copies=copies)
    if impl == "lutram":
        return Mapped(b, "lutram", lut=copies * lutram_luts(depth, width), copies=copies)
    if impl == "bram":
        return Mapped(b, "bram", bram18=copies * bram18_for(depth, width, true_dual_port=true_dual_port),
                      copies=copies)
    raise ValueError(f"buffer {b.name}: unknown storage implementation {impl!r}; allowed: {', '.join(IMPLS)}")


@dataclass
class Model:
    """The mapped buffers and multipliers of one kernel, with totals."""

    buffers: list
    multipliers: list = field(default_factory=list)
    dsp_family: str = ""
    ps: str = ""

    @property
    def bram36(self) -> float:
        return sum(m.bram36 for m in self.buffers)

    @property
    def uram(self) -> int:
        return sum(m.uram for m in self.buffers)

    @property
    def lut(self) -> int:
        return sum(m.lut for m in self.buffers)

    @property
    def ff(self) -> int:
        return sum(m.ff for m in self.buffers)

    @property
    def dsp(self) -> int:
        return sum(self.dsp_of(m) for m in self.multipliers)

    def dsp_of(self, m: Multiplier) -> int:
        return m.count * dsp_per_product(m.a_bits, m.b_bits, m.a_signed, m.b_signed, self.ps)

    def buffer_rows(self) -> list:
        return [m.as_dict() for m in self.buffers]

    def multiplier_rows(self) -> list:
        return [{**asdict(m), "dsp_each": dsp_per_product(m.a_bits, m.b_bits, m.a_signed, m.b_signed, self.ps),
                 "dsp": self.dsp_of(m), "family": self.dsp_family} for m in self.multipliers]


def build(buffers, multipliers, ps: str) -> Model:
    """Map ``buffers`` and count ``multipliers`` for a board of PS family ``ps``."""
    if ps not in DSP_FAMILIES:
        raise ValueError(f"unknown PS family {ps!r}; known: {', '.join(DSP_FAMILIES)}")
    return Model([map_buffer(b) for b in buffers], list(multipliers), DSP_FAMILIES[ps][0], ps)


def utilization(res: dict, board_resources) -> dict:
    """used / available per resource (0 where the board has none and none is used)."""
    out = {}
    for k, used in res.items():
        avail = board_resources.get(k, 0)
        out[k] = used / avail if avail else (0.0 if not used else float(used))
    return out


def within_margins(used: dict, board_resources, keys=None) -> bool:
    """The fit check: every resource of ``used`` (``keys``, default :data:`MARGINS`'s) at most
    its :data:`MARGINS` share (:data:`FIT_SHARE`) of ``board_resources``. ``hlsnn perf``'s "fits",
    the refusals of :mod:`hlsnn.network.fit` and the board-sized kernel's sizing
    (:func:`hlsnn.engines.sparse_cluster.netsize.size`) all apply it."""
    return not [k for k, *_ in over_budget(used, board_resources) if keys is None or k in keys]


def over_budget(used: dict, board_resources) -> list:
    """The resources of ``used`` (``{"lut": ..., "ff": ..., ...}``) above the fit budget
    (:data:`FIT_SHARE` of the board's): ``[(resource, used, budget, available), ...]`` in the
    order of :data:`MARGINS`; ``[]`` when the kernel fits."""
    bad = []
    for k, share in MARGINS.items():
        n = used.get(k, 0) or 0
        avail = board_resources.get(k, 0)
        if n > share * avail:
            bad.append((k, n, share * avail, avail))
    return bad


def format_over(over) -> str:
    """``over_budget``'s rows as text: ``LUT 58,664 of 53,200 (110%; budget 47,880)``, joined by commas."""
    def one(k, n, budget, avail):
        share = f"{100 * n / avail:.0f}%" if avail else "the board has none"
        return f"{RESOURCE_NAMES.get(k, k)} {n:,.0f} of {avail:,} ({share}; budget {budget:,.0f})"
    return ", ".join(one(*row) for row in over)


def estimate(cfg, model: Model, *, logic_lut: int, logic_ff: int, extra: Optional[dict] = None,
             notes: Optional[dict] = None) -> dict:
    """The engine estimate dict: ``resources`` (dsp, bram36, uram, lut, ff), ``utilization``,
    ``buffers`` and ``multipliers`` (the breakdown), ``notes``, plus ``extra`` keys."""
    res = {
        "dsp": model.dsp,
        "bram36": math.ceil(model.bram36),
        "uram": model.uram,
        "lut": logic_lut + model.lut,
        "ff": logic_ff + model.ff,
    }
    out = {
        "resources": res,
        "utilization": utilization(res, cfg.board.resources),
        "dsp_family": model.dsp_family,
        "buffers": model.buffer_rows(),
        "multipliers": model.multiplier_rows(),
    }
    out.update(extra or {})
    base_notes = {
        "bram36": "; ".join(f"{r['name']} {r['bram36']:g}" for r in out["buffers"] if r["bram36"]) or "none",
        "uram": "; ".join(f"{r['name']} {r['uram']}" for r in out["buffers"] if r["uram"]) or "none",
        "dsp": "; ".join(f"{r['name']} {r['count']} x {r['dsp_each']}" for r in out["multipliers"] if r["dsp"])
               or "none",
    }
    out["notes"] = {**base_notes, **(notes or {})}
    return out


def format_buffers(est: dict, indent: str = "    ") -> list:
    """The per-buffer breakdown as text lines (``hlsnn info``)."""
    rows = [("buffer", "function", "kind", "copies", "depth x width", "partition", "bind", "storage",
             "BRAM36", "URAM", "LUT", "FF")]
    for r in est["buffers"]:
        rows.append((r["name"], r["function"], r["kind"], str(r["copies"]), f"{r['depth']} x {r['width']}",
                     r["partition"], r["bind"], r["storage"], f"{r['bram36']:g}", str(r["uram"]), str(r["lut"]),
                     str(r["ff"])))
    w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [c.ljust(w[i]) if i < 3 or 5 <= i <= 7 else c.rjust(w[i]) for i, c in enumerate(row)]
        lines.append(indent + "  ".join(cells).rstrip())
    for m in est.get("multipliers", []):
        lines.append(f"{indent}multiplier {m['name']} ({m['function']}): {m['count']} x "
                     f"{m['a_bits']}{'s' if m['a_signed'] else 'u'} x {m['b_bits']}{'s' if m['b_signed'] else 'u'}"
                     f" -> {m['dsp_each']} {m['family']} each, {m['dsp']} in all"
                     + (f" ({m['note']})" if m["note"] else ""))
    return lines


def memory_summary(est: dict) -> str:
    """One line: the buffers that take URAM, then those that take BRAM, largest first."""
    items = sorted((r for r in est["buffers"] if r["bram36"] or r["uram"]), key=lambda r: (-r["uram"], -r["bram36"]))
    return ", ".join((f"{r['name']} {r['bram36']:g} BRAM36" if r["bram36"] else f"{r['name']} {r['uram']} URAM")
                     for r in items) or "no block memory"


def adder_levels(q, leaf_bits) -> list:
    """An adder tree of ``q`` values of ``leaf_bits`` bits as the sized kernels write it, level by
    level: ``[(sums, bits)]``, level ``k`` (from 1) the ``ceil(n / 2)`` pairwise sums of the ``n``
    values of the level before (an odd last one passed on), each ``leaf_bits + k`` bits (a sum of
    ``2**k`` values is exact one bit wider per level)."""
    out, n, k = [], q, 0
    while n > 1:
        n, k = -(-n // 2), k + 1
        out.append((n, leaf_bits + k))
    return out


def shifter_luts(in_bits: int, max_shift: int) -> int:
    """LUTs of a logarithmic left shifter of an ``in_bits`` value by ``0 .. max_shift``.

    The shift amount's bits are taken two at a time: each such stage is a 4:1 multiplexer per
    output bit, one LUT6 (four data and two select inputs); an odd last bit is a 2:1 stage,
    two output bits per LUT6 (its O5 and O6 outputs share the select). A stage's output is as
    wide as the input plus the largest shift reached so far (bits below the shift are zeros
    and bits above the value are sign copies, both free of multiplexers at the ends, which
    the model does not subtract).
    """
    if max_shift <= 0:
        return 0
    sel = math.ceil(math.log2(max_shift + 1))
    luts, b = 0, 0
    while b < sel:
        take = 2 if sel - b >= 2 else 1
        width = in_bits + min(max_shift, (1 << (b + take)) - 1)
        luts += width if take == 2 else math.ceil(width / 2)
        b += take
    return luts
