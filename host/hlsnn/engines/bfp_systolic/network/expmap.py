"""Leading-one maps: a conv's patch exponents beside its products (``net_maps``).

Rule bfp_conv (:mod:`hlsnn.engines.bfp_systolic.network.lower`) takes a patch's exponent from the
largest leading one of its non-zero elements. The exponent pass (``ConvExp``) reads every
element of every patch, two taps a cycle, before the products start: on ResNet-8 it is a fifth
of the kernel's time. The largest leading one over a patch is the largest, over its taps, of
each pixel's largest leading one over its channels. So a conv that writes its output pixel by
pixel (``ConvMac``'s writes, every channel of a pixel in consecutive cycles) also writes that
per-pixel maximum, one word a pixel, into a small *leading-one map* of the activation buffer it
writes (``lmap[dst]``, word ``y * OW + x``; ``kLow`` for an all-zero pixel). A conv that reads
a tensor whose map is whole (:func:`mark`) then takes its patch exponents from the map, one tap
a cycle, inside its own ``ConvMac`` loop (the map is a memory of its own, so the activation
banks keep their two ports for the products and the writes): exact, the same maximum. The
exponent side runs ``kh * kw`` iterations per pixel and the products ``ceil(C/Q) * kh * kw``
per block, so it stays ahead of them; the products start :func:`lead` iterations after the
loop (the first pixel's taps and :data:`EXP_LEAD`, the distance the pipeline needs between a
patch exponent's write and its read, held by the strict C-simulation), and the conv's
exponent pass has no iterations (``sa = 0``).

A map is *whole* for the tensor its buffer's last map writer wrote: a conv of one pack (the
unfolded stem too: its writes are any conv's) into activation buffer 0 or 1 (``dual`` 0 or 1; not the third buffer) marks
``mw``; a conv reading such a tensor (not from the pool buffer, no rule bfp_mean mean, one pack)
marks ``mr``. A conv that would read and write the same buffer's map reads it and writes none.
Everything else keeps the exponent pass; a program none of whose convs has one renders no
``ConvExp`` loop (the kernel's tables' ``has_exp``).

**An Add's map** (:func:`add_writes`). The residual Add runs a block's channels in parts of
``kA`` (``net_add``), every pixel of a part before the next part; so it writes its output's map
word by word as a running maximum: per cycle the leading ones of the ``kA`` elements it writes
(as ``ConvExp`` reads them: ``ELop`` of the element), a tree over them, and one compare-select
with the word the parts before wrote (read in the same cycle; the first part's is ``kLow``). A
word is read ``hw`` iterations after its write, so the Add must have at least
:data:`EXP_LEAD` pixels. The convs after it (on ResNet-8: the next stage's first conv and its
1 x 1 shortcut conv) read it as any map.

**The pool's map.** Where the kernel holds a global pool's sums rounded to odd (``AddPoolOdd``:
one word a cycle, the leading ones unchanged), that loop also keeps the largest leading one of
the pool's live channels (``ELop`` of each rounded word, one compare-select on its loop-back)
in one register, ``gmax``; a 1 x 1 conv that reads the pool buffer (ResNet-8's classifier: its
one patch is every channel of the pooled tensor) takes its patch exponent from it, one tap.

**The image's map** (:func:`load_map`). The unfolded stem's patch is ``kh`` taps of the
unfolded image, whose pixel ``(y, u)`` holds the input's channels at columns ``u + kx - pl``
(``kx < kw``; a zero outside the row). A board-sized kernel's unfolded load (``load_pairs``:
two values of one channel's row a cycle, channel after channel) writes that image's map too:
per input pixel the largest leading one over the channels so far, in a small buffer of its own
(``omap``, even and odd columns in two banks, each read and written once a cycle: the channel
before's maximum, the next channel's word ``H * W / 2`` iterations later); in the last
channel's pass each pixel's final maximum goes through a window of the row's last ``kw + 1``
columns, and each cycle writes the map's words ``u = px - 1`` and ``px`` (the largest over
their ``kw`` columns; ``kw - 1 - pl = 1``, so a pair's columns finish those two). A row's last
word (its columns beyond the row are padding) is written in the next row's first cycle, whose
``u = -1`` slot is free, and the image's last one after the loop (one cycle: the load's
:data:`LOAD_TAIL`). The stem then reads its patch exponents from the map as any map-reading
conv (``mr``): the same maximum over the same elements, so the same exponents.
"""
from __future__ import annotations

