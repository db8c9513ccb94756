"""Nothing that does not fit: the refusal of a kernel above its board's fit budget.

A kernel may take at most :data:`hlsnn.resources.FIT_SHARE` (90%) of each of its board's LUTs,
FFs, DSPs, BRAM36 and URAM, by :mod:`hlsnn.resources`' model (not a synthesis result). Above it:

* a layer config (:func:`check_config`): ``hlsnn info``, ``render`` and ``build`` refuse it;
* a compiled model's network kernel (:func:`check_network`): ``hlsnn compile`` (and
  :func:`hlsnn.network.build.compile_model`) and ``hlsnn build NAME.hlsnn`` refuse it.

The refusal is one line (:class:`~hlsnn.errors.InputError`) naming each resource over, its
figure, the board's budget, and a shape that would fit: the largest ``units`` / ``rows`` of a
layer config whose estimate fits, the sparse engine's board sizer's pick (``net_shape: board``)
or the largest ``net_sub`` that holds the program, the largest ``net_lanes`` x ``net_banks`` of a
shift_mac network kernel, and otherwise (bfp_systolic's network kernel has one fixed shape) the
shipped boards that would hold the kernel. ``allow_overfit=True`` (``--allow-overfit``) goes on
deliberately; ``hlsnn info`` and ``hlsnn perf`` still say that the kernel is over.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import InputError, printable
from ..resources import FIT_SHARE, format_over, over_budget

#: the command-line switch that goes on with a kernel over the budget
FLAG = "--allow-overfit"


def _budget_words():
    return f"{100 * FIT_SHARE:.0f}% of the board (hlsnn.resources.FIT_SHARE)"


def refusal(what: str, over, board: str, fix: str) -> str:
    """The one-line refusal: ``what`` (the kernel), the resources ``over`` (rows of
    :func:`hlsnn.resources.over_budget`), the board, and ``fix`` (a shape that would fit)."""
    return (f"{what} does not fit {board}: {format_over(over)}, above the budget of {_budget_words()}; "
            f"{fix}; or pass {FLAG} to go on anyway")


def _boards():
    """The shipped boards (``configs/boards/*.yaml``), smallest (by LUTs) first."""
    from ..config import load_board
    from ..paths import CONFIGS_DIR
    boards = [load_board(p.stem) for p in sorted((CONFIGS_DIR / "boards").glob("*.yaml"))]
    return sorted(boards, key=lambda b: (b.resources["lut"], b.name))


def _boards_that_hold(resources_on, exclude):
    """Names of the shipped boards whose budget holds ``resources_on(board)`` (None: cannot say)."""
    out = []
    for b in _boards():
        if b.name == exclude:
            continue
        used = resources_on(b)
        if used is not None and not over_budget(used, b.resources):
            out.append(b.name)
    return out


def _board_fix(names, what, how):
    if names:
        some = names[:3]
        return f"{what} fits {', '.join(some[:-1]) + ' or ' if len(some) > 1 else ''}{some[-1]} ({how})"
    return f"no shipped board holds {what}: make it smaller"


# --------------------------------------------------------------------------- layer configs

#: per engine, the layer config's size parameter a fitting shape is sought along (largest first)
LAYER_KNOBS = {"sparse_cluster": "units", "bfp_systolic": "rows", "shift_mac": "rows"}


def _raw(cfg):
    """The config's data as :func:`hlsnn.config.load_config` reads it (its YAML where it has one)."""
    from ..config import read_yaml
    if cfg.path:
        try:
            raw = read_yaml(cfg.path)
            if isinstance(raw, dict):
                return dict(raw)
        except Exception:                          # noqa: BLE001 - fall back to the loaded data
            pass
    raw = cfg.as_dict()
    raw["board"] = cfg.board.path or cfg.board.name
    return raw


def config_fix(cfg) -> str:
    """A shape of layer config ``cfg`` that fits its board (the largest value of its
    :data:`LAYER_KNOBS` parameter whose estimate is within the budget), else the boards that
    would hold it as it is."""
    from ..config import load_config
    from ..errors import ConfigError
    raw = _raw(cfg)
    knob = LAYER_KNOBS.get(cfg.engine)
    sec = dict(raw.get(cfg.engine) or {})
    if knob and knob in cfg.params:
        for v in range(int(cfg.params[knob]) - 1, 0, -1):
            try:
                c = load_config({**raw, cfg.engine: {**sec, knob: v}}, source=cfg.path or cfg.name, check_fit=False)
            except ConfigError:
                continue
            if not over_budget(c.estimates["resources"], c.board.resources):
                return f"{cfg.engine}.{knob}: {v} fits (the largest that does)"

    def on(b):
        try:
            c = load_config({**raw, "board": b.name}, source=cfg.path or cfg.name, check_fit=False)
        except ConfigError:
            return None
        return c.estimates["resources"]
    return _board_fix(_boards_that_hold(on, cfg.board.name), "the config", "hlsnn build --board NAME")


def check_config(cfg, *, allow_overfit=False, instances=1) -> list:
    """The resources of layer config ``cfg`` above the budget (``[]``: it fits), its kernel's
    times ``instances`` (``hlsnn build --instances``: that many kernels in one overlay); an
    :class:`InputError` (:func:`refusal`) when there are any and not ``allow_overfit``."""
    res = {k: v * instances for k, v in cfg.estimates["resources"].items()}
    over = over_budget(res, cfg.board.resources)
    if over and not allow_overfit:
        where = f" ({printable(cfg.path)})" if cfg.path else ""
        if instances == 1:
            raise InputError(refusal(f"config {cfg.name}{where}: its kernel", over, cfg.board.name, config_fix(cfg)))
        most = max((n for n in range(1, instances) if not over_budget(
            {k: v * n for k, v in cfg.estimates["resources"].items()}, cfg.board.resources)), default=0)
        fix = f"--instances {most} fits" if most > 1 else ("one instance fits (leave out --instances)" if most
                                                          else config_fix(cfg))
        raise InputError(refusal(f"config {cfg.name}{where}: its kernel x {instances} (--instances {instances})", over, cfg.board.name, fix))
    return over


# --------------------------------------------------------------------------- network kernels

def kernel_tables(net, shape=None):
    """``(perf module, tables)`` of a lowered network's network kernel (at ``shape``: the
    engine's ``(lanes, banks[, multipliers])``, default its config's), :class:`InputError`
    where the kernel does not run the network."""
    if net.engine == "bfp_systolic":
        from ..engines.bfp_systolic.network import kernel, perf
        return perf, kernel.tables(net, *(shape or kernel.shape(net.params)))
    if net.engine == "sparse_cluster":
        from ..engines.sparse_cluster.network import kernel, perf
        return perf, kernel.tables(net, *(shape or kernel.shape(net.params)))
    from ..engines.shift_mac.network import kernel, perf
    return perf, kernel.tables(net, *(shape or kernel.lanes(net.params)))


def network_resources(net, ps, shape=None):
    """The network kernel's resources (``{"lut", "ff", "dsp", "bram36", "uram", ...}``, the
    engine's ``perf.resources``), None where the kernel does not run ``net`` at ``shape``."""
    try:
        perf, t = kernel_tables(net, shape)
    except InputError:
        return None
    return perf.resources(net, t, ps)


def network_kernel(program, arrays, source=""):
    """``(net, cfg)``: a compiled model's lowered network and its accelerator config, or None
    where it runs layer by layer (no network kernel)."""
    from ..deploy.lower import program as netmode
    from ..engines.network.move import refuse_kernel
    from .loader import config_of
    try:
        net = netmode.lower(program, arrays)
        refuse_kernel(net)
        kernel_tables(net)
    except InputError:
        return None
    return net, config_of(program["accels"][net.accel], source)


def _fits(used, board):
    return used is not None and not over_budget(used, board.resources)


def network_fix(net, cfg) -> str:
    """A network-kernel shape that holds ``net`` on ``cfg``'s board (module docstring)."""
    board = cfg.board
    p = net.params
    if net.engine == "sparse_cluster":
        from ..engines.sparse_cluster import netsize
        if "net_sub" not in p:                     # the layer-shaped kernel: the board sizer's pick
            try:
                sz = netsize.size(dict(p), board)
            except Exception:                      # noqa: BLE001 - an odd max_z: the sizer refuses it
                sz = None
            if sz:
                n2 = replace(net, params={**p, **sz})
                if _fits(network_resources(n2, board.ps), board):
                    return (f"net_shape: board fits (the sizer picks {sz['net_lanes']} lanes, {sz['net_banks']} banks, "
                            f"net_sub {sz['net_sub']}, {sz['net_pack']} packed slots)")
        else:
            for s in range(int(p["net_sub"]) - 1, 0, -1):
                sz = netsize.size(dict(p), board, sub=s)
                n2 = replace(net, params={**p, **sz})
                if _fits(network_resources(n2, board.ps), board):
                    return f"net_sub: {s} fits (the largest that holds this program; the sizer's nominal pick is over)"
    elif net.engine == "shift_mac":
        from ..engines.shift_mac.network.kernel import lanes
        pz0, pc0 = lanes(p)
        best = None
        for pz in range(pz0, 0, -1):
            for pc in range(pc0 - pc0 % pz, 0, -pz):
                if best and pz * pc <= best[0] * best[1]:
                    break
                if _fits(network_resources(net, board.ps, (pz, pc)), board):
                    best = (pz, pc)
                    break
        if best:
            return f"net_lanes: {best[0]}, net_banks: {best[1]} fits (the largest lanes x banks that does)"
    return _board_fix(_boards_that_hold(lambda b: network_resources(net, b.ps), board.name), "the network kernel",
                      f"the model compiled with an accel config of {net.engine} on that board")


def check_network(program, arrays, *, allow_overfit=False, source="", what=None):
    """The network kernel of a compiled model (its ``program`` and ``arrays``): ``None`` where it
    runs layer by layer, else ``{"resources", "over", "board"}``; an :class:`InputError`
    (:func:`refusal`) when it is over the budget and not ``allow_overfit``."""
    got = network_kernel(program, arrays, source)
    if got is None:
        return None
    net, cfg = got
    res = network_resources(net, cfg.board.ps)
    over = over_budget(res, cfg.board.resources)
    if over and not allow_overfit:
        name = what or f"the network kernel of {program.get('name', '?')} ({program.get('assignment', '?')})"
        raise InputError(refusal(f"{name} on {net.accel}", over, cfg.board.name, network_fix(net, cfg)))
    return {"resources": {k: res[k] for k in ("lut", "ff", "dsp", "bram36", "uram")}, "over": over,
            "board": cfg.board.name}
