#!/usr/bin/env python
"""Benchmark: what the loader's run path costs the host around the C call of a network start
(issue 52), the x86 source of :data:`hlsnn.network.hostmodel.LOADER`, :data:`~hlsnn.network.hostmodel.HOST_OPS`
and the simulated board's share in :data:`~hlsnn.network.hostmodel.BOARD_IO`.

``net.run(x)`` of a compiled model on the sim board (``hlsnn.load(path, target="sim")``, the C host
path of :mod:`hlsnn.network.nethost`, :meth:`CompiledNet._run_c`) runs, per start:

1. the input check: the dtype and shape of an ndarray the C call takes as stored (part 5), and a
   finiteness pass (``np.isfinite(x).all()``) only where the C call does not count the non-finite
   values itself: a network with a prefix or a ``bfp_systolic`` network (``finite``: fixed + per
   value, fitted on images of 64 and 16,384 values); any other input goes through
   ``_check_input`` (``uint8 -> float64``: a ``bfp_systolic`` network's uint8 image, converted);
2. the host ops on the float input before the start (:mod:`hlsnn.deploy.lower.netprefix`): each op's
   ``hlsnn.deploy.run.hostops.run`` (``ops``: fixed + per element, per op kind, fitted on 64 and
   16,384 elements), and for a ``bfp_systolic`` kernel its first layer's patches
   (``bfp_patches``: fixed + per element, one patch per image);
3. the C call (:meth:`CHost.run`; its Python and rule 1 measured by ``bench_c_host.py``), inside
   the simulated board's wrappers: ``sim_io`` (the C call's callbacks into the simulated board's
   register file and syncs: the driver's time less the same call against ``netin.c``'s null
   register file, ``null_call``) and ``sim_context`` (``NetSimBoard.run_image``'s lock and the
   simulated device's context, less the inner ``NetBoard.run_image``); neither exists on a board;
4. the host ops after the output that run in Python (:func:`hlsnn.deploy.lower.program.finish` less
   the same call with no ops after it: ``after_ops``; Softmax's cost per element in ``ops``); a
   Softmax over each image's output vector runs in the C call (``nethost.softmax_rule``: its
   cost is ``bench_c_host.py``'s ``softmax_c``) and costs nothing here;
5. ``loader``: the rest of ``net.run``: its dispatch, the dtype and shape checks, the timing,
   ``NetBoard.run_image``'s own lines around the C call, the output's reshape (``total`` less
   1-4 and the driver's time, each timed alone in the same run).

Part 5 and the simulated board's parts are measured on the compiled models given with
``--hlsnn`` (one image of the stored pairs as float32, the data sets' dtype; the kernel's answer
replayed after one real start, so that the C-simulation neither costs nor evicts caches),
side by side in one run; the table gives each model's figure and the median. Medians of wall
time (``time.perf_counter_ns``) on a shared machine; rerun to see the spread. The parts timed
alone cost less than inside ``net.run`` (warm caches and branch predictors in their own loop):
the difference falls on part 5, most for a model with a large prefix (h_jet_bnin bfp8: its
patches, 30 us alone, cost ~6 us more inside the call).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_loader_host.py --hlsnn /tmp/hrep/*.hlsnn --calls 2000

``--fallback`` times a ``--host-fallback`` GRU and LSTM node (``hlsnn.deploy.run.hostops.run`` of the
imported layer: onnx's reference evaluator built once per layer and run on each sample; input 16,
hidden 32, 4 and 32 steps, batch 1) and fits a fixed cost and a cost per step; then one run of the
node over a batch of 1 and 32 sequences (32 steps) for the cost per step of each further sequence:
the source of :data:`~hlsnn.network.hostmodel.FALLBACK_RNN`.

``--ops-only --rounds 3`` fits part 2's op kinds alone, in rounds in one process (the re-fit of
``HOST_OPS``), with a few kinds ``HOST_OPS`` does not time beside them (``UNTIMED``: what the
model's default for those, the timed kinds' medians, stands for).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

import hlsnn  # noqa: E402
from hlsnn.deploy.run import hostops
from hlsnn.deploy.lower import netprefix  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.network.loader import CompiledNet  # noqa: E402
from _common import median_us  # noqa: E402

SIZES = (64, 16384)
#: the op kinds timed, with the attributes hostops.run takes (per channel: 4 channels)
OPS = {
    "BatchNormalization": lambda: {"params": [np.linspace(0.5, 1.5, 4), np.linspace(-1, 1, 4), np.linspace(0, 1, 4),
                                              np.linspace(1, 2, 4)], "epsilon": 1e-5},
    "LayerNormalization": lambda: {"axis": -1, "epsilon": 1e-5, "scale": None, "bias": None},
    "AddConst": lambda: {"c": 0.5},
    "Relu": lambda: {},
    "Sigmoid": lambda: {},
    "Softmax": lambda: {"axis": -1},
}

#: op kinds HOST_OPS does not time (hostmodel.HOST_OP_OTHER), measured beside them with --ops-only
UNTIMED = {
    "Scale": lambda: {"c": 255.0, "divide": True},
    "Tanh": lambda: {},
    "Clip": lambda: {"lo": 0.0, "hi": 6.0},
    "GlobalAveragePool": lambda: {"keepdims": 1},
}


def _fit(small, big):
    """``(fixed us, ns per element)`` through the two sizes' medians."""
    ns = 1e3 * (big - small) / (SIZES[1] - SIZES[0])
    return max(0.0, small - ns * SIZES[0] / 1e3), ns


