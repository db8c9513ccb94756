"""hlsnn report for a deployment config: the HTML page (sections, numbers equal to deploy(),
self-contained figures), the cycle model against hand computation, output-path errors."""
import base64
import copy
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("matplotlib")

from hlsnn.evaluation import run  # noqa: E402
from hlsnn.deploy.importer.graph import Layer  # noqa: E402
from hlsnn.deploy.reports.report import layer_cycles, layer_shape  # noqa: E402
from hlsnn.evaluation.report import write_report  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

SECTIONS = ("accuracy", "layer-error", "weights", "sparsity", "latency")
PNG = b"\x89PNG\r\n\x1a\n"


class Page(HTMLParser):
    """Ids of headings, every src/href, and the cell texts of each table with an id."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.imgs, self.tables, self.scripts = set(), [], [], {}, 0
        self._table, self._cell = None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for k in ("src", "href"):
            if k in a:
                self.links.append(a[k])
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "script":
            self.scripts += 1
        if tag == "table":
            self._table = a.get("id")
            if self._table:
                self.tables[self._table] = []
        if tag == "tr" and self._table:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(path):
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def rows_by_first(table):
    return {r[0]: dict(zip(table[0], r)) for r in table[1:]}


def check_page(page):
    assert {"summary", *SECTIONS} <= page.ids
    assert page.scripts == 0
    assert page.imgs and len(page.links) == len(page.imgs)      # no href at all, every src an <img>
    for src in page.imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG


def test_report_accuracy_equals_deploy(root, tmp_path, monkeypatch):
    """The report's tables are the deployment's: the result of the real deploy() that
    write_report runs (recorded, with its arguments, as it returns; before, the test ran a second
    deployment of its own, ~10 CPU-s, to compare with). Four of digits_mlp.yaml's eight
    assignments (one per engine and the mixed one; the eight took 15 CPU-s for the two runs)."""
    models = root / "configs" / "models"
    text = (models / "digits_mlp.yaml").read_text().replace("../accel/", f"{root / 'configs' / 'accel'}/")
    text = text.replace("model: digits_mlp.onnx", f"model: {models / 'digits_mlp.onnx'}")
    head, _, tail = text.partition("\nassignments:\n")
    keep = ("bfp8:", "twohot:", "sparse50:", "twohot+bfp8:")
    lines = [ln for ln in tail.splitlines() if ln.strip().startswith(keep)]
    assert len(lines) == 4, tail
    cfg = tmp_path / "digits_mlp.yaml"
    cfg.write_text(head + "\nassignments:\n" + "\n".join(lines) + "\n")
    calls, deploy = [], run.deploy

    def recorded(*args, **kw):
        r = deploy(*args, **kw)
        calls.append((args, kw, copy.deepcopy(r)))      # as deploy() returned it, before the page reads it
        return r

    monkeypatch.setattr(run, "deploy", recorded)
    (tmp_path / "sub").mkdir()                      # --out makes no folders outside build/ and overlays/
    out = write_report(cfg, "emu", out=tmp_path / "sub" / "mlp.html", test_samples=40)
    assert len(calls) == 1
    args, kw, res = calls[0]
    assert args == (cfg, "emu") and kw["per_layer"] is True and kw["test_samples"] == 40
    assert list(res["assignments"]) == ["bfp8", "twohot", "sparse50", "twohot+bfp8"]
    assert out == tmp_path / "sub" / "mlp.html"
    page = parse(out)
    check_page(page)
    acc = rows_by_first(page.tables["accuracy-table"])
    assert list(acc) == list(res["assignments"])
    for name, e in res["assignments"].items():
        assert acc[name]["accuracy %"] == f"{100 * e['accuracy']:.2f}"
        assert acc[name]["vs float (points)"] == f"{100 * (e['accuracy'] - res['float_accuracy']):+.2f}"
        assert acc[name]["agreement with float %"] == f"{100 * e['agreement_with_float']:.2f}"
        assert acc[name]["end to end us/image"].startswith(f"{e['end_to_end']['end_to_end_us']:.1f} (")
    err = page.tables["layer-error-table"]
    assert len(err) - 1 == sum(len(e["per_layer"]) for e in res["assignments"].values())
    # 2 engine layers: accuracy, error, 2 weight figures, sparsity, latency
    assert len(page.imgs) == 6
    text = out.read_text()
    assert "models, not measurements" in text
    assert f"{100 * res['float_accuracy']:.2f} %" in text


def fake_result(model="digits_mlp"):
    """A deploy() result of the shipped MLP config's shape (what write_report consumes)."""
    fmts = {"bfp8": 0.0, "bfp16": 0.0, "twohot": 0.0, "pot": 0.1, "fixed8": 0.0, "sparse50": 0.5, "sparse80": 0.8}
    asg = {n: n for n in fmts}
    asg["twohot+bfp8"] = None
    out = {"model": model, "config": "digits_mlp", "target": "emu", "test_images": 40, "calibration_images": 128,
           "calibration_mode": "static", "float_accuracy": 0.95, "assignments": {}}
    for i, (name, default) in enumerate(asg.items()):
        layers = {"fc1": default or "twohot", "fc2": default or "bfp8"}
        out["assignments"][name] = {
            "accuracy": 0.9 + i / 100, "agreement_with_float": 0.93, "images_per_s": 1000.0 + i,
            "calibration_s": 0.01, "layers": layers,
            "per_layer": {ln: {"format": f, "kind": "dense", "relative_rms_error": 0.01 * (j + 1) if i else 0.0,
                               "f_in": None if f.startswith("bfp") else 5, "f_w": 7, "f_out": 4,
                               "weight_sparsity": fmts[f], "input_density": 0.5, "saturated_outputs": i,
                               "msb_histogram": [], "kernel_calls": 2} for j, (ln, f) in enumerate(layers.items())}}
    return out


