"""The ``sparse_cluster`` config section: schema, cross-field rules, resource and cycle
models, and the flat values the Jinja2 templates receive."""
from __future__ import annotations

from ...config import Field
from ...engine_registry import register
from ...errors import ConfigError
from ...primitives import ROUNDING_CODES
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
    "weights_per_round": Field("int", "U: distinct weights the multipliers of a unit may apply in one cycle "
                               "(source 003: 1 for units 1000/1300, 2 for units 1400/1500)", default=1, lo=1, hi=2),
    "rounding": Field("choice", "rounding of the output requantization", default="nearest_even",
                      choices=tuple(ROUNDING_CODES)),
    "stream_bits": Field("int", "AXI-Stream width; default: the board's DMA width", default=None,
                         lo=32, hi=512, pow2=True),
    "net_shape": Field("choice", "network kernel (hlsnn compile): 'layer' (max_z lanes of units * tile_w / max_z "
                       "selecting multipliers, as the layer kernel's DSPs) or 'board' (sized to the board's DSPs and "
                       "LUTs: hlsnn.engines.sparse_cluster.netsize)", default="layer", choices=("layer", "board")),
    "net_sub": Field("int", "net_shape board: read ports (replicas) per activation bank; default: the largest "
                     "that fits the board", default=None, lo=1, hi=9),
    "net_bits": Field("int", "net_shape board: the products' operand bits: 8 (int8 x int8, two a DSP48) or 4 "
                      "(narrow int4 weights x uint4 activations, four a DSP48: programs whose weights and "
                      "activations fit, hlsnn.engines.sparse_cluster.lowbit)", default=None, lo=4, hi=8),
    "net_wlut": Field("int", "net_shape board: each lane's last N weight words a step (of 16 int4 or 8 int8 "
                      "slots) in LUT ROMs, not block RAM (hlsnn.engines.sparse_cluster.netsize.buffers); default 0",
                      default=None, lo=0, hi=64),
    # derived with net_shape: board (hlsnn.engines.sparse_cluster.netsize.size); a compiled model keeps them
    "net_lanes": Field("int", "derived: the sized network kernel's output lanes", default=None, lo=1, hi=64),
    "net_banks": Field("int", "derived: its channel banks", default=None, lo=1, hi=64),
    "net_pack": Field("int", "derived: the slots whose lane pairs share a DSP", default=None, lo=0, hi=1024),
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
    if p["net_shape"] == "board":
        from . import netsize
        if p["net_bits"] not in (None, 4, 8):
            raise ConfigError(source, f"{NAME}.net_bits", p["net_bits"], "must be 4 or 8")
        if p["net_bits"] in (None, 8):                          # the default: absent, the configs' hashes stay
            p.pop("net_bits")
        p.update(netsize.size(p, board, source, p["net_sub"]))
        if p["net_wlut"] is None:                               # the default 0: absent, the configs' hashes stay
            p.pop("net_wlut")
        elif p["net_wlut"] >= netsize.chunks(p):
            raise ConfigError(source, f"{NAME}.net_wlut", p["net_wlut"],
                              f"must be below {netsize.chunks(p)}, the weight words a lane reads a step "
                              f"(net_banks {p['net_banks']} x net_sub {p['net_sub']} slots, "
                              f"{16 if p.get('net_bits') == 4 else 8} a word; one at least in block RAM)")
        return p
    for k in ("net_sub", "net_lanes", "net_banks", "net_pack", "net_bits", "net_wlut"):    # absent for 'layer': the configs' hashes stay
        if p.pop(k) is not None:
            raise ConfigError(source, f"{NAME}.{k}", p.get(k), "is only read with net_shape: board")
    p.pop("net_shape")
    return p


#: Estimated logic (LUT, FF), not synthesis: per multiplier (its two popcounts of a column
#: bitmap, the entry address, the forwarding compare and multiplexer of the accumulator
#: pipeline, the product's add), per unit (its loop control, the window counts' maximum,
#: the output path), and for Dispatch/Collect/control.
LANE_LUT, LANE_FF, UNIT_LUT, UNIT_FF, BASE_LUT, BASE_FF = 180, 160, 900, 1200, 4000, 5000
#: U = 2 adds per multiplier the second slot's column multiplexers, its choice of slot and
#: weight, and its two progress counters, and per input column two more popcounts.
U2_LANE_LUT, U2_LANE_FF = 120, 40