def _shape(n):
    return (1, 4, n // 4)


def op_costs(calls, ops=None):
    """Per op kind (``ops``, default :data:`OPS`): the fitted fixed cost and cost per element of
    ``hostops.run`` (module docstring)."""
    res = {}
    rng = np.random.default_rng(0)
    for op, attrs in (OPS if ops is None else ops).items():
        spec = hostops._Spec(op, attrs())
        t = []
        for n in SIZES:
            x = rng.normal(size=_shape(n))
            t.append(median_us(lambda x=x: hostops.run(spec, [x]), calls))
        res[op] = dict(zip(("fixed_us", "ns"), _fit(*t)), us=t)
    return res


def _fallback_layer(op, steps, f=16, h=32):
    """The ``--host-fallback`` layer of a GRU or LSTM (hidden ``h``) on ``steps`` steps of ``f``
    features, as PyTorch's TorchScript export of ``batch_first=True`` writes it (input transposed to
    (T, 1, F), a file of batch 1): imported with ``host_fallback=True``, with a ``clip`` that never
    binds (a one-direction cell without one is unrolled onto the engines at import)."""
    import tempfile
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from hlsnn.deploy.importer.onnx_import import load_onnx
    g = 3 if op == "GRU" else 4
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.normal(size=sh) * 0.3).astype(np.float32), n) for n, sh in
             (("W", (1, g * h, f)), ("R", (1, g * h, h)), ("B", (1, 2 * g * h)))]
    inits += [numpy_helper.from_array(np.array([1], np.int64), "ax1"),
              numpy_helper.from_array(np.array([1, steps * h], np.int64), "shape"),
              numpy_helper.from_array((rng.normal(size=(5, steps * h)) * 0.3).astype(np.float32), "wf"),
              numpy_helper.from_array(np.zeros(5, np.float32), "bf")]
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             helper.make_node(op, ["xt", "W", "R", "B"], ["Y"], hidden_size=h, clip=1e4),  # never binds: the
             #                                      unrolling (hlsnn.deploy.rewrite.rnnunroll) refuses a clip, the node falls back
             helper.make_node("Squeeze", ["Y", "ax1"], ["ys"]), helper.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["yb", "shape"], ["flat"]),
             helper.make_node("Gemm", ["flat", "wf", "bf"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, steps, f])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], initializer=inits)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "rnn.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        net = load_onnx(path, host_fallback=True)
    return next(la for la in net.layers if la.kind == "host" and la.op == "fallback")


