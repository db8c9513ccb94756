"""The host's modelled cost per kernel start of the network path with the C host
(:mod:`hlsnn.network.nethost`), step by step, with the source of every constant.

A start of a batch of ``B`` images of ``n`` input and ``m`` output values costs the host:

* ``python call``: the Python wrapper and the one ``ctypes`` call (:meth:`CHost.run`: the
  context check, two ``byref`` pointers, the result's copies);
* ``quantize``: rule input_quantize in C, per input value, by the image's dtype as the data set stores it
  (float32, float64, or uint8 through a table);
* ``input stores``: the quantized bytes written into the uncached input buffer (no flush: the
  buffers are allocated uncached, so there is no cache maintenance call);
* ``start and poll``: one register write (``ap_start``) and the read of the poll that sees
  ``ap_done``; the polls before it overlap the kernel;
* ``outputs``: the ``B * m`` output bytes read once from the uncached output buffer and
  dequantized in C.

Image in to logits out is those steps plus the fabric (the kernel with its own DDR reads and
writes: ``m_axi``, no DMA engine). The host layers after the logits (``Softmax``, numpy) are
reported beside it: they are part of MLPerf Tiny's timed window (DMA + kernel + softmax), not of
"logits out".

Around the C call, the loader's run path (``net.run(x)``: :meth:`hlsnn.network.loader.CompiledNet._run_c`)
costs the host, per start (:func:`loader_steps`):

* ``input check``: the image's dtype and shape (part of the loader's Python) and, where the C
  call does not count the non-finite values in its rule input_quantize pass (a network with a prefix), a
  finiteness pass per input value on the image as stored (the C
  host path takes float32 and uint8 images as they are; a ``bfp_systolic`` network's uint8
  image is converted to float64: :func:`stored_dtype`);
* the host ops on the float input before the start and after the output (:func:`op_us`: per op
  kind, a fixed cost plus a cost per element; a ``bfp_systolic`` kernel's first-layer patches
  formed on the host, ``bfp patches``, likewise); a Softmax over each image's output vector
  runs in the C call instead (:func:`softmax_c_us`; :func:`hlsnn.network.nethost.softmax_rule`);
* ``loader``: the rest of ``net.run`` in Python (its dispatch, the dtype and shape checks, the
  timing, ``NetBoard.run_image``'s lines around the C call, the output's reshape);
* on the simulated board only (``x86-this-machine``): its device context and the C call's
  callbacks into its register file and syncs (``BOARD_IO``'s ``sim_*``); a board has neither.

Constants: :data:`X86` measured on this machine by ``benchmarks/bench_c_host.py``,
:data:`LOADER` and :data:`HOST_OPS` by ``benchmarks/bench_loader_host.py``; the boards'
figures are x86 figures times :data:`SCALE` (estimates, named as such), plus :data:`BOARD_IO`
for what x86 does not have (uncached stores and reads, AXI-Lite round trips): estimates from the
architecture, not measured on a board. Nothing here is a board measurement.
"""
from __future__ import annotations

