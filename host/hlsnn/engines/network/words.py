"""The integer network kernels' image words: the input and output activations of one image packed
into the 64-bit words of the ``m_axi`` ports (``LoadWords`` / ``StoreWords`` of
``network.cpp.j2``) and unpacked on the host (:class:`hlsnn.engines.network.kernel.NetKernel`,
:class:`hlsnn.network.board.NetBoard`, the simulated board's IP model).

An activation of ``b`` bits (two's complement) takes a lane of :func:`lane_bits`, the layer
kernel's rule (:func:`hlsnn.engines.shift_mac.spec.x_lane_bits`). Element ``i`` of an image (NCHW
order) sits in word ``i // per_word`` at bits ``[lane * (i % per_word), lane * (i % per_word +
1))``, sign-extended; a word's unused lanes are zero. On a little-endian host the words are the
image's lanes as ``int8`` / ``int16`` (:func:`dtype`)."""
from __future__ import annotations

import numpy as np

#: the widest activation a network kernel's lane carries
MAX_BITS = 16


def lane_bits(bits):
    """The lane of a ``bits``-bit activation in a 64-bit word: 8 (``bits <= 8``) or 16."""
    bits = int(bits)
    if not 2 <= bits <= MAX_BITS:
        from ...errors import InputError
        raise InputError(f"network kernel: {bits}-bit activations; its words carry 2..{MAX_BITS}-bit ones")
    return 8 if bits <= 8 else 16


def per_word(bits):
    """Activations of ``bits`` bits a 64-bit word."""
    return 64 // lane_bits(bits)


def n_words(elems, bits):
    """The 64-bit words of ``elems`` activations of ``bits`` bits."""
    return -(-int(elems) // per_word(bits))


def dtype(bits):
    """The numpy type of a lane (``int8`` or ``int16``)."""
    return np.int8 if lane_bits(bits) == 8 else np.int16


def fields(in_elems, out_elems, bits):
    """The tables' image-word fields of a kernel whose input and output are ``bits``-bit
    activations: ``lane_bits``, ``in_words``, ``out_words`` and the bytes the host moves per
    value (``in_value_bytes``, ``out_value_bytes``: :mod:`hlsnn.network.latency`)."""
    lb = lane_bits(bits)
    return dict(lane_bits=lb, in_words=n_words(in_elems, bits), out_words=n_words(out_elems, bits),
                in_value_bytes=lb // 8, out_value_bytes=lb // 8)


def of_tables(tables):
    """``(lane bits, in_words, out_words)`` of a kernel's tables (8-bit lanes where the tables
    name none: the sparse_cluster kernel's int8)."""
    lb = int(tables.get("lane_bits", 8))
    per = 64 // lb
    return lb, -(-tables["in_elems"] // per), -(-tables["out_elems"] // per)
