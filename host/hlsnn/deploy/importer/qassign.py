"""How a deployment runs a quantized file's layers (:mod:`hlsnn.deploy.importer.qimport`'s second half,
reached as ``qimport.for_assignment`` and ``qimport.pin``): per engine layer, the file's mapping
(:func:`hlsnn.deploy.importer.qimport.layer_mapping`) narrowed to the layer's format, and the file's radix
points pinned in the layers that run it exactly."""
from __future__ import annotations

import numpy as np


def _shift_codes(w):
    """"pot" when every weight is 0 or a signed power of two, "twohot" when every one is a sum of at
    most two, else None (a property of the values; the shift formats still choose their own codes)."""
    a = np.abs(np.asarray(w, np.float64)).reshape(-1)
    a = a[a > 0]
    if not a.size:
        return "pot"
    m, _ = np.frexp(a)
    if np.all(m == 0.5):
        return "pot"
    lead = np.ldexp(0.5, np.frexp(a)[1])          # the largest power of two <= a
    rest = a - lead
    mr, _ = np.frexp(rest[rest > 0])
    return "twohot" if np.all(mr == 0.5) else None


def _int8_layer(ex):
    """``ex`` runs a ``fixed`` or ``sparse`` format (a :class:`~hlsnn.deploy.run.executors.SparseExec`,
    :data:`~hlsnn.deploy.run.executors.EXECS`): int8 on ``sparse_cluster``."""
    return ex.fmt.type in ("fixed", "sparse")


def _shift_layer(ex):
    """``ex`` runs a ``pot`` or ``twohot`` format of one weight term (a
    :class:`~hlsnn.deploy.run.executors.ShiftExec` on ``shift_mac``)."""
    return ex.fmt.type in ("pot", "twohot") and getattr(ex.fmt, "weight_terms", 1) == 1 and hasattr(ex, "wq")


def _shift_exact(ex, e):
    """Why the shift layer ``ex`` does not run the file's integers (a list, empty when it does): its
    codes' values are the file's weights exactly, one scale per tensor, 8-bit signed activations,
    and the file's bias on the accumulator's unit at the codes' radix (``F_x + F_w``)."""
    from ..run.groups import gemm_weight
    why = []
    w2 = gemm_weight(ex.layer, ex.gp)
    err = float(np.abs(ex.wq.dequantize().reshape(w2.shape) - w2).max(initial=0.0))
    if err:
        fit = getattr(ex.fmt, "weight_fit", "nearest")
        why.append(f"format {ex.fmt.name} ({ex.fmt.type}) does not hold the file's weights (error <= {err:.3g}"
                   + (f"; its weight_fit {fit} refits them: weight_fit: nearest keeps the file's where its codes "
                      "hold them)" if fit != "nearest" else ")"))
    if np.ndim(ex.f_w) or ex.bits != 8 or not ex.signed:
        why.append(f"format {ex.fmt.name}: per-channel scales or activations other than int8")
    elif e.get("f_in") is not None:
        acc = np.ldexp(np.asarray(ex.layer.b, np.float64), e["f_in"] + int(ex.f_w))
        if not np.array_equal(acc, np.rint(acc)):
            why.append(f"the bias is not on the codes' accumulator unit 2^-{e['f_in'] + int(ex.f_w)}")
    return why


def for_assignment(mapping, dep, recalibrate=False):
    """Per engine layer of the deployment ``dep``, how the file's quantization ran: ``mapping``
    (:func:`layer_mapping`) narrowed to the layer's format. A layer is **exact** when the file's
    mapping is exact, its format is ``fixed`` or an unpruned ``sparse`` (int8 on ``sparse_cluster``),
    or ``pot``/``twohot`` on ``shift_mac`` whose codes hold the file's weights exactly (say binary or
    2-bit weights at a power-of-two scale; :func:`_shift_exact`), the kernel and the deployment both
    round half to even (as ``QuantizeLinear`` does) and ``recalibrate`` is off; those layers' radix
    points are then set to the file's (:func:`pin`). Every other layer is **approximated**, with the
    reason; ``weight_max_abs_error`` is the largest difference between the file's dequantized weights
    and the weights the layer ran (``fixed``/``sparse``; None for the others)."""
    out, exact = {}, []
    for name, ex in dep.execs.items():
        e = dict(mapping.get(name) or {"mapping": "approximated", "why": "not quantized in the file",
                                       "weights": "float", "input": "float", "output": "float"})
        why = [e["why"]] if e["why"] else []
        fmt = ex.fmt
        shift = _shift_layer(ex)
        if shift:
            why += _shift_exact(ex, e)
        if not _int8_layer(ex) and not shift:
            why.append(f"format {fmt.name} ({fmt.type}) quantizes by its own rule")
            codes = _shift_codes(ex.layer.w)
            if codes and fmt.type in ("twohot", "pot") and (codes == "pot" or fmt.type == "twohot"):
                why.append(f"the file's weights are all {codes} values")
        else:
            if getattr(fmt, "prune", 0):
                why.append(f"format {fmt.name} prunes {fmt.prune:g} of the weights")
            if ex.p.get("rounding") != "nearest_even" or dep.rounding != "nearest_even":
                why.append(f"rounding {dep.rounding} (deployment) / {ex.p.get('rounding')} (kernel); QuantizeLinear "
                           "rounds half to even: set `rounding: nearest_even`")
            if recalibrate:
                why.append("--recalibrate: radix points calibrated, not the file's")
            elif dep.dynamic:
                why.append("dynamic calibration: radix points re-chosen on every batch")
            if not shift:
                f_w = np.asarray(ex.f_w).reshape((-1,) + (1,) * (ex.w_taps.ndim - 1))
                deployed = np.ldexp(ex.w_taps.astype(np.float64), -f_w).reshape(ex.layer.w.shape)
                e["weight_max_abs_error"] = float(np.abs(deployed - ex.layer.w).max(initial=0.0))
        if not _int8_layer(ex):
            e["weight_max_abs_error"] = None
        e["mapping"] = "approximated" if why else "exact"
        e["why"] = "; ".join(why)
        e["format"] = fmt.name
        if not why:
            exact.append(name)
        out[name] = e
    pin(dep, {n: out[n] for n in exact})
    return out


def pin(dep, mapping):

    """Fix the radix points of ``dep``'s exactly mapped layers (``fixed``/``sparse``, shift) to the file's
    (after :meth:`~hlsnn.deploy.run.runner.Deployment.calibrate`, which set the others): each such
    layer's output radix ``F_out`` and, where its input arrives as float (the network input, a
    sum), its input radix ``F_x``. Returns the names of the layers pinned."""
    pinned = []
    for name, ex in dep.execs.items():
        e = mapping.get(name)
        if not e or e["mapping"] != "exact" or not (_int8_layer(ex) or _shift_layer(ex)):
            continue
        ex.f_out = e["f_out"]
        ex.stats.f_out = e["f_out"]
        ex.f_x = e["f_in"]
        pinned.append(name)
    dep._fastnet = None           # a compiled program reads the radix points as they are
    return pinned
