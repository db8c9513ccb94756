"""The command-line side of compiled models: ``hlsnn compile``, ``hlsnn run NAME.hlsnn`` and
``hlsnn perf NAME.hlsnn`` (called from :mod:`hlsnn.cli`)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import InputError, printable


def cmd_compile(args):
    from ..deploy.config import load_deploy_config
    from ..network.build import choose_assignment, compile_model
    assignment = choose_assignment(load_deploy_config(args.config), args.assignment)
    out = args.output or f"{Path(args.config).stem}_{assignment}.hlsnn"
    if not str(out).endswith(".hlsnn"):
        raise InputError(f"-o {out}: a compiled model's name ends in .hlsnn")
    from ..paths import out_parent
    out_parent(out)
    prog = compile_model(args.config, assignment, out, check_samples=args.check_samples,
                         host_fallback=getattr(args, "host_fallback", False),
                         recalibrate=getattr(args, "recalibrate", False),
                         allow_overfit=getattr(args, "allow_overfit", False))
    size = Path(out).stat().st_size
    engine = [j for j in prog["layers"] if j["kind"] != "host"]
    # what a board runs where (the file as a board reads it): the network kernel takes the host
    # layers it lowers (residual adds, ReLUs, pools, flattens); layer by layer, every host layer
    # runs on the host
    from ..network import artifact
    from ..network.loader import kernel_network
    before = []                          # host ops on the float input before the start (netprefix)
    try:
        lowered = kernel_network(*artifact.read(out))[0]
        path, why, on_host = "network", None, lowered.host_after
        before = [e["name"] + " (" + e["op"] + ")" for e in lowered.host_before]
    except InputError as e:
        path, why, on_host = "layers", str(e), [j for j in prog["layers"] if j["kind"] == "host"]
    host = [j["name"] + " (" + j["op"] + ")" for j in on_host]
    res = {"output": str(out), "bytes": size, "model": prog["name"], "assignment": prog["assignment"],
           "engine_layers": len(engine), "host_layers": host, "host_before_layers": before, "path": path, "layer_by_layer_because": why,
           "accels": {k: v["sha"][:12] for k, v in prog["accels"].items()}, "check_pairs": args.check_samples}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{out}: {prog['name']} ({prog['assignment']}), {len(engine)} engine layers, {size:,} bytes")
        print("  accelerators: " + ", ".join(f"{k} (config hash {h})" for k, h in res["accels"].items()))
        if path == "network":
            print("  runs as one network kernel start per batch (every layer up to the logits on the fabric)")
            if before:
                print("  on the host before it (on the float input): " + ", ".join(before))
            print("  on the host after it: " + (", ".join(host) or "nothing"))
        else:
            print(f"  runs layer by layer: {why}")
            print("  on the host: " + (", ".join(host) or "nothing"))
        print(f"  self-check: {args.check_samples} input/output pairs from the emulator")
    return 0


def _kernel_calls(net):
    return sum(ex.stats.calls for ex in net._dep.execs.values())


def _starts(net, before):
    """Kernel starts of the last run: the network path counts its own, the layer path the
    runner's calls since ``before``."""
    return net.last_kernel_starts if net.network is not None else _kernel_calls(net) - before


def overlay_options(items) -> dict:
    """``hlsnn run NAME.hlsnn --overlay ACCEL=FOLDER ...`` as ``hlsnn.load``'s ``overlays``
    (whether each ACCEL is one of the model's, the loader checks and says)."""
    out = {}
    for item in items or ():
        name, eq, folder = str(item).partition("=")
        if not eq or not name or not folder:
            raise InputError(f"--overlay {item}: give ACCEL=FOLDER, an accelerator of the model (hlsnn compile "
                             f"names them) and its overlay folder")
        if name in out:
            raise InputError(f"--overlay {item}: {name} given twice")
        out[name] = folder
    return out


def read_npy(path, what, *, checked=True):
    """The array of the ``.npy`` file given as ``--<what>``; an :class:`InputError` for anything
    else (a folder, FIFO or device, an unreadable file, an ``.npz`` archive) and, when ``checked``,
    for an array without elements or of other than real numbers."""
    src = Path(path)
    if not src.is_file():                     # a FIFO or a device would block or never end
        kind = "a folder" if src.is_dir() else "not a regular file (a FIFO, device or socket)" if src.exists() \
            else "no such file"
        raise InputError(f"--{what} {printable(path)}: {kind}; give a .npy file (numpy.save)")
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as exc:                  # OSError, ValueError, EOFError, BadZipFile, MemoryError ...
        raise InputError(f"--{what} {printable(path)}: cannot be read as a .npy array ({type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:160]})") from None
    if not isinstance(a, np.ndarray):         # an .npz archive
        a.close()
        raise InputError(f"--{what} {printable(path)}: is an .npz archive; save one array with numpy.save (.npy)")
    if checked and (a.ndim == 0 or a.size == 0):
        raise InputError(f"--{what} {printable(path)}: holds an array of shape {a.shape}: must have at least one "
                         f"dimension and one element")
    if checked and a.dtype.kind not in "biuf":
        raise InputError(f"--{what} {printable(path)}: has dtype {a.dtype}: must be real numbers (int or float); "
                         f"complex, string and object arrays are refused")
    return a