def fallback_costs(calls, steps=(4, 32), batches=(1, 32)):
    """``--fallback``: per recurrent op, ``hostops.run`` of its fallback layer (the session built
    once, on the warm-up call, as a loaded program does). A file of batch 1 at ``steps`` steps, one
    sample -> the fixed cost and the cost per step of one run of the node (the importer runs the node
    on each sample: ``attrs["sw"]``). The same node without ``sw`` on (T, B, F) (one run covering
    ``batches`` sequences, as a node reading the held tensor itself) at the larger number of steps ->
    the cost per step of each further sequence in a run."""
    import copy
    res = {}
    rng = np.random.default_rng(1)
    for op in ("GRU", "LSTM"):
        t = []
        for n in steps:
            la = _fallback_layer(op, n)
            x = rng.normal(size=(1, n, 1, 16))
            t.append(median_us(lambda la=la, x=x: hostops.run(la, [x]), calls))
        per = (t[1] - t[0]) / (steps[1] - steps[0])
        fixed = max(0.0, t[0] - per * steps[0])
        whole = copy.copy(la)
        whole.attrs = {k: v for k, v in la.attrs.items() if k != "sw"}
        tb = []
        for b in batches:
            x = rng.normal(size=(steps[1], b, 16))
            tb.append(median_us(lambda la=whole, x=x: hostops.run(la, [x]), calls))
        slope = (tb[1] - tb[0]) / (batches[1] - batches[0]) / steps[1]
        res[op] = {"fixed_us": fixed, "us_per_step": per, "us": t, "steps": list(steps),
                   "us_per_step_sample": slope, "batch_us": tb, "batches": list(batches)}
    return res


def check_costs(calls):
    """The input check of ``net.run``'s fast path where it is more than a dtype and shape test:
    the finiteness pass of a float image (float32, float64; a network with a prefix or a
    ``bfp_systolic`` network: the C call does not count them there), and ``_check_input`` on a
    ``bfp_systolic`` network's uint8 image (converted to float64): fixed + per value."""
    res = {}
    rng = np.random.default_rng(1)
    for key in ("float32", "float64", "uint8 -> float64"):
        dt = key.split()[0]
        t = []
        for n in SIZES:
            me = SimpleNamespace(input_shape=_shape(n)[1:], network=SimpleNamespace(engine="bfp_systolic"))
            x = (rng.random(_shape(n)) * 255).astype(dt)
            fn = (lambda x=x, me=me: CompiledNet._check_input(me, x, stored=True)) if "->" in key else \
                (lambda x=x: np.isfinite(x).all())
            t.append(median_us(fn, calls))
        res[key] = dict(zip(("fixed_us", "ns"), _fit(*t)), us=t)
    return res


def patch_costs(net, calls):
    """``netprefix.bfp_patches`` of a ``bfp_systolic`` network's params, one patch per image."""
    t = []
    rng = np.random.default_rng(2)
    for n in SIZES:
        stub = SimpleNamespace(input={"patches": "image"}, params=net.params)
        x = rng.normal(size=(1, n)) / 3.0                   # not exact in float32: the patches are formed
        t.append(median_us(lambda x=x, stub=stub: netprefix.bfp_patches(stub, x), calls))
    return dict(zip(("fixed_us", "ns"), _fit(*t)), us=t)


