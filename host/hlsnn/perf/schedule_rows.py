"""What the schedule's rows (:mod:`hlsnn.perf.schedule`) give the cycle models and ``hlsnn perf``: each
loop's II by its counter, and the table of the loops above II 1; and a config's pipeline depths, the
recurrence of a carried dependence."""


def layer_depths(cfg):
    """``{loop: pipeline depth}`` of the config's engine page (the recurrence of a carried dependence)."""
    from .pages import PAGES
    page = PAGES[cfg.engine]
    try:
        return {lp.name: lp.depth for lp in page.loops(cfg.params) if lp.ii}
    except Exception:                          # noqa: BLE001 - a page whose loops need more than params
        return {}


def ii_of(rows) -> dict:
    """``{loop counter: II}`` of the rows whose derived II is above 1 (the name the cycle
    models count the loop by: its ``HLSNN_ITER`` counter, else its label)."""
    out = {}
    for r in rows:
        if r["ii"] > 1:
            for k in r.get("counters") or [r.get("counter") or r["loop"]]:
                out[k] = max(out.get(k, 1), r["ii"])
    return out


def format_table(rows, all_loops=False) -> str:
    rows = [r for r in rows if all_loops or r["ii"] > 1]
    if not rows:
        return "no pipelined loop above II 1"
    t = [("kernel", "loop", "II", "bound", "why")]
    for r in rows:
        notes = sorted(r["notes"], key=lambda n: "checked by" in n)    # what raises the II first
        t.append((r["kernel"], r["loop"], str(r["ii"]), r["bound"], "; ".join(notes)[:160]))
    w = [max(len(x[i]) for x in t) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w[i]) if i < 4 else c for i, c in enumerate(x)).rstrip() for x in t)
