"""A shift format's ``radix: auto`` and ``weight_fit: auto`` (the config's defaults for ``twohot``
and ``pot``): the activation radix rule (``lse`` or ``msb``) and the codes' fit (``network`` or
``output``) chosen per model by fidelity to the float model on the calibration images, and by
their labels where they beat it significantly.

No one pair is best for every model: on the test digits each pair leaves some model further
from float than another. So the deployment calibrates once with each pair of
:data:`RADIX` x :data:`FIT` and keeps the one whose outputs on the calibration images are nearest the float
model's (no labels):

1. the float model's outputs ``y_f`` on the calibration images: the imported network in float64
   (:func:`hlsnn.deploy.run.hostops.float_tensors`), one pass;
2. per pair, the deployment calibrated with it (every ``auto`` field of the assignment's shift
   formats takes the pair's value; fields the config sets, and the other formats, are kept) and
   run on the same images, ``y_q``;
3. the score: the relative RMS error ``||y_q - y_f|| / ||y_f||``, lower first (an exact tie
   keeps the earlier pair of :data:`RADIX` x :data:`FIT`); a classifier (the deployment's
   :attr:`~hlsnn.deploy.run.runner.Deployment.task`, or, when not set, a 2-D output of more than one
   column) keeps instead a pair whose ``argmax y_q`` is ``argmax y_f`` on significantly more
   images (``b`` images where it agrees with float and the pair of least error does not, ``c``
   the other way, ``b - c > Z sqrt(b + c)``: McNemar's test as in step 4; of such pairs the most
   agreeing, then the error). The count of agreeing images does not come first: one image of
   128 would outweigh any error, and the pairs of ``weight_fit: output``, fitted to the
   calibration images' own layer outputs, win that count on the very images they were fitted to;
4. a classifier whose calibration images have labels (:attr:`~hlsnn.deploy.run.runner.Deployment.cal_labels`:
   ``hlsnn deploy`` and ``hlsnn compile`` give the data set's ``y_train``) keeps step 3's pair
   unless another classifies significantly more of them as labelled: ``b`` images right where
   step 3's pair is wrong, ``c`` the other way, ``b - c > Z sqrt(b + c)`` (McNemar's test,
   :data:`Z` = 2); of such pairs, the most images right, then the error. Fidelity first
   because a pair nearer the float model is the safer bet when accuracies are within noise;
   the labels only overrule it when the float model is itself beaten on its training images.

The deployment is then exactly the one the chosen pair set by hand gives: the pairs calibrate
in the reverse order of :data:`RADIX` x :data:`FIT`, so the first pair (the likeliest choice)
is the last calibrated; when it wins, its layers' statistics (which its scoring run moved) go
back to the calibration's; otherwise, or where a run moves more than those (a BFP layer, a
host layer in fixed point), the deployment calibrates once more with the chosen pair. Cost:
one calibration and one run over the calibration images per pair (four, two when the config
sets one of the fields), one float pass, and one calibration more unless the first pair wins.
Every calibration chooses again. Deterministic: the same images give the same choice. Only radix
points and codes change (as with either value set by hand), so emu, csim and the board agree
bit for bit. The choice and the scores are in :attr:`Deployment.shift_choice`, in ``hlsnn
deploy``'s result (``shift_choice`` of each assignment) and in the compiled program
(``calibration.shift_choice``).

A model :func:`hlsnn.train.export` wrote is deployed with the radix rule and fit it was trained
with instead (:mod:`hlsnn.deploy.importer.trained` sets the ``auto`` fields from its sidecar first).
"""
from __future__ import annotations

import copy
import dataclasses
import itertools

import numpy as np

#: the (radix, weight_fit) values tried, in order of preference (a tie keeps the earlier)
RADIX = ("lse", "msb")
FIT = ("network", "output")

#: choose on the first half of the calibration images, score on the other half, then calibrate
#: on all with the pair chosen
HOLD_OUT = False

#: the format types whose ``auto`` fields are chosen here (``fixed``'s radix is ``lse``, the config's)
TYPES = ("twohot", "pot")


def _auto(fmt):
    return fmt.type in TYPES and (getattr(fmt, "radix", "msb") == "auto" or getattr(fmt, "weight_fit", "") == "auto")


