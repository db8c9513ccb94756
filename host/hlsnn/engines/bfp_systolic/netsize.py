"""bfp_systolic's network kernel sized to the board (``net_shape: board``).

The network kernel (:mod:`hlsnn.engines.bfp_systolic.network.kernel`) is ``P`` output lanes by
``Q`` channel banks (``net_lanes``, ``net_banks``; ``P`` divides ``Q``): a cycle multiplies
``Q`` patch mantissas (one tap of ``Q`` channels) by the ``P x Q`` resident weight mantissas of
a block of ``P`` output channels, so a conv of ``C`` channels to ``Z`` takes ``ceil(Z/P) *
ceil(C/Q)`` cycles per output pixel and tap, plus its exponent pass (``ceil(C/Q)`` taps two a
cycle, :mod:`hlsnn.engines.bfp_systolic.network.perf`).

**Packing** (``net_pack``). BFP as seed 001 defines it shares one exponent per block, so the
products are of plain ``M``-bit signed mantissas; at ``M <= 8`` lanes ``2i`` and ``2i + 1``
share each bank's patch mantissa ``x`` and one DSP48 forms both products, as the sparse engine's
board-sized kernel does for int8 (:mod:`hlsnn.engines.sparse_cluster.netsize`): its A port
(with the pre-adder) takes ``w1 * 2**16 + w0`` (25 bits, a DSP48E1's), its B port ``x``, and the
fabric splits the 33-bit product exactly: the low 16 bits as signed are ``w0 * x`` (``|w0 * x|
<= 2**14``: the mantissas are in ``[-128, 127]``), the rest plus that field's sign ``w1 * x``.
The sums are the unpacked kernel's, so the bits do not move (netbfp's rules, the emulator's).
A pair's two mantissas are one 16-bit ROM word (``kWPairs``): the weight ROMs stay one per DSP.
``P x Q`` products then take ``P x Q / 2`` DSPs and :data:`~hlsnn.engines.sparse_cluster.netsize.PACK_LUT`
LUTs each for the split.

**Slots** (``net_slots: 1``, asked for by the config): ``3Q/2`` products a lane a cycle over (tap,
channel) slots (:mod:`.network.slots`); the sizer tries those shapes first (the Add down to
``Q/4`` lanes) and leaves the key out where none fits.

**Sizing** (:func:`size`, at config load, when the config gives none of ``net_lanes``,
``net_banks``, ``net_pack``: a compiled model records the pick, so its config hash does not move
with the sizer): packing wherever ``mantissa_bits <= 8``; of the shapes in :func:`shapes`, the one
with the most products a cycle ``P * Q`` whose kernel, by the resource model ``hlsnn perf``
reports (:func:`hlsnn.engines.bfp_systolic.network.resmodel.resources`, on :func:`nominal`'s
program), keeps LUT, FF, BRAM and DSP within :data:`hlsnn.resources.MARGINS` (90% of each, the
fit check's, :func:`hlsnn.resources.within_margins`); among as many products the fewer banks (a
conv of 16 channels leaves no bank idle at ``Q = 16``). The nominal program is ResNet-8's on
32 x 32 images (:data:`NOMINAL_ACT_ELEMS`, :data:`NOMINAL_WEIGHTS`, a residual Add and a global
pool: its widest parts; residual Adds fused into their convs' write paths,
:mod:`hlsnn.engines.bfp_systolic.network.fuse`; with leading-one maps, the image load's map and no exponent pass: every
ResNet-8 conv then reads a map, :mod:`hlsnn.engines.bfp_systolic.network.expmap`); a program larger than the nominal one is checked on its own figures, and
``hlsnn compile`` refuses one that is over (:mod:`hlsnn.network.fit`). The clock is the config's
``clock_mhz`` (the delay model's check of it: ``hlsnn perf``'s schedule). The figures are the
model's, not a synthesis report.
"""
from __future__ import annotations

from types import SimpleNamespace

from ...errors import ConfigError

#: the layer shape (``net_shape: layer``): 8 output lanes x 16 channel banks, a DSP a product
LANES, BANKS = 8, 16

#: elements of the largest activation map the nominal program holds (ResNet-8 on 32 x 32: 16
#: channels of 1,024 pixels), spread over the banks (a bank at least 1,024 words: a BRAM36 of
#: 36-bit elements)
NOMINAL_ACT_ELEMS = 16 * 1024
#: weight mantissas the nominal program keeps resident, its blocks padded (ResNet-8 at 8 x 16:
#: 128 ROMs of 610 words)
NOMINAL_WEIGHTS = 128 * 610
#: blocks of output channels (the row exponent and bias ROMs' depth; ResNet-8 at 8 lanes: 44)
NOMINAL_OUT_CHANNELS = 352
#: the exponent pass's taps (ResNet-8: 114), a patch sum's bits (ResNet-8: 25), the most pixels
#: of a conv (ResNet-8: 1,024)
NOMINAL_TAPS, NOMINAL_SUM_BITS, NOMINAL_PIX = 128, 26, 1024


def shapes():
    """The candidate ``(P, Q)``: ``P`` and ``Q`` powers of two, ``P`` dividing ``Q``, ``8 <= P``,
    ``16 <= Q <= 64``; the most products first, the fewer banks first among as many."""
    c = [(pz, pc) for pc in (16, 32, 64) for pz in (8, 16, 32, 64) if pz <= pc]
    return sorted(c, key=lambda s: (-s[0] * s[1], s[1]))


def can_pack(p):
    """True where the mantissas pack two a DSP48 (``mantissa_bits <= 8``)."""
    return int(p["mantissa_bits"]) <= 8


