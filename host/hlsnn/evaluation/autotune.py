"""``hlsnn autotune MODEL.yaml``: per-layer formats for the least modelled latency within an
accuracy drop (issue 78), in one network kernel start.

**What a layer's format can change in one kernel.** A network kernel runs one accelerator
config, so a mixed assignment mixes the formats one engine's kernel holds. Measured on the
shipped ResNet-8 (``docs/tutorials/autotune.md``): on the PYNQ-Z2 the board-sized
``sparse_cluster`` kernel (``fixed8_z2``, 223.6 us end to end) is the fastest single format;
``shift_mac``'s kernel holds power of two and two-hot per layer, but its fastest, all power of
two (``pot_z2``), is 231.1 us already, so no mix of the two beats it; ``bfp_systolic``'s kernel
has one mantissa width. The sized sparse kernel skips a tap (one input channel at one kernel
position) when no lane of a block of output channels needs it, so a layer pruned in that shape
(``sparse`` with ``prune_shape: kernel``, :mod:`hlsnn.deploy.quantize.kprune`) takes proportionally
fewer steps: per-layer sparsity is the per-layer format that buys time. The candidates are the
base format (the config's ``fixed``/``sparse`` format on such a kernel, at sparsity 0) and the
same format pruned in the kernel's shape at each of :data:`LEVELS`.

**Accuracy** is measured on a validation split of the *training* data (:func:`split`: the
images the deployment config's ``validation: N`` says were held out of the model's training,
else every training image that does not calibrate; never the test split), each candidate
calibrated on the calibration images and run on the fast integer path (:meth:`Deployment.run
<hlsnn.deploy.run.runner.Deployment.run>`: the compiled integer program, bit-exact with the
kernels); the test split is read only with ``test=True``, after the choice. A candidate is
*within the drop* when an upper bound of its drop is: the images the float model gets right
and the candidate wrong (``lost``) and the reverse (``gained``) give the drop
``(lost - gained) / n`` and its bound ``drop + z * sqrt(lost + gained) / n`` (``z`` standard
errors of the paired difference, McNemar's: what one more draw of images could add): the
bound keeps a choice that barely passes on these images from passing by luck. On images held
out of training (``validation: N``) the drop is an unbiased estimate and ``z`` is
:data:`Z_HELD` (1); without, the network was trained on them, their drop flatters it besides,
and ``z`` is :data:`Z` (2).
**Cost** is ``hlsnn perf``'s model of the compiled candidate (:func:`hlsnn.network.latency.model`:
the derived schedule of the board's sized kernel, host included): ``end_to_end_us``, or the
energy estimate (board power x that time).

**Search and confirmation images.** A search that compares dozens of candidates on the same
images picks, among near-equals, the ones those images flatter: on the DS-CNN a choice 0.25
points under float on its 400 validation images was 2.78 under on the test split. So the
validation images are split in two by a seeded permutation (:func:`halves`, :data:`CONFIRM`):
the search sees only the *search* images, and the choice is made on the *confirmation* images,
which the search never saw, by fixed-sequence testing (Maurer, Hothorn and Lehmacher 1995): the
descent's path (the base, then each move it kept, in the order kept: fixed before the
confirmation images are read) is confirmed state by state, each with the bound above on the
confirmation images, and the choice is the last state before the first whose bound exceeds
``max_drop``. Tested in a fixed order and stopped at the first failure, each state at the one
bound's level, the chance of confirming any state whose true drop exceeds ``max_drop`` stays at
that level (no correction for the number of states). Every single format (the config's and the
uniform levels) is judged by the same bound on the same confirmation images.

**Search.** A sensitivity scan runs every layer alone at every level (the rest at the base),
which gives each move's accuracy cost and time saving. Then a greedy descent from the base:
among the moves (a layer one level up, to the next level that saves at least
:data:`MIN_SAVING` of the base's cost) it tries the one with the most time saved per point of
search accuracy its scan lost (ties: the most time), keeps it when the whole assignment is
still within ``max_drop`` of float on the search images, else marks that layer done. A move
that saves under 1% cannot change a speedup by more than 0.01x, yet it may cost a whole image
(the DS-CNN's descent kept three moves of its dense layer worth hundredths of a microsecond),
and each kept state is one more the confirmation must pass in sequence. The uniform levels
(every layer at one level) are evaluated too. The choice (above) is the confirmed state, unless
one of the config's single-format assignments on the board (another engine's kernel) is
cheaper within the drop on the confirmation images, or the path's base itself is not within
it and such a format is: the engine per model; and the same for the uniform levels (a single
format on the base's kernel, fixed before the search, judged on the same images). Greedy, not evolutionary: the scan shows the costs add per layer (each
layer's steps are its own, one kernel start), and the accuracy losses nearly so at the small
drops wanted, so a descent on the measured ratios reaches the front in about one evaluation
per move, a few dozen on ResNet-8, where an evolutionary search would need hundreds.
"""
from __future__ import annotations

