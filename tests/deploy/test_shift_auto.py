"""A shift format's ``radix: auto`` / ``weight_fit: auto`` (hlsnn.deploy.quantize.shift_auto, issue 52): the
config leaves both to the deployment, which keeps the (radix, fit) pair whose outputs on the
calibration images are nearest the float model's. Checked against deployments with each pair set
by hand, scored here against a float reference built by loops (not hlsnn's float pass): the
choice is the best pair by the rule, its outputs are that pair's bit for bit, on csim and the
simulated board too, and the compiled program records it."""
import numpy as np
import pytest
from conftest import ROOT
from hlsnn.deploy.quantize import shift_auto
from hlsnn.deploy.config import Assignment, FormatSpec, load_deploy_config
from hlsnn.deploy.importer.graph import Layer, Network
from hlsnn.deploy.run.runner import Deployment
from hlsnn.runtime import Accelerator
from test_shift_netfit import _patches

SHIFT = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"
DATA = ROOT / "tests" / "data" / "torch" / "beyond"
PAIRS = ["lse+network", "lse+output", "msb+network", "msb+output"]


def test_the_config_leaves_a_shift_formats_radix_and_fit_to_the_deployment(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"name: m\nmodel: {DATA / 'v_f_unet_bil_ts17.onnx'}\ndata: digits\nformats:\n"
                   "  t: {type: twohot, accel: shift8_pynq-z2}\n"
                   "  p: {type: pot, accel: shift8_pynq-z2}\n"
                   "  tm: {type: twohot, accel: shift8_pynq-z2, radix: msb, weight_fit: output}\n"
                   "  f: {type: fixed, accel: sparse8_pynq-z2}\n"
                   "  s: {type: sparse, accel: sparse8_pynq-z2}\n"
                   "  b: {type: bfp, accel: bfp8_zcu104}\n")
    got = {k: (f.radix, f.weight_fit) for k, f in load_deploy_config(cfg).formats.items()}
    assert got == {"t": ("auto", "auto"), "p": ("auto", "auto"), "tm": ("msb", "output"), "f": ("lse", "output"),
                   "s": ("msb", "output"), "b": ("msb", "output")}


def _small(rng, outputs=10):
    """x -> c1 (3x3, 4 channels, ReLU) -> c2 (3x3 depthwise, ReLU) -> dense."""
    w = lambda *s: rng.normal(0, 0.5, s)
    layers = [Layer("c1", "conv", ["x"], "t1", w=w(4, 1, 3, 3), b=w(4) * 0.2, relu=True, pad=1),
              Layer("c2", "conv", ["t1"], "t2", w=w(4, 1, 3, 3), b=w(4) * 0.2, relu=True, pad=1, group=4),
              Layer("fl", "host", ["t2"], "t3", op="Flatten", attrs={"axis": 1}),
              Layer("fc", "dense", ["t3"], "y", w=w(outputs, 4 * 36), b=w(outputs) * 0.2)]
    return Network(name="n", path="", input="x", input_shape=(None, 1, 6, 6), output="y", layers=layers)