#: the note :func:`fake_page`'s pot row carries
POT_NOTE = "pot: -22.5 pts vs float: power-of-two weights without retraining; use two-hot or retrain"


@pytest.fixture(scope="module")
def fake_page(root, tmp_path_factory):
    """The report of the shipped MLP config from :func:`fake_result` (a model name that needs
    escaping, a note on the pot row), written once for the tests that read it."""
    res = fake_result(model="<script>alert(1)</script>")
    res["assignments"]["pot"]["note"] = POT_NOTE
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run, "deploy", lambda *a, **k: res)
        return write_report(root / "configs" / "models" / "digits_mlp.yaml", out=tmp_path_factory.mktemp("fake") / "r.html")


def test_report_with_fake_deploy_escapes_and_is_self_contained(root, fake_page):
    out = fake_page
    text = out.read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    page = parse(out)
    check_page(page)
    acc = rows_by_first(page.tables["accuracy-table"])
    assert acc["pot"]["accuracy %"] == "93.00" and acc["pot"]["vs float (points)"] == "-2.00"
    sp = {(r[0], r[1]): r for r in page.tables["sparsity-table"][1:]}
    assert sp[("fc1", "sparse80")][3] == "80.00"
    lat = {(r[0], r[1]): r for r in page.tables["latency-table"][1:]}
    assert set(lat) == {(ln, f) for f in ("bfp8", "bfp16", "twohot", "pot", "fixed8", "sparse50", "sparse80")
                        for ln in ("fc1", "fc2")}
    assert lat[("fc1", "twohot")][3] == "pynq-z2" and lat[("fc1", "bfp8")][4] == "150"
    boards = page.tables["boards-table"]
    assert boards[0][2:] == sorted(f.stem for f in (root / "configs" / "boards").glob("*.yaml"))   # every shipped board
    assert "aup-zu3" in boards[0] and "pynq-z2" in boards[0]


def test_default_output_under_build(root, tmp_path, monkeypatch):
    """Without --out the page goes under build/ (made there), never loose in the current folder."""
    monkeypatch.setattr(run, "deploy", lambda *a, **k: fake_result())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HLSNN_BUILD", raising=False)
    out = write_report(root / "configs" / "models" / "digits_mlp.yaml")
    assert out == Path("build") / "digits_mlp_report.html" and (tmp_path / out).is_file()
    assert not list(tmp_path.glob("*.html"))


def test_bad_output_path(root, tmp_path, monkeypatch):
    cfg = root / "configs" / "models" / "digits_mlp.yaml"

    def never(*a, **k):
        raise AssertionError("deploy() must not run when --out is wrong")
    monkeypatch.setattr(run, "deploy", never)
    with pytest.raises(InputError, match=r"must end in \.html"):
        write_report(cfg, out=tmp_path / "r.png")
    (tmp_path / "file").write_text("x")                   # the path is checked before deploy() runs
    with pytest.raises(InputError, match="is a file, not a folder"):
        write_report(cfg, out=tmp_path / "file" / "r.html")
    (tmp_path / "d.html").mkdir()
    with pytest.raises(InputError, match="is a folder; give a file name"):
        write_report(cfg, out=tmp_path / "d.html")
    with pytest.raises(InputError, match="does not exist; create it first"):
        write_report(cfg, out=tmp_path / "missing" / "r.html")
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- cycle model