def check_npy_out(path):
    """``--output``: a ``.npy`` path whose folder may be written (before anything runs)."""
    from ..paths import out_parent
    if not str(path).endswith(".npy"):
        raise InputError(f"--output {path}: must end in .npy (numpy.save adds it otherwise)")
    out_parent(path)


def save_npy(path, y):
    """``y`` into ``path`` atomically (a full disk or a kill leaves no half file)."""
    from ..files import atomic_path
    try:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, y)
    except OSError as exc:
        raise InputError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


def run_compiled(args):
    """``hlsnn run NAME.hlsnn --input x.npy --target T``: the network on T and on the emulator,
    compared bit for bit (exit 1 on a mismatch)."""
    from ..network.loader import load
    if args.output:                          # before anything runs
        check_npy_out(args.output)
    x = read_npy(args.input, "input", checked=False)
    network = False if getattr(args, "layer_by_layer", False) else None
    overlays = overlay_options(getattr(args, "overlay", None))
    with load(args.target_path, args.target, self_check=not args.no_self_check, network=network,
              overlays=overlays) as net:
        x = net._check_input(x, stored=net._c_path())     # as net.run takes it
        times, host, starts = [], [], []
        import time
        for _ in range(max(1, args.repeat)):
            c0 = _kernel_calls(net)
            t0 = time.perf_counter()
            y, env = net.run(x, keep=True)
            starts.append(_starts(net, c0))
            times.append(time.perf_counter() - t0)
            host.append(net.last_host_s)
        calls = float(np.mean(starts))
        path_kind = "network" if net.network is not None else "layers"
        lt = net.program["output"]["engine_tensor"]
        logits = env[lt]
    with load(args.target_path, "emu", self_check=False, network=False) as ref:   # the layer-by-layer emulator
        y_ref, env_ref = ref.run(x, keep=True)
    bad = int(np.count_nonzero(logits.view(np.uint64) != env_ref[lt].view(np.uint64)))
    bad_y = int(np.count_nonzero(np.asarray(y, np.float64).view(np.uint64) != y_ref.view(np.uint64)))
    res = {"model": str(args.target_path), "target": args.target, "images": int(len(x)), "outputs": int(logits.size),
           "path": path_kind, "mismatches": bad, "output_mismatches": bad_y,
           "kernel_starts_per_image": calls / len(x),
           "seconds_per_batch": float(np.median(times)), "host_s_per_image": float(np.median(host)) / len(x)}
    if args.output:
        save_npy(args.output, y)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['model']} on {args.target}: {res['images']} images; {bad} of {res['outputs']} outputs of "
              f"{net.program['output']['engine_layer']} differ from the emulator, {bad_y} of the network output")
        print(f"  {1e3 * res['seconds_per_batch']:.2f} ms per batch; host {1e3 * res['host_s_per_image']:.2f} ms per "
              f"image (kernel wall time excluded where the target reports it); "
              f"{res['kernel_starts_per_image']:g} kernel starts per image ({path_kind} path)")
    return 0 if bad == 0 and bad_y == 0 else 1


#: ``hlsnn perf``'s options of one operation (an accel config), with their defaults: refused for a NAME.hlsnn.
PERF_OPERATION_FLAGS = {"gemm": None, "conv": None, "mode": None, "resident": False, "density": 1.0,
                        "padding": "same", "target": "csim", "loops": False, "seed": 0}
#: ``hlsnn perf``'s options of a compiled model, with their defaults: refused for an accel config.
PERF_COMPILED_FLAGS = {"board": None, "batch": 1, "layer_by_layer": False, "host": None, "input_dtype": None,
                       "sources": False}


def refuse_flags(args, this, other, flags):
    """An InputError naming the options of ``flags`` (dest -> default) given with ``this`` kind of
    input, which only ``other`` takes: they would be ignored silently otherwise."""
    given = [f"--{d.replace('_', '-')}" for d, default in flags.items() if getattr(args, d, default) != default]
    if given:
        raise InputError(f"{', '.join(given)}: only for {other}, not for {this} ({args.config})")


def perf_compiled(args):
    from ..network.latency import format_table, model
    refuse_flags(args, "a compiled model (NAME.hlsnn)", "an accel config", PERF_OPERATION_FLAGS)
    res = model(args.config, board=args.board, batch=args.batch,
                network=False if getattr(args, "layer_by_layer", False) else None,
                host=getattr(args, "host", None) or "c", input_dtype=getattr(args, "input_dtype", None) or "float32")
    print(json.dumps(res) if args.json else
          format_table(res, full_sources=getattr(args, "sources", False),
                       all_loops=getattr(args, "schedule_all", False)))
    return 0
