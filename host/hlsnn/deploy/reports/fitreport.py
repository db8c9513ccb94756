"""What the output-layer rules of a regression deployment did, for ``hlsnn deploy``.

Two rules act on the layers giving the network's output (:mod:`hlsnn.deploy.quantize.outputs`), each
deciding per layer on the calibration images; :func:`entry` reports the decision and its
figures in an assignment's result (``hlsnn deploy --json``, the text table, the HTML report):

- ``output_fit`` (``weight_fit: network``, :mod:`hlsnn.deploy.quantize.outfit`): per refitted-or-not
  layer ``kept`` (whether the refitted weights replaced the layer's), ``error_before`` and
  ``error_after`` (the layer's output against the float network's on all calibration images,
  relative L2 norms; ``after == before`` where not kept), ``held_out_before`` and
  ``held_out_after`` (the same on the odd-numbered images, of the layer as it was and of the
  fit on the even-numbered ones: the fit is tried on all images only where after < before
  here) and ``why`` in words.
- ``input_terms`` (``input_terms: 2``, :mod:`hlsnn.deploy.quantize.twoin`): per layer that could take
  two terms (a conv giving the network's output in a format with ``input_terms: 2``) ``terms``
  (1 or 2, what runs), ``one_term_error`` (the part of the layer's output one term's rounding of
  its input carries, :func:`hlsnn.deploy.quantize.twoin.cost`; None where the layer was not a candidate),
  ``two_term_error`` (the same for what two terms leave) and ``why`` in words.
"""
from __future__ import annotations


def _r(v):
    return None if v is None else round(float(v), 6)


def output_fit(dep) -> dict:
    """``output_fit`` of the module docstring, ``{}`` where no layer has ``weight_fit: network``."""
    fits = getattr(dep, "output_fit", None) or {}
    held = getattr(dep, "output_fit_held_out", None) or {}
    out = {}
    for name, (before, after) in fits.items():
        hb, ha = held.get(name, (None, None))
        kept = after < before
        if kept:
            why = "the fit lowered the error on the held-out half and on all images"
        elif ha is not None and not ha < hb:
            why = "the fit on half of the images did not lower the error on the other half"
        else:
            why = "the fit on all images did not lower their error"
        out[name] = {"kept": bool(kept), "error_before": _r(before), "error_after": _r(after),
                     "held_out_before": _r(hb), "held_out_after": _r(ha), "why": why}
    return out


def input_terms(dep) -> dict:
    """``input_terms`` of the module docstring, ``{}`` where no layer could take two terms."""
    out = {}
    for name, ex in dep.execs.items():
        if getattr(ex, "in_terms", 1) != 2:
            continue
        two = bool(getattr(ex, "two", False))
        out[name] = {"terms": 2 if two else 1, "one_term_error": _r(getattr(ex, "two_cost", None)),
                     "two_term_error": _r(getattr(ex, "two_rest", None)) if two else None,
                     "why": getattr(ex, "two_why", None) or "not decided (the layer has not calibrated)"}
    return out


def entry(dep) -> dict:
    """The keys of an assignment's result: ``output_fit`` and ``input_terms`` where not empty."""
    got = {"output_fit": output_fit(dep), "input_terms": input_terms(dep)}
    return {k: v for k, v in got.items() if v}


def lines(e, pad="  " + " " * 14) -> list:
    """The text report's lines of an assignment's result ``e`` (its ``output_fit``, ``input_terms``)."""
    out = []
    for ln, v in (e.get("output_fit") or {}).items():
        out.append(f"{pad} weight_fit network, {ln}: {'kept' if v['kept'] else 'rejected'}, error "
                   f"{100 * v['error_before']:.2f} -> {100 * v['error_after']:.2f} % on the calibration images"
                   + ("" if v["held_out_before"] is None else
                      f" (held-out half {100 * v['held_out_before']:.2f} -> {100 * v['held_out_after']:.2f} %)")
                   + ("" if v["kept"] else f": {v['why']}"))
    for ln, v in (e.get("input_terms") or {}).items():
        err = ""
        if v["one_term_error"] is not None:
            err = f", input rounding {100 * v['one_term_error']:.2f} %" + (
                "" if v["two_term_error"] is None else f" -> {100 * v['two_term_error']:.4f} %") + " of the output"
        out.append(f"{pad} input_terms 2, {ln}: {v['terms']} term(s){err} ({v['why']})")
    return out