#: measured here: ``python benchmarks/bench_c_host.py --model resnet8_digits32 --assignment twohot
#: --calls 3000`` on this 2-core AMD EPYC at 2.6 GHz, shared with other jobs (medians; the
#: per-value figures the least-disturbed runs on 2**20 values)
X86 = {
    "python_call_us": 1.5,         # CHost.run(ints=False) of a uint8 image less its 3,072 lookups
    "quant_ns": {"float32": 1.0, "float64": 4.0, "uint8": 0.24, "float32 words": 0.45},
    "softmax_us": 4.2,             # netmode.finish on the C call's 10 values (the model: HOST_OPS["Softmax"])
    "softmax_c_ns": 1.0,           # the Softmax in the C call (hlsnn_in_softmax), per output value
    "softmax_c_bfp_ns": 5.0,       # a bfp_systolic network's (hlsnn_in_softmax_bfp: pairs, a table row), per value
    "source": "measured on this x86 (AMD EPYC 2.6 GHz, 2 cores shared) by benchmarks/bench_c_host.py "
              "--model resnet8_digits32 --assignment twohot --calls 3000: call_u8 less its lookups 1.8 us "
              "(call_f32 7.8 us, call_u8 2.5 us per 3,072-value image), rule input_quantize in C 2.0 / 4.0 / 0.24 ns per "
              "float32 / float64 / uint8 value, Softmax of the 10 values the C call dequantized 4.2 us (5.6 us "
              "with the second, Python dequantization the loader no longer runs; the Python rule input_quantize it "
              "replaces: 19.6 us); a bfp_systolic network (--assignment bfp8_z2): 3.2 us per call, i.e. 0.45 ns per value for "
              "its float32 words and their unpacking in C beyond the 1.8 us (numpy's unpacking it replaces: 15 us). "
              "Re-measured in one run with the loader's call (--assignment fixed8_z2 --calls 3000, load ~4.4 from "
              "other jobs): CHost.run(ints=False) of a uint8 image 2.26 us against 2.57 us with the integers "
              "copied out, so the python call 1.5 us (was 1.8); the Softmax of the 10 outputs in the C call "
              "(hlsnn_in_softmax, run(softmax=True) less run(), alternately) 0.01 us, 1 ns per value (the numpy "
              "Softmax it replaces: 4.2 us); rule input_quantize's float64 and uint8 figures are the earlier, less loaded "
              "run's (those loops unchanged). Rule input_quantize on float32 without data-dependent branches (netin.c q_f32): "
              "2.64 -> 1.27 ns per value side by side (old and new netin.c alternately, 196,608 digits32 values, "
              "nearest_away, built with CC='gcc -fno-tree-vectorize': scalar, as the boards' build without NEON "
              "runs it; x86's own build vectorizes it to 0.68 ns), so 2.0 x 1.27 / 2.64 = 1.0 ns. bfp8's Softmax in "
              "the C call (--assignment bfp8_z2 --calls 3000 / 5000, three runs: softmax_c 0.06, 0.06, 0.041 us "
              "for 10 values): 5 ns per value (the pairs' exponent check, the table row, the pairwise sum)",
}

_LOADER_RUN = ("OMP_NUM_THREADS=1 python benchmarks/bench_loader_host.py --hlsnn /tmp/hrep/*.hlsnn --calls 2000 "
               "(the 18 one-start models of docs/history/performance.md, side by side; medians of wall time)")

#: the loader's run path around the C call on this x86 (module docstring), measured by
#: ``benchmarks/bench_loader_host.py``: the input check where ``net.run`` makes a finiteness pass
#: of its own (a network with a prefix, :func:`counts_in_c`), ``(fixed
#: us, ns per value)`` by the image's dtype as the C host path takes it (fitted on 64 and 16,384
#: values; ``uint8 -> float64``: a ``bfp_systolic`` network's uint8 image, converted by
#: ``_check_input``), and the loader's own Python (``net.run`` less the check, the host ops, the
#: driver's C call and the simulated board's context, and the ops after: the median over the models)
LOADER = {
    "check": {"float32": (1.10, 0.068), "float64": (1.10, 0.116), "uint8 -> float64": (2.05, 0.212)},
    "loader_us": 1.52,
    "source": "measured on this x86 by " + _LOADER_RUN + ", load ~5 from other jobs: net.run's fast path "
              "(CompiledNet._run_c) checks an image's dtype and shape in its own Python, and the C call counts "
              "the non-finite values in its rule input_quantize pass; a network with a prefix gets a finiteness pass (bfp "
              "words got one when this was measured; their C pass now counts them), "
              "np.isfinite(x).all(), 1.10 us + 0.068 ns per float32 value (float64 1.10 us + 0.116 ns; a "
              "bfp_systolic network's uint8 converted to float64 by _check_input 2.05 us + 0.212 ns); the "
              "loader's own Python 1.52 us (NetBoard.run_image's lines around the C call now counted in it; "
              "median over the 18 models of net.run less its timed parts: 1.15-1.86 "
              "us; 3.3 and 10.4 us for h_jet_bnin, whose prefix and the steps after it cost more inside net.run "
              "than timed alone). Before the fast path (same script, the general path): check 1.49 us + 0.071 ns "
              "per float32 value on every image, loader's Python 3.84 us",
}