def storage_plan(p, board) -> dict:
    """Where the two largest per-unit buffers live: ``acc`` (the accumulation RAM, a bank per
    multiplier) and ``res_q`` (the output FIFO). Where the board has UltraRAM, they go to URAM, ``acc`` first,
    as long as all units together stay within 90% of the board's URAM (``MARGINS``); the rest is block RAM.
    Returns the template booleans ``acc_uram`` and ``res_q_uram``."""
    from ...resources import MARGINS, uram_for
    budget = MARGINS["uram"] * board.resources.get("uram", 0)
    used = 0
    plan = {}
    res = stream_depths(p)["res_beats"]
    for name, banks, depth, width in (("acc", p["tile_w"], p["max_z"] * p["tile_h"], ACC_BITS),
                                      ("res_q", 1, res, p["stream_bits"])):
        need = p["units"] * banks * uram_for(depth, width)
        plan[f"{name}_uram"] = bool(budget) and used + need <= budget
        used += need if plan[f"{name}_uram"] else 0
    return plan


def buffers(ctx) -> tuple:
    """Every array and stream the kernel declares (hls/engines/sparse_cluster/kernel.cpp.j2),
    by its C++ name, and its multipliers, from the template context ``ctx``."""
    from ...resources import Buffer, DEFAULT_STREAM_DEPTH, Multiplier
    m = ctx["units"]
    z, th, tw = ctx["max_z"], ctx["tile_h"], ctx["tile_w"]
    top = ctx["top"]
    complete = ((0, "complete"),)
    kk, tiw = ctx["max_ksize"], ctx["tile_in_w"]
    u1 = ctx["weights_per_round"] == 1
    bufs = [
        Buffer("acc", "Unit", "array", ACC_BITS, (tw, z * th), partition=((1, "complete"),), storage="ram_s2p",
               impl="uram" if ctx["acc_uram"] else "bram", static=True, instances=m,
               note="accumulation buffer: a bank per multiplier (output column)"),
        Buffer("ebuf", "Unit", "array", 16, (2, ctx["tile_in_w"], ctx["tile_in_h"]),
               partition=((1, "complete"), (2, "complete")), storage="ram_s2p", impl="lutram", static=True,
               instances=m, note="two tile buffer sets: per input column, its non-zeros"),
        Buffer("occ", "Unit", "array", ctx["tile_in_h"], (2, ctx["tile_in_w"]), partition=((0, "complete"),),
               instances=m, note="row bitmaps of the buffered columns (per-row offsets)"),
    ] + ([
        Buffer("nwin", "Unit", "array", 8, (kk, kk), partition=complete, instances=m),
        Buffer("n", "Unit", "array", 9, (tiw,), partition=complete, instances=m,
               note="the columns' counts in one window (CountWindows)"),
        Buffer("col_e", "Unit", "array", 16, (tiw,), partition=complete, instances=m,
               note="the entry each column memory gives in a MacLoop cycle"),
        Buffer("col_ok", "Unit", "array", 1, (tiw,), partition=complete, instances=m),
    ] if u1 else [
        Buffer("ebuf1", "Unit", "array", 16, (2, tiw, ctx["tile_in_h"]),
               partition=((1, "complete"), (2, "complete")), storage="ram_s2p", impl="lutram", static=True,
               instances=m, note="U = 2: a second copy of the tile buffers for the second slot's reads"),
        Buffer("t0", "Unit", "array", 9, (tw,), partition=complete, instances=m),
        Buffer("t1", "Unit", "array", 9, (tw,), partition=complete, instances=m),
        *(Buffer(name, "Unit", "array", 9, (tiw,), partition=complete, instances=m)
          for name in ("st0", "n0", "st1", "n1")),
        *(Buffer(name, "Unit", "array", 16, (tiw,), partition=complete, instances=m,
                 note="the entry each column memory gives a slot in a MacLoop cycle (ReadColumns)")
          for name in ("col0", "col1")),
    ]) + [
        Buffer("fwd", "Unit", "array", ctx["acc_forward"] * (ctx["acc_addr_bits"] + ACC_BITS), (tw,),
               partition=complete, instances=m,
               note="each multiplier's read-add-write bypass: acc_forward addresses (acc_addr_bits) and words"),
        Buffer("bias", "Unit", "array", 32, (z,), instances=m),
        Buffer("shift", "Unit", "array", 16, (z,), instances=m),
        Buffer("hist", "Unit", "array", 32, (ctx["stats_bins"],), partition=complete, instances=m),
        Buffer("oh", "Collect", "array", 32, (m,)),
        Buffer("ow", "Collect", "array", 32, (m,)),
        Buffer("hist", "Collect", "array", 32, (ctx["stats_bins"],), partition=complete),
        Buffer("job_q", top, "stream", LANE_BITS, (m,), depth=2 + 3 * z),
        Buffer("data_q", top, "stream", ctx["stream_bits"], (m,), depth=ctx["data_beats"] + 1),
        Buffer("coef_q", top, "stream", ctx["stream_bits"], (m,), depth=ctx["coef_beats"] + 1),
        Buffer("res_q", top, "stream", ctx["stream_bits"], (m,), depth=ctx["res_beats"], storage="fifo",
               impl="uram" if ctx["res_q_uram"] else "bram", note="a whole output tile per unit, in beats"),
        Buffer("sat_q", top, "stream", 32, (m,), depth=DEFAULT_STREAM_DEPTH),
        Buffer("stats_q", top, "stream", 32, (m,), depth=ctx["stats_bins"]),
        Buffer("hdr_q", top, "stream", LANE_BITS, (), depth=2 * m * 4),
    ]
    muls = [
        Multiplier("coef*val", "MacLoop", 8, 8, count=m * tw,   # the loop of each unit's module
                   note=f"{tw} int8 x int8 products per unit and cycle (one per output column)"),
        Multiplier("output sizes", "Collect", 8, 16, count=2 * m,
                   note="zg*area and oh*ow per unit: 8-bit sizes (the binder may share them)"),
        Multiplier("output count", "Unit", 8, 16, count=m, note="zg*ph*pw per unit"),
    ]
    return bufs, muls