import re
import time
from dataclasses import replace

import numpy as np

from ..errors import InputError, printable

#: the kernel-shaped sparsities a layer may take besides 0
LEVELS = (0.25, 0.5, 0.75, 0.875)
#: validation images (at most; 0: every training image beyond the calibration images)
VAL_IMAGES = 0
#: standard errors of the paired drop added to it before it is compared with ``max_drop``: on
#: training images the network was fitted to (their drop flatters it)
Z = 2.0
#: ... and on images held out of its training (the config's ``validation: N``: the drop is an
#: unbiased estimate there, and one standard error keeps out a pass by the luck of an image or two)
Z_HELD = 1.0
#: the share of the validation images that confirm the choice and take no part in the search
CONFIRM = 0.5
#: a descent move is tried only when it saves at least this share of the base's cost
MIN_SAVING = 0.01
OBJECTIVES = ("latency", "energy")


def split(n_train, n_cal, n_val=VAL_IMAGES, seed=0, held=0):
    """Indices of the validation images in a training split of ``n_train``: ``n_val`` (0: all) of
    the candidates drawn by a seeded permutation, sorted. The candidates are the last ``held``
    training images when the model was trained without them (the config's ``validation: N``),
    else the images beyond the first ``n_cal``, which calibrate. The test split is never among them."""
    if held:
        if int(n_cal) + int(held) > int(n_train):
            raise InputError(f"autotune: validation {held} held-out images and calibration.samples {n_cal} overlap "
                             f"in a training split of {n_train} images: their sum must be at most {n_train}")
        rest = np.arange(int(n_train) - int(held), int(n_train))
    else:
        rest = np.arange(int(n_cal), int(n_train))
    if not len(rest):
        raise InputError(f"autotune: the training split has {n_train} images, all of them calibration images "
                         f"(calibration.samples {n_cal}); the validation split needs images beyond them")
    k = min(int(n_val), len(rest)) if n_val else len(rest)
    return np.sort(np.random.default_rng(seed).permutation(rest)[:k])


def base_format(cfg, board=None, name=None):
    """The base format: ``name`` or the config's only ``fixed``/``sparse`` (unpruned) format whose accel
    config is the board-sized ``sparse_cluster`` network kernel (``net_shape: board``) of ``board``."""
    from ..config import load_config
    from ..deploy.quantize.kprune import shape_of
    ok = []
    for f in cfg.formats.values():
        if f.type not in ("fixed", "sparse") or f.prune:
            continue
        acc = load_config(f.accel, check_fit=False)
        if shape_of(acc.params) is not None and (board is None or acc.board.name == board):
            ok.append(f.name)
    if name is not None:
        if name not in ok:
            raise InputError(f"--base {name!r}: not a fixed or unpruned sparse format of {printable(cfg.path)} on a "
                             f"board-sized sparse_cluster kernel{' of ' + board if board else ''}; such formats: "
                             f"{', '.join(ok) or 'none'}")
        return name
    if len(ok) != 1:
        raise InputError(f"autotune: {printable(cfg.path)} has {len(ok) or 'no'} fixed format(s) on a board-sized "
                         f"sparse_cluster kernel (net_shape: board){' of ' + board if board else ''}"
                         + (f" ({', '.join(ok)}): choose one with --base or --board" if ok else
                            ": add one, e.g. {type: fixed, accel: sparse8net_pynq-z2}"))
    return ok[0]


def halves(n, share=CONFIRM, seed=1):
    """A boolean mask over ``n`` validation images: True for the ``round(share * n)`` of them, drawn by a
    seeded permutation, that confirm the choice (the others search)."""
    k = int(round(float(share) * int(n)))
    if int(n) and not 0 < k < int(n):
        raise InputError(f"autotune: {n} validation images cannot be split into search and confirmation "
                         f"images at a share of {share:g}: give more validation images (--val-images, validation: N)")
    conf = np.zeros(int(n), bool)
    conf[np.random.default_rng(seed).permutation(int(n))[:k]] = True
    return conf


def level_name(base, s):
    return f"{base}_k{int(round(s * 1000)):03d}"