def model_parts(path, calls):
    """Part 3-5 of the module docstring on one compiled model, warm."""
    from hlsnn.network import nethost
    row = {"model": Path(path).stem}
    with hlsnn.load(path, target="sim") as net:
        n = net.network
        if n is None or not hasattr(net._kernel, "run_image"):
            return None
        x = np.ascontiguousarray(net.check["x"][:1], np.float32)
        net.run(x)
        kern = net._kernel.kernel                   # its answer replayed: the host's steps alone
        name = "run_words" if hasattr(kern, "run_words") else "run"
        real, got = getattr(kern, name), {}

        def replay(a):
            if "y" not in got:
                got["y"] = real(a)
            return got["y"].copy()
        setattr(kern, name, replay)
        sb = net._kernel                             # NetSimBoard
        kept, want, counts, before, out_shape, after, fold = net._c_run
        xp = netprefix.run(n, x) if before else x
        tot, drv = [], []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            net.run(x)
            tot.append(time.perf_counter_ns() - t0 - 1e9 * sb.last_kernel_s)
            drv.append(1e6 * sb.last_driver_s)
        row["total_us"] = statistics.median(tot) / 1e3
        row["driver_us"] = statistics.median(drv)
        row["check_us"] = 0.0 if counts else median_us(lambda: np.isfinite(x).all(), calls)
        row["prefix_us"] = median_us(lambda: netprefix.run(n, x), calls) if before else 0.0
        ks = []

        def outer():
            sb.run_image(xp, ints=False, softmax=fold)
            ks.append(sb.last_kernel_s)
        row["run_image_us"] = median_us(outer, calls) - 1e6 * statistics.median(ks)
        ks.clear()
        with sb._lock, sb.sim:
            def inner():
                sb.board.run_image(xp, ints=False, softmax=fold)
                ks.append(sb.board.last_kernel_s)
            row["inner_us"] = median_us(inner, calls) - 1e6 * statistics.median(ks)
            null = nethost.CHost(sb.board, null_registers=True)
            row["null_call_us"] = median_us(lambda: null.run(xp, ints=False, softmax=fold), calls)
        q, yv = sb.run_image(xp)
        qs = q.reshape((1,) + tuple(n.output["shape"])) if not isinstance(q, tuple) else q
        ys = yv.reshape((1,) + tuple(n.output["shape"]))
        row["finish_us"] = median_us(lambda: netmode.finish(n, qs, ys, x=x), calls)
        stubs, n._host_stubs = n._host_stubs, []             # finish's own Python, without the ops after
        row["finish_empty_us"] = median_us(lambda: netmode.finish(n, qs, ys, x=x), calls)
        n._host_stubs = stubs
        row["after_ops_us"] = 0.0 if fold or not after else max(0.0, row["finish_us"] - row["finish_empty_us"])
        row["sim_context_us"] = row["run_image_us"] - row["inner_us"]
        row["sim_io_us"] = row["driver_us"] - row["null_call_us"]
        row["loader_us"] = (row["total_us"] - row["check_us"] - row["prefix_us"] - row["driver_us"]
                            - row["sim_context_us"] - row["after_ops_us"])
        row.update(in_elems=int(x.size), before=[e["op"] for e in n.host_before],
                   after=[j["op"] for j in n.host_after], engine=n.engine, softmax_in_c=fold, counted_in_c=counts)
        if n.engine == "bfp_systolic":
            row["params"] = n.params
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hlsnn", nargs="+", metavar="NAME.hlsnn",
                    help="compiled models with a network path (the loader's parts are measured on each)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--ops-only", action="store_true",
                    help="only the host ops (OPS, and UNTIMED beside them), --rounds times in this process")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--fallback", action="store_true",
                    help="only a --host-fallback GRU and LSTM node: fixed us + us per step (FALLBACK_RNN)")
    args = ap.parse_args(argv)
    if args.fallback:
        res = fallback_costs(min(args.calls, 60))
        if args.json:
            print(json.dumps(res, indent=1))
            return 0
        for op, c in res.items():
            print(f"{op}: {c['fixed_us']:.1f} us + {c['us_per_step']:.2f} us per step (medians {c['us'][0]:.0f} / "
                  f"{c['us'][1]:.0f} us at {c['steps'][0]} / {c['steps'][1]} steps, batch-1 file); dynamic batch: "
                  f"+ {c['us_per_step_sample']:.3f} us per step per further sample (medians {c['batch_us'][0]:.0f} / "
                  f"{c['batch_us'][1]:.0f} us at batch {c['batches'][0]} / {c['batches'][1]}, "
                  f"{c['steps'][1]} steps)")
        return 0
    if args.ops_only:
        return _ops_only(args)
    if not args.hlsnn:
        ap.error("--hlsnn NAME.hlsnn ... is required (or --ops-only)")
    rows = [r for r in (model_parts(p, args.calls) for p in args.hlsnn) if r is not None]
    bfp = next((r.pop("params") for r in rows if "params" in r), None)
    for r in rows:
        r.pop("params", None)
    res = {"calls": args.calls, "ops": op_costs(args.calls), "check": check_costs(args.calls),
           "bfp_patches": None, "models": rows}
    if bfp is not None:
        res["bfp_patches"] = patch_costs(SimpleNamespace(params=bfp), args.calls)
    med = {k: statistics.median(r[k] for r in rows) for k in ("loader_us", "sim_context_us", "sim_io_us",
                                                               "null_call_us", "total_us", "check_us")}
    res["median"] = med
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"the loader's run path around the C call, this machine, warm (medians of {args.calls} calls, us)")
    print(f"  {'model':<22} {'total':>7} {'check':>6} {'prefix':>7} {'after':>7} {'driver':>7} {'C null':>7} "
          f"{'sim io':>7} {'sim ctx':>7} {'loader':>7}")
    for r in rows:
        print(f"  {r['model']:<22} {r['total_us']:>7.2f} {r['check_us']:>6.2f} {r['prefix_us']:>7.2f} "
              f"{r['after_ops_us']:>7.2f} {r['driver_us']:>7.2f} {r['null_call_us']:>7.2f} {r['sim_io_us']:>7.2f} "
              f"{r['sim_context_us']:>7.2f} "
              f"{r['loader_us']:>7.2f}")
    print(f"  median: loader {med['loader_us']:.2f}, sim context {med['sim_context_us']:.2f}, sim io "
          f"{med['sim_io_us']:.2f}, C call (null registers) {med['null_call_us']:.2f}")
    print(f"input check where the C call does not count the non-finite values (finiteness pass; uint8 -> float64: "
          f"_check_input), fixed us + ns per value, fitted on {SIZES[0]} and {SIZES[1]} values:")
    for dt, c in res["check"].items():
        print(f"  {dt:<16} {c['fixed_us']:6.2f} us + {c['ns']:.3f} ns  (medians {c['us'][0]:.2f} / "
              f"{c['us'][1]:.2f} us)")
    print("host ops (hostops.run, fixed us + ns per element):")
    for op, c in res["ops"].items():
        print(f"  {op:<20} {c['fixed_us']:6.2f} us + {c['ns']:.3f} ns  (medians {c['us'][0]:.2f} / "
              f"{c['us'][1]:.2f} us)")
    if res["bfp_patches"]:
        c = res["bfp_patches"]
        print(f"  {'bfp patches':<20} {c['fixed_us']:6.2f} us + {c['ns']:.3f} ns  (medians {c['us'][0]:.2f} / "
              f"{c['us'][1]:.2f} us)")
    return 0


def _ops_only(args):
    """``--ops-only``: :func:`op_costs` of OPS and of UNTIMED, ``--rounds`` rounds, the other jobs'
    load beside each."""
    from _common import OtherLoad
    rounds = []
    for r in range(args.rounds):
        with OtherLoad() as load:
            res = op_costs(args.calls)
            res.update({f"{k} (not timed)": v for k, v in op_costs(args.calls, UNTIMED).items()})
        rounds.append({"round": r, "other_load_cpus": load.cpus, "ops": res})
    if args.json:
        print(json.dumps(rounds, indent=1))
        return 0
    for rd in rounds:
        ld = "?" if rd["other_load_cpus"] is None else f"{rd['other_load_cpus']:.2f}"
        print(f"round {rd['round']}: hostops.run, fixed us + ns per element (medians of {args.calls} calls; other "
              f"jobs' load {ld} CPUs)")
        for op, c in rd["ops"].items():
            print(f"  {op:<32} {c['fixed_us']:6.2f} us + {c['ns']:.3f} ns  (medians {c['us'][0]:.2f} / "
                  f"{c['us'][1]:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
