"""End-to-end latency of a compiled network on a board, modelled: ``hlsnn perf NAME.hlsnn``.

Per engine layer, for a batch of ``batch`` images (the compiled network's own calls, as the
deployment runner makes them: :func:`hlsnn.measure.layers.layer_kernel_cycles`):

* ``kernel_us``: the kernel calls' cycles from the engine's cycle model at the config's clock
  (the stream phases included at the kernel's ``stream_bits`` per cycle);
* ``ddr_us``: the DMA bytes (every beat in and out of the calls, times ``stream_bits / 8``;
  the stream phases' cycles, one beat a cycle, only where the cycle model gives no beat totals)
  at the board's HP-port peak
  (:data:`BOARDS`); the DMA streams while the kernel runs, so the layer's fabric time is
  ``max(kernel_us, ddr_us)``;
* ``host_us``: ``kernel_starts * call_us + host_bytes * byte_us``: the driver's cost per
  kernel start (register writes, two DMA starts, the waits' polling) and the host's numpy work
  per byte it touches (:func:`host_bytes`), with the constants of the board's CPU.

Host layers (the residual ``Add``, pooling, ``Flatten``, the final ``Softmax``) cost
``op_us + host_bytes * byte_us``. Nothing overlaps: the host waits for every call, so
``end_to_end_us`` is the sum over the layers of fabric and host time. ``host_bytes`` counts
the runner's float64 work as it is today (see docs/network-host.md, 'The latency model').

The CPU constants (:data:`CPUS`) are stated with their source: ``x86-this-machine`` measured
here (``benchmarks/bench_compiled_host.py`` and ``hlsnn run`` on the sim board), the boards'
ARM cores *estimated* from it (the factor and how it was derived are in the table). A model,
not a measurement.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..resources import FIT_SHARE, format_over
from .artifact import as_internal_error

_guard = as_internal_error.guard

#: host cost constants per CPU: us per kernel start, us per byte touched, us per host op
CPUS = {
    "x86-this-machine": {
        "call_us": 1800.0, "byte_us": 0.0009, "op_us": 3.0,
        "source": "measured on this 2-core x86 (CPU time, so the session's shared load does not inflate it): "
                  "byte_us and op_us from an im2col plus conversion touching 4.8 MB (0.0009 us/byte) and a small "
                  "numpy op (2.6 us); call_us fitted to resnet8 bfp16's host CPU time per image on the sim board "
                  "(40.4 ms, benchmarks/bench_compiled_host.py) less its modelled bytes and host ops, over its 17 "
                  "kernel starts. It includes the simulated board's own Python (register and DMA models, the "
                  "cycle bookkeeping), so it overstates a real board's driver call"},
    "cortex-a9-650": {
        "call_us": 1000.0, "byte_us": 0.009, "op_us": 30.0,
        "source": "estimate. byte_us and op_us: x86-this-machine x 10 (CoreMark per core ~2.5/MHz x 650 MHz ~ "
                  "1,600 vs ~15,000-25,000 for a current x86 core; the PYNQ-Z2's 16-bit DDR3-1066 peaks at "
                  "2.1 GB/s vs ~20 GB/s here; the issue's 'an order of magnitude slower'). call_us: one pynq "
                  "kernel start with its two DMA transfers in Python, taken as 1 ms: a published PYNQ-Z2 "
                  "measurement puts a whole Python DMA round trip of a tiny MLP at ~3.5 ms, 1.0-1.3 ms of it "
                  "the shell (ainews247.org/story/78316). Not measured on a board"},
    "cortex-a53-1200": {
        "call_us": 400.0, "byte_us": 0.0036, "op_us": 12.0,
        "source": "estimate: byte_us and op_us x86-this-machine x 4 (Cortex-A53 at 1.2-1.5 GHz, in order, "
                  "CoreMark ~3.5/MHz; 64-bit DDR4); call_us the Cortex-A9's / 2.5. Not measured"},
}

#: the network path's host costs per CPU (one kernel start per batch): ``start_us`` the driver's
#: calls of one start (the input buffer's fill and flush, ap_start, the last poll of ap_done,
#: invalidate, the read-back), ``quant_us + quant_value_us * n`` rule 1 on ``n`` input values,
#: ``finish_us + finish_value_us * n`` rule 5 and the host layers after the logits on ``n``
#: outputs. x86: measured on this machine by ``python benchmarks/bench_network_start.py
#: --model resnet8_digits32 --calls 50`` (driver 42 us, of which pynq's own Python 26 us, the
#: rest the simulated board's register and cache models; quantize 23 us for 64 values and
#: 40 us for 3,072; finish 12.5 us for 10 outputs); the ARM cores: the same x 10 and x 4, the
#: factors of :data:`CPUS` (estimates, not measured on a board).
NET_HOST = {
    "x86-this-machine": {"start_us": 42.0, "quant_us": 22.6, "quant_value_us": 0.0057, "finish_us": 12.5,
                         "finish_value_us": 0.0},
    "cortex-a9-650": {"start_us": 420.0, "quant_us": 226.0, "quant_value_us": 0.057, "finish_us": 125.0,
                      "finish_value_us": 0.0},
    "cortex-a53-1200": {"start_us": 168.0, "quant_us": 90.4, "quant_value_us": 0.023, "finish_us": 50.0,
                        "finish_value_us": 0.0},
}

#: per board: its CPU (a key of CPUS) and the HP port the DMA masters (bits per PL clock cycle; peak)
BOARDS = {
    "pynq-z2": {"cpu": "cortex-a9-650", "hp_bits": 64,
                "source": "Zynq-7000 S_AXI_HP ports are 64 bits wide (UG585 ch. 5); the DMA runs at the PL clock"},
    "zcu104": {"cpu": "cortex-a53-1200", "hp_bits": 128, "source": "Zynq UltraScale+ S_AXI_HP: 128 bits (UG1085)"},
    "ultra96v2": {"cpu": "cortex-a53-1200", "hp_bits": 128, "source": "as zcu104"},
    "kv260": {"cpu": "cortex-a53-1200", "hp_bits": 128, "source": "as zcu104"},
    "aup-zu3": {"cpu": "cortex-a53-1200", "hp_bits": 128, "source": "as zcu104 (the XCZU3EG's Cortex-A53s)"},
    "x86-sim": {"cpu": "x86-this-machine", "hp_bits": 64, "source": "this machine driving the simulated board"},
}


def host_bytes(kind, in_elems, out_elems, rows_elems=0, dma_bytes=0):
    """Bytes the host touches for one layer today: the float64 input read and output written,
    the im2col rows (8-byte elements, written, then read to pack them), and every DMA byte
    (packed in, unpacked out)."""
    return 8 * (in_elems + out_elems + 2 * rows_elems) + dma_bytes


def _elems(shape):
    return int(np.prod(shape)) if shape is not None else 0


def _dma_bytes(kc, cfg):
    """The DMA bytes of a layer's kernel calls ``kc`` (:class:`hlsnn.perf.model.KernelCycles`) on
    ``cfg``: the calls' stream beats in and out times ``stream_bits / 8``; one beat per cycle of the
    stream phases only where the cycle model gives no beat totals (a stream phase's cycles are not
    beats: a DATAFLOW engine whose input stage is its slowest process reports that stage's stalls
    as its stream phase)."""
    streams = sum(v for k, v in kc.phases.items() if k.startswith(("input stream", "output stream")))
    return int((kc.beats_in + kc.beats_out or streams) * (cfg.params["stream_bits"] // 8))


_TOTALS = ("kernel_starts", "kernel_us", "ddr_us", "fabric_us", "host_us", "end_to_end_us", "host_bytes", "dma_bytes")


def _board(prog, board):
    boards = {v["config"]["board"]["name"] for v in prog["accels"].values()}
    name = board or sorted(boards)[0]
    if name not in BOARDS:
        raise InputError(f"--board {name!r}: no CPU constants for it; known: {', '.join(BOARDS)}")
    return name, BOARDS[name], CPUS[BOARDS[name]["cpu"]]


def energy(board_name, end_to_end_us, batch):
    """The energy estimate of one start: whole-board power x end-to-end time, as MLPerf Tiny
    measures energy (at the board's supply, the host's part included), with no dynamic term of
    the kernel's own (its activity is not modelled; the board's idle power is most of it).
    ``{"board_power_w", "uj_per_batch", "uj_per_image", "basis"}``, or None for a board without a
    power figure (``power_w`` of ``configs/boards/<board>.yaml``; ``x86-sim`` has no board file).
    W x us = uJ."""
    from ..config import load_board
    from ..errors import ConfigError
    try:
        board = load_board(board_name)
    except ConfigError:
        return None
    if board.power_w is None:
        return None
    uj = board.power_w * end_to_end_us
    return {"board_power_w": board.power_w, "uj_per_batch": uj, "uj_per_image": uj / batch,
            "basis": f"estimate: {board.name}'s typical whole-board power ({board.power_w:g} W, power_w of its "
                     f"board file {Path(board.path).name}: its source in the file's comment) x the modelled "
                     f"end-to-end time, as MLPerf Tiny measures energy; no term for the kernel's own activity"}


def _with_energy(res):
    res["energy"] = energy(res["board"], res["end_to_end_us"], res["batch"])
    return res


def _gist(source):
    """The first clause of a constant's source ("estimate", "measured on this 2-core x86", ...)."""
    return re.split(r"[.:;] | \(", source, maxsplit=1)[0].strip()