class Search:
    """The deployment pieces a search evaluates its candidates with (one import, one data load)."""

    def __init__(self, config_path, *, board=None, base=None, objective="latency", levels=LEVELS,
                 val_images=VAL_IMAGES, log=None):
        from ..deploy import datasets
        from ..deploy.quantize import task_formats
        from ..deploy.importer import trained
        from ..deploy.config import deployment_kwargs, load_deploy_config
        from ..deploy.reports.evaluate import _layout, float_reference, open_accelerators
        from ..deploy.importer.onnx_import import load_onnx
        if objective not in OBJECTIVES:
            raise InputError(f"--objective {objective!r}: one of {', '.join(OBJECTIVES)} (every candidate runs on the "
                             "same sized kernel, whose LUTs do not depend on a layer's sparsity)")
        levels = tuple(sorted(set(float(s) for s in levels)))
        if not levels or not all(0.0 < s < 1.0 for s in levels):
            raise InputError(f"levels {levels}: sparsities between 0 and 1 (exclusive)")
        self.t0 = time.perf_counter()
        self.log = log or (lambda msg: None)
        self.cfg = cfg = load_deploy_config(config_path)
        if cfg.calibration["mode"] != "static":
            raise InputError(f"{printable(cfg.path)}: calibration.mode {cfg.calibration['mode']!r}: autotune costs "
                             "the compiled model, which needs static radix points (mode: static)")
        self.net = load_onnx(cfg.model, output=cfg.output)
        self.ds = ds = datasets.load(cfg.data, layout=_layout(self.net, cfg.layout))
        if ds.x_train is None or ds.y_train is None or ds.y_train.dtype.kind not in "iu":
            raise InputError(f"{cfg.data}: autotune needs labelled training images (a classifier's x_train, "
                             "y_train): its validation split comes from them")
        self.task = "classification"
        cfg.formats = task_formats.resolve(cfg.formats, self.task, self.net)
        cfg.formats = trained.follow(cfg)
        self.base = base_format(cfg, board, base)
        self.board = board
        self.objective, self.levels = objective, levels
        self.n_cal = cfg.calibration["samples"]
        self.x_cal = ds.x_train[:self.n_cal]
        self.held = int(getattr(cfg, "validation", 0) or 0)
        self.val_images = val_images
        self.val_index = vi = split(len(ds.x_train), self.n_cal, val_images, held=self.held)
        self.x_val, self.y_val = ds.x_train[vi], np.asarray(ds.y_train[vi])
        y_ref = float_reference(cfg.model, self.x_val, output=self.net.output)
        self.float_ok = np.argmax(y_ref, 1) == self.y_val
        self.float_val = float(np.mean(self.float_ok))
        self.conf = halves(len(self.y_val))          # the confirmation images (the rest search)
        b = cfg.formats[self.base]
        for s in levels:                  # the base format pruned in the kernel's shape
            n = level_name(self.base, s)
            f = replace(b, name=n, type="sparse", prune=s, prune_shape="kernel")
            if n in cfg.formats and cfg.formats[n] != replace(f, auto=cfg.formats[n].auto):
                raise InputError(f"{printable(cfg.path)}: format {n!r} exists and is not {self.base} pruned to {s:g} in "
                                 "the kernel's shape, the name autotune gives that level: rename it")
            cfg.formats[n] = f
        self.layers = [la.name for la in self.net.engine_layers()]
        self.dep_kwargs = deployment_kwargs(cfg)
        self.accs = self._open(open_accelerators)
        self.cache = {}

    def _open(self, open_accelerators):
        from ..deploy.config import Assignment
        self.cfg.assignments["_autotune_base"] = Assignment("_autotune_base", self.base, {})
        return open_accelerators(self.cfg, "emu", ["_autotune_base"])

    def close(self):
        for a in self.accs.values():
            a.close()

    def assignment(self, lv, name="_autotune"):
        """The :class:`Assignment` of per-layer levels ``lv`` (a tuple, one index a layer: 0 the base,
        ``i`` the ``i``-th of :attr:`levels`)."""
        from ..deploy.config import Assignment
        fmts = [self.base] + [level_name(self.base, s) for s in self.levels]
        layers = {ln: fmts[i] for ln, i in zip(self.layers, lv) if i}
        return Assignment(name, self.base, layers)

    def evaluate(self, lv, x=None, y=None):
        """``{levels, accuracy, drop, cost, end_to_end_us, energy_uj, starts}`` of the per-layer levels
        ``lv`` on the validation images (cached), or on ``x``, ``y`` when given (not cached)."""
        lv = tuple(int(i) for i in lv)
        if x is None and lv in self.cache:
            return self.cache[lv]
        from ..deploy.run.runner import Deployment
        from ..deploy.quantize.shift_auto import cal_labels
        asg = self.assignment(lv)
        self.cfg.assignments[asg.name] = asg
        dep = Deployment(self.net, asg, self.cfg.formats, self.accs, **self.dep_kwargs)
        dep.task, dep.collect_stats = self.task, False
        dep.cal_labels = cal_labels(self.ds, self.n_cal, self.task)
        dep.calibrate(self.x_cal)
        xs, ys = (self.x_val, self.y_val) if x is None else (x, y)
        ok = np.argmax(dep.run(xs), 1) == ys
        cost = self._cost(dep, asg, xs[:1])
        r = dict(levels=lv, accuracy=float(np.mean(ok)), **cost)
        if x is None:
            r.update(self.split_drops(ok))
            self.cache[lv] = r
        return r

    def split_drops(self, ok):
        """The search images' ``{drop, bound, lost, gained}`` of the right answers ``ok`` on every
        validation image, and the same on the confirmation images as ``confirm``."""
        return dict(self.drops(ok[~self.conf], ~self.conf), confirm=self.drops(ok[self.conf], self.conf))

    def drops(self, ok, part=None):
        """``{drop, bound}`` in accuracy points of the validation images' right answers ``ok``
        against float's (module docstring); ``part``: a mask of the images ``ok`` holds."""
        fok = self.float_ok if part is None else self.float_ok[part]
        lost = int(np.sum(fok & ~ok))
        gained = int(np.sum(~fok & ok))
        n = len(ok)
        drop = 100.0 * (lost - gained) / n
        z = Z_HELD if self.held else Z
        return dict(drop=drop, bound=drop + z * 100.0 * np.sqrt(lost + gained) / n, lost=lost, gained=gained)

    def _cost(self, dep, asg, x1, check_fit=False):
        import tempfile
        from pathlib import Path
        import json
        from ..errors import InputError
        from ..network import artifact, latency
        from ..network.fit import check_network
        from ..deploy.lower.layers import program_of
        program, arrays = program_of(dep, self.net, self.cfg, asg.name, self.accs, x_cal=0)
        arrays["check/x"] = np.asarray(x1, np.float64)
        with tempfile.TemporaryDirectory(prefix="hlsnn-autotune-") as d:
            path = Path(d) / "c.hlsnn"
            artifact.write(path, program, arrays)
            res = latency.model(path, board=self.board)
        fits = {}
        if check_fit:                          # the kernel within the board's fit budget, as hlsnn compile holds it
            try:                               # (a baseline's: a candidate runs on the base's kernel)
                check_network(json.loads(json.dumps(program)), arrays)
                fits = dict(fits=True)
            except InputError:
                fits = dict(fits=False)
        e = (res.get("energy") or {}).get("uj_per_image")
        us = float(res["end_to_end_us"])
        return dict(end_to_end_us=us, energy_uj=None if e is None else float(e), starts=int(res["kernel_starts"]),
                    cost=us if self.objective == "latency" or e is None else float(e), **fits)

    def elapsed(self):
        return time.perf_counter() - self.t0