#: iterations between a patch exponent's write (the exponent side) and its first read (the
#: products): the loop's depth, as ``tz``'s (:data:`hlsnn.engines.bfp_systolic.network.perf.MAC_DEPTH`)
EXP_LEAD = 16
#: the unfolded load's cycles after its loop with :func:`load_map`: the image's last map word
LOAD_TAIL = 1


def load_map(unfold, load_pairs, on, place, hw):
    """True where the board-sized kernel's unfolded image load writes the stem's leading-one map
    (module docstring): maps on (``net_maps``), the load two values a cycle (``load_pairs``), a
    window whose pair of columns finishes two map words (``kw - 1 - pl == 1``), the image in
    activation buffer 0 or 1 alone (``place``: ``(slot, dual)``), and its channel passes at
    least :data:`EXP_LEAD` cycles apart (``hw / 2``: the pixel's maximum read back)."""
    return bool(on and unfold and load_pairs and unfold["kw"] - 1 - unfold["pl"] == 1
                and place[0] in (0, 1) and not place[1] and hw // 2 >= EXP_LEAD)


def lead(d):
    """``ConvMac``'s iterations before a map-reading conv's first product: the first pixel's
    ``kh * kw`` taps and :data:`EXP_LEAD`."""
    return d["kh"] * d["kw"] + EXP_LEAD


def add_writes(d):
    """True where the residual Add of descriptor ``d`` writes its output's map (module docstring):
    no global pool (its output goes to the pool buffer), into activation buffer 0 or 1 (``dual``
    0 or 1), of at least :data:`EXP_LEAD` pixels (a word read back ``hw`` iterations after its
    write, in the Add's next part)."""
    return not d["gap"] and d["dual"] != 2 and d["dst"] in (0, 1) and d["hw"] >= EXP_LEAD


def mark(rows, infos, name, on, load=None, pool=False):
    """Set the descriptor fields ``mr``, ``mw`` of each row (``rows``: the kernel's descriptor
    dicts ``d`` in program order; ``infos``: per row ``(op, packs, unfolded, src_tensor)``) and,
    for a map-reading conv, its ``sa`` (0), ``n_iter`` (plus :func:`lead`) and ``lead``;
    ``on``: the config's ``net_maps`` (off: every field 0); ``load``: ``(buffer, input tensor)``
    where the image load writes the unfolded image's map (:func:`load_map`), else None; ``pool``:
    the kernel holds a global pool's sums rounded to odd (``AddPoolOdd``), so an Add with the
    pool writes its map (one word, ``gmax``) for a 1 x 1 conv that reads the pool buffer. Returns
    the map's words (the most output pixels of a map-writing conv, or the image's, at least 1)."""
    owner = {}                                   # buffer -> the tensor whose map it holds
    words = 1
    if on and load:
        owner[load[0]] = load[1]
        words = max((r["hw"] for r, (op, _, unf, _) in zip(rows, infos) if unf), default=1)
    for d, (op, packs, unfolded, src) in zip(rows, infos):
        d.update(mr=0, mw=0, lead=0)
        if on and op.kind == "add":              # an Add's map: its parts' maxima, word by word (add_writes)
            if add_writes(d):
                d["mw"] = 1
                owner[d["dst"]] = name(op.out)
                words = max(words, d["hw"])
            elif pool and d["gap"]:              # the pool buffer's one word: its channels' largest
                d["mw"] = 1
                owner["gap"] = name(op.out)
            elif d["dual"] != 2 and d["dst"] in owner:
                owner.pop(d["dst"])
            continue
        if not on or op.kind != "conv":
            continue
        if packs == 1 and not d["mdiv"] and (
                not d["sb"] and d["src"] in (0, 1) and owner.get(d["src"]) == src
                or d["sb"] and owner.get("gap") == src and d["kh"] == d["kw"] == 1):
            d.update(mr=1, lead=lead(d), sa=0, n_iter=d["n_iter"] + lead(d))
        if packs == 1 and d["dual"] != 2 and d["dst"] in (0, 1) and not (d["mr"] and d["dst"] == d["src"]):
            d["mw"] = 1
            owner[d["dst"]] = name(op.out)
            words = max(words, d["ohw"])
        elif d["dual"] != 2 and d["dst"] in owner:   # the buffer's map no longer matches what it holds
            owner.pop(d["dst"])
    return words
