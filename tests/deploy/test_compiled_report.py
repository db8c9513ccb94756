"""``hlsnn report NAME.hlsnn``: the compiled model's HTML page, read back with the standard
library's HTML parser."""
import json
from html.parser import HTMLParser

import pytest

pytest.importorskip("onnx")
pytest.importorskip("sklearn")

from hlsnn.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "report")


class _Tables(HTMLParser):
    """Every table's rows (lists of cell texts) by the table's id."""

    def __init__(self):
        super().__init__()
        self.tables, self._id, self._row, self._cell = {}, None, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._id = dict(attrs).get("id") or f"table{len(self.tables)}"
            self.tables[self._id] = []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row.append(self._cell.strip())
            self._cell = None
        elif tag == "tr" and self._id is not None:
            self.tables[self._id].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _num(s):
    return float(s.replace(",", ""))


def test_report_of_a_compiled_model_gives_the_latency_per_layer_and_in_total(compiled, tmp_path, capsys):
    path = compiled("digits_cnn", "twohot")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = _Tables()
    page.feed(out.read_text())
    assert main(["perf", str(path), "--json"]) == 0
    perf = json.loads(capsys.readouterr().out)
    net = page.tables["latency"]
    assert net[0][0] == "layer" and net[-1][0] == "total"
    assert [r[0] for r in net[1:-1]] == [r["name"] for r in perf["layers"]]
    total = _num(net[-1][-1])
    # the rows add up to the total (to the table's rounding), and it is `hlsnn perf`'s figure
    assert sum(_num(r[-1]) for r in net[1:-1]) == pytest.approx(total, abs=0.05 * len(net))
    assert total == pytest.approx(perf["end_to_end_us"], abs=0.05)
    assert _num(net[-1][2]) == 1                          # the network kernel: one start per batch
    lbl = page.tables["latency-layers"]                   # layer by layer: at least one call per engine layer
    starts = {r[0]: _num(r[2]) for r in lbl[1:-1]}
    assert all(starts[n] >= 1 for n in ("conv1", "conv2", "fc")) and _num(lbl[-1][2]) >= 3
    assert _num(lbl[-1][-1]) > total                      # the host between layers costs more
    text = out.read_text()
    assert "modelled, not measured" in text and "shift8_pynq_z2" in text


def test_report_of_a_compiled_model_refuses_bad_output_and_names_it(compiled, tmp_path, capsys):
    path = compiled("digits_cnn", "twohot")
    assert main(["report", str(path), "--out", str(tmp_path / "r.txt")]) == 2
    err = capsys.readouterr().err
    assert "r.txt" in err and ".html" in err and "Traceback" not in err
    assert not (tmp_path / "r.txt").exists()
    assert main(["report", str(path), "--board", "no-such-board", "--out", str(tmp_path / "b.html")]) == 2
    err = capsys.readouterr().err
    assert "no-such-board" in err and "Traceback" not in err
    assert not (tmp_path / "b.html").exists()


def test_report_of_a_compiled_model_checks_the_out_path_before_modelling(compiled, tmp_path, monkeypatch):
    """A folder that does not exist is refused before the latency model runs (every refusal of
    ``deploy.reports.report.page_out``: ``test_report.test_bad_output_path``)."""
    from hlsnn.errors import InputError
    from hlsnn.network import latency
    from hlsnn.network.report import write_report
    path = compiled("digits_cnn", "twohot")

    def never(*a, **k):
        raise AssertionError("the latency model must not run when --out is wrong")
    monkeypatch.setattr(latency, "model", never)
    with pytest.raises(InputError, match="does not exist; create it first"):
        write_report(path, out=tmp_path / "missing" / "r.html")
    assert not (tmp_path / "missing").exists()


def test_the_layer_table_says_where_each_layer_runs_as_the_latency_table_does(compiled, tmp_path, capsys):
    """On the network path the pooling and the Flatten run in the network kernel, as the latency table
    and `hlsnn compile` say, and only what follows the logits (the Softmax) on the host."""
    path = compiled("digits_cnn", "twohot")
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--out", str(out)]) == 0
    capsys.readouterr()
    page = _Tables()
    page.feed(out.read_text())
    layers = next(t for t in page.tables.values() if t and t[0][:4] == ["layer", "kind", "format", "runs on"])
    runs = {r[0]: r[3] for r in layers[1:]}
    assert runs["pool1"].startswith("network kernel") and runs["pool2"].startswith("network kernel"), runs
    assert runs["flatten"].startswith("network kernel") and runs["conv1"].startswith("network kernel"), runs
    assert runs["softmax"] == "host", runs
    timed = {r[0] for r in page.tables["latency"][1:]}
    assert {n for n, w in runs.items() if w.startswith("network kernel") and "data move" not in w} <= timed


def test_without_out_the_page_goes_under_the_build_root_and_is_named(compiled, tmp_path, monkeypatch, capsys):
    path = compiled("digits_cnn", "twohot")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", "build")
    assert main(["report", str(path)]) == 0
    out = tmp_path / "build" / f"{path.stem}_report.html"
    assert out.is_file() and capsys.readouterr().out.strip() == f"wrote build/{path.stem}_report.html"
    assert not list(tmp_path.glob("*.html"))