def within(r, max_drop):
    """Whether ``r`` is within ``max_drop`` on the confirmation images (its bound there)."""
    return bool(r["confirm"]["bound"] <= max_drop + 1e-9)


def search(s: Search, max_drop):
    """The sensitivity scan and the greedy descent (module docstring) on ``s``'s search images, then
    the choice on its confirmation images; returns ``(chosen, scan, path)``: the last assignment of
    the descent's path (the base, then each kept move) before the first whose bound on the
    confirmation images exceeds ``max_drop`` (the base when it does), the scan ``{(layer index,
    level): result}`` and the path's results."""
    nl, nv = len(s.layers), len(s.levels)
    zero = (0,) * nl
    base = s.evaluate(zero)
    s.log(f"base {s.base}: validation {100 * base['accuracy']:.2f} % (float {100 * s.float_val:.2f} %), "
          f"{base['end_to_end_us']:.1f} us")
    scan = {}
    for i in range(nl):
        for j in range(1, nv + 1):
            lv = list(zero)
            lv[i] = j
            scan[i, j] = s.evaluate(lv)
        s.log(f"scan {s.layers[i]}: " + ", ".join(
            f"{100 * s.levels[j - 1]:g}% {scan[i, j]['cost']:.1f} ({100 * scan[i, j]['accuracy']:.1f} %)"
            for j in range(1, nv + 1)))
    for j in range(1, nv + 1):                 # the uniform levels: single formats too
        s.evaluate((j,) * nl)

    def acc(r):                                # accuracy on the search images
        return 1.0 - (r["lost"] - r["gained"]) / max(1, int(np.sum(~s.conf)))

    def loss(i, j):
        return max(0.0, acc(base) - acc(scan[i, j])) if j else 0.0

    def cost(i, j):
        return scan[i, j]["cost"] if j else base["cost"]
    least = MIN_SAVING * base["cost"]
    cur, done, path = list(zero), set(), [base]
    while True:
        moves = []
        for i in range(nl):
            if i in done:
                continue
            nxt = next((j for j in range(cur[i] + 1, nv + 1) if cost(i, j) < cost(i, cur[i]) - least), None)
            if nxt is None:
                continue
            gain = cost(i, cur[i]) - cost(i, nxt)
            lost = loss(i, nxt) - loss(i, cur[i])
            moves.append((gain / max(lost, 1e-4), gain, -i, i, nxt))
        if not moves:
            break
        *_, i, j = max(moves)
        lv = list(cur)
        lv[i] = j
        r = s.evaluate(lv)
        ok = r["bound"] <= max_drop + 1e-9
        s.log(f"try {s.layers[i]} -> {100 * s.levels[j - 1]:g}%: {r['cost']:.1f}, search drop {r['drop']:.2f} "
              f"points (bound {r['bound']:.2f}): {'kept' if ok else 'rejected'}")
        if ok:
            cur = lv
            path.append(r)
        else:
            done.add(i)
    chosen = base
    for r in path:                             # fixed-sequence: in the path's order, up to the first failure
        if not within(r, max_drop):
            break
        chosen = r
    s.log(f"confirmed {path.index(chosen) if within(chosen, max_drop) else 'none'} of the path's {len(path) - 1} "
          f"moves on {int(np.sum(s.conf))} confirmation images")
    return chosen, scan, path