#: host ops on this x86: ``(fixed us, ns per element)`` of :func:`hlsnn.deploy.run.hostops.run`,
#: fitted on 64 and 16,384 float64 elements (``bfp patches``: ``netprefix.bfp_patches``, one
#: patch per image), measured by ``benchmarks/bench_loader_host.py`` (re-measured with the
#: loader's fast path, the ops' code unchanged: within 3% of these; kept). BatchNormalization
#: re-fitted after ``hostops.bn_terms`` kept its terms per layer (4.29 us + 0.825 ns before): the
#: medians of ``OMP_NUM_THREADS=1 python benchmarks/bench_loader_host.py --ops-only --rounds 3``
#: (2,000 calls, other jobs' load ~1.9 CPUs), 2.96 / 3.11 / 3.10 us + 0.839 / 0.834 / 0.844 ns; the
#: other five in the same rounds -1 to +2% of their fixed costs here and +3 to +7% per element (kept)
HOST_OPS = {
    "BatchNormalization": (3.10, 0.839),
    "LayerNormalization": (10.7, 1.37),
    "AddConst": (0.93, 0.094),
    "Relu": (1.03, 0.44),
    "Sigmoid": (2.21, 0.99),
    "Softmax": (4.50, 1.38),
    "bfp patches": (25.8, 8.94),
}
#: an op kind not timed: the median of the timed ops' fixed costs and per-element costs (an
#: assumption; 3.10 us + 0.99 ns, 4.29 + 0.99 before BatchNormalization's re-fit). A rule, not a
#: constant of its own: the kinds not timed that the same rounds measure (the benchmark's
#: ``UNTIMED``: Scale 0.86 us + 0.25 ns, Tanh 0.51 + 0.74, Clip 1.70 + 0.72, GlobalAveragePool
#: 3.79 + 0.15) lie below it but for GlobalAveragePool's fixed cost
HOST_OP_OTHER = "median of the timed ops"

#: x86 -> board CPU factors: ``python`` for interpreted Python and numpy calls, ``c`` for the C
#: loops; both estimates
SCALE = {
    "x86-this-machine": {"python": 1.0, "c": 1.0, "source": "measured here"},
    "cortex-a9-650": {
        "python": 10.0, "c": 12.0,
        "source": "estimate. python x 10: the factor of hlsnn.network.latency.CPUS (CoreMark per core ~2.5/MHz x "
                  "650 MHz ~ 1,600 vs ~15,000-25,000 for a current x86 core; published ctypes call costs: 1.37 us "
                  "on a 2.33 GHz Core Duo (tungwaiyip.info/blog/2009/07/16/ctype_performance_benchmark), 0.15-0.39 "
                  "us on 2019-2023 x86 desktops (interoptopus FFI benchmarks)); c x 12: the clock ratio 2.6 GHz / "
                  "650 MHz = 4 times an IPC ratio of ~3 (a 4-wide out-of-order x86 core against the 2-wide "
                  "Cortex-A9 with its VFPv3, on scalar code; the native helpers build without NEON). Not measured "
                  "on a board"},
    "cortex-a53-1200": {
        "python": 4.0, "c": 5.0,
        "source": "estimate: python x 4 as hlsnn.network.latency.CPUS; c x 5: clock ratio 2.6 / 1.2 GHz ~ 2.2 "
                  "times an IPC ratio of ~2.3 (2-wide in-order Cortex-A53). Not measured"},
}

#: what the board's memory system adds (estimates from the architecture, not measured)
BOARD_IO = {
    "x86-this-machine": {"store_ns_per_byte": 0.0, "mmio_write_us": 0.0, "mmio_read_us": 0.0,
                         "uncached_read_us": 0.0, "sim_io_us": 0.52, "sim_context_us": 2.52,
                         "source": "the sim board, measured by " + _LOADER_RUN + ": the C call's callbacks into "
                                   "its register file and syncs 0.52 us (the driver's time less the same call "
                                   "against the null register file), its device context and lock 2.52 us "
                                   "(medians over the models); not on a board"},
    "cortex-a9-650": {
        "store_ns_per_byte": 2.0, "mmio_write_us": 0.1, "mmio_read_us": 0.3, "uncached_read_us": 0.15,
        "source": "estimate. Input stores: the Cortex-A9 merges stores to Normal non-cacheable memory in its "
                  "store buffer; 2 ns per byte (~500 MB/s into DDR3 through the L2 controller). ap_start: one posted "
                  "32-bit write through M_AXI_GP0, ~0.1 us; the last poll: one AXI-Lite read round trip to the "
                  "PL at 100-150 MHz, ~40 PL cycles, ~0.3 us (UG585 ch. 5: the GP ports cross into the PL clock "
                  "domain). Output bytes: one uncached DDR read each, ~0.15 us (DDR3 latency plus the "
                  "interconnect). Not measured on a board"},
    "cortex-a53-1200": {
        "store_ns_per_byte": 1.0, "mmio_write_us": 0.1, "mmio_read_us": 0.25, "uncached_read_us": 0.12,
        "source": "estimate: as cortex-a9-650 with DDR4 and the faster interconnect of Zynq UltraScale+ "
                  "(UG1085). Not measured"},
}

