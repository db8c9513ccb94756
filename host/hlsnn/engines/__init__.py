"""Engines: one module (package) per kernel family. Each exports the same small interface:

``NAME``, ``TOP`` (top function), ``SCHEMA`` (its config section), ``validate(params, board,
source)``, ``estimate(cfg)``, ``TEMPLATES`` (template -> rendered file), ``template_context(cfg)``,
``protocol`` (stream packing used by every target), ``emulate`` (the bit-exact model) and
``Kernel`` (the Accelerator-facing operations). Adding an engine adds one line here.
"""
from . import bfp_systolic, shift_mac, sparse_cluster

ENGINES = {
    bfp_systolic.NAME: bfp_systolic,
    shift_mac.NAME: shift_mac,
    sparse_cluster.NAME: sparse_cluster,
}
