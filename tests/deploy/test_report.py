"""hlsnn report for a deployment config: the HTML page (sections, numbers equal to deploy(),
self-contained figures), the cycle model against hand computation, output-path errors."""
import base64
import math
from html.parser import HTMLParser
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("matplotlib")

from hlsnn.deploy import evaluate  # noqa: E402
from hlsnn.deploy.onnx_import import Layer  # noqa: E402
from hlsnn.deploy.report import layer_cycles, layer_shape, write_report  # noqa: E402
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


def test_report_accuracy_equals_deploy(root, tmp_path):
    cfg = root / "configs" / "models" / "digits_mlp.yaml"
    res = evaluate.deploy(cfg, "emu", per_layer=True, test_samples=40)
    out = write_report(cfg, "emu", out=tmp_path / "sub" / "mlp.html", test_samples=40)
    assert out == tmp_path / "sub" / "mlp.html"
    page = parse(out)
    check_page(page)
    acc = rows_by_first(page.tables["accuracy-table"])
    assert list(acc) == list(res["assignments"])
    for name, e in res["assignments"].items():
        assert acc[name]["accuracy %"] == f"{100 * e['accuracy']:.2f}"
        assert acc[name]["vs float (points)"] == f"{100 * (e['accuracy'] - res['float_accuracy']):+.2f}"
        assert acc[name]["agreement with float %"] == f"{100 * e['agreement_with_float']:.2f}"
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


def test_report_with_fake_deploy_escapes_and_is_self_contained(root, tmp_path, monkeypatch):
    res = fake_result(model="<script>alert(1)</script>")
    monkeypatch.setattr(evaluate, "deploy", lambda *a, **k: res)
    out = write_report(root / "configs" / "models" / "digits_mlp.yaml", out=tmp_path / "r.html")
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
    assert boards[0][2:] == ["kv260", "pynq-z2", "ultra96v2", "zcu104"]


def test_default_output_in_current_folder(root, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "deploy", lambda *a, **k: fake_result())
    monkeypatch.chdir(tmp_path)
    out = write_report(root / "configs" / "models" / "digits_mlp.yaml")
    assert out.name == "digits_mlp_report.html" and (tmp_path / out).is_file()


def test_bad_output_path(root, tmp_path, monkeypatch):
    cfg = root / "configs" / "models" / "digits_mlp.yaml"

    def never(*a, **k):
        raise AssertionError("deploy() must not run when --out is wrong")
    monkeypatch.setattr(evaluate, "deploy", never)
    with pytest.raises(InputError, match=r"must end in \.html"):
        write_report(cfg, out=tmp_path / "r.png")
    monkeypatch.setattr(evaluate, "deploy", lambda *a, **k: fake_result())
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="cannot write"):
        write_report(cfg, out=tmp_path / "file" / "r.html")


# --------------------------------------------------------------------------- cycle model

def dense(n, k):
    return Layer("t", "dense", ["x"], "y", w=np.zeros((n, k)), b=np.zeros(n))


def accel(engine, clock=100.0, **params):
    return SimpleNamespace(engine=engine, clock_mhz=clock, params=params)


def test_layer_shape_conv():
    conv = Layer("c", "conv", ["x"], "y", w=np.zeros((4, 2, 3, 3)), b=np.zeros(4), pad=1)
    assert layer_shape(conv, (5, 6)) == {"positions": 30, "k": 18, "n": 4, "in_elems": 60}
    conv.pad = 0
    assert layer_shape(conv, (5, 6))["positions"] == 12
    with pytest.raises(InputError, match="in_hw"):
        layer_shape(conv)


def test_cycle_model_by_hand():
    # batch 3 of a dense 7 -> 5 layer: M = 3, K = 7, N = 5
    layer, ceil = dense(5, 7), math.ceil
    # bfp_systolic 2x2, 8-bit mantissas -> 8-bit lanes, 32-bit stream: P = 4
    r = layer_cycles(layer, accel("bfp_systolic", rows=2, cols=2, mantissa_bits=8, stream_bits=32), 3)
    t, g, s = ceil(3 / 2), ceil(5 / 2), ceil(7 / 2)                  # 2, 3, 4
    assert r["compute"] == t * g * s == 24
    assert r["stream_in"] == 24 * ceil(4 / 4) + 3 * ceil(8 / 4) == 30
    assert r["stream_out"] == 3 * ceil(6 / 4) == 6
    assert (r["cycles"], r["bound"], r["us"]) == (30, "stream_in", 0.3)
    # shift_mac 2x2, 16-bit lanes on 32 bits: P = 2; two-hot: 2 outputs per pass
    sm = accel("shift_mac", 200.0, rows=2, cols=2, stream_bits=32)
    r = layer_cycles(layer, sm, 3, fmt_type="twohot")
    assert r["compute"] == 2 * 3 * 7 == 42
    assert r["stream_in"] == 2 * 3 * (7 * 1 + ceil(6 / 2)) + 3 * ceil(7 / 2) == 72
    assert r["stream_out"] == 3 * ceil(5 / 2) == 9
    assert r["us"] == 72 / 200
    # dual PoT: 4 outputs per pass
    r = layer_cycles(layer, sm, 3, fmt_type="pot")
    assert r["compute"] == 2 * 2 * 7 == 28
    assert r["stream_in"] == 2 * 2 * (7 + ceil(12 / 2)) + 12 == 64
    # sparse_cluster, 2 units, 2 channels per group, P = 2; half the weights and inputs zero
    r = layer_cycles(layer, accel("sparse_cluster", units=2, max_z=2, stream_bits=32), 3,
                     weight_sparsity=0.5, input_density=0.5)
    assert r["compute"] == ceil(3 * 5 * 7 * 0.5 * 0.5 / 2) == 14
    assert r["stream_in"] == ceil((2 * 3 * 0.5 * 3 * 7 + 2 * 0.5 * 5 * 7) / 2) == 49
    assert r["stream_out"] == ceil(15 / 2) == 8
    assert (r["cycles"], r["bound"]) == (49, "stream_in")


def test_cycle_model_conv():
    # conv 2 -> 4, 3x3, pad 1 on 4x4: M = 16, K = 18, N = 4; 512-bit stream: P = 32 lanes
    conv = Layer("c", "conv", ["x"], "y", w=np.zeros((4, 2, 3, 3)), b=np.zeros(4), pad=1)
    r = layer_cycles(conv, accel("shift_mac", rows=4, cols=2, stream_bits=512), fmt_type="twohot", in_hw=(4, 4))
    assert r["compute"] == 8 * 1 * 18 == 144
    assert r["stream_in"] == 8 * (18 * 1 + 1) + 16 * 1 == 168
    assert (r["m"], r["k"], r["n"], r["bound"]) == (16, 18, 4, "stream_in")
