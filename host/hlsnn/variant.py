"""One variant of a sweep (:mod:`hlsnn.sweep`): its row (validation, the resource estimate and the modelled
GEMM, :func:`_row`) and its C-simulation against the emulator (:func:`_csim_one`); run here or on a
cluster worker (:mod:`hlsnn.cluster`)."""
from __future__ import annotations

import time

from .config import load_config
from .errors import ConfigError, HlsnnError


#: Resources reported and plotted, in order (the keys of every engine's estimate).
RESOURCES = ("dsp", "bram36", "uram", "lut", "ff")


def _csim_one(data, source, seed, n_random):
    """Worker: load one variant and compare its C-simulation with the emulator."""
    from .compare import compare
    t0 = time.time()
    try:
        cfg = load_config(data, source=source, check_fit=False)
        rep = compare(cfg, "csim", seed=seed, n_random=n_random)
    except HlsnnError as exc:
        return {"error": str(exc), "time_s": round(time.time() - t0, 3)}
    keep = ("cases", "outputs", "mismatches", "first_mismatch", "register_mismatches", "setup_s", "run_s")
    return {**{k: rep[k] for k in keep}, "time_s": round(time.time() - t0, 3)}


def _csim_ok(c) -> bool:
    return c is not None and "error" not in c and c["mismatches"] == 0 and not c["register_mismatches"]


def _check_csim_tools():
    from . import csim
    csim.compiler()
    csim.ap_types_dir()


def _row(v, csim: bool):
    """Validation and the resource estimate of one variant: its row (``csim`` None) and its
    Config (None when invalid). Runs here, or on a cluster worker (:mod:`hlsnn.cluster`)."""
    r = {"index": v["index"], "name": v["name"], "values": v["values"], "valid": False, "error": None,
         "resources": None, "utilization": None, "buffers": None, "multipliers": None, "throughput": None, "fits": None, "over_budget": [],
         "clock_mhz": None, "csim": None, "csim_skipped": None}
    try:
        cfg = load_config(v["data"], source=v["source"], check_fit=False)
    except ConfigError as exc:
        prefix = f"{v['source']}: "
        msg = str(exc)
        r["error"] = " ".join((msg[len(prefix):] if msg.startswith(prefix) else msg).split())
        r["csim_skipped"] = "invalid"
        return r, None
    est = cfg.estimates
    res = {k: est["resources"][k] for k in RESOURCES if k in est["resources"]}
    avail = cfg.board.resources
    over = [{"resource": k, "used": used, "available": avail.get(k, 0), "over": used - avail.get(k, 0)}
            for k, used in est["resources"].items() if used > avail.get(k, 0)]
    r.update(buffers=est.get("buffers", []), multipliers=est.get("multipliers", []))
    r.update(valid=True, resources=res, utilization={k: est["utilization"][k] for k in res},
             throughput=dict(est["throughput"]) if "throughput" in est else None, fits=not over,
             over_budget=over, clock_mhz=cfg.clock_mhz)
    from .perf.closed_form import reference_gemm    # the cycle model of hlsnn perf
    r["model"] = reference_gemm(cfg)
    if over:
        r["csim_skipped"] = "over budget"
    elif not csim:
        r["csim_skipped"] = "--no-csim"
    return r, cfg