def _host_summary(cpu, c_host, nh):
    """The host constants of the network path in a few short lines (``hlsnn perf``'s text; the
    sources in full: ``host["basis"]``, ``hlsnn perf --sources``)."""
    from . import hostmodel
    if not c_host:
        return [f"the numpy driver ({cpu}): {nh['start_us']} us per kernel start, quantize {nh['quant_us']} us + "
                f"{nh['quant_value_us']} us per value, finish {nh['finish_us']} us (hlsnn.network.latency.NET_HOST; "
                "x86 measured by benchmarks/bench_network_start.py, the ARM cores scaled: estimates)"]
    sc, io = hostmodel.SCALE[cpu], hostmodel.BOARD_IO[cpu]
    lines = ["x86 figures measured on this machine by benchmarks/bench_c_host.py (the C call, rule 1, Softmax) "
             "and benchmarks/bench_loader_host.py (the loader's steps, the host ops)"]
    if cpu != "x86-this-machine":
        lines.append(f"on {cpu}: Python x {sc['python']:g} and C x {sc['c']:g} of the x86 figures; input stores "
                     f"{io['store_ns_per_byte']:g} ns a byte, ap_start {io['mmio_write_us']:g} us, the last poll "
                     f"{io['mmio_read_us']:g} us, {io['uncached_read_us']:g} us an output read ({_gist(sc['source'])}"
                     f"{'' if 'board' in _gist(sc['source']) else ', not measured on a board'})")
    else:
        lines.append(f"the simulated board's registers and syncs {io['sim_io_us']:g} us, its context "
                     f"{io['sim_context_us']:g} us (measured here)")
    return lines