def _float(net, x):
    """The network in float64 by loops: explicit patches per group, then a matrix product."""
    for la in net.layers:
        if la.kind == "conv":
            g, z = la.group, la.w.shape[0]
            outs = []
            for k in range(g):
                xg = x[:, k * x.shape[1] // g:(k + 1) * x.shape[1] // g]
                wg = la.w[k * z // g:(k + 1) * z // g].reshape(z // g, -1)
                outs.append((_patches(xg, 3, 3, 1, 1) @ wg.T + la.b[k * z // g:(k + 1) * z // g])
                            .reshape(x.shape[0], 6, 6, -1).transpose(0, 3, 1, 2))
            x = np.maximum(np.concatenate(outs, axis=1), 0)
        elif la.kind == "dense":
            x = x.reshape(len(x), -1) @ la.w.T + la.b
        else:
            x = x.reshape(len(x), -1)
    return x


def _dep(net, acc, fmt, task=None, labels=None):
    dep = Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc})
    dep.task, dep.cal_labels = task, labels
    return dep


def _stats(dep):
    return {k: (ex.f_x, ex.f_out, ex.stats.sat_count, ex.stats.input_density, list(ex.stats.histogram), ex.in_shape,
                ex.wq.code_values().tolist(), np.asarray(ex.b_fit).tolist()) for k, ex in dep.execs.items()}


def _score(y, ref, by_class, labels=None):
    """(-images of their label's class (0 without labels), -agreement (0 for a regression), relative error)."""
    agree = int(np.sum(np.argmax(y, 1) == np.argmax(ref, 1)))
    correct = 0 if labels is None else int(np.sum(np.argmax(y, 1) == labels))
    return (-correct, -agree if by_class else 0, np.linalg.norm(y - ref) / np.linalg.norm(ref))


def _mcnemar(right, best):
    """The pairs whose bool per image beats ``best``'s: ``b - c > 2 sqrt(b + c)``."""
    out = []
    for p in PAIRS:
        b, c = np.count_nonzero(right[p] & ~right[best]), np.count_nonzero(right[best] & ~right[p])
        if b - c > 2 * (b + c) ** 0.5:
            out.append(p)
    return out


def _faithful(scores, outs, ref, by_class):
    """The pair of least error (then order); for a classifier, one whose classes are float's on
    significantly more images instead (the most such images, then error and order)."""
    fid = lambda p: (scores[p][2], PAIRS.index(p))     # noqa: E731
    best = min(PAIRS, key=fid)
    if by_class:
        agreeing = _mcnemar({p: np.argmax(outs[p], 1) == np.argmax(ref, 1) for p in PAIRS}, best)
        if agreeing:
            best = min(agreeing, key=lambda p: (scores[p][1],) + fid(p))
    return best


def _want(scores, outs, labels, ref, by_class=True):
    """The most faithful pair (:func:`_faithful`); with labels, a pair whose images right beat it
    by McNemar's test at two standard deviations first (the most right, then error and order)."""
    fid = _faithful(scores, outs, ref, by_class)
    if labels is None:
        return fid
    better = _mcnemar({p: np.argmax(outs[p], 1) == labels for p in PAIRS}, fid)
    return min(better, key=lambda p: (scores[p][0], scores[p][2], PAIRS.index(p))) if better else fid


@pytest.mark.parametrize("typ,task,seed,labelled", [("twohot", None, 0, False), ("twohot", None, 1, False),
                                                    ("pot", None, 2, False), ("twohot", "regression", 3, False),
                                                    ("pot", "classification", 4, False),
                                                    ("twohot", "classification", 5, "noisy"), ("pot", None, 6, "noisy"),
                                                    ("twohot", None, 7, "pair"), ("pot", None, 8, "pair")])
def test_the_choice_is_the_pair_nearest_the_float_model_and_runs_its_bits(typ, task, seed, labelled):
    """Without labels: the most images of the float model's class, then the least error; with the
    calibration images' labels (``cal_labels``): a pair that classifies significantly more of them
    right instead ("pair": the labels are the least faithful pair's classes, so it must win)."""
    rng = np.random.default_rng([seed, 5203])
    net = _small(rng)
    x_cal, x = rng.uniform(0, 1, (48, 1, 6, 6)), rng.uniform(0, 1, (16, 1, 6, 6))
    ref = _float(net, x_cal)
    by_class = task != "regression"
    # labels near the float model's classes (a noisy copy), so that the pairs' counts differ
    labels = np.argmax(ref + rng.normal(0, 0.5 * ref.std(), ref.shape), 1) if labelled == "noisy" else None
    acc = Accelerator(SHIFT, "emu")
    try:
        runs, scores, outs = {}, {}, {}
        for pair in PAIRS:
            r, w = pair.split("+")
            dep = _dep(net, acc, FormatSpec("f", typ, "a", radix=r, weight_fit=w), task)
            dep.calibrate(x_cal)
            outs[pair] = dep.run(x_cal)
            scores[pair] = _score(outs[pair], ref, by_class, labels)
            runs[pair] = dep.run(x)
        faithful = _faithful(scores, outs, ref, by_class)
        if labelled == "pair":                        # the least faithful pair's classes as labels
            worst = max(PAIRS, key=lambda p: (scores[p][2], PAIRS.index(p)))
            labels = np.argmax(outs[worst], 1)
            scores = {p: _score(outs[p], ref, by_class, labels) for p in PAIRS}
            assert np.count_nonzero(labels != np.argmax(outs[faithful], 1)) >= 5
        want = _want(scores, outs, labels, ref, by_class)
        # "pair": every image right for the least faithful pair; the choice is one as right (the
        # most faithful of those), never the most faithful pair
        assert labelled != "pair" or (scores[want][0] == -len(x_cal) and want != faithful)
        auto = _dep(net, acc, FormatSpec("f", typ, "a", radix="auto", weight_fit="auto"), task, labels)
        auto.calibrate(x_cal)
        r, w = want.split("+")
        plain = _dep(net, acc, FormatSpec("f", typ, "a", radix=r, weight_fit=w), task)
        plain.calibrate(x_cal)
        assert _stats(auto) == _stats(plain)          # what the calibration leaves, the report's statistics too
        got = auto.shift_choice
        assert got["chosen"] == want, (got, scores)
        assert list(got["scores"]) == PAIRS and got["images"] == len(x_cal) and not got["held_out"]
        assert got["by"].startswith("relative RMS")
        assert ("argmax agrees" in got["by"]) == by_class
        assert ("label's class" in got["by"]) == bool(labelled)
        for p in PAIRS:
            assert got["scores"][p].get("correct") == (-scores[p][0] if labelled else None)
            assert got["scores"][p].get("agreement") == (-scores[p][1] if by_class else None)
            assert got["scores"][p]["relative_rms_error"] == pytest.approx(scores[p][2], abs=2e-6)
        np.testing.assert_array_equal(auto.run(x), runs[want])
        assert auto.formats["f"].radix == want.split("+")[0] and auto.formats["f"].weight_fit == want.split("+")[1]
    finally:
        acc.close()


@pytest.mark.parametrize("case", ["error", "agreement", "labels"])
def test_a_classifier_keeps_the_pair_of_least_error_unless_another_agrees_significantly_more(monkeypatch, case):
    """Step 3 on outputs made here for each pair (the deployment's runs replaced): "error": the
    pair of least error disagrees with float on one image of 64 where another agrees on all at
    twice its error (one image is no evidence: the least error wins; the rule before counted
    agreement first and took the other); "agreement": that other agrees on 12 more (McNemar:
    12 > 2 sqrt(12), it wins); "labels": step 4 on top, labels that the least faithful pair
    alone gets all right."""
    rng = np.random.default_rng(81)
    net = _small(rng)
    x_cal = rng.uniform(0, 1, (64, 1, 6, 6))
    ref = _float(net, x_cal)
    top2 = np.argsort(ref, 1)[:, -2:]
    close = np.argsort(ref[np.arange(len(ref)), top2[:, 1]] - ref[np.arange(len(ref)), top2[:, 0]])

    def flipped(k, scale):
        """float's outputs plus noise of RMS ``scale`` times theirs, float's class kept but on the
        ``k`` images of the smallest margin, where its top two are swapped."""
        y = ref + rng.normal(0, scale * np.sqrt(np.mean(ref ** 2)), ref.shape)
        for j, i in enumerate(close):
            a, b = top2[i]
            if j < k:
                y[i, a], y[i, b] = y[i, b], y[i, a]
                if np.argmax(y[i]) != a:
                    y[i, a] = y[i].max() + 1e-3
            elif np.argmax(y[i]) != b:
                y[i] = ref[i]
        return y
    k_least = 12 if case == "agreement" else 1
    outs = {"lse+network": flipped(k_least, 0.02), "lse+output": flipped(0, 0.04),
            "msb+network": flipped(20, 0.03), "msb+output": flipped(30, 0.06)}
    labels = np.argmax(outs["msb+output"], 1) if case == "labels" else None
    scores = {p: _score(outs[p], ref, True, labels) for p in PAIRS}
    assert min(PAIRS, key=lambda p: scores[p][2]) == "lse+network"
    want = {"error": "lse+network", "agreement": "lse+output", "labels": "msb+output"}[case]
    assert _want(scores, outs, labels, ref) == want
    monkeypatch.setattr(Deployment, "run", lambda self, x, **kw: outs[f"{self.formats['f'].radix}+"
                                                                     f"{self.formats['f'].weight_fit}"])
    with Accelerator(SHIFT, "emu") as acc:
        dep = _dep(net, acc, FormatSpec("f", "twohot", "a", radix="auto", weight_fit="auto"), "classification",
                   labels)
        got = shift_auto.choose(dep, x_cal, lambda x: None)
    assert got["chosen"] == want, got
    assert {p: got["scores"][p]["agreement"] for p in PAIRS} == {p: -scores[p][1] for p in PAIRS}


def test_a_field_the_config_sets_is_kept():
    rng = np.random.default_rng(77)
    net = _small(rng)
    x_cal = rng.uniform(0, 1, (32, 1, 6, 6))
    with Accelerator(SHIFT, "emu") as acc:
        dep = _dep(net, acc, FormatSpec("f", "twohot", "a", radix="msb", weight_fit="auto"))
        dep.calibrate(x_cal)
        assert list(dep.shift_choice["scores"]) == ["msb+network", "msb+output"]
        assert dep.formats["f"].radix == "msb"
        plain = _dep(net, acc, FormatSpec("f", "twohot", "a"))        # radix msb, weight_fit output: no choice
        plain.calibrate(x_cal)
        assert getattr(plain, "shift_choice", None) is None


def test_held_out_chooses_on_the_second_half_and_calibrates_on_all(monkeypatch):
    rng = np.random.default_rng(78)
    net = _small(rng)
    x_cal, x = rng.uniform(0, 1, (40, 1, 6, 6)), rng.uniform(0, 1, (8, 1, 6, 6))
    ref = _float(net, x_cal[20:])
    with Accelerator(SHIFT, "emu") as acc:
        scores, runs = {}, {}
        for pair in PAIRS:
            r, w = pair.split("+")
            dep = _dep(net, acc, FormatSpec("f", "twohot", "a", radix=r, weight_fit=w))
            dep.calibrate(x_cal[:20])
            scores[pair] = _score(dep.run(x_cal[20:]), ref, True)
            dep = _dep(net, acc, FormatSpec("f", "twohot", "a", radix=r, weight_fit=w))
            dep.calibrate(x_cal)
            runs[pair] = dep.run(x)
        monkeypatch.setattr(shift_auto, "HOLD_OUT", True)
        auto = _dep(net, acc, FormatSpec("f", "twohot", "a", radix="auto", weight_fit="auto"))
        auto.calibrate(x_cal)
    want = min(PAIRS, key=lambda p: (scores[p][2], PAIRS.index(p)))      # no pair agrees significantly more here
    assert auto.shift_choice["chosen"] == want and auto.shift_choice["held_out"] and auto.shift_choice["images"] == 20
    np.testing.assert_array_equal(auto.run(x), runs[want])


def test_every_calibration_chooses_again():
    """A deployment calibrated again (other images) chooses on those, as a new one would."""
    rng = np.random.default_rng(79)
    net = _small(rng)
    x1, x2, x = rng.uniform(0, 1, (32, 1, 6, 6)), rng.uniform(0, 0.3, (32, 1, 6, 6)) ** 2, rng.uniform(0, 1, (8, 1, 6, 6))
    fmt = FormatSpec("f", "pot", "a", radix="auto", weight_fit="auto")
    with Accelerator(SHIFT, "emu") as acc:
        again, fresh = _dep(net, acc, fmt), _dep(net, acc, fmt)
        again.calibrate(x1)
        again.calibrate(x2)
        fresh.calibrate(x2)
        assert again.shift_choice == fresh.shift_choice
        np.testing.assert_array_equal(again.run(x), fresh.run(x))


@pytest.mark.csim
@pytest.mark.slow          # the quick suite's csim of shift codes: test_twoterm, test_shift_fit
@pytest.mark.parametrize("target", ["csim", "sim"])
def test_the_choice_and_its_bits_are_the_emulators_on_csim_and_the_simulated_board(target):
    rng = np.random.default_rng(80)
    net = _small(rng)
    x_cal, x = rng.uniform(0, 1, (32, 1, 6, 6)), rng.uniform(0, 1, (3, 1, 6, 6))
    fmt = FormatSpec("f", "twohot", "a", radix="auto", weight_fit="auto")
    out = {}
    for t in ("emu", target):
        with Accelerator(SHIFT, t) as acc:
            dep = _dep(net, acc, fmt)
            dep.calibrate(x_cal)
            out[t] = dep.shift_choice, dep.run(x)
    assert out[target][0] == out["emu"][0]
    np.testing.assert_array_equal(out[target][1], out["emu"][1])


def test_the_compiled_model_records_the_choice_and_runs_that_pairs_bits(tmp_path):
    import dataclasses

    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.network.build import compile_model
    path = ROOT / "configs" / "models" / "digits_mlp.yaml"
    prog = compile_model(path, "pot", tmp_path / "m.hlsnn", check_samples=2)
    got = prog["calibration"]["shift_choice"]
    assert got["formats"] == ["pot"] and got["chosen"] in PAIRS and list(got["scores"]) == PAIRS
    # digits: a classifier (hlsnn compile knows) with labelled calibration images
    assert "McNemar" in got["by"] and "correct" in got["scores"]["lse+network"]
    cfg = load_deploy_config(path)
    r, w = got["chosen"].split("+")
    formats = {k: dataclasses.replace(f, radix=r, weight_fit=w) if k == "pot" else f for k, f in cfg.formats.items()}
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data)
    accs = open_accelerators(cfg, "emu", ["pot"])
    try:
        dep = Deployment(net, cfg.assignments["pot"], formats, accs, rounding=cfg.rounding,
                         overflow_ratio=cfg.calibration["overflow_ratio"])
        dep.calibrate(ds.x_train[:cfg.calibration["samples"]])
        x = np.asarray(ds.x_test[:16], np.float64)
        want = dep.run(x)
    finally:
        for a in accs.values():
            a.close()
    with hlsnn.load(tmp_path / "m.hlsnn", "emu") as m:
        np.testing.assert_array_equal(m(x), want)
