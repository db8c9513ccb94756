"""How a deployment's fixed-point engine layers update their output radix point (source
002): ``calibration.update`` of the deployment config, ``--radix-update`` of ``hlsnn deploy``
and ``hlsnn report``.

``e1`` (the default)
    The preceding operation runs the layer on the whole batch with the statistics unit on,
    DETERMINE picks ``F_out``, the main operation runs the whole batch again
    (:meth:`hlsnn.deploy.run.executors._Exec._two_pass`).
``e5``
    Source 002's E5 (Alg 2-E, :func:`hlsnn.formats.radix_update.select_e5`): every layer is updated
    either by two operations on a sample (E2) or by saving results (E4), whichever the cycle
    model says is faster. The sample is ``calibration.percent`` % of the batch's images, at
    equal intervals (:func:`hlsnn.formats.radix_update.sample_mask` along the image axis: image
    ``i`` is sampled iff ``i % b < a``).

    * **E2**: the preceding operation runs the sampled images (statistics on), DETERMINE
      picks ``F_out`` from their histogram, the main operation runs every image.
    * **E4**: the preceding operation runs the sampled images in the kernel's raw mode: the
      kernel streams out the wide results (``FLAG_RAW``: ``sparse_cluster``'s int32
      accumulators plus bias and ReLU; ``shift_mac``'s accumulators plus bias, saturated to
      ``acc_bits``, after ReLU, as int32 or int64, ``Kernel.gemm_int(raw=True)``) and its
      statistics unit counts them, the same histogram as the requantizing call's; DETERMINE
      picks ``F_out``; the stored wide results are converted by the kernel's output rule
      (:func:`_convert`: ``shift_round_sat`` with the config's rounding, saturating to the
      signed output format, or for unsigned ``shift_mac`` activations to ``bits + 1`` signed
      bits with negatives then 0: ``sparse_cluster.emulator`` rule 5,
      ``shift_mac.emulator.output_rule``) and the main operation runs only the other images.
      Both engines' fixed-point layers can take E4.
    * For the same sample and DETERMINE, E2 and E4 give the same bits (SPECS T2.6); the
      runner checks that whenever it runs both.
    * **Iterations 1..A** are the calibration batch (A = 1; in ``dynamic`` mode also any
      batch before it): every layer runs both methods (E2 only where E4 is not available:
      an engine without a raw mode, ``WIDE_OUT = False``) and its modelled times are
      recorded. At the end of the calibration run the choice is
      made, per layer or (``calibration.update_by: op_type``) per operation type (the layer
      kind, ``conv`` or ``dense``; layers without E4 are left out of their type's means).
      Later updates (every batch in ``dynamic`` mode) run the chosen method only.

    BFP layers choose their output exponent in the kernel and host layers their radix
    points on the host, so E5 does not concern them.

Modelled times (:func:`modelled_times`), per layer and per calibration batch, in µs at the
accelerator config's clock: cycles from :func:`hlsnn.measure.layers.layer_cycles` (the cycle
model of ``hlsnn perf`` and the deploy report, for the runner's kernel calls, at the
measured weight sparsity and input density) and the fig. 15 timing model
(:func:`hlsnn.formats.radix_update.cost_model`):

* ``t_prev``: the main operation on the whole batch;
* ``t_pre``: the preceding operation on the whole batch. The statistics unit sits in the
  output stage, so the model costs it like the main operation (the histogram's few beats
  are left out);
* ``t_store``: E3, the operation with its wide results saved: ``t_prev`` plus streaming
  the wide results out and back in, ``2 * ceil(outputs * wide_bytes / (stream_bits / 8))``
  cycles, one beat of ``stream_bits`` per cycle on the config's AXI stream (the cycle
  model's stream rule), ``wide_bytes`` the width of a raw output as the kernel streams it
  (``_Exec.wide_bits / 8``: 4 on ``sparse_cluster``; on ``shift_mac`` ``spec.raw_bits / 8``,
  4 when ``acc_bits <= 32``, else 8, as for the shipped configs' 42- and 44-bit
  accumulators);
* ``N`` = the sampled fraction of the batch's images; then E2 = ``N*t_pre + t_prev`` and
  E4 = ``N*t_store + (1-N)*t_prev`` = ``t_prev + N * (wide streaming)``: E4 wins where
  streaming the wide results out and in costs less than recomputing the operation.
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from ...errors import HlsnnError, InputError
from ...formats import fixed, radix_update

UPDATES = ("e1", "e5")
UPDATE_BY = ("layer", "op_type")
#: the sample of E2/E4 when a deployment does not set one (SPECS T2.5: E5 assumes 20 %)
DEFAULT_PERCENT = 20.0

#: the layer and phase whose kernel calls run now (:func:`phase`): ``(layer name, phase)`` or None
_PHASE = contextvars.ContextVar("hlsnn_update_phase", default=None)
#: the phases of a radix update, as the kernels' calls and the timelines of
#: :mod:`hlsnn.seed002` name them
PHASES = ("preceding", "determine", "quantize", "main")


@contextlib.contextmanager
def phase(ex, name):
    """The kernel calls in the block are layer ``ex``'s ``name`` (one of :data:`PHASES`): a
    circuit group (:class:`hlsnn.seed002.circuits.CircuitGroup`) sends them to the circuits
    its layout gives that phase and records their cycles; elsewhere nothing changes."""
    token = _PHASE.set((ex.layer.name, name))
    try:
        yield
    finally:
        _PHASE.reset(token)


def current_phase():
    """``(layer name, phase)`` of the running kernel calls (:func:`phase`), or None."""
    return _PHASE.get()


def check(update, update_by, percent):
    """The update options, validated (:class:`InputError` naming the bad one)."""
    if update not in UPDATES:
        raise InputError(f"radix update = {update!r}: one of {', '.join(UPDATES)}")
    if update_by not in UPDATE_BY:
        raise InputError(f"radix update by = {update_by!r}: one of {', '.join(UPDATE_BY)}")
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 < percent <= 100:
        raise InputError(f"update percent = {percent!r}: a number in (0, 100]")
    return update, update_by, float(percent)


def modelled_times(ex, batch, in_hw, percent) -> dict:
    """The modelled times of updating layer ``ex`` (a :class:`~hlsnn.deploy.run.executors._Exec`) on
    a batch of ``batch`` images, ``percent`` % sampled (module docstring)."""
    from ...measure.layers import layer_cycles
    cfg = ex.acc.config
    r = layer_cycles(ex.layer, cfg, batch, fmt_type=ex.fmt.type, in_hw=in_hw,
                     weight_sparsity=ex.stats.weight_sparsity, input_density=ex.stats.input_density)
    wide_bytes = ex.wide_bits // 8
    move = -(-r["m"] * r["n"] * wide_bytes // (cfg.params["stream_bits"] // 8))
    t_prev = r["cycles"]
    us = [c / cfg.clock_mhz for c in (t_prev, t_prev, t_prev + 2 * move)]
    costs = radix_update.cost_model(*us, percent)
    return {"batch": int(batch), "percent": float(percent), "main_cycles": int(t_prev), "wide_stream_cycles": int(move),
            "wide_bytes": int(wide_bytes), "t_prev_us": us[0], "t_pre_us": us[1], "t_store_us": us[2],
            "e2_us": costs.e2, "e4_us": costs.e4}


def _convert(stored, shift, rounding, bits, signed=True):
    """The kernel's output rule on stored wide results (images first, channels on axis 1):
    ``(outputs, saturation flags)``. Signed outputs: ``shift_round_sat`` to ``bits``
    (``sparse_cluster.emulator`` rule 5, ``shift_mac.emulator.output_rule`` for signed
    activations); unsigned: to ``bits + 1`` signed bits, then negatives become 0 and count as
    saturated (``output_rule`` for unsigned activations; :func:`hlsnn.formats.fixed.convert_shifted`)."""
    s = np.asarray(shift, np.int64).reshape((1, -1) + (1,) * (stored.ndim - 2))
    return fixed.convert_shifted(stored, s, bits, rounding, signed)


def _same(layer, a, b):
    """E2 and E4 must agree bit for bit (same sample, same DETERMINE)."""
    (o2, f2, s2), (o4, f4, s4) = a, b
    if f2 != f4 or s2 != s4 or not np.array_equal(o2, o4):
        diff = np.argwhere(np.asarray(o2) != np.asarray(o4))
        where = f"first at index {tuple(int(i) for i in diff[0])}" if len(diff) else "same outputs"
        raise HlsnnError(f"layer {layer.name}: E2 and E4 disagree (F_out {f2} vs {f4}, saturated {s2} vs {s4}, "
                         f"{where}); they compute the same sample and must give the same bits")


def run(ex, call, f_in, f_vec, bits, signed, calibrate):
    """One update of layer ``ex`` under E5 (module docstring): both methods until the choice
    is made, then the chosen one. Returns the main outputs (images first) and records the
    modelled times in ``ex.stats.update`` when calibrating (or before any choice). A
    deployment with ``update_force`` (``"e2"`` or ``"e4"``, set by :mod:`hlsnn.seed002`) runs
    that method only, on the same sample."""
    deploy = ex.deploy
    shape = ex.in_shape
    n_images = shape[0]
    sample = radix_update.sample_mask((n_images,), deploy.update_percent)
    forced = getattr(deploy, "update_force", None)
    choice = None if calibrate else ex.update_choice
    methods = [forced] if forced else [choice] if choice else (["e2", "e4"] if ex.WIDE_OUT else ["e2"])
    if choice is None:
        in_hw = tuple(shape[-2:]) if ex.layer.kind == "conv" else None
        times = modelled_times(ex, n_images, in_hw, 100.0 * np.count_nonzero(sample) / n_images)
        ex.update_times = dict(times, sampled_images=int(np.count_nonzero(sample)), e4_available=ex.WIDE_OUT)
        ex.update_choice = None
    ex.update_ran = methods
    got = {}
    for m in methods:
        if m == "e2":
            with phase(ex, "preceding"):
                ex.preceding(call, f_vec, bits, signed, images=sample)
            with phase(ex, "main"):
                out, _, sat, _ = call(False, ex.shift_for(f_in, f_vec), None)
        else:
            with phase(ex, "preceding"):
                stored = ex.preceding(call, f_vec, bits, signed, images=sample, raw=True)
            shift = np.broadcast_to(np.asarray(ex.shift_for(f_in, f_vec), np.int64), (ex.n_out,))
            with phase(ex, "quantize"):
                conv_s, flags = _convert(stored, shift, ex.p["rounding"], bits, signed)
            sat = int(np.count_nonzero(flags))
            if sample.all():
                out = conv_s
            else:
                with phase(ex, "main"):
                    rest, _, s_rest, _ = call(False, shift, None, images=~sample)
                out = np.empty((n_images,) + rest.shape[1:], np.int64)
                out[sample], out[~sample] = conv_s, rest
                sat = (sat + s_rest) % (1 << 32)
        got[m] = (out, ex.f_out, int(sat))
    if len(got) == 2:
        _same(ex.layer, got["e2"], got["e4"])
    return got[methods[0]][0], got[methods[0]][2]


def choose(execs, update_by):
    """After iteration A (the calibration run): E5's choice for every layer that recorded
    modelled times, per layer or per operation type (:func:`hlsnn.formats.radix_update.select_e5`);
    layers without E4 take E2. Fills ``ex.update_choice`` and ``ex.stats.update``."""
    timed = {n: ex for n, ex in execs.items() if getattr(ex, "update_times", None)}
    both = {n: ex for n, ex in timed.items() if ex.WIDE_OUT}
    picks = {}
    if both:
        groups = {n: ex.layer.kind for n, ex in both.items()} if update_by == "op_type" else None
        picks = radix_update.select_e5({n: ex.update_times["e2_us"] for n, ex in both.items()},
                                {n: ex.update_times["e4_us"] for n, ex in both.items()}, groups=groups)
    for n, ex in timed.items():
        t = ex.update_times
        c = picks.get(n) or radix_update.Choice("e2", t["e2_us"], t["e4_us"])
        ex.update_choice = c.method
        ex.stats.update = dict(t, method=c.method, by=update_by if n in picks else "layer",
                               op_type=ex.layer.kind, compared_e2_us=c.e2, compared_e4_us=c.e4,
                               note="" if ex.WIDE_OUT else f"E4 not available: {ex.acc.config.engine} streams no "
                                                           f"wide results")