def nominal(p, pz, pc, pack, add=None, maps=0, slots=0):
    """``(net, tables)`` of the nominal program (module docstring) on ``pz`` lanes by ``pc``
    banks (``slots``: the slot schedule's, :mod:`.network.slots`): the fields
    :func:`hlsnn.engines.bfp_systolic.network.perf.resources` reads."""
    from .network.widths import ELEM_BITS, WIDE_BITS
    params = dict(mantissa_bits=int(p["mantissa_bits"]), acc_bits=int(p["acc_bits"]),
                  net_lanes=pz, net_banks=pc, net_pack=int(pack), net_add=add or pc, net_maps=int(maps))
    net = SimpleNamespace(ops=[], params=params)
    ns = 3 * (pc // 2) if slots else pc        # a lane's products a cycle (resmodel.slot_count)
    nw = -(-NOMINAL_WEIGHTS // (pz * ns))
    nb = -(-NOMINAL_OUT_CHANNELS // pz)
    words = max(1024, NOMINAL_ACT_ELEMS // pc)
    rows = [{"vals": [0]}, {"vals": [2]}]          # a conv and a residual Add (kernel.FIELDS' "op")
    tables = dict(pz=pz, pc=pc, rows=rows, act_bufs=2, act_words=words, act3_words=0, sc_words=words,
                  elem_bits=ELEM_BITS, sum_bits=NOMINAL_SUM_BITS, max_pix=NOMINAL_PIX, max_blocks=nb, tz_slots=6,
                  pool_bits=WIDE_BITS + 13, gap_words=4, weights=[[[0] * nw]], biases=[[0] * nb],
                  taps=[0] * NOMINAL_TAPS, prelu=None, maps=bool(maps), map_words=NOMINAL_PIX,
                  load_map=bool(maps), in_hw=NOMINAL_PIX, unfold_kw=3,     # ResNet-8's stem: its map in the load
                  has_exp=not maps,              # with maps every ResNet-8 conv reads one: no exponent pass
                  fuse=True,                     # a residual Add in its conv's write path (.network.fuse)
                  units=dict(pair=[0] * NOMINAL_TAPS) if slots else None)    # the slot schedule's cycles
    return net, tables


def estimate(p, pz, pc, pack, ps, add=None, maps=0, slots=0):
    """The nominal kernel's resources on ``pz`` lanes by ``pc`` banks, the Add's ``add`` lanes
    (``{"lut", "ff", ...}``)."""
    from .network import resmodel
    return resmodel.resources(*nominal(p, pz, pc, pack, add, maps, slots), ps)


def size(p, board) -> dict:
    """``{net_lanes, net_banks, net_pack}`` for ``board`` (module docstring); the layer shape
    (packed where it can) when nothing larger fits."""
    from ...resources import within_margins
    pack = can_pack(p)
    slots = int(bool(p.get("net_slots")) and pack)     # asked for (net_slots: 1): the slot schedule's shapes first
    for pz, pc in shapes():
        for sl, add, maps in ([(1, pc, 1), (1, pc // 2, 1), (1, pc // 4, 1)] if slots else []) + [
                (0, pc, 1), (0, pc // 2, 1), (0, pc, 0), (0, pc // 2, 0)]:
            if within_margins(estimate(p, pz, pc, pack, board.ps, add, maps, sl), board.resources,
                              ("lut", "ff", "bram36", "dsp")):
                return dict(net_lanes=pz, net_banks=pc, net_pack=int(pack), net_add=add, net_maps=maps, net_slots=sl)
    return dict(net_lanes=LANES, net_banks=BANKS, net_pack=int(pack), net_add=BANKS // 2, net_maps=0, net_slots=0)


def fill(p):
    """The fields a partly given board shape leaves out: the layer shape's, packed where it can."""
    return dict(net_lanes=LANES, net_banks=BANKS, net_pack=int(can_pack(p)),
                net_add=p.get("net_banks") or BANKS, net_maps=0)


def check(p, source):
    """A given shape's rules: ``P`` divides ``Q``; packing needs an even ``P`` and ``mantissa_bits <= 8``."""
    pz, pc = p["net_lanes"], p["net_banks"]
    if pc % pz:
        raise ConfigError(source, "bfp_systolic.net_banks", pc,
                          f"must be a multiple of net_lanes = {pz} (a block's outputs fall in distinct banks)")
    if pc % p["net_add"]:
        raise ConfigError(source, "bfp_systolic.net_add", p["net_add"],
                          f"must divide net_banks = {pc} (the Add takes a block of banks in parts)")
    if p["net_pack"] and not can_pack(p):
        raise ConfigError(source, "bfp_systolic.net_pack", p["net_pack"],
                          f"must be 0 with mantissa_bits = {p['mantissa_bits']}: two mantissas share a DSP48 "
                          f"only at 8 bits or fewer")
    if p.get("net_slots") and not (p["net_pack"] and p["net_maps"] and pc % 2 == 0):
        raise ConfigError(source, "bfp_systolic.net_slots", p["net_slots"],
                          f"needs net_pack: 1, net_maps: 1 and an even net_banks (got net_pack = {p['net_pack']}, "
                          f"net_maps = {p['net_maps']}, net_banks = {pc}): the slots read two taps of a half of the "
                          f"banks a cycle and take the patch exponents from the leading-one maps")
    if p["net_pack"] and pz % 2:
        raise ConfigError(source, "bfp_systolic.net_lanes", pz, "must be even with net_pack: 1 (lanes pair on a DSP)")