DTYPES = ("float32", "float64", "uint8")


def stored_dtype(input_dtype, words=False):
    """The dtype the C call sees through ``net.run`` for images of ``input_dtype``: the image as
    stored, but a ``bfp_systolic`` network's (``words``) uint8 image as float64
    (:meth:`hlsnn.network.loader.CompiledNet._check_input`)."""
    return "float64" if words and input_dtype == "uint8" else input_dtype


def host_steps(cpu, *, n_in, n_out, batch, input_dtype="float32", words=False, lane_bytes=1, via_loader=False):
    """The host steps of one start (module docstring) on ``cpu`` (a key of :data:`SCALE`):
    ``[{"step", "us", "basis"}]``, where basis says what is measured and what is estimated.
    ``words``: a ``bfp_systolic`` network, whose input is float32 words (4 bytes a value) and
    whose ``n_out`` outputs are 64-bit words (one uncached read each). ``lane_bytes``: the
    bytes of an input value's lane (2: activations of more than 8 bits, one uncached read of
    each output lane as of a byte). ``via_loader``: the start made by ``net.run``, whose input
    check hands the C call the image as :func:`stored_dtype` says (:func:`loader_steps`)."""
    if input_dtype not in DTYPES:
        from ..errors import InputError
        raise InputError(f"input dtype {input_dtype!r}: the C host path takes {', '.join(DTYPES)}")
    s, io = SCALE[cpu], BOARD_IO[cpu]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    nv, nb = n_in * batch, n_out * batch
    if via_loader:
        input_dtype = stored_dtype(input_dtype, words)
    if words:
        return [
            {"step": "python call", "us": X86["python_call_us"] * s["python"],
             "basis": f"{ests}: {X86['python_call_us']} us on x86 x {s['python']:g}"},
            {"step": "quantize (float32 words, C)", "us": X86["quant_ns"]["float32 words"] * nv * s["c"] / 1e3,
             "basis": f"{ests}: {nv:,} values x {X86['quant_ns']['float32 words']} ns on x86 x {s['c']:g}"},
            {"step": "input stores (uncached)", "us": io["store_ns_per_byte"] * 4 * nv / 1e3,
             "basis": f"estimate: {4 * nv:,} bytes x {io['store_ns_per_byte']} ns"},
            {"step": "ap_start and the last poll", "us": io["mmio_write_us"] + io["mmio_read_us"],
             "basis": "estimate: one register write, one read (the counts are tested on the sim board)"},
            {"step": "outputs read once (C)", "us": io["uncached_read_us"] * nb,
             "basis": f"estimate: {nb} uncached 64-bit word reads"},
        ]
    return [
        {"step": "python call", "us": X86["python_call_us"] * s["python"],
         "basis": f"{ests}: {X86['python_call_us']} us on x86 x {s['python']:g}"},
        {"step": f"quantize ({input_dtype}, C)", "us": X86["quant_ns"][input_dtype] * nv * s["c"] / 1e3,
         "basis": f"{ests}: {nv:,} values x {X86['quant_ns'][input_dtype]} ns on x86 x {s['c']:g}"},
        {"step": "input stores (uncached)", "us": io["store_ns_per_byte"] * lane_bytes * nv / 1e3,
         "basis": f"estimate: {lane_bytes * nv:,} bytes x {io['store_ns_per_byte']} ns"},
        {"step": "ap_start and the last poll", "us": io["mmio_write_us"] + io["mmio_read_us"],
         "basis": "estimate: one register write, one read (the counts are tested on the sim board)"},
        {"step": "outputs read once (C)", "us": io["uncached_read_us"] * nb,
         "basis": f"estimate: {nb} uncached {'byte' if lane_bytes == 1 else '16-bit'} reads"},
    ]


