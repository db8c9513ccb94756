"""Leading-one maps: a conv's patch exponents beside its products (issue 83, ``net_maps``).

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
``mw``; a conv reading such a tensor (not from the pool buffer, no rule bfp_mean mean, one pack,
not the unfolded stem) marks ``mr``. A conv that would read and write the same buffer's map
reads it and writes none. Everything else keeps the exponent pass.
"""
from __future__ import annotations

#: iterations between a patch exponent's write (the exponent side) and its first read (the
#: products): the loop's depth, as ``tz``'s (:data:`hlsnn.engines.bfp_systolic.network.perf.MAC_DEPTH`)
EXP_LEAD = 16


def lead(d):
    """``ConvMac``'s iterations before a map-reading conv's first product: the first pixel's
    ``kh * kw`` taps and :data:`EXP_LEAD`."""
    return d["kh"] * d["kw"] + EXP_LEAD


def mark(rows, infos, name, on):
    """Set the descriptor fields ``mr``, ``mw`` of each row (``rows``: the kernel's descriptor
    dicts ``d`` in program order; ``infos``: per row ``(op, packs, unfolded, src_tensor)``) and,
    for a map-reading conv, its ``sa`` (0), ``n_iter`` (plus :func:`lead`) and ``lead``;
    ``on``: the config's ``net_maps`` (off: every field 0). Returns the map's words (the most
    output pixels of a map-writing conv, at least 1)."""
    owner = {}                                   # buffer -> the tensor whose map it holds
    words = 1
    for d, (op, packs, unfolded, src) in zip(rows, infos):
        d.update(mr=0, mw=0, lead=0)
        if not on or op.kind != "conv":
            continue
        if (packs == 1 and not unfolded and not d["sb"] and not d["mdiv"] and d["src"] in (0, 1)
                and owner.get(d["src"]) == src):
            d.update(mr=1, lead=lead(d), sa=0, n_iter=d["n_iter"] + lead(d))
        if packs == 1 and d["dual"] != 2 and d["dst"] in (0, 1) and not (d["mr"] and d["dst"] == d["src"]):
            d["mw"] = 1
            owner[d["dst"]] = name(op.out)
            words = max(words, d["ohw"])
        elif d["dual"] != 2 and d["dst"] in owner:   # the buffer's map no longer matches what it holds
            owner.pop(d["dst"])
    return words
