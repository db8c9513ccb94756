"""``hlsnn deploy`` and ``report``: the commands of a deployment config (a model, its formats and
accelerators; :mod:`hlsnn.cli` builds the parser)."""
from __future__ import annotations

import json

from .kernels import _load
from ..paths import build_root


def _is_deploy_config(path):
    """A deployment config (configs/models/*.yaml) names a model; an accel config does not."""
    from ..config import find_config, read_yaml
    raw = read_yaml(find_config(path))
    return isinstance(raw, dict) and "model" in raw


def _host_bits(args):
    """``--host-bits``, the width of ``--host-precision quantized`` (8 when not given); given without it,
    an error (the host layers would run in float and the width be ignored)."""
    if args.host_bits is None:
        return 8
    if args.host_precision != "quantized":
        from ..errors import InputError
        raise InputError(f"--host-bits {args.host_bits}: the width of --host-precision quantized, which is not given "
                         f"(host layers run in float without it): add --host-precision quantized, or leave it out")
    return args.host_bits


def cmd_deploy(args):
    from ..deploy.reports.evaluate import format_result
    from ..evaluation.run import deploy
    from ..progress import enabled
    res = deploy(args.config, args.target, assignments=args.assignment or None, host_fallback=args.host_fallback,
                 host_precision=args.host_precision, host_bits=_host_bits(args), per_layer=args.per_layer, test_samples=args.test_samples,
                 progress=enabled(quiet=args.quiet, json=args.json), radix_update=args.radix_update,
                 radix_update_by=args.radix_update_by, network=False if args.layer_by_layer else None,
                 recalibrate=args.recalibrate)
    print(json.dumps(res) if args.json else format_result(res))
    return 1 if any("error" in e for e in res["assignments"].values()) else 0     # a failed assignment


def cmd_report(args):
    from pathlib import Path
    from ..build.netflow import is_compiled_model
    if is_compiled_model(args.config):          # a compiled model: its modelled end-to-end latency
        from ..network.report import write_report as write_compiled
        print(f"wrote {write_compiled(args.config, out=args.out, board=args.board, batch=args.batch)}")
        return 0
    if _is_deploy_config(args.config):
        from ..evaluation.report import write_report
        out = write_report(args.config, args.target, out=args.out, host_fallback=args.host_fallback,
                           host_precision=args.host_precision, host_bits=_host_bits(args), test_samples=args.test_samples,
                           radix_update=args.radix_update, radix_update_by=args.radix_update_by)
        print(f"wrote {out}")
        return 0
    from ..measure.sparse_work import KINDS, check_engine, check_out, density_sweep, format_sweep, parse_densities, plot_sweep
    cfg = _load(args.config)
    check_engine(cfg)
    densities = parse_densities(args.densities)
    stem = Path(cfg.path).stem if cfg.path else cfg.name
    out = None if args.no_plot else check_out(args.out or build_root() / f"{stem}_report.png")
    kinds = ("structured",) if args.structured else ("random",) if args.random else KINDS
    rep = density_sweep(cfg, channels=args.channels, size=args.size, ksize=args.ksize, densities=densities,
                        kinds=kinds, seed=args.seed)
    rep["out"] = None if out is None else plot_sweep(rep, out)
    if args.json:
        print(json.dumps(rep))
        return 0
    print(format_sweep(rep))
    if rep["out"]:
        print(f"wrote {rep['out']}")
    return 0


def cmd_autotune(args):
    import sys
    from ..evaluation import autotune
    from ..progress import enabled
    levels = autotune.LEVELS
    if args.levels:
        try:
            levels = tuple(float(v) for v in args.levels.split(","))
        except ValueError:
            from ..errors import InputError
            raise InputError(f"--levels {args.levels!r}: sparsities between 0 and 1, comma-separated (0.25,0.5,0.75)") \
                from None
    show = enabled(quiet=args.quiet)               # progress lines on stderr (the JSON goes to stdout)
    train = None
    if args.train:
        try:
            from ..train.autotune import train_chosen
        except ImportError as exc:
            from ..errors import InputError
            raise InputError(f"--train needs PyTorch ({exc}): pip install \"hlsnn[train]\"") from None

        def train(s, chosen):
            return train_chosen(s, chosen, args.config, args.name, epochs=args.train, test=args.test, log=s.log)
    res = autotune.run(args.config, board=args.board, max_drop=args.max_drop, objective=args.objective,
                       base=args.base, levels=levels, val_images=args.val_images, name=args.name,
                       write=not args.no_write, test=args.test, train=train,
                       log=(lambda m: print(m, file=sys.stderr, flush=True)) if show else None)
    print(json.dumps(res) if args.json else autotune.format_result(res), flush=True)
    if args.plot:
        autotune.plot(res, args.plot)
    return 0