def op_cost_x86(op):
    """``(fixed us, ns per element)`` of host op ``op`` on this x86 (:data:`HOST_OPS`; an op
    kind not timed there: the medians of the timed ops', :data:`HOST_OP_OTHER`)."""
    if op in HOST_OPS:
        return HOST_OPS[op]
    timed = [v for k, v in HOST_OPS.items() if k != "bfp patches"]
    return (sorted(f for f, _ in timed)[len(timed) // 2], sorted(n for _, n in timed)[len(timed) // 2])


#: ``--host-fallback`` recurrent nodes run by onnx's reference evaluator (:func:`hlsnn.deploy.run.hostops._fallback`):
#: ``(fixed us, us per time step, us per time step of each further sequence)`` on this x86: the fixed
#: cost of one run of the node (the evaluator is built once per layer, :func:`hlsnn.deploy.run.hostops.fallback_session`;
#: rebuilt on every call, as before 2026-11-27, the same benchmark gave 157.0 / 120.9 us), the cost of each step of one
#: sequence (the reference's Python loop over the sequence; the step's products are tiny next to it),
#: and what each further sequence adds to a step when one run covers several (the step's numpy on a
#: larger batch). Measured by ``OMP_NUM_THREADS=1 python benchmarks/bench_loader_host.py --fallback``
#: (input 16, hidden 32; 4 and 32 steps of one sequence; 1 and 32 sequences in one run of 32 steps;
#: medians of 60 calls, two runs averaged, other jobs' load 3-4 on 2 cores; the first fit, 157.6 + 36.9 /
#: 143.9 + 40.1 us per step, was at load 10-13): a host-fallback estimate, +-20 %, not one of the timed host ops.
FALLBACK_RNN = {"GRU": (50.1, 23.7, 1.98), "LSTM": (35.2, 26.4, 1.96)}


def fallback_us(cpu, node, consts, in_elems, batch, *, per_sample=True):
    """A ``--host-fallback`` node (``node``: its ONNX NodeProto; ``consts``: its constant inputs;
    ``in_elems``: its first input's elements per sample) on ``cpu``: ``{"us", "basis"}``. A GRU or LSTM
    of ``steps`` = ``in_elems`` / the input size (the last axis of ``W``) x directions, with
    :data:`FALLBACK_RNN`'s ``fixed, per, slope``: ``per_sample`` (the importer runs the node on each
    sample: a file whose shapes are fixed at batch 1, the layer's ``attrs["sw"]``)
    ``batch x (fixed + steps x per)``; else one run covering the batch,
    ``fixed + steps x (per + slope x (batch - 1))``; times the CPU's Python factor. Any other node:
    None (the caller's generic host op, a lower bound)."""
    if node.op_type not in FALLBACK_RNN or node.domain or len(node.input) < 2 or node.input[1] not in consts:
        return None
    w = getattr(consts[node.input[1]], "shape", ())
    if len(w) != 3 or not w[2]:
        return None
    steps = int(in_elems) // int(w[2]) * int(w[0])
    fixed, per, slope = FALLBACK_RNN[node.op_type]
    s = SCALE[cpu]["python"]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    if per_sample:
        us = batch * (fixed + steps * per)
        how = f"{batch} x ({fixed} us + {steps} steps x {per} us) (one run a sample)"
    else:
        us = fixed + steps * (per + slope * (batch - 1))
        how = f"{fixed} us + {steps} steps x ({per} + {batch - 1} x {slope}) us (one run for the batch)"
    return {"us": us * s,
            "basis": f"host-fallback estimate ({ests}): onnx's reference {node.op_type}, {how} on x86 x {s:g}; "
                     f"benchmarks/bench_loader_host.py --fallback"}


def op_us(cpu, op, elements):
    """Host op ``op`` (or ``"bfp patches"``) on ``elements`` float64 values on ``cpu``:
    ``{"us", "basis"}``, the x86 figure times the CPU's Python factor."""
    fixed, ns = op_cost_x86(op)
    s = SCALE[cpu]["python"]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    how = "" if op in HOST_OPS else f" (not timed: {HOST_OP_OTHER}'s)"
    return {"us": (fixed + ns * elements / 1e3) * s,
            "basis": f"{ests}: {fixed} us + {elements:,} elements x {ns} ns on x86{how} x {s:g}; "
                     f"benchmarks/bench_loader_host.py"}


def softmax_c_us(cpu, n_out, bfp=False):
    """The Softmax of ``n_out`` output values in the C call (``hlsnn_in_softmax``, or with ``bfp``
    a ``bfp_systolic`` network's ``hlsnn_in_softmax_bfp``: a network
    :func:`hlsnn.network.nethost.softmax_rule` accepts): ``{"us", "basis"}``, the x86 figure per
    value times the CPU's C factor."""
    s = SCALE[cpu]["c"]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    ns = X86["softmax_c_bfp_ns" if bfp else "softmax_c_ns"]
    return {"us": ns * n_out * s / 1e3,
            "basis": f"{ests}: {n_out:,} values x {ns} ns in C on x86 x {s:g}; "
                     f"benchmarks/bench_c_host.py softmax_c{' (--assignment bfp8_z2)' if bfp else ''}"}


def counts_in_c(words=False, prefix=False):
    """True when the C call counts the image's non-finite values in its rule input_quantize pass, so that
    ``net.run`` makes no finiteness pass of its own: no prefix (whose ops would change the
    values first; :meth:`hlsnn.network.loader.CompiledNet._c_setup`). ``bfp_systolic`` words
    too: their pass (netin.c ``f32_words``) counts a value that is not finite or not exact in
    float32, and the refusal tells the two apart (:meth:`hlsnn.network.nethost.CHost._finish`)."""
    return not prefix


def loader_steps(cpu, *, n_in, batch, input_dtype="float32", words=False, prefix=False):
    """The loader's steps of one start around the C call (module docstring) on ``cpu``:
    ``[{"step", "us", "basis"}]``: the input check and the loader's own Python, and on the
    simulated board (``x86-this-machine``) its device context and register callbacks.
    ``words``: a ``bfp_systolic`` network (:func:`stored_dtype`); ``prefix``: host ops before
    the start (then, as for words, ``net.run`` makes its own finiteness pass: :func:`counts_in_c`)."""
    s, io = SCALE[cpu]["python"], BOARD_IO[cpu]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    nv = n_in * batch
    seen = stored_dtype(input_dtype, words)
    key = input_dtype if seen == input_dtype else f"{input_dtype} -> {seen}"
    if key == "uint8":
        check = {"step": "input check (uint8)", "us": 0.0,
                 "basis": f"{ests}: none of its own: dtype and shape only (in the loader's Python); uint8 values "
                          f"are finite"}
    elif key in ("float32", "float64") and counts_in_c(words, prefix):
        check = {"step": f"input check ({key})", "us": 0.0,
                 "basis": f"{ests}: none of its own: dtype and shape only (in the loader's Python); the "
                          f"non-finite values are counted by the C call in its rule input_quantize pass (in its quantize step)"}
    else:
        fixed, ns = LOADER["check"][key]
        check = {"step": f"input check ({key})", "us": (fixed + ns * nv / 1e3) * s,
                 "basis": f"{ests}: {fixed} us + {nv:,} values x {ns} ns on x86 x {s:g}"}
    steps = [
        check,
        {"step": "loader's Python", "us": LOADER["loader_us"] * s,
         "basis": f"{ests}: {LOADER['loader_us']} us on x86 x {s:g}"},
    ]
    if io.get("sim_context_us") or io.get("sim_io_us"):
        steps.append({"step": "sim board: context, registers", "us": io["sim_context_us"] + io["sim_io_us"],
                      "basis": f"measured: {io['sim_context_us']} us + {io['sim_io_us']} us (the simulated "
                               f"board's; not on a board)"})
    return steps


def pipelined_us_per_image(host_us, fabric_us, batch):
    """Double-buffered starts of one image each (the host's work on image i+1 while the kernel
    runs image i), ``host_us`` and ``fabric_us`` per image: over ``batch`` images ``(host +
    fabric + (batch - 1) * max(host, fabric)) / batch`` per image; ``max(host, fabric)`` in the
    steady state."""
    return (host_us + fabric_us + (batch - 1) * max(host_us, fabric_us)) / batch
