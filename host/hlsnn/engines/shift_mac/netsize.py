"""shift_mac's network kernel sized to the board (``net_shape: board``).

The network kernel (:mod:`hlsnn.engines.shift_mac.network.kernel`) is ``P`` output lanes by ``Q``
channel banks of shift-add units (``net_lanes``, ``net_banks``); a conv of ``C`` channels to
``Z`` takes ``ceil(Z/P) * ceil(C/Q)`` cycles per output pixel and tap
(:mod:`hlsnn.engines.shift_mac.network.perf`), so for channel counts that are multiples of both
its time is inversely proportional to ``P * Q``; a dense conv of ``C <= Q/2`` channels reads two
taps a cycle when ``Q/2`` is a multiple of ``P`` (tap pairs,
:mod:`hlsnn.engines.shift_mac.network.pairs`). Its products are shifts and adds: LUTs, no DSP, so
the LUTs bound ``P * Q``, and the weight ROMs' read width the BRAM; with ``net_dsp`` the upper half
of the banks multiplies on DSP48s, two lanes a DSP (:mod:`hlsnn.engines.shift_mac.network.dsp`), and
the DSPs bound it too.

**Sizing** (:func:`size`, at config load, when the config gives neither ``net_lanes`` nor
``net_banks``: a compiled model records the pick, so its config hash does not move with this
model): of the shapes whose ``P`` and ``Q`` are powers of two
with ``P`` dividing ``Q`` and ``Q <= 64`` (the schema's bound), the one with the most units
``P * Q`` whose kernel, by the resource model ``hlsnn perf`` reports
(:func:`hlsnn.engines.shift_mac.network.perf.resources`, on :func:`nominal`'s program), keeps
LUT, FF, BRAM and DSP within :data:`hlsnn.resources.MARGINS` (90% of each, the fit check's);
among as many units the squarest (``P = Q``, else ``Q = 2P``): a narrow layer (a stem of three
channels, a classifier of ten) leaves fewer lanes or banks idle. The nominal program has the
widest products and sums the config allows (shifts up to ``2**exp_bits - 1``, ``acc_bits``
sums), :data:`NOMINAL_ACT_WORDS` words a bank and :data:`NOMINAL_WEIGHT_WORDS` words a weight
ROM, tap pairs where the shape has them, and the units of the config's ``default_mode``: a
``pot`` config is sized for one-shifter units and 5-bit ROM codes at 3-bit exponents (four a
word), a ``twohot`` one for two shifters and an adder a unit and 10-bit codes (two a word; with
``net_dsp``, shift-add units on half the banks, ``P/2 * Q/2`` DSPs, each bank's ROM one reshaped word,
and products as narrow as the config's ``max_code`` allows). A
program larger than the nominal one (or of the other mode: two-hot weights on a kernel sized for
pot) is checked on its own figures, and ``hlsnn compile`` refuses one that is over
(:mod:`hlsnn.network.fit`). The clock is the config's ``clock_mhz`` (the delay model's check of
it: ``hlsnn perf``'s schedule). The figures are the model's, not a synthesis report; the
shapes picked per board are in ``docs/engines/shift_mac.md``.
"""
from __future__ import annotations

from types import SimpleNamespace

#: words a channel bank's activation buffers hold (ResNet-8 at 16 banks: 1,024; one RAMB18 at 8
#: bits holds 2,048)
NOMINAL_ACT_WORDS = 2048
#: words a weight ROM (a word of lanes by a bank) holds: one RAMB18 in its 512 x 36 shape (ResNet-8 at
#: 16 x 16: 305, at 8 x 16: 610, pot at 16 x 32 with tap pairs: 157)
NOMINAL_WEIGHT_WORDS = 512
#: blocks of output channels (the bias and shift ROMs' depth; ResNet-8 at 16 lanes: 22; at 32 a 32-bit bias ROM
#: of 16 lanes is 1,024 bits, LUTRAM, :data:`hlsnn.resources.LUTRAM_MAX_BITS`)
NOMINAL_BLOCKS = 32


def nominal(p, pz, pc):
    """``(net, tables)`` of the nominal program (module docstring) on ``pz`` lanes by ``pc`` banks:
    the fields :func:`hlsnn.engines.shift_mac.network.perf.resources` reads."""
    a = int(p["act_bits"])
    emax = (1 << int(p["exp_bits"])) - 1
    net = SimpleNamespace(ops=[], input={"bits": a}, params={"acc_bits": int(p["acc_bits"])})
    from .network.kernel import code_bits, weight_pack
    pot = p.get("default_mode") == "pot"
    cw = code_bits(int(p["exp_bits"]), pot)
    dsp = bool(p.get("net_dsp")) and pz % 2 == 0 and pc % 2 == 0     # DSP banks (network.dsp)
    pb = a + emax + 2
    if p.get("max_code"):                 # the code limit bounds a product (network.kernel.tables)
        pb = min(pb, (int(p["max_code"]) << (a - 1)).bit_length() + 1)
    tables = dict(pz=pz, pc=pc, pack=weight_pack(pz, cw), code_bits=cw, parts=1, terms=1, pot=pot,
                  tap_pairs=pc >= 2 * pz, act_bufs=2, act_words=NOMINAL_ACT_WORDS,
                  sc_words=NOMINAL_ACT_WORDS, sc_bits=a, weights=[[[0] * NOMINAL_WEIGHT_WORDS]],
                  biases=[[0] * NOMINAL_BLOCKS], luts=[0], prod_bits=pb, max_shift=emax, sum_bits=int(p["acc_bits"]),
                  add_bits=max(a + 2, 16), div_bits=0, dsp=dsp, sa_banks=pc // 2 if dsp else pc)
    return net, tables


def estimate(p, pz, pc, ps):
    """The nominal kernel's resources on ``pz`` lanes by ``pc`` banks (``{"lut", "ff", ...}``)."""
    from .network import perf
    return perf.resources(*nominal(p, pz, pc), ps)


def shapes():
    """The candidate ``(P, Q)``, most units first, the squarest first among as many."""
    pw = [1 << i for i in range(7)]
    c = [(pz, pc) for pc in pw for pz in pw if pz <= pc]
    return sorted(c, key=lambda s: (-s[0] * s[1], s[1] // s[0]))


def size(p, board) -> dict:
    """``{net_lanes, net_banks}`` for ``board`` (module docstring); 1 x 1 when nothing larger fits."""
    from ...resources import within_margins
    for pz, pc in shapes():
        if within_margins(estimate(p, pz, pc, board.ps), board.resources, ("lut", "ff", "bram36", "dsp")):
            return dict(net_lanes=pz, net_banks=pc)
    return dict(net_lanes=1, net_banks=1)
