"""The ``sparse_cluster`` config section: schema, cross-field rules, resource and cycle
models, and the flat values the Jinja2 templates receive."""
from __future__ import annotations

import math

from ...config import Field
from ...errors import ConfigError
from ...primitives import ROUNDING_CODES
from ..common import bram36
from .protocol import ACC_BITS

NAME = "sparse_cluster"
TOP = "sparse_cluster_top"
#: ID register magic: 'H' 'N' (hlsnn), engine 0x03, protocol version 0x01.
MAGIC = 0x484E0301
LANE_BITS = 16
ACC_BITS = 32

SCHEMA = {
    "units": Field("int", "compute units M (one sub-feature-map each)", lo=1, hi=32),
    "tile_h": Field("int", "largest output tile height per unit and pass (larger sub-maps are folded)",
                    default=16, lo=1, hi=128),
    "tile_w": Field("int", "largest output tile width per unit and pass", default=16, lo=1, hi=128),
    "max_z": Field("int", "output channels per pass (accumulation-buffer regions)", default=8, lo=1, hi=64),
    "max_out_channels": Field("int", "largest number of output channels Z", default=256, lo=1, hi=4096),
    "max_in_channels": Field("int", "largest number of input channels C", default=64, lo=1, hi=4096),
    "max_ksize": Field("int", "largest kernel size k", default=5, lo=1, hi=15),
    "max_hw": Field("int", "largest feature-map height or width", default=256, lo=1, hi=4096),
    "rounding": Field("choice", "rounding of the output requantization", default="nearest_even",
                      choices=tuple(ROUNDING_CODES)),
    "stream_bits": Field("int", "AXI-Stream width; default: the board's DMA width", default=None,
                         lo=32, hi=512, pow2=True),
}


def tile_in(p):
    """Input tile size (with halo) a unit buffers per channel."""
    return (p["tile_h"] + p["max_ksize"] - 1), (p["tile_w"] + p["max_ksize"] - 1)


def validate(p: dict, board, source) -> dict:
    if p["stream_bits"] is None:
        p["stream_bits"] = board.dma["stream_bits"]
    th, tw = tile_in(p)
    if th > 256 or tw > 256:
        raise ConfigError(source, f"{NAME}.tile_h", p["tile_h"],
                          "tile + max_ksize - 1 must be at most 256 (8-bit row and column indices)")
    # |acc| <= C * k^2 * 128 * 128 plus a 2^30 bias must stay inside int32
    worst = p["max_in_channels"] * p["max_ksize"] ** 2 * (1 << 14) + (1 << 30)
    if worst >= 1 << 31:
        raise ConfigError(source, f"{NAME}.max_in_channels", p["max_in_channels"],
                          f"max_in_channels * max_ksize^2 must be at most {((1 << 30) >> 14) - 1} so that "
                          "int32 accumulators cannot overflow")
    if p["max_z"] > p["max_out_channels"]:
        raise ConfigError(source, f"{NAME}.max_z", p["max_z"],
                          f"must not exceed max_out_channels = {p['max_out_channels']}")
    return p


def estimate(cfg) -> dict:
    """Resources: one 8x8 multiplier per unit (a DSP), per unit an accumulation buffer
    ``max_z x tile_h x tile_w`` of int32 and value/index buffers for one input tile, FIFOs.
    Work model: a unit's cycles follow its non-zero products (see ``model.py``)."""
    p, board = cfg.params, cfg.board
    m = p["units"]
    th, tw = tile_in(p)
    per_unit_bram = (bram36(p["max_z"] * p["tile_h"] * p["tile_w"], ACC_BITS) + bram36(th * tw, 8)
                     + bram36(th * tw, 16) + 2 * bram36(p["max_z"] * p["max_ksize"] ** 2, 16))
    res = {
        "dsp": m + 1,
        "bram36": math.ceil(m * per_unit_bram + 2),
        "lut": m * 1800 + 4000,
        "ff": m * 2200 + 5000,
    }
    return {
        "resources": res,
        "utilization": {k: res[k] / board.resources[k] for k in res},
        "units": m,
        "peak_macs_per_cycle": m,
        "throughput": {"value": m * cfg.clock_mhz / 1e3, "unit": "G multiplies/s",
                       "what": "peak multiplies per second: one per unit per cycle (non-zero pairs only)"},
        "notes": {"dsp": f"{m} units x 1 multiplier", "bram36": f"{m} accumulation and tile buffers",
                  "lut": f"{m} units", "ff": f"{m} units"},
    }


def template_context(cfg) -> dict:
    p = cfg.params
    th, tw = tile_in(p)
    return {
        **{k: p[k] for k in ("units", "tile_h", "tile_w", "max_z", "max_out_channels", "max_in_channels",
                             "max_ksize", "max_hw", "stream_bits", "rounding")},
        "tile_in_h": th,
        "tile_in_w": tw,
        "max_entries": th * tw,
        "max_coefs": p["max_z"] * p["max_ksize"] ** 2,
        "lane_bits": LANE_BITS,
        "stats_bins": ACC_BITS,
        "rounding_code": ROUNDING_CODES[p["rounding"]],
        "magic": MAGIC,
        "top": TOP,
        "cfg_struct": "SparseClusterCfg",
        "word_type": "sparse_word_t",
    }