def _base(dep):
    """The deployment's formats as it was made (before a choice replaced the ``auto`` ones)."""
    return dep.__dict__.get("_auto_formats") or dep.formats


def wanted(dep):
    """The names of the formats of ``dep``'s engine layers with a field chosen here (every
    calibration chooses again)."""
    base = _base(dep)
    return sorted({n for n in (dep.assignment.format_of(la.name) for la in dep.net.engine_layers())
                   if n in base and _auto(base[n])})


def candidates(formats):
    """The pairs ``"RADIX+FIT"`` to try for the (auto) formats ``formats``: every value of a field
    that one of them leaves to ``auto``, else the field's own (``-`` where they differ)."""
    def values(field, every):
        if any(getattr(f, field) == "auto" for f in formats):
            return every
        own = {getattr(f, field) for f in formats}
        return (own.pop(),) if len(own) == 1 else ("-",)
    return [f"{r}+{w}" for r, w in itertools.product(values("radix", RADIX), values("weight_fit", FIT))]


def spec(fmt, pair):
    """``fmt`` with its ``auto`` fields set from ``pair`` (``"RADIX+FIT"``)."""
    radix, _, fit = pair.partition("+")
    return dataclasses.replace(fmt, radix=radix if fmt.radix == "auto" else fmt.radix,
                               weight_fit=fit if fmt.weight_fit == "auto" else fmt.weight_fit)


def _use(dep, names, pair, base):
    """Every engine layer gets a fresh executor (no state of the last calibration), the formats
    in ``names`` with ``pair``."""
    from ..run.executors import EXECS
    dep.formats = {k: (spec(f, pair) if k in names else f) for k, f in base.items()}
    for layer in dep.net.engine_layers():
        fmt = dep.formats[dep.assignment.format_of(layer.name)]
        dep.execs[layer.name] = EXECS[fmt.type](layer, fmt, dep._accelerators[fmt.accel], dep)
    dep.calibrated, dep._fastnet = False, None


def _snapshot(dep):
    """The layers' statistics as the calibration left them (a run moves them), or None where a
    run moves more: a host layer in fixed point, a MatMul of two activations, a layer not on
    ``shift_mac`` (a BFP layer's rolling exponents)."""
    from ..run.executors import ShiftExec
    if dep.host or getattr(dep, "actmm", None) or not all(type(ex) is ShiftExec for ex in dep.execs.values()):
        return None
    return {k: (copy.deepcopy(ex.stats), ex.in_shape) for k, ex in dep.execs.items()}


def _restore(dep, snap):
    for k, (stats, shape) in snap.items():
        dep.execs[k].stats, dep.execs[k].in_shape = stats, shape


def classifier(dep, y):
    """True when ``dep`` is scored as a classifier (step 3: argmax agreement may overrule the error)."""
    task = getattr(dep, "task", None)
    if task is not None:
        return task == "classification"
    return y.ndim == 2 and y.shape[1] > 1


def labels(dep, n):
    """The calibration images' labels the caller gave (:attr:`Deployment.cal_labels`, integer
    classes, one per image of the ``n``) or None: a classifier then scores by them first."""
    y = getattr(dep, "cal_labels", None)
    if y is None:
        return None
    y = np.asarray(y)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        return None
    return y


#: step 4's significance: a pair replaces the most faithful one when ``b - c > Z * sqrt(b + c)``
#: (McNemar's test, about two standard deviations)
Z = 2.0


def score(y_q, y_f, by_class, y_true=None):
    """``(images whose class is the float model's or None, relative RMS error, a bool per image:
    its class is its label, or None)`` of ``y_q``."""
    y_q, y_f = np.asarray(y_q, np.float64), np.asarray(y_f, np.float64)
    cls = np.argmax(y_q.reshape(len(y_q), -1), 1) if by_class else None
    agree = int(np.sum(cls == np.argmax(y_f.reshape(len(y_f), -1), 1))) if by_class else None
    right = cls == y_true if by_class and y_true is not None else None
    rel = float(np.sqrt(np.sum((y_q - y_f) ** 2)) / max(np.sqrt(np.sum(y_f ** 2)), 1e-30))
    return agree, rel, right