def pareto(results):
    """The evaluated results no other is both cheaper (or as cheap) and more accurate (or as
    accurate) than, by cost."""
    out = []
    for r in sorted(results, key=lambda r: (r["cost"], -r["accuracy"])):
        if not out or r["accuracy"] > out[-1]["accuracy"]:
            out.append(r)
    return out


def single(s: Search, name, x=None, y=None):
    """The config's assignment ``name`` on its own accelerators, evaluated as a candidate is (on the
    validation images, or on ``x``, ``y``): ``{name, accuracy, drop, bound, cost, ...}``."""
    from ..deploy.config import Assignment
    from ..deploy.reports.evaluate import open_accelerators
    from ..deploy.run.runner import Deployment
    from ..deploy.quantize.shift_auto import cal_labels
    a = s.cfg.assignments[name]
    accs = open_accelerators(s.cfg, "emu", [name])
    saved = s.accs
    try:
        dep = Deployment(s.net, Assignment(name, a.default, {}), s.cfg.formats, accs, **s.dep_kwargs)
        dep.task, dep.collect_stats = s.task, False
        dep.cal_labels = cal_labels(s.ds, s.n_cal, s.task)
        dep.calibrate(s.x_cal)
        xs, ys = (s.x_val, s.y_val) if x is None else (x, y)
        ok = np.argmax(dep.run(xs), 1) == ys
        s.accs = accs
        cost = s._cost(dep, a, xs[:1], check_fit=True)
    finally:
        s.accs = saved
        for acc in accs.values():
            acc.close()
    r = dict(name=name, default=a.default, accuracy=float(np.mean(ok)), **cost)
    if x is None:
        r.update(s.split_drops(ok))
    return r


def baselines(s: Search):
    """The config's single-format assignments (``{default: F}``, no layers) whose formats run on
    the search's board and whose network kernel fits it for this model (``hlsnn compile``'s fit
    budget, :func:`hlsnn.network.fit.check_network`), each evaluated as a candidate would be (validation accuracy, modelled
    cost, :func:`single`): what the choice is compared with, and chosen over the mix when one
    is faster within the drop (the engine per model)."""
    from ..config import load_config
    board = s.board or load_config(s.cfg.formats[s.base].accel, check_fit=False).board.name
    out = []
    for name, a in list(s.cfg.assignments.items()):
        if a.layers or name.startswith("_autotune") or name == s.base:
            continue
        if load_config(s.cfg.formats[a.default].accel, check_fit=False).board.name == board:
            r = single(s, name)
            if r["fits"]:
                out.append(r)
            else:                                     # hlsnn compile would refuse it: no baseline
                s.log(f"single format {name}: its network kernel does not fit {board} for this model; left out")
    return out