def test_layer_shape_conv():
    conv = Layer("c", "conv", ["x"], "y", w=np.zeros((4, 2, 3, 3)), b=np.zeros(4), pad=1)
    assert layer_shape(conv, (5, 6)) == {"positions": 30, "k": 18, "n": 4, "in_elems": 60}
    conv.pad = 0
    assert layer_shape(conv, (5, 6))["positions"] == 12
    with pytest.raises(InputError, match="in_hw"):
        layer_shape(conv)


# The report's latency is the cycle model of hlsnn.perf on the runner's calls: equal to the
# C-simulation's counters for the same layer (tests/perf/test_cycle_model.py hand-counts them).
PERF_CONFIGS = {"bfp": ("bfp_systolic", "t16_row"), "shift": ("shift_mac", "s_tiny"),
                "sparse": ("sparse_cluster", "sp_small")}


def _csim(root, which):
    from hlsnn.runtime import Accelerator
    engine, name = PERF_CONFIGS[which]
    return Accelerator(root / "tests" / "engines" / engine / "configs" / f"{name}.yaml", target="csim")


@pytest.mark.csim
def test_layer_cycles_equal_csim_bfp(root):
    # dense 7 -> 6 with a bias, batch 5, on t16_row: the hand-counted call of
    # tests/perf/test_cycle_model.py (177 cycles since the serial geometry and the K-pass loop:
    # test_sim_target_times_the_kernel) plus ReadBias: the exponent and 6 biases are
    # ceil(7 / 4) = 2 beats, (2 - 1) * II 1 + depth 2 = 3
    layer = Layer("d", "dense", ["x"], "y", w=np.ones((6, 7)), b=np.ones(6))
    rng = np.random.default_rng(0)
    with _csim(root, "bfp") as acc:
        acc.gemm(rng.normal(size=(5, 7)), rng.normal(size=(6, 7)), bias=rng.normal(size=6))
        want = acc.kernel.last_cycles
        r = layer_cycles(layer, acc.config, 5)
    # Steps at its derived II (hlsnn.perf.schedule): 7, its depth, while o_exp and wexp_o carry
    # an undeclared dependence (tests/perf/test_cycle_model.py steps_ii), 58 more iterations
    tpl = (Path(root) / "hls" / "engines" / "bfp_systolic" / "kernel.cpp.j2").read_text()
    ii = 1 if all(f"DEPENDENCE variable = {v} inter false" in tpl for v in ("o_exp", "wexp_o")) else 7
    total = 177 + 58 * (ii - 1) + 3
    assert want.cycles == total == r["cycles"]
    assert r["us"] == pytest.approx(total / acc.config.clock_mhz) and r["bound"] == want.bound
    assert r["compute"] + r["stream_in"] + r["stream_out"] + r["serial"] == r["cycles"]


@pytest.mark.csim
def test_layer_cycles_equal_csim_shift_conv(root):
    # conv 2 -> 3, 3x3, pad 1 on 4x5 runs as a GEMM on 20 im2col rows of K = 18 (ShiftExec)
    conv = Layer("c", "conv", ["x"], "y", w=np.ones((3, 2, 3, 3)), b=np.zeros(3), pad=1)
    rng = np.random.default_rng(1)
    with _csim(root, "shift") as acc:
        for mode in ("twohot", "pot"):
            acc.kernel.gemm(rng.normal(size=(20, 18)), rng.normal(size=(3, 18)), mode=mode)
            r = layer_cycles(conv, acc.config, fmt_type=mode, in_hw=(4, 5))
            assert (r["m"], r["k"], r["n"]) == (20, 18, 3)
            assert r["cycles"] == acc.kernel.last_cycles.cycles


