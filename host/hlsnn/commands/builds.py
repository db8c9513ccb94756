"""``hlsnn build`` and ``sweep``: bitstreams and the variants of a config (:mod:`hlsnn.cli` builds
the parser)."""
from __future__ import annotations

import json
import sys

from .kernels import _load
from ..paths import build_root

_BUILD_OUTCOME = {0: "ok", 1: "FAILED", 3: "tools missing"}


def load_for_build(path, board=None):
    """A config, optionally moved to another board (``--board``)."""
    from ..config import find_config, load_config, read_yaml
    if board is None:
        return _load(path)
    from ..config import load_board
    path = find_config(path)
    bname = load_board(board, source="--board").name     # a board name or a board file's path
    raw = read_yaml(path)
    if isinstance(raw, dict):
        # another board gets its own overlay name, so it never overwrites the original's
        raw = {**raw, "board": board}
        if isinstance(raw.get("name"), str) and "name" in raw:
            raw["name"] = f"{raw['name']}_{bname.replace('-', '_').replace('.', '_')}"
    cfg = load_config(raw, source=str(path))
    from dataclasses import replace
    return replace(cfg, path=str(path))     # build/<name>: the name above carries the board


def _batch_status(statuses) -> int:
    """One exit status for several builds: 1 when one failed, else 3 when the tools were
    missing for one, else 0."""
    return 1 if 1 in statuses else 3 if 3 in statuses else max(statuses, default=0)


def cmd_build(args):
    from ..build import main_build
    from ..build.netflow import is_compiled_model, main_build_network
    from ..errors import InputError
    if args.check and args.dry_run:
        raise InputError("hlsnn build: --check and --dry-run cannot be combined (--check runs Vitis HLS; "
                          "--dry-run runs nothing)")
    from ..progress import enabled
    configs = list(args.config)
    instances = getattr(args, "instances", 1)
    if instances > 1 and (len(configs) > 1 or args.cluster or is_compiled_model(configs[0])):
        raise InputError(f"hlsnn build --instances {instances}: for one layer config, built locally (a compiled "
                          f"model's network overlay, a batch and --cluster build one instance each)")
    if len(configs) > 1 or args.cluster:        # a batch, or one build on a Dask cluster
        models = [c for c in configs if is_compiled_model(c)]
        if models and (args.cluster or len(configs) > 1):
            raise InputError(f"hlsnn build {models[0]}: a compiled model's network overlay is built on its own and "
                             f"locally (one argument, no --cluster); list only configs in a batch")
        if len(set(configs)) != len(configs):
            raise InputError("hlsnn build: a config is listed twice; list each once")
        cfgs = [load_for_build(c, args.board) for c in configs]      # every config checked before any build
        from ..network.fit import check_config
        for c in cfgs:
            check_config(c, allow_overfit=getattr(args, "allow_overfit", False))
        names = [c.stem for c in cfgs]
        # names that differ only in case share a folder on a case-insensitive filesystem (macOS, Windows)
        folded = [n.casefold() for n in names]
        dup = next((n for n, f in zip(names, folded) if folded.count(f) > 1), None)
        if dup:
            same = [n for n, f in zip(names, folded) if f == dup.casefold()]
            case = ", which differ only in case: one folder on macOS and Windows" if len(set(same)) > 1 else ""
            raise InputError(f"hlsnn build: two configs build into build/{dup} (the names "
                             f"{' and '.join(map(repr, same))}{case}); give them different names")
        if args.cluster:
            from .. import cluster
            statuses = cluster.run_builds(args.cluster, cfgs, out=args.out, jobs=args.jobs, dry_run=args.dry_run,
                                          check=args.check, show_progress=enabled(quiet=args.quiet))
        else:
            statuses = [main_build(c, out=args.out, jobs=args.jobs, dry_run=args.dry_run, check=args.check,
                                   progress=enabled(quiet=args.quiet)) for c in cfgs]
        if len(cfgs) > 1:
            print("builds: " + ", ".join(f"{c.name} {_BUILD_OUTCOME.get(s, f'exit {s}')}"
                                         for c, s in zip(cfgs, statuses)))
        return _batch_status(statuses)
    args.config = configs[0]
    if is_compiled_model(args.config):          # a compiled model: its network kernel's overlay
        if args.board:
            raise InputError(f"hlsnn build {args.config} --board: a compiled model's network overlay is built for "
                             f"the config it was compiled against; compile the model for the other board instead")
        if args.check:
            raise InputError(f"hlsnn build {args.config} --check: not for the network kernel yet; run the full "
                             f"build (or --dry-run)")
        from ..network.fit import check_network
        from ..network import artifact
        check_network(*artifact.read(args.config), allow_overfit=getattr(args, "allow_overfit", False),
                      source=args.config)
        return main_build_network(args.config, out=args.out, jobs=args.jobs, dry_run=args.dry_run,
                                  progress=enabled(quiet=args.quiet))
    cfg = load_for_build(args.config, args.board)
    from ..network.fit import check_config
    check_config(cfg, allow_overfit=getattr(args, "allow_overfit", False), instances=instances)
    return main_build(cfg, out=args.out, jobs=args.jobs, dry_run=args.dry_run, check=args.check,
                      progress=enabled(quiet=args.quiet), instances=instances)


def cmd_sweep(args):
    from pathlib import Path
    from .. import sweep
    from ..errors import InputError, MissingDependency
    if args.cluster is not None and args.jobs is not None:
        raise InputError("hlsnn sweep: --jobs and --cluster cannot be combined (--jobs: processes on this machine; "
                         "--cluster: the scheduler's workers)")
    out = None
    if not args.no_plot:
        out = sweep.check_out(args.out or build_root() / f"{Path(args.config).stem}_sweep.png")
        missing = sweep.matplotlib_missing()
        if missing and args.out:
            raise MissingDependency(missing)
        if missing:
            print(f"hlsnn: note: no plot: {missing}", file=sys.stderr)
            out = None
    from ..progress import enabled
    rep = sweep.run_sweep(args.config, args.vary, csim=not args.no_csim, jobs=args.jobs, cases=args.cases,
                          seed=args.seed, show_progress=enabled(quiet=args.quiet, json=args.json),
                          cluster=args.cluster)
    rep["out"] = sweep.plot_sweep(rep, out) if out else None
    if args.json:
        print(json.dumps(rep))
    else:
        print(sweep.format_table(rep))
        if rep["out"]:
            print(f"wrote {rep['out']}")
    return rep["status"]