def run(config_path, *, board=None, max_drop=1.0, objective="latency", base=None, levels=LEVELS,
        val_images=VAL_IMAGES, name="autotune", write=True, test=False, train=None, log=None):
    """Search (module docstring) and, with ``write``, add the chosen assignment to the config as
    ``name`` (:func:`write_assignment`). Returns a JSON-able dict: ``float_val``, ``base``,
    ``chosen`` (its per-layer formats, validation accuracy and drop, cost), ``pareto``,
    ``baselines`` (the config's single-format assignments on the board), ``uniform`` (every layer
    at one level), ``path`` (the descent's kept moves), ``speedup`` over the fastest single format
    within ``max_drop`` on the confirmation images (those and the uniform levels), ``evaluations``,
    ``seconds``; with ``test`` the test-split accuracy of float, of the chosen assignment and of
    each of the path's, measured after the choice; with ``train`` (``train(search, chosen)``,
    :func:`hlsnn.train.autotune.train_chosen`, given by the command) the chosen assignment
    fine-tuned and measured again, as ``train``."""
    if not 0.0 <= float(max_drop) <= 100.0:
        raise InputError(f"--max-drop {max_drop!r}: accuracy points, 0..100")
    s = Search(config_path, board=board, base=base, objective=objective, levels=levels, val_images=val_images,
               log=log)
    try:
        chosen, _, path = search(s, float(max_drop))
        singles = baselines(s)
        nl = len(s.layers)
        uniform = [dict(name=level_name(s.base, s.levels[j - 1]), **s.cache[(j,) * nl]) for j in range(1, len(s.levels) + 1)]
        base_r = dict(name=s.base, **s.cache[(0,) * nl])
        fmt_of = lambda r: s.assignment(r["levels"]).layers      # noqa: E731
        ok = [r for r in singles + uniform + [base_r] if within(r, max_drop)]
        fastest = min(ok, key=lambda r: r["cost"]) if ok else None
        res = dict(config=str(config_path), board=board or s.cfg.formats[s.base].accel, objective=objective,
                   max_drop=float(max_drop), base=s.base, levels=list(s.levels), layers=s.layers,
                   validation_images=int(len(s.x_val)), confirmation_images=int(np.sum(s.conf)),
                   validation_held_out=bool(s.held), z=Z_HELD if s.held else Z, min_saving=MIN_SAVING,
                   float_val=s.float_val,
                   chosen=dict(name=name, default=s.base, layers=fmt_of(chosen), within=within(chosen, max_drop),
                               **_plain(chosen)),
                   path=[dict(layers=fmt_of(r), **_plain(r)) for r in path],
                   pareto=[dict(layers=fmt_of(r), **_plain(r)) for r in pareto(s.cache.values())],
                   baselines=singles, uniform=[_plain(r) for r in uniform], base_result=_plain(base_r),
                   fastest_single=None if fastest is None else dict(name=fastest["name"], cost=fastest["cost"]),
                   evaluations=len(s.cache) + len(singles), seconds=round(s.elapsed(), 1))
        other = [r for r in singles + uniform if within(r, max_drop) and (r["cost"] < chosen["cost"] or not
                                                                            within(chosen, max_drop))]
        if other:                            # a single format is faster within the drop
            best = min(other, key=lambda r: r["cost"])
            if best.get("levels") is not None:                  # a uniform level: every layer at it, one kernel
                res["chosen"] = dict(_plain(best), name=name, default=s.base, layers=fmt_of(best), within=True,
                                     uniform=best["name"])
            else:                                               # another engine's: the engine per model
                res["chosen"] = dict(best, name=name, layers={}, levels=None, single=best["name"], within=True)
            chosen = res["chosen"]
        res["speedup"] = None if fastest is None else fastest["cost"] / chosen["cost"]
        single_shipped = [r for r in singles + [base_r] if within(r, max_drop)]
        res["speedup_vs_shipped"] = (min(r["cost"] for r in single_shipped) / chosen["cost"]
                                     if single_shipped else None)
        if test:
            from ..deploy.reports.evaluate import float_reference
            y_ref = float_reference(s.cfg.model, s.ds.x_test, output=s.net.output)
            yt = np.asarray(s.ds.y_test)
            got = (single(s, chosen["single"], s.ds.x_test, yt) if chosen.get("single") else
                   s.evaluate(chosen["levels"], s.ds.x_test, yt))
            res["test"] = dict(float=float(np.mean(np.argmax(y_ref, 1) == yt)), chosen=got["accuracy"],
                               path=[s.evaluate(r["levels"], s.ds.x_test, yt)["accuracy"] for r in path])
        if write:
            c = res["chosen"]
            res["written"] = write_assignment(config_path, name, c["default"], c["layers"], s)
        if train is not None:
            res["train"] = train(s, res["chosen"])
    finally:
        s.close()
    return res


def _plain(r):
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()}


_TOP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:")


def _block_end(lines, key):
    """``(index of the line 'key:', index after the block's last indented line)``, or None when
    the config has no block-style top-level ``key:`` (a flow mapping on the same line)."""
    start = next((i for i, ln in enumerate(lines) if _TOP.match(ln) and _TOP.match(ln).group(1) == key), None)
    if start is None or lines[start].split(":", 1)[1].split("#", 1)[0].strip():
        return None
    end = start + 1
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        if ln.strip() and not ln.startswith((" ", "\t", "#")):
            break
        if ln.strip() and not ln.lstrip().startswith("#"):
            end = i + 1
    return start, end


