"""hlsnn.perf.schedule_pch: the schedule's parse with the headers from a precompiled header (their
function bodies skipped) gives the rows of the parse that reads the headers itself, and a parse the
PCH cannot serve is done again without it."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("clang.cindex")

from conftest import test_config  # noqa: E402
from hlsnn.perf import schedule, schedule_pch  # noqa: E402


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture
def own_cache(cache_root, monkeypatch):
    """The module's cache folder (the PCH built in it once) and an empty memo: a new process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    monkeypatch.setattr(schedule_pch, "_MEMO", {})
    return cache_root / "hlsnn" / "schedule"


@pytest.fixture(scope="module")
def layer():
    """t2_tiny's rendered layer kernel (the bfp engine: every access form of the analysis), its
    config and its rows parsed without the PCH."""
    import tempfile
    from hlsnn.codegen import render
    from hlsnn.config import load_config
    cfg = load_config(test_config("t2_tiny"))
    with tempfile.TemporaryDirectory(prefix="hlsnn-pch-") as tmp:
        src = render(cfg, os.path.join(tmp, "hls")).dir / f"{cfg.engine}.cpp"
        was = os.environ.get("HLSNN_SCHEDULE_PCH")
        os.environ["HLSNN_SCHEDULE_PCH"] = "0"
        try:
            plain = _rows(src, cfg)
        finally:
            if was is None:
                del os.environ["HLSNN_SCHEDULE_PCH"]
            else:
                os.environ["HLSNN_SCHEDULE_PCH"] = was
        yield src, cfg, plain


def _rows(src, cfg):
    return schedule.Kernel(src, name="k").schedule(schedule.layer_depths(cfg), cfg.clock_mhz, cfg.board.ps)


def test_the_pch_gives_the_rows_of_the_plain_parse(layer, own_cache, monkeypatch):
    src, cfg, plain = layer
    assert plain and any(r["notes"] for r in plain)    # a row the analysis explains: the rows say something
    monkeypatch.setenv("HLSNN_SCHEDULE_PCH", "1")
    assert _rows(src, cfg) == plain
    assert [p.name.startswith("headers_") for p in own_cache.glob("*.pch")] == [True]


def test_a_constexpr_function_of_a_header_still_evaluates(tmp_path, own_cache, monkeypatch):
    """``std::max`` in a template argument: a constant expression that calls a header's function
    (clang never skips a ``constexpr`` body); the row is the plain parse's."""
    src = tmp_path / "k.cpp"
    src.write_text("#include <algorithm>\n#include <ap_int.h>\n"
                   "void k(const int idx[64], int n) {\n"
                   "  static ap_int<std::max(4, 9)> a[64];\n"
                   "Loop:\n  for (int i = 0; i < n; ++i) {\n#pragma HLS PIPELINE II = 1\n"
                   "    const int b = idx[i];\n    a[b] = a[b] + 1;\n  }\n}\n")
    ci = schedule.cindex()
    args = schedule.parse_args(tmp_path)
    with_pch = ci.Index.create().parse(str(src), args=args + schedule_pch.pch_args(ci, args))
    assert not [d.spelling for d in with_pch.diagnostics if d.severity >= 3]
    rows = {}
    for pch in (False, True):
        monkeypatch.setenv("HLSNN_SCHEDULE_PCH", "1" if pch else "0")
        (rows[pch],) = schedule.Kernel(src).schedule()
    assert rows[True] == rows[False]
    assert rows[True]["ii"] == schedule.DEFAULT_DEPTH and rows[True]["bound"] == "dependence"


def test_a_kernel_with_an_error_is_still_an_error(tmp_path, own_cache, monkeypatch):
    src = tmp_path / "k.cpp"
    src.write_text("#include <ap_int.h>\nvoid k(int n) { ap_int<8> x = undeclared_name; }\n")
    monkeypatch.setenv("HLSNN_SCHEDULE_PCH", "1")
    with pytest.raises(ValueError, match="front end failed.*undeclared_name"):
        schedule.Kernel(src)


def test_a_damaged_pch_is_parsed_without_and_discarded(layer, own_cache, monkeypatch):
    src, cfg, plain = layer
    monkeypatch.setenv("HLSNN_SCHEDULE_PCH", "1")
    ci = schedule.cindex()
    (_, pch) = schedule_pch.pch_args(ci, schedule.parse_args(src.parent))
    with open(pch, "r+b") as f:
        f.write(b"not a precompiled header")
    monkeypatch.setattr(schedule_pch, "_MEMO", {})     # a new process: it finds the damaged file
    assert _rows(src, cfg) == plain
    assert not os.path.exists(pch)                     # the next process builds it again