@pytest.mark.csim
def test_layer_cycles_equal_csim_sparse(root):
    # a conv layer of two 3-channel 7x6 images on sp_small, with these very int8 operands
    conv = Layer("c", "conv", ["x"], "y", w=np.ones((4, 3, 3, 3)), b=np.zeros(4), pad=1)
    rng = np.random.default_rng(2)
    x = (rng.integers(-128, 128, (2, 3, 7, 6)) * (rng.random((2, 3, 7, 6)) < 0.5)).astype(np.int64)
    w = (rng.integers(-128, 128, (4, 3, 3, 3)) * (rng.random((4, 3, 3, 3)) < 0.5)).astype(np.int64)
    with _csim(root, "sparse") as acc:
        acc.kernel.conv2d_batch_int(x, w, bias=np.zeros(4, np.int64), shift=0, padding="same")
        want = acc.kernel.last_cycles
        r = layer_cycles(conv, acc.config, 2, in_hw=(7, 6), x=x, w=w)
    assert r["cycles"] == want.cycles and r["calls"] == want.calls
    # the synthetic layer at half density is a different map: still a positive, bounded figure
    s = layer_cycles(conv, acc.config, 2, in_hw=(7, 6), weight_sparsity=0.5, input_density=0.5)
    assert 0 < s["cycles"] and s["bound"] in ("compute", "input stream", "output stream")


@pytest.mark.csim
def test_the_runner_keeps_a_layer_on_chip_and_the_model_counts_it(root):
    """A BFP dense layer whose batch takes several calls (t16_row's stores hold 48 samples of
    K = 7, N = 6: 100 samples are 3 calls): the runner keeps its weights on chip, so the first call streams them (keep)
    and the others stream only the samples (resident, the bias kept). The latency model counts
    the same calls: its cycles equal the C-simulation's, and the layer's output equals the
    emulator's."""
    from conftest import record_calls
    from hlsnn.deploy.run.executors import BfpExec
    from hlsnn.deploy.quantize.quant import Act
    from hlsnn.engines.bfp_systolic import protocol
    rng = np.random.default_rng(4)
    layer = Layer("d", "dense", ["x"], "y", w=rng.normal(size=(6, 7)), b=rng.normal(size=6))
    x = rng.normal(size=(100, 7))
    outs = {}
    for target in ("csim", "emu"):
        from hlsnn.runtime import Accelerator
        cfgp = root / "tests" / "engines" / "bfp_systolic" / "configs" / "t16_row.yaml"
        with Accelerator(cfgp, target=target, **({"arrays": False} if target == "emu" else {})) as acc:
            per = protocol.samples_per_call(acc.config.params, 7, 6)
            assert per == 48
            calls = record_calls(acc)
            ex = BfpExec(layer, None, acc, None)
            outs[target] = ex.run(Act(x, None), calibrate=False).values
            flags = [f & (protocol.FLAG_KEEP | protocol.FLAG_RESIDENT | protocol.FLAG_BIAS_KEPT) for f, _ in calls]
            assert flags == [protocol.FLAG_KEEP] + [protocol.FLAG_RESIDENT | protocol.FLAG_BIAS_KEPT] * (len(calls) - 1)
            assert len(calls) == 3
            if target == "csim":
                assert acc.kernel.last_cycles.cycles == layer_cycles(layer, acc.config, 100)["cycles"]
    np.testing.assert_array_equal(outs["csim"], outs["emu"])


def test_boards_table_with_accel_configs_named_by_name(root, tmp_path, monkeypatch):
    """Issue 32: accel configs given by bare name (bfp8_zcu104, as the README recommends) are
    retargeted like paths, not "no such config file"; a failed assignment is listed, not fatal."""
    text = (root / "configs" / "models" / "digits_mlp.yaml").read_text()
    text = text.replace("../accel/", "").replace(".yaml}", "}").replace(".yaml,", ",")
    text = text.replace("model: digits_mlp.onnx", f"model: {root / 'configs' / 'models' / 'digits_mlp.onnx'}")
    (tmp_path / "byname.yaml").write_text(text)
    res = fake_result()
    res["assignments"]["fixed8"] = {"error": "layer fc1: something the test made up", "layers": {}}
    monkeypatch.setattr(run, "deploy", lambda *a, **k: res)
    out = write_report(tmp_path / "byname.yaml", out=tmp_path / "r.html")
    page = parse(out)
    cells = [c for row in page.tables["boards-table"][1:] for c in row[2:]]
    assert cells and not any("n/a" in c for c in cells), cells
    assert all(" us @ " in c for c in cells)
    assert "fixed8" not in rows_by_first(page.tables["accuracy-table"])
    assert "fixed8: layer fc1: something the test made up" in out.read_text()


def test_report_shows_the_pot_note_beside_its_row(fake_page):
    acc = rows_by_first(parse(fake_page).tables["accuracy-table"])
    assert acc["pot"]["note"] == POT_NOTE and acc["twohot"]["note"] == ""