def estimate(cfg) -> dict:
    """Resources from the buffers and multipliers the kernel declares (:func:`buffers`,
    mapped by :mod:`hlsnn.resources`); LUT/FF logic ``LANE_LUT``/``LANE_FF`` per multiplier, ``UNIT_LUT``/``UNIT_FF`` per unit plus
    ``BASE_LUT``/``BASE_FF``. ``tile_w`` int8 x int8 products per unit (a DSP each: 8 x 8
    fits any DSP48's ports, and HLS does not pack two into one). Work model: a unit's cycles
    follow its non-zero products (see ``model.py``)."""
    from ... import resources
    m, tw = cfg.params["units"], cfg.params["tile_w"]
    model = resources.build(*buffers(template_context(cfg)), cfg.board.ps)
    peak = m * tw
    u2 = cfg.params["weights_per_round"] == 2
    return resources.estimate(
        cfg, model, logic_lut=m * (UNIT_LUT + tw * (LANE_LUT + u2 * U2_LANE_LUT)) + BASE_LUT,
        logic_ff=m * (UNIT_FF + tw * (LANE_FF + u2 * U2_LANE_FF)) + BASE_FF,
        extra={"units": m, "peak_macs_per_cycle": peak,
               "throughput": {"value": peak * cfg.clock_mhz / 1e3, "unit": "G multiplies/s",
                              "what": f"peak multiplies per second: tile_w = {tw} per unit per cycle "
                                      "(non-zero pairs only)"}},
        notes={"lut": f"{m} units x {tw} multipliers (model) + LUTRAM/SRL buffers",
               "ff": f"{m} units x {tw} multipliers (model) + register buffers"})


