"""``hlsnn calibrate``: one calibration batch of a deployment by one of source 002's methods
E1-E4, E6-E9 on its circuits and boards (:mod:`hlsnn.seed002`; :mod:`hlsnn.cli` builds the
parser)."""
from __future__ import annotations

import json


def _methods(text):
    return [m.strip() for m in text.split(",") if m.strip()]


def cmd_calibrate(args):
    from ..errors import InputError
    from ..seed002 import calibrate, calibration_images, layout
    from ..seed002.timeline import format_timeline, plot_timelines
    methods = _methods(args.method)
    if not methods:
        raise InputError("--method: give one or more of " + ", ".join(layout.METHODS) + " (comma-separated)")
    for m in methods:
        layout.check_method(m)
    x = calibration_images(args.config, args.images)
    results, panels, out = {}, [], []
    for m in methods:
        r = calibrate(args.config, x, method=m, percent=args.percent, assignment=args.assignment, target=args.target,
                      cluster=args.cluster, circuits=args.circuits, low=args.low)
        results[m] = r
        panels.append((f"{m} modelled ({r.percent:g} %: {r.sampled} of {len(x)} images; {r.layout.describe()})",
                       r.timeline))
        if r.measured:
            panels.append((f"{m} measured on {args.target} (the cycles of each circuit's kernel calls; hatched: "
                           f"the model's, for what the host runs)", r.measured))
    same = {m: [o for o in results if results[o].same_bits(results[m])] for m in results}
    if args.plot:
        plot_timelines(panels, args.plot)
    if args.json:
        print(json.dumps({m: {"percent": r.percent, "sampled": r.sampled, "images": len(x), "points": r.points,
                              "input_points": r.inputs, "saturated": r.saturated, "layout": r.layout.describe(),
                              "summary": r.summary, "measured_summary": r.measured_summary,
                              "timeline": r.timeline, "measured": r.measured, "same_bits_as": same[m],
                              "workers": r.workers} for m, r in results.items()}, indent=2))
        return 0
    for m, r in results.items():
        s = r.summary
        out.append(f"{m}: {r.percent:g} % ({r.sampled} of {len(x)} images sampled); {r.layout.describe()}")
        out.append(f"  radix points {r.points}; saturated {r.saturated}")
        out.append(f"  modelled: end {s['end_us']:.1f} µs, main operations alone {s['main_alone_us']:.1f} µs, "
                   f"overhead {s['overhead_us']:.1f} µs (longest preceding operation {s['longest_preceding_us']:.1f} "
                   f"µs, {s['longest_preceding_layer']})")
        if r.measured_summary:
            s = r.measured_summary
            out.append(f"  measured: end {s['end_us']:.1f} µs, main operations alone {s['main_alone_us']:.1f} µs, "
                       f"overhead {s['overhead_us']:.1f} µs")
        if len(results) > 1:
            out.append(f"  same bits as: {', '.join(same[m])}")
        if args.timeline:
            out.append(format_timeline(r.timeline, "  modelled timeline"))
            if r.measured:
                out.append(format_timeline(r.measured, "  measured timeline"))
    if args.plot:
        out.append(f"timeline plot: {args.plot}")
    print("\n".join(out))
    return 0