def write_assignment(config_path, name, base, layers, s):
    """Add ``assignments.NAME: {default: BASE, layers: {...}}`` and the kernel-pruned formats it uses
    to the config file, as text inserted at the end of its ``formats:`` and ``assignments:``
    blocks (its comments and layout kept; no YAML writer rewrites it), then read it back with the
    config checks; on any error the file is left as it was. Returns the lines added."""
    from pathlib import Path
    from ..config import read_yaml
    from ..deploy.config import load_deploy_config
    path = Path(config_path)
    text = path.read_text()
    raw = read_yaml(path)
    if name in (raw.get("assignments") or {}):
        raise InputError(f"--name {name!r}: {printable(path)} already has an assignment of that name; give another")
    lines = text.splitlines()
    fb, ab = _block_end(lines, "formats"), _block_end(lines, "assignments")
    if fb is None or ab is None:
        raise InputError(f"{printable(path)}: autotune adds to block-style formats: and assignments: sections "
                         "(one entry a line); this config has none or a one-line one: use --no-write and copy the "
                         "assignment from the output")
    base_raw = dict(raw["formats"][base])
    fb_spec = s.cfg.formats[base]
    new_f = []
    for fmt in sorted(set(layers.values())):
        if fmt in (raw.get("formats") or {}):
            continue
        spec = s.cfg.formats[fmt]
        d = {"type": "sparse", "accel": base_raw["accel"], "prune": spec.prune, "prune_shape": "kernel"}
        d.update({k: v for k, v in base_raw.items() if k not in d})
        d.setdefault("radix", fb_spec.radix)            # the base's resolved rule (sparse's default differs)
        if fb_spec.weight_scale == "auto" or "weight_scale" in base_raw:
            d.setdefault("weight_scale", base_raw.get("weight_scale", "auto"))
        body = ", ".join(f"{k}: {v}" for k, v in d.items())
        new_f.append(f"  {fmt}: {{{body}}}")
    lay = ", ".join(f"{k}: {v}" for k, v in layers.items())
    new_a = [f"  # hlsnn autotune: {len(layers)} of {len(s.layers)} layers pruned in the kernel's shape" if base == s.base
             else f"  # hlsnn autotune: every layer {base}, faster within the drop than any mix on {s.base}'s kernel",
             f"  {name}: {{default: {base}" + (f", layers: {{{lay}}}}}" if layers else "}")]
    out = list(lines)
    for idx, add in sorted([(fb[1], new_f), (ab[1], new_a)], reverse=True):
        out[idx:idx] = add
    new_text = "\n".join(out) + "\n"
    path.write_text(new_text)
    try:
        load_deploy_config(path)
    except Exception:
        path.write_text(text)
        raise
    return new_f + new_a