def stream_depths(p) -> dict:
    """Beats of the largest segments (``data_beats``: one unit's tile of one channel;
    ``coef_beats``: one channel's coefficients of a pass; ``res_beats``: one job's outputs of
    a pass, raw), the MAC loop's bound and log2 of the lanes per beat."""
    th, tw = tile_in(p)
    lanes = p["stream_bits"] // LANE_BITS
    max_coefs = p["max_z"] * p["max_ksize"] ** 2
    return {
        "data_beats": -(-(1 + 2 * th * tw) // lanes),
        "coef_beats": -(-(1 + 2 * max_coefs) // lanes),
        "res_beats": -(-(2 * p["max_z"] * p["tile_h"] * p["tile_w"]) // lanes),
        "mac_bound": max(max_coefs * p["tile_h"], th * tw),
        "lane_shift": lanes.bit_length() - 1,
    }


#: ``MacLoop``'s stages from the depth table of :mod:`hlsnn.perf.sparse_cluster`: the ``acc`` read
#: is issued at stage 2 (after the entry's place and the ``ebuf`` read) and the sum is written at
#: stage 6, so a read sees a write of the same word only ``6 - 2 + 1 = 5`` iterations later. The
#: kernel forwards the words of the four iterations before (``Accumulate``); the strict C-simulation
#: holds every ``acc`` read to this distance (``HLSNN_MEM(acc, ..., distance)``).
MAC_ACC_READ_STAGE, MAC_ACC_WRITE_STAGE = 2, 6
ACC_RAW_DISTANCE = MAC_ACC_WRITE_STAGE - MAC_ACC_READ_STAGE + 1
#: the stages of margin in Accumulate's bypass beyond the MAC loop's read-to-write distance
ACC_FORWARD_MARGIN = 1


def acc_addr_bits(p) -> int:
    """Bits of ``Forward``'s addresses (``Accumulate``'s bypass): signed, holding a word of an
    accumulator bank (``0 .. max_z * tile_h - 1``) and -1 (no word). They were 32-bit ``int`` values:
    on sparse8_pynq-z2 (max_z 16, tile_h 16: 9 bits) the 128 multipliers' 5 addresses took
    14,720 flip-flops more than they need, and put the kernel at 92% of the XC7Z020's FFs
    (issue 83)."""
    return (p["max_z"] * p["tile_h"] - 1).bit_length() + 1


def template_context(cfg) -> dict:
    p = cfg.params
    th, tw = tile_in(p)
    return {
        # Accumulate forwards the words of the last ACC_RAW_DISTANCE iterations, one more than
        # the depth table needs (a stage of margin should the write land a stage later), and the
        # strict csim holds every acc read that misses the bypass to one more than that
        "acc_distance": ACC_RAW_DISTANCE + ACC_FORWARD_MARGIN,
        "acc_forward": ACC_RAW_DISTANCE - 1 + ACC_FORWARD_MARGIN,
        # the bypass's addresses: a word of a bank (0 .. max_z * tile_h - 1) or -1 (none)
        "acc_addr_bits": acc_addr_bits(p),
        # MacLoop reads ebuf[b] and writes ebuf[1 - b] (the next channel's tile): the strict
        # csim holds a read of a word written in the same run to the loop's whole depth
        "ebuf_distance": MAC_ACC_WRITE_STAGE + 1,
        **{k: p[k] for k in ("units", "tile_h", "tile_w", "max_z", "max_out_channels", "max_in_channels",
                             "max_ksize", "max_hw", "stream_bits", "rounding", "weights_per_round")},
        "tile_in_h": th,
        "tile_in_w": tw,
        "max_entries": th * tw,
        "max_coefs": p["max_z"] * p["max_ksize"] ** 2,
        **stream_depths(p),
        "lane_bits": LANE_BITS,
        "stats_bins": ACC_BITS,
        **storage_plan(p, cfg.board),
        "rounding_code": ROUNDING_CODES[p["rounding"]],
        "magic": MAGIC,
        "top": TOP,
        "cfg_struct": "SparseClusterCfg",
        "word_type": "sparse_word_t",
    }


register(NAME, SCHEMA, validate, estimate)       # hlsnn.engine_registry: what config.py reads
