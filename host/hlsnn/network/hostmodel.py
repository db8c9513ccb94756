"""The host's modelled cost per kernel start of the network path with the C host
(:mod:`hlsnn.network.nethost`), step by step, with the source of every constant.

A start of a batch of ``B`` images of ``n`` input and ``m`` output values costs the host:

* ``python call``: the Python wrapper and the one ``ctypes`` call (:meth:`CHost.run`: the
  context check, two ``byref`` pointers, the result's copies);
* ``quantize``: rule 1 in C, per input value, by the image's dtype as the data set stores it
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

Constants: :data:`X86` measured on this machine by ``benchmarks/bench_c_host.py``; the boards'
figures are x86 figures times :data:`SCALE` (estimates, named as such), plus :data:`BOARD_IO`
for what x86 does not have (uncached stores and reads, AXI-Lite round trips): estimates from the
architecture, not measured on a board. Nothing here is a board measurement.
"""
from __future__ import annotations

#: measured here: ``python benchmarks/bench_c_host.py --model resnet8_digits32 --assignment twohot
#: --calls 3000`` on this 2-core AMD EPYC at 2.6 GHz, shared with other jobs (medians; the
#: per-value figures the least-disturbed runs on 2**20 values)
X86 = {
    "python_call_us": 1.8,         # CHost.run of a uint8 image less its 3,072 lookups
    "quant_ns": {"float32": 2.0, "float64": 4.0, "uint8": 0.24, "float32 words": 0.45},
    "softmax_us": 4.2,             # netmode.finish on the C call's 10 values: the numpy Softmax alone
    "source": "measured on this x86 (AMD EPYC 2.6 GHz, 2 cores shared) by benchmarks/bench_c_host.py "
              "--model resnet8_digits32 --assignment twohot --calls 3000: call_u8 less its lookups 1.8 us "
              "(call_f32 7.8 us, call_u8 2.5 us per 3,072-value image), rule 1 in C 2.0 / 4.0 / 0.24 ns per "
              "float32 / float64 / uint8 value, Softmax of the 10 values the C call dequantized 4.2 us (5.6 us "
              "with the second, Python dequantization the loader no longer runs; the Python rule 1 it "
              "replaces: 19.6 us); a bfp_systolic network (--assignment bfp8_z2): 3.2 us per call, i.e. 0.45 ns per value for "
              "its float32 words and their unpacking in C beyond the 1.8 us (numpy's unpacking it replaces: 15 us)",
}

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
                         "uncached_read_us": 0.0, "source": "the sim board: none beyond the measured call"},
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


def host_steps(cpu, *, n_in, n_out, batch, input_dtype="float32", words=False, lane_bytes=1):
    """The host steps of one start (module docstring) on ``cpu`` (a key of :data:`SCALE`):
    ``[{"step", "us", "basis"}]``, where basis says what is measured and what is estimated.
    ``words``: a ``bfp_systolic`` network, whose input is float32 words (4 bytes a value) and
    whose ``n_out`` outputs are 64-bit words (one uncached read each). ``lane_bytes``: the
    bytes of an input value's lane (2: activations of more than 8 bits, one uncached read of
    each output lane as of a byte)."""
    if input_dtype not in DTYPES:
        from ..errors import InputError
        raise InputError(f"input dtype {input_dtype!r}: the C host path takes {', '.join(DTYPES)}")
    s, io = SCALE[cpu], BOARD_IO[cpu]
    ests = "measured" if cpu == "x86-this-machine" else "estimate"
    nv, nb = n_in * batch, n_out * batch
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


def softmax_us(cpu):
    """The numpy Softmax of the logits on ``cpu`` (their values come dequantized from the C call)."""
    return X86["softmax_us"] * SCALE[cpu]["python"]


def pipelined_us_per_image(host_us, fabric_us, batch):
    """Double-buffered starts of one image each (the host's work on image i+1 while the kernel
    runs image i), ``host_us`` and ``fabric_us`` per image: over ``batch`` images ``(host +
    fabric + (batch - 1) * max(host, fabric)) / batch`` per image; ``max(host, fabric)`` in the
    steady state."""
    return (host_us + fabric_us + (batch - 1) * max(host_us, fabric_us)) / batch