def format_result(res) -> str:
    """The text ``hlsnn autotune`` prints: the search's figures and the Pareto front as a table."""
    unit = "us" if res["objective"] == "latency" else "uJ"
    c = res["chosen"]
    nc = res.get("confirmation_images", 0)
    lines = [f"autotune {res['config']}: base {res['base']}, {len(res['layers'])} layers, levels "
             f"{', '.join(f'{100 * x:g}%' for x in res['levels'])}; {res['validation_images']} validation images "
             f"({'held out of training' if res.get('validation_held_out') else 'training split, seen in training'}"
             f"; {res['validation_images'] - nc} search, {nc} confirm), float {100 * res['float_val']:.2f} %",
             f"  {res['evaluations']} evaluations in {res['seconds']:.0f} s",
             "", f"  Pareto front ({res['objective']}, {unit}; accuracy on every validation image; drop and bound "
                 f"(the drop + {res.get('z', Z):g} standard error(s)) on the search | confirmation images):",
             f"  {'cost':>9}  {'accuracy':>8}  {'drop':>6}  {'bound':>6} | {'drop':>6}  {'bound':>6}  "
             "layers pruned (sparsity)"]

    def row(r):
        return (f"{r['cost']:9.1f}  {100 * r['accuracy']:7.2f}%  {r['drop']:6.2f}  {r['bound']:6.2f} | "
                f"{r['confirm']['drop']:6.2f}  {r['confirm']['bound']:6.2f}")
    for r in res["pareto"]:
        lay = ", ".join(f"{k} {_pct(v)}" for k, v in r["layers"].items()) or "(none: the base)"
        lines.append(f"  {row(r)}  {lay}")
    lines += ["", "  the descent's path (each kept move; confirmed in this order up to the first bound over the drop):"]
    for r in res.get("path", []):
        lay = ", ".join(f"{k} {_pct(v)}" for k, v in r["layers"].items()) or "(none: the base)"
        lines.append(f"  {row(r)}  {lay}")
    lines += ["", "  single formats on the board:"]
    for r in res["baselines"] + [res["base_result"]] + \
            [dict(u, name=f"{u['name']} (every layer)") for u in res["uniform"]]:
        lines.append(f"  {r['name']:<30} {row(r)}")
    lay = ", ".join(f"{k} {_pct(v)}" for k, v in c["layers"].items()) or (
        f"every layer {c['default']} (another engine's single format is faster within the drop)"
        if c.get("single") else "(none)")
    if c.get("uniform"):
        lay = f"every layer {c['uniform']} (a uniform level is faster within the drop than the confirmed mix)"
    lines += ["", f"  chosen ({c['name']}): {c['cost']:.1f} {unit}, validation {100 * c['accuracy']:.2f} % "
                  f"(confirmation drop {c['confirm']['drop']:.2f} points, bound {c['confirm']['bound']:.2f}, "
                  f"max {res['max_drop']:g}{'' if c.get('within', True) else ': NOT within the drop'}); {lay}"]
    if res.get("speedup_vs_shipped"):
        lines.append(f"  {res['speedup_vs_shipped']:.2f}x the fastest of the config's single-format assignments "
                     f"within the drop; {res['speedup']:.2f}x the fastest single format including the uniform "
                     f"kernel-pruned levels ({res['fastest_single']['name']})")
    if "test" in res:
        t = res["test"]
        lines.append(f"  test split (after the choice): chosen {100 * t['chosen']:.2f} %, float {100 * t['float']:.2f} %"
                     + (f"; the path: {', '.join(f'{100 * a:.2f}' for a in t['path'])}" if t.get("path") else ""))
    if res.get("train"):
        t = res["train"]
        v = t["validation"]
        lines.append(f"  --train ({t['epochs']} epochs, {len(t['layers'])} pruned layers): {t['model']}, {t['config']}: "
                     f"{t['cost']:.1f} {unit}, validation {100 * v['accuracy']:.2f} % (confirmation drop "
                     f"{v['confirm']['drop']:.2f}, bound {v['confirm']['bound']:.2f})"
                     + (f", test {100 * t['test']:.2f} %" if "test" in t else ""))
    if res.get("written"):
        lines.append(f"  added to {res['config']}:")
        lines += [f"    {ln.strip()}" for ln in res["written"]]
    return "\n".join(lines)


def _pct(fmt_name):
    m = re.search(r"_k(\d{3})$", str(fmt_name))
    return f"{int(m.group(1)) / 10:g}%" if m else str(fmt_name)


def plot(res, out):
    """The evaluated front as a PNG: cost against validation accuracy, the front joined, the single
    formats and the chosen point marked (needs matplotlib: ``hlsnn[plot]``)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError(f"--plot needs matplotlib ({exc}): pip install \"hlsnn[plot]\"") from None
    unit = "us" if res["objective"] == "latency" else "uJ"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    pf = res["pareto"]
    ax.plot([r["cost"] for r in pf], [100 * r["accuracy"] for r in pf], "o-", color="C0", label="Pareto front (mixed)")
    sing = [r for r in res["baselines"] + [res["base_result"]] if r["starts"] == 1]     # one kernel start
    ax.scatter([r["cost"] for r in sing], [100 * r["accuracy"] for r in sing], marker="s", color="C1",
               label="single formats (config, one start)", zorder=3)
    for r in sing:
        ax.annotate(r["name"], (r["cost"], 100 * r["accuracy"]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    un = res["uniform"]
    ax.scatter([r["cost"] for r in un], [100 * r["accuracy"] for r in un], marker="^", color="C2",
               label="uniform kernel pruning", zorder=3)
    c = res["chosen"]
    ax.scatter([c["cost"]], [100 * c["accuracy"]], marker="*", s=180, color="C3", label="chosen", zorder=4)
    ax.axhline(100 * res["float_val"] - res["max_drop"], color="grey", ls="--", lw=0.8,
               label=f"float - {res['max_drop']:g} point")
    lo = 100 * res["float_val"] - max(3.0, 3 * res["max_drop"])
    ax.set_ylim(lo, 100.3)                   # points far below the drop are left out of the frame
    ax.set_xscale("log")
    ax.set_xlabel(f"modelled end to end ({unit}, log scale)" if unit == "us" else
                  "modelled energy per image (uJ, log scale)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(f"hlsnn autotune: {res['config'].split('/')[-1]}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