def sources(res) -> list:
    """``(what, source)`` of every constant behind ``res`` (:func:`model`'s result), in full."""
    from . import hostmodel
    cpu = res["cpu"]
    out = []
    if res.get("path") == "network" and res.get("host", {}).get("path") == "c":
        out += [("x86 C host path (hlsnn.network.hostmodel.X86)", hostmodel.X86["source"]),
                ("the loader's steps and the host ops (hostmodel.LOADER)", hostmodel.LOADER["source"]),
                (f"x86 -> {cpu} (hostmodel.SCALE)", hostmodel.SCALE[cpu]["source"]),
                (f"{cpu}'s memory and registers (hostmodel.BOARD_IO)", hostmodel.BOARD_IO[cpu]["source"])]
    elif res.get("path") == "network":
        out.append(("the numpy driver (hlsnn.network.latency.NET_HOST)", res["host"]["basis"]))
    out.append((f"CPU constants of the layer path, {cpu} (hlsnn.network.latency.CPUS)",
                res["constants"]["cpu"]["source"]))
    out.append(("HP port (hlsnn.network.latency.BOARDS)", res["constants"]["hp_source"]))
    return out


def _all_steps(lsteps, pre, steps):
    """Every host step of one start through ``net.run`` up to the logits, in order, with its
    basis: they sum to ``host["us"]`` (the host ops after the logits are rows of their own)."""
    out = [r for r in lsteps if r["step"].startswith("input check")]
    out += [{"step": r["kind"][5:], "us": r["host_us"], "basis": r["basis"]} for r in pre]
    return out + steps + [r for r in lsteps if not r["step"].startswith("input check")]