def significantly_better(right, best):
    """The pairs whose images right (``right[pair]``, a bool per image: of their label's class in
    step 4, of the float model's class in step 3) beat ``best``'s by McNemar's test: ``b`` images
    right where ``best`` is wrong, ``c`` the other way, ``b - c > Z * sqrt(b + c)``."""
    out = []
    for p, r in right.items():
        b, c = int(np.sum(r & ~right[best])), int(np.sum(~r & right[best]))
        if b - c > Z * np.sqrt(b + c):
            out.append(p)
    return out


def choose(dep, x_cal, calibrate_once):
    """Calibrate ``dep`` on ``x_cal`` by the module docstring's rule; ``calibrate_once(x)``
    calibrates it with its formats as they are. Sets and returns ``dep.shift_choice``."""
    names = set(wanted(dep))
    base = dep.__dict__.setdefault("_auto_formats", dict(dep.formats))
    pairs = candidates([base[n] for n in sorted(names)])
    from ..run.hostops import float_tensors
    y_f = np.asarray(float_tensors(dep.net, x_cal)[dep.net.output], np.float64)
    by_class = classifier(dep, y_f)
    y_true = labels(dep, len(x_cal)) if by_class else None
    x_fit, x_score, y_score, t_score = x_cal, x_cal, y_f, y_true
    if HOLD_OUT and len(x_cal) > 1:
        h = len(x_cal) // 2
        x_fit, x_score, y_score = x_cal[:h], x_cal[h:], y_f[h:]
        t_score = None if y_true is None else y_true[h:]
    scores, snap, right, same = {}, None, {}, {}
    for pair in reversed(pairs):               # the first pair, the likeliest choice, calibrated last
        _use(dep, names, pair, base)
        calibrate_once(x_fit)
        snap = _snapshot(dep)
        y_q = dep.run(x_score)
        agree, rel, right[pair] = score(y_q, y_score, by_class, t_score)
        if by_class:                           # a bool per image: its class is the float model's
            same[pair] = np.argmax(y_q.reshape(len(y_q), -1), 1) == np.argmax(y_score.reshape(len(y_score), -1), 1)
        scores[pair] = {"relative_rms_error": round(rel, 6), **({"agreement": agree} if by_class else {}),
                        **({"correct": int(np.sum(right[pair]))} if right[pair] is not None else {})}
    fidelity = lambda p: (scores[p]["relative_rms_error"], pairs.index(p))  # noqa: E731
    best = min(pairs, key=fidelity)
    if by_class:                               # step 3: classes significantly more often float's
        agreeing = significantly_better(same, best)
        if agreeing:
            best = min(agreeing, key=lambda p: (-scores[p]["agreement"],) + fidelity(p))
    better = significantly_better(right, best) if t_score is not None else []
    if better:                                 # step 4: the labels say another pair classifies better
        best = min(better, key=lambda p: (-scores[p]["correct"],) + fidelity(p))
    if best == pairs[0] and x_fit is x_cal and snap is not None:
        _restore(dep, snap)                    # the statistics the scoring run moved: as the calibration left them
        dep._fastnet = None                    # and the program compiled from them afresh, as after any calibration
    else:                                      # the deployment as a plain calibration with that pair leaves it
        _use(dep, names, best, base)
        calibrate_once(x_cal)
    dep.shift_choice = {"formats": sorted(names), "chosen": best, "images": len(x_score),
                        "held_out": x_fit is not x_cal,
                        "by": "relative RMS error against float, unless a pair's argmax agrees with float's on "
                        f"significantly more images (McNemar, Z = {Z:g})"
                        + (f"; a pair of significantly more images of their label's class (McNemar, Z = {Z:g}) "
                           "before it" if y_true is not None else "") if by_class
                        else "relative RMS error against float",
                        "scores": {p: scores[p] for p in pairs}}
    return dep.shift_choice


def cal_labels(ds, n, task):
    """The labels of the ``n`` calibration images (``ds.y_train[:n]``) for a classifier whose data
    set has integer ones, else None (:attr:`hlsnn.deploy.run.runner.Deployment.cal_labels`)."""
    y = getattr(ds, "y_train", None)
    if task != "classification" or y is None or len(y) < n:
        return None
    y = np.asarray(y[:n])
    return y if y.ndim == 1 and np.issubdtype(y.dtype, np.integer) else None
