"""Compare a target with the emulator, bit for bit, over an engine's seeded cases."""
from __future__ import annotations

import time

from .engines import ENGINES
from .runtime.make import make_target


def compare(cfg, target="csim", *, seed=0, n_random=8, verbose=False, target_obj=None):
    """Run every case of ``cfg``'s engine on ``target`` and on the emulator.

    Returns a report dict: per-case results, total outputs, total mismatches, the first
    mismatch (case, index, expected, got, raw hex), and whether all registers matched.
    """
    eng = ENGINES[cfg.engine]
    t0 = time.time()
    tgt = target_obj or make_target(target, cfg, eng, **({"verbose": verbose} if target in ("csim", "sim") else {}))
    t_setup = time.time() - t0
    results = []
    t1 = time.time()
    for case in eng.cases.make_cases(cfg, seed=seed, n_random=n_random):
        r = eng.cases.run_case(cfg, tgt, case)
        results.append(r)
        if verbose:
            status = "ok" if r["mismatches"] == 0 and r["registers_ok"] else "MISMATCH"
            print(f"  {r['case']:<24} shape={r['shape']!s:<20} {r['outputs']:>8} outputs  {status}")
    first = next(({"case": r["case"], **r["first"]} for r in results if r["first"]), None)
    bad_regs = [r["case"] for r in results if not r["registers_ok"]]
    lib = getattr(tgt, "lib", None)
    strict = lib.strict_totals if getattr(lib, "strict", False) else None
    return {
        "config": cfg.name, "engine": cfg.engine, "target": tgt.name, "seed": seed,
        "cases": len(results), "outputs": sum(r["outputs"] for r in results),
        "mismatches": sum(r["mismatches"] for r in results), "first_mismatch": first,
        "register_mismatches": bad_regs, "setup_s": round(t_setup, 3),
        "run_s": round(time.time() - t1, 3), "results": results,
        # the strict C-simulation's records over every case (csim and sim targets; None when
        # fast): fifos (name, depth, peak), raw (array, min_distance, required), banks (loop,
        # array, bank, sites, ports), operators (loop, mul, div, dsp); docs/strict-csim.md
        **({"strict": strict or {"fifos": [], "raw": [], "banks": [], "operators": []}}
           if getattr(lib, "strict", False) else {}),
    }


def format_report(rep) -> str:
    ok = rep["mismatches"] == 0 and not rep["register_mismatches"]
    lines = [f"{rep['config']} [{rep['engine']}] target={rep['target']} vs emulator: {rep['cases']} cases, "
             f"{rep['outputs']} outputs, {rep['mismatches']} mismatches"
             + ("" if not rep["register_mismatches"] else
                f", output registers differ in {', '.join(rep['register_mismatches'])}")]
    f = rep["first_mismatch"]
    if f:
        lines.append(f"  first mismatch: case {f['case']} index {tuple(f['index'])}: expected "
                     f"{f['expected']['value']!r} ({f['expected']['raw']}), got {f['got']['value']!r} "
                     f"({f['got']['raw']})")
    st = rep.get("strict")
    if st is not None:
        full = sum(f["peak"] >= f["depth"] for f in st["fifos"])
        lines.append(f"  strict C-simulation: {len(st['fifos'])} FIFOs bounded ({full} filled up at some point), "
                     f"{len(st['raw'])} dependence arrays, {len(st['banks'])} loop banks within their ports")
    lines.append(("PASS" if ok else "FAIL") + f" (setup {rep['setup_s']} s, run {rep['run_s']} s)")
    return "\n".join(lines)