@_guard
def network_model(path, *, board=None, batch=1, host="c", input_dtype="float32"):
    """The latency model of the network path (one kernel start per batch,
    :mod:`hlsnn.engines.network.kernel`), or None when the network kernel cannot run the model.
    The host checks the input (``net.run``'s input check, on the image as stored), runs
    the host ops on the float input before the kernel (a model's input normalization,
    :mod:`hlsnn.deploy.lower.netprefix`, and a ``bfp_systolic`` kernel's first patches; each at its
    measured cost per op kind and element, :func:`hlsnn.network.hostmodel.op_us`), quantizes the
    input (8 bytes read, 1 written per value), starts the kernel once, dequantizes the output (1
    read, 8 written), runs the loader's own Python and the host layers after the output (a
    Softmax: 8 read, 8 written per value; :func:`~hlsnn.network.hostmodel.op_us`, or on the C host
    path, over each image's output vector, in the C call: :func:`~hlsnn.network.hostmodel.softmax_c_us`). On the C host
    path the steps are :mod:`hlsnn.network.hostmodel`'s (measured on this machine, scaled to the
    board's CPU); on the numpy driver's, :data:`NET_HOST`'s. The kernel's cycles are
    :func:`hlsnn.engines.shift_mac.network.perf.op_cycles` per image; its DDR traffic is the input and output
    words at the HP port's width.

    ``host="c"`` (the default, where the network's input rule is one the C host path covers,
    :func:`hlsnn.network.nethost.input_rule`): the host's steps are
    :func:`hlsnn.network.hostmodel.loader_steps` and :func:`~hlsnn.network.hostmodel.host_steps`
    for images of ``input_dtype`` as the data set stores them (``net.run`` hands them to the C
    call as they are, :func:`hlsnn.network.hostmodel.stored_dtype`); ``host="python"``: the
    numpy driver's (:data:`NET_HOST`). Beside
    ``end_to_end_us`` (a numpy image in, the network's output out: every row) the result
    carries ``logits_out_us`` (a numpy image in, the logits out: without the host layers after
    them), ``mlperf_window_us`` (the kernel with its DDR traffic, plus the host layers after the
    logits: MLPerf Tiny's DMA + kernel + softmax; input quantization outside it) and ``host``:
    the steps with their basis, and the double-buffered figures per image."""
    from . import artifact
    from ..deploy.lower import program as netmode
    from ..engines.network.move import refuse_kernel
    from ..engines.network.perf import DDR_LATENCY
    from ..engines.shift_mac.network import perf as netperf
    from ..engines.shift_mac.network import kernel as shiftkernel
    from .loader import config_of
    prog, arrays = artifact.read(path)
    try:
        net = netmode.lower(prog, arrays)
        refuse_kernel(net)                          # a data move no kernel has a loop for (netmove)
    except InputError:
        return None
    name, b, cpu = _board(prog, board)
    cfg = config_of(prog["accels"][net.accel], str(path))
    if net.engine == "bfp_systolic":               # its own kernel: bfpkernel, bfpperf
        from ..engines.bfp_systolic.network import kernel as bfpkernel, perf
        try:
            t = bfpkernel.tables(net, *bfpkernel.shape(net.params))
        except InputError:
            return None
    elif net.engine == "sparse_cluster":             # its own kernel: sparsekernel, sparseperf
        from ..engines.sparse_cluster.network import kernel as sparsekernel, perf
        try:
            t = sparsekernel.tables(net, *sparsekernel.shape(net.params))
        except InputError:                         # a network the kernel refuses runs layer by layer
            return None
    else:
        perf = netperf
        t = shiftkernel.tables(net, *shiftkernel.lanes(net.params))
    mhz, beat = cfg.clock_mhz, b["hp_bits"] / 8
    n_in, n_out = t["in_elems"] * batch, t["out_elems"] * batch

    def row(nm, kind, **k):
        r = dict(name=nm, kind=kind, kernel_starts=0, kernel_cycles=0, kernel_us=0.0, ddr_us=0.0, dma_bytes=0,
                 host_bytes=0, host_us=0.0, fabric_us=0.0)
        r.update(k)
        r["end_to_end_us"] = r["fabric_us"] + r["host_us"]
        return r
    nh = NET_HOST[b["cpu"]]
    from . import hostmodel, nethost
    if host not in ("c", "python"):
        raise InputError(f"host {host!r}: 'c' (the C host path) or 'python' (the numpy driver)")
    c_host = host == "c" and nethost.covers(net)
    bfp_words = net.engine == "bfp_systolic"          # float32 words in, 64-bit words out
    n_out_host = t.get("out_words", t["out_elems"]) if bfp_words else t["out_elems"]
    steps = hostmodel.host_steps(b["cpu"], n_in=t["in_elems"], n_out=n_out_host, batch=batch,
                                 input_dtype=input_dtype, words=bfp_words, via_loader=True,
                                 lane_bytes=1 if bfp_words else t.get("in_value_bytes", 1)) if c_host else None
    # net.run's own steps around the C call (hlsnn.network.loader): the input check, the loader's
    # Python, the simulated board's context (x86-sim only)
    lsteps = hostmodel.loader_steps(b["cpu"], n_in=int(np.prod(net.source["shape"])) if getattr(net, "source", None)
                                    else t["in_elems"], batch=batch, input_dtype=input_dtype,
                                    words=bfp_words, prefix=bool(net.host_before)) if c_host else None
    # bytes per value the host writes into the input buffer and reads from the output buffer
    in_b, out_b = t.get("in_value_bytes", 1), t.get("out_value_bytes", 1)
    # the host ops on the float input before the kernel (hlsnn.deploy.lower.netprefix), each at its
    # measured cost per op kind and element (hostmodel.op_us), and a bfp_systolic kernel's first
    # patches formed on the host after them (netprefix.bfp_patches)
    pre = []
    for e in net.host_before:
        n_el = sum(int(np.prod(sh)) for _, sh in e["ins"]) * batch
        hb = host_bytes("host", n_el, int(np.prod(e["ins"][0][1])) * batch)
        oc = hostmodel.op_us(b["cpu"], e["op"], n_el)
        if e["op"] == "fallback":           # a --host-fallback node: its own estimate where one is fitted
            st = e["stub"]
            oc = hostmodel.fallback_us(b["cpu"], st.node, st.attrs.get("consts") or {}, int(np.prod(e["ins"][0][1])),
                                       batch, per_sample="sw" in st.attrs) \
                or dict(oc, basis="host-fallback node, not timed (a lower bound): " + oc["basis"])
        pre.append(row(e["name"], "host " + e["op"] + " (before the start)", host_bytes=hb, host_us=oc["us"],
                       basis=oc["basis"]))
    if net.host_before and bfp_words and net.input.get("patches"):
        oc = hostmodel.op_us(b["cpu"], "bfp patches", n_in)
        pre.append(row("input", "host bfp patches (before the start)", host_bytes=16 * n_in, host_us=oc["us"],
                       basis=oc["basis"]))
    if c_host:
        st = {r["step"].split(" (")[0]: r["us"] for r in steps}
        ls = {r["step"].split(" (")[0]: r["us"] for r in lsteps}
        layers = [row("input", "host input check (loader)", host_us=ls["input check"])] + pre + [
            row("input", "host quantize (C)",
                host_bytes=(np.dtype(hostmodel.stored_dtype(input_dtype, bfp_words)).itemsize
                            + (4 if bfp_words else in_b)) * n_in,
                host_us=st["quantize"] + st["input stores"])]
    else:
        layers = pre + [row("input", "host quantize", host_bytes=(8 + in_b) * n_in,
                      host_us=nh["quant_us"] + nh["quant_value_us"] * n_in)]
    from ..perf import schedule as sched
    from .schedule import network_schedule
    rows_s = network_schedule(net, cfg)
    for nm, kind, cyc in perf.op_cycles(net, t, ii=sched.ii_of(rows_s)):
        c = cyc * batch
        k_us = c / mhz
        extra = {}
        if kind in ("load image", "store output"):
            words = t.get("in_words" if kind == "load image" else "out_words",
                          -(-t["in_elems" if kind == "load image" else "out_elems"] // 8)) * batch
            extra = dict(dma_bytes=8 * words, ddr_us=8 * words / (beat * mhz))
        if kind == "load image":                      # the one kernel start of the batch
            extra.update(kernel_starts=1, host_us=st["python call"] + st["ap_start and the last poll"] if c_host
                         else nh["start_us"])
        layers.append(row(nm, kind, kernel_cycles=c, kernel_us=k_us, fabric_us=max(k_us, extra.get("ddr_us", 0.0)),
                          **extra))
    # rule 5 and the host layers after the logits, measured together (finish_us): split evenly;
    # a view after the logits (Reshape, Flatten, ...: hlsnn.deploy.lower.netafter) costs nothing
    from ..deploy.lower.netafter import is_view
    ops_after = [j for j in net.host_after if not is_view(j["op"])]
    fin = [("output", "host dequantize", (8 + out_b) * n_out)] + [(j["name"], "host " + j["op"], 16 * n_out)
                                                                  for j in ops_after]
    if c_host:
        layers.append(row("output", "host read + dequantize (C)", host_bytes=(16 if bfp_words else 9) * n_out,
                          host_us=st["outputs read once"]))
        layers.append(row("output", "host loader's Python", host_us=ls["loader's Python"]
                          + ls.get("sim board: context, registers", 0.0)))
        in_c = nethost.softmax_rule(net)           # a Softmax over each image's vector: in the C call
        for j in ops_after:
            if in_c:
                layers.append(row(j["name"], "host " + j["op"] + " (C)", host_bytes=16 * n_out,
                                  host_us=hostmodel.softmax_c_us(b["cpu"], n_out, bfp_words)["us"]))
                continue
            layers.append(row(j["name"], "host " + j["op"], host_bytes=16 * n_out,
                              host_us=hostmodel.op_us(b["cpu"], j["op"], n_out)["us"]))
    else:
        for nm, kind, hb in fin:
            layers.append(row(nm, kind, host_bytes=hb,
                              host_us=(nh["finish_us"] + nh["finish_value_us"] * n_out) / len(fin)))
    for j in net.host_after:
        if is_view(j["op"]):
            layers.append(row(j["name"], "host " + j["op"] + " (a view)"))
    tot = {k: sum(r[k] for r in layers) for k in _TOTALS}
    after = {j["name"] for j in net.host_after}
    logits_us = sum(r["end_to_end_us"] for r in layers if r["name"] not in after)
    fabric = sum(r["fabric_us"] for r in layers)
    host_pre = sum(r["host_us"] for r in layers if r["name"] not in after)
    # double-buffered starts take one image each: the host's steps of a batch of one
    # (hlsnn_in_pipeline), plus the two address words each start after the first writes
    host1 = (sum(r["us"] for r in hostmodel.host_steps(b["cpu"], n_in=t["in_elems"], n_out=n_out_host, batch=1,
                                                      input_dtype=input_dtype, words=bfp_words))
             + 2 * hostmodel.BOARD_IO[b["cpu"]]["mmio_write_us"]
             + sum(r["host_us"] for r in pre) / batch if c_host else host_pre / batch)
    windows = {
        "logits_out_us": logits_us,
        "mlperf_window_us": fabric + sum(r["host_us"] for r in layers if r["name"] in after),
        "host": {"path": "c" if c_host else "python", "input_dtype": input_dtype if c_host else "float64",
                 "us": host_pre, "steps": _all_steps(lsteps, pre, steps) if c_host
                 else None,
                 "pipelined_us_per_image": hostmodel.pipelined_us_per_image(host1, fabric / batch, batch),
                 "steady_state_us_per_image": max(host1, fabric / batch),
                 "basis": (hostmodel.X86["source"] + "; the loader's steps and the host ops: "
                           + hostmodel.LOADER["source"] + "; " + hostmodel.SCALE[b["cpu"]]["source"] + "; "
                           + hostmodel.BOARD_IO[b["cpu"]]["source"]) if c_host else
                          "hlsnn.network.latency.NET_HOST (the numpy driver: x86 measured by "
                          "benchmarks/bench_network_start.py; the ARM cores scaled, estimates)",
                 "summary": _host_summary(b["cpu"], c_host, nh)},
        # the numpy driver's image-in-to-logits-out host time, for comparison (NET_HOST)
        "host_python_us": sum(r["host_us"] for r in pre) + nh["quant_us"] + nh["quant_value_us"] * n_in + nh["start_us"]
        + (nh["finish_us"] + nh["finish_value_us"] * n_out) / len(fin),
    }
    res = perf.resources(net, t, cfg.board.ps)
    have = cfg.board.resources
    from ..resources import over_budget    # the budget every kernel is checked against (hlsnn.network.fit)
    res["over"] = over_budget(res, have)
    res["fits"] = not res["over"]
    return {"model": prog["name"], "assignment": prog["assignment"], "path": "network", "board": name,
            "cpu": b["cpu"], "batch": batch, **tot, **windows, "layers": layers,
            "host_only_layers": [j["name"] for j in net.host_after],
            "host_before_layers": [e["name"] for e in net.host_before],
            "kernel_resources": {k: v for k, v in res.items() if k not in ("buffers", "logic")},
            "kernel_logic": res["logic"], "schedule": rows_s,
            "constants": {"cpu": dict(cpu), "network_host": dict(nh), "hp_bits": b["hp_bits"],
                          "hp_source": b["source"], "ddr_latency_cycles": DDR_LATENCY}}


@_guard
def model(path, *, board=None, batch=1, network=None, host="c", input_dtype="float32"):
    """The latency model of a compiled model (module docstring): a JSON-able dict with keys
    ``board``, ``cpu``, ``batch``, ``kernel_starts``, ``kernel_us``, ``ddr_us``, ``fabric_us``,
    ``host_us``, ``end_to_end_us``, ``host_bytes``, ``dma_bytes``, ``layers`` (one dict per layer
    with the same keys), ``path`` (``network``: one kernel start per batch,
    :func:`network_model`; ``layers``: today's calls) and ``constants``. ``network``: None takes
    the network path where the model has one, True requires it, False models layer by layer;
    ``host`` and ``input_dtype``: the network path's host (:func:`network_model`)."""
    if network is not False:
        res = network_model(path, board=board, batch=batch, host=host, input_dtype=input_dtype)
        if res is not None:
            return _with_energy(res)
        if network:
            from . import artifact
            from ..deploy.lower import program as netmode
            from ..engines.network.move import refuse_kernel
            refuse_kernel(netmode.lower(*artifact.read(path)))          # raises the reason
    from ..deploy.quantize.twoterm import cost_layer            # rule 4 of hlsnn.deploy.quantize.twoterm
    from ..measure.layers import input_terms, layer_kernel_cycles
    from .loader import load
    net = load(path, "emu", self_check=False, network=False)
    try:
        prog = net.program
        name, b, cpu = _board(prog, board)
        x = net.check.get("x")
        if x is None:
            x = np.zeros((1,) + net.input_shape)
        xb = np.repeat(x[:1], batch, axis=0)
        for ex in net._dep.execs.values():
            ex.deploy.collect_stats = True         # the sparse engine's cycles depend on the input density
        _, env = net.run(xb, keep=True)
        shapes = {k: np.shape(v) for k, v in env.items()}
        cfgs = {}
        shapes[prog["input"]["name"]] = xb.shape
        layers = []
        for j in prog["layers"]:
            ins = [shapes.get(i) for i in j["inputs"]]
            in_el, out_el = sum(_elems(s) for s in ins), _elems(shapes.get(j["output"]))
            row = {"name": j["name"], "kind": j["kind"] if j["kind"] != "host" else "host " + j["op"],
                   "kernel_starts": 0, "kernel_cycles": 0, "kernel_us": 0.0, "ddr_us": 0.0, "dma_bytes": 0}
            q = getattr(getattr(net._dep, "actmm", {}).get(j["name"]), "engine", None) if j["kind"] == "host" else None
            if q is not None:                        # a MatMul of two activations on the engine (actmm_engine)
                cfg = q.kern.cfg
                cfgs[cfg.sha] = cfg
                kc = q.kernel_cycles(cfg)
                dma = _dma_bytes(kc, cfg)
                hb = host_bytes("host", in_el, out_el, dma_bytes=dma)
                k_us, d_us = kc.cycles / cfg.clock_mhz, dma / (b["hp_bits"] / 8 * cfg.clock_mhz)
                row.update(kind="engine MatMulAct", kernel_starts=int(kc.calls), kernel_cycles=int(kc.cycles),
                           kernel_us=k_us, ddr_us=d_us, dma_bytes=dma, fabric_us=max(k_us, d_us), host_bytes=hb,
                           host_us=kc.calls * cpu["call_us"] + hb * cpu["byte_us"], bound=kc.bound)
            elif j["kind"] == "host":
                hb = host_bytes("host", in_el, out_el)
                row.update(host_bytes=hb, host_us=cpu["op_us"] + hb * cpu["byte_us"], fabric_us=0.0)
                if j["op"] == "fallback":    # a --host-fallback node: its own estimate where one is fitted
                    st = next((la for la in net._dep.net.layers if la.name == j["name"]), None)
                    from .hostmodel import fallback_us
                    oc = None if st is None or ins[0] is None else fallback_us(
                        b["cpu"], st.node, st.attrs.get("consts") or {}, _elems(ins[0]) // batch, batch,
                        per_sample="sw" in st.attrs)
                    if oc is not None:
                        row.update(host_us=oc["us"] + hb * cpu["byte_us"], basis=oc["basis"])
            else:
                ex = net._dep.execs[j["name"]]
                acc = ex.acc
                cfg = acc.config
                cfgs[cfg.sha] = cfg
                in_hw = tuple(ins[0][-2:]) if j["kind"] == "conv" else None
                wsp = float(np.mean(np.asarray(ex.wq) == 0)) if j["format"] in ("fixed", "sparse") else 0.0
                terms = getattr(ex, "terms", 1)          # weight_terms: 2 runs K doubled, rows [p | p]
                kc = layer_kernel_cycles(cost_layer(ex.layer, terms), cfg, batch, fmt_type=j["format"], in_hw=in_hw,
                                         weight_sparsity=wsp, input_density=ex.stats.input_density,
                                         **input_terms(ex))      # input_terms 2: two raw passes (deploy.quantize.twoin)
                dma = _dma_bytes(kc, cfg)
                rows = 0
                if j["kind"] == "conv" and j["format"] in ("bfp", "twohot", "pot"):
                    g = ex.layer.geom
                    oh, ow = g.out_hw(*in_hw)
                    rows = batch * oh * ow * int(np.prod(j["w_shape"][1:])) * g.group * terms
                hb = host_bytes(j["kind"], in_el, out_el, rows, dma)
                k_us = kc.cycles / cfg.clock_mhz
                d_us = dma / (b["hp_bits"] / 8 * cfg.clock_mhz)
                row.update(kernel_starts=int(kc.calls), kernel_cycles=int(kc.cycles), kernel_us=k_us, ddr_us=d_us,
                           dma_bytes=dma, fabric_us=max(k_us, d_us), host_bytes=hb,
                           host_us=kc.calls * cpu["call_us"] + hb * cpu["byte_us"], bound=kc.bound)
            row["end_to_end_us"] = row["fabric_us"] + row["host_us"]
            layers.append(row)
    finally:
        net.close()
    tot = {k: sum(r[k] for r in layers) for k in _TOTALS}
    from ..perf.schedule import config_schedule
    schedule_rows = [r for c in cfgs.values() for r in config_schedule(c)]   # the layer kernels' loops
    return _with_energy({"schedule": schedule_rows,
            "model": prog["name"], "assignment": prog["assignment"], "path": "layers", "board": name, "cpu": b["cpu"],
            "batch": batch,
            **tot, "layers": layers,
            "host_only_layers": [r["name"] for r in layers if r["kind"].startswith("host")],
            "host_before_layers": [],
            "constants": {"cpu": dict(cpu), "hp_bits": b["hp_bits"], "hp_source": b["source"]}})


def _wrap(text, indent, first=""):
    """``first + text`` wrapped at 110 columns, continuation lines indented by ``indent`` spaces."""
    return textwrap.wrap(first + text, 110, subsequent_indent=" " * indent, break_on_hyphens=False) or [first]


def format_table(res, *, full_sources=False, all_loops=False):
    """``hlsnn perf NAME.hlsnn``'s text: the layer table, the end-to-end lines, the host's steps,
    the constants in brief (``full_sources``: every constant's source in full, wrapped; the JSON
    has them as ``host["basis"]`` and ``constants``) and the schedule (the loops above II 1;
    ``all_loops``: every pipelined loop)."""
    path = ("the network kernel, one start per batch" if res.get("path") == "network"
            else "layer by layer, today's kernel calls")
    nw = max([12] + [len(r["name"]) for r in res["layers"]])
    kw = max([22] + [len(r["kind"]) for r in res["layers"]])
    lines = [f"{res['model']} ({res['assignment']}) on {res['board']} ({res['cpu']}), batch {res['batch']}: "
             f"modelled, per batch; {path}",
             f"  {'layer':<{nw}} {'kind':<{kw}} {'starts':>6} {'kernel us':>10} {'DDR us':>8} {'host us':>9} "
             f"{'host bytes':>11} {'total us':>9}"]
    for r in res["layers"]:
        lines.append(f"  {r['name']:<{nw}} {r['kind']:<{kw}} {r['kernel_starts']:>6} {r['kernel_us']:>10.1f} "
                     f"{r['ddr_us']:>8.1f} {r['host_us']:>9.1f} {r['host_bytes']:>11,} {r['end_to_end_us']:>9.1f}")
    lines.append(f"  {'total':<{nw}} {'':<{kw}} {res['kernel_starts']:>6} {res['kernel_us']:>10.1f} "
                 f"{res['ddr_us']:>8.1f} {res['host_us']:>9.1f} {res['host_bytes']:>11,} "
                 f"{res['end_to_end_us']:>9.1f}")
    if "mlperf_window_us" in res:
        h = res["host"]
        lines += _wrap(f"end to end: {res['end_to_end_us']:.1f} us a numpy {h['input_dtype']} image in, the network's "
                       f"output out ({res['logits_out_us']:.1f} us to the logits); MLPerf Tiny window (the kernel "
                       f"with its DDR traffic + the host layers after the logits): {res['mlperf_window_us']:.1f} us",
                       4, "  ")
        lines += _wrap(f"host ({h['path']} path): {h['us']:.1f} us per start (the numpy driver: "
                       f"{res['host_python_us']:.1f} us); double-buffered starts: {h['pipelined_us_per_image']:.1f} "
                       f"us per image at this batch, {h['steady_state_us_per_image']:.1f} us in the steady state",
                       4, "  ")
        for st in h["steps"] or []:
            lines += _wrap(st["basis"], 46, f"    {st['step']:<28} {st['us']:>8.2f} us  ")
    e = res.get("energy")
    if e:
        lines += _wrap(f"energy (estimate, board power x time): {e['uj_per_image']:,.0f} uJ per image "
                       f"({e['board_power_w']:g} W x {res['end_to_end_us']:,.1f} us end to end"
                       + (f" / {res['batch']} images" if res["batch"] > 1 else "")
                       + f"; the typical whole-board power of {res['board']}, power_w of its board file, as MLPerf "
                         f"Tiny measures energy; no term for the kernel's own activity)", 4, "  ")
    elif "energy" in res:
        lines.append(f"  energy: no power figure for {res['board']} (power_w of its board file)")
    if "kernel_resources" in res:
        r = res["kernel_resources"]
        lines.append(f"  network kernel (hlsnn.resources and the datapath model, not synthesis): {r['bram36']} BRAM36, "
                     f"{r['lut']:,} LUT, {r['ff']:,} FF, {r['dsp']} DSP" +
                     ("" if r["fits"] else f"; OVER the budget of {100 * FIT_SHARE:.0f}% of the board: "
                      f"{format_over(r['over'])} (hlsnn compile refuses it without --allow-overfit)"))
        lines += _wrap(f"products: {r['products']}", 4, "  ") if r.get("products") else []  # a board-sized sparse kernel
    c = res["constants"]["cpu"]
    network = "network_host" in res["constants"]
    if network:
        lines.append("  host constants (" + ("their sources below" if full_sources else
                                             "in brief; in full: --sources, or --json's host.basis") + "):")
        for ln in res["host"].get("summary") or [res["host"]["basis"]]:
            lines += _wrap(ln, 6, "    ")
    lines += _wrap(f"CPU constants ({res['cpu']}{'; the layer path, --layer-by-layer' if network else ''}): "
                   f"{c['call_us']} us per kernel start, {c['byte_us']} us per byte, {c['op_us']} us per host op "
                   f"({_gist(c['source'])})", 4, "  ")
    lines += _wrap(f"HP port: {res['constants']['hp_bits']} bits per PL cycle (peak; {res['constants']['hp_source']})",
                   4, "  ")
    if full_sources:
        lines.append("  sources of the constants:")
        for what, src in sources(res):
            lines.append(f"    {what}:")
            lines += _wrap(src, 6, "      ")
    if res.get("schedule") is not None:
        from ..perf.schedule import format_table as schedule_table
        what = "the network kernel" if res.get("path") == "network" else "the layer kernels"
        which = "every pipelined loop" if all_loops else "loops above II 1"
        lines.append(f"  schedule of {what} (II derived from the rendered C++, hlsnn.perf.schedule; {which}):")
        lines += ["    " + ln for ln in schedule_table(res["schedule"], all_loops=all_loops).splitlines()]
    return "\n".join(lines)
