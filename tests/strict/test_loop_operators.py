"""Each pipelined loop's operators and memory bank sites counted from the rendered code
(tests/loop_operators.py), for every shipped config and the bfp GEMV configs (issue 30).

Operators: held against what the loop declares to the strict C-simulation (``HLSNN_OPS``) and
against the resource model's multipliers of that loop (operators per loop module, none shared
across loops). Bank sites: every bank of every checked array (``hlsnn::Mem``), whether or not a
run reaches it, against the bank's ports. The expected counts are also made by hand from the
array shapes, and planted code makes each check fail."""
from pathlib import Path

import pytest

import hlsnn
from conftest import ROOT
from hlsnn.codegen import render
from loop_operators import bank_sites, check, loop_operators, over_ports

SHIPPED = sorted((ROOT / "configs" / "accel").glob("*.yaml"))
GEMV = [ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / f"{n}.yaml"
        for n in ("t16_gemv", "t8_packed_gemv", "t8_gemv_tensor")]


def _rendered(path, tmp_path):
    cfg = hlsnn.load_config(path, check_fit=False)
    return cfg, render(cfg, tmp_path / "hls")


def _counts(cfg, r):
    header = next(p.name for p in Path(r.dir).iterdir() if p.name.endswith("_config.h"))
    return loop_operators(r.dir, r.engine.KERNEL_SOURCES[0], header)


@pytest.mark.parametrize("path", SHIPPED + GEMV, ids=lambda p: p.stem)
def test_loop_operators_match_the_declarations_and_the_resource_model(path, tmp_path):
    cfg, r = _rendered(path, tmp_path)
    assert check(cfg, r) == []


def test_the_counts_are_the_array_shapes_by_hand(tmp_path):
    # bfp8_zcu104: 48 x 16 tiles, two products each, in Steps (GEMV mode runs there too and
    # adds none); sparse8_pynq-z2: one product per output column of a unit's tile (tile_w 16)
    # in MacLoop; shift8_pynq-z2: shifts and adds only; no loop divides
    counts = {}
    for name in ("bfp8_zcu104", "sparse8_pynq-z2", "shift8_pynq-z2", "bfp8_ultra96v2"):
        cfg, r = _rendered(ROOT / "configs" / "accel" / f"{name}.yaml", tmp_path / name)
        counts[name] = _counts(cfg, r)
    assert counts["bfp8_zcu104"]["Steps"] == {"mul": 2 * 48 * 16, "div": 0}
    assert counts["bfp8_ultra96v2"]["Steps"] == {"mul": 28 * 11, "div": 0}    # packed: a DSP a tile
    assert counts["sparse8_pynq-z2"]["MacLoop"] == {"mul": 16, "div": 0}
    assert all(c == {"mul": 0, "div": 0} for c in counts["shift8_pynq-z2"].values())
    assert all(c["div"] == 0 for cs in counts.values() for c in cs.values())
    assert sum(c["mul"] for c in counts["bfp8_zcu104"].values()) == 2 * 48 * 16   # no other loop multiplies


# (config, anchor that occurs once in the rendered kernel, what replaces it, the loop it lands in)
PLANTS = [
    ("bfp8_zcu104", "const bool issue = !gemv && more", "const bool issue = !gemv && (ct * cg) != 3 && more",
     "Steps: the code has 1537 run-time products"),
    ("shift8_pynq-z2", "HLSNN_ITER(Steps, k == 0);", "HLSNN_ITER(Steps, k == 0); const ap_uint<32> planted = k / iters;",
     "Steps: the code has 0 run-time products and 1 quotients"),
    ("sparse8_pynq-z2", "HLSNN_OPS_AT(MacLoop, kId, Cfg::kTileW, 0, Cfg::kTileW);",
     "HLSNN_OPS_AT(MacLoop, kId, Cfg::kTileW + 1, 0, Cfg::kTileW);", "MacLoop: the code has 16 run-time products"),
]


@pytest.mark.parametrize("name,old,new,message", PLANTS, ids=[p[0] for p in PLANTS])
def test_a_planted_operator_fails_the_check(name, old, new, message, tmp_path):
    cfg, r = _rendered(ROOT / "configs" / "accel" / f"{name}.yaml", tmp_path)
    src = Path(r.dir) / r.engine.KERNEL_SOURCES[0]
    text = src.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times: update the plant"
    src.write_text(text.replace(old, new))
    problems = check(cfg, r)
    assert problems and message in problems[0], problems


def test_a_product_in_a_loop_the_resource_model_does_not_count_fails(tmp_path):
    # the resource model is the other side: without the statistics unit's squares in
    # StatSums, bfp12_ultra96v2-stats's code has products the model would not pay for
    import dataclasses
    cfg, r = _rendered(ROOT / "configs" / "accel" / "bfp12_ultra96v2-stats.yaml", tmp_path)
    muls = [m for m in cfg.estimates["multipliers"] if m["function"] != "StatSums"]
    cfg = dataclasses.replace(cfg, estimates={**cfg.estimates, "multipliers": muls})
    problems = check(cfg, r)
    assert problems == ["StatSums: the resource model counts 0 products, the code 8 x 1 instance(s)"]


def _sites(r):
    header = next(p.name for p in Path(r.dir).iterdir() if p.name.endswith("_config.h"))
    return bank_sites(r.dir, r.engine.KERNEL_SOURCES[0], header)


@pytest.mark.parametrize("path", SHIPPED + GEMV, ids=lambda p: p.stem)
def test_every_bank_of_every_checked_array_is_within_its_ports(path, tmp_path):
    cfg, r = _rendered(path, tmp_path)
    rows = _sites(r)
    assert rows and over_ports(rows) == []


def test_bank_sites_by_hand(tmp_path):
    """shift8_pynq-z2's Steps: each of the line buffer's banks has the window's read and the
    next input row's write (a run of a small convolution may never write the last bank; the
    code does); bfp8_zcu104's Steps in GEMV mode: each weight-exponent bank one read (bank-major
    posting), each result-store bank of the 16 columns x 16 lanes one write (the sample's
    column is a run-time index: every column), each activation-store bank one read (XRead, at
    the mode's address, outside the mode's if: both modes) and one write (the sample beat), and
    each sample-exponent bank one write (the sample's column: a run-time index); in array mode
    the activation store and the sample exponents one read each (XRead; the post) and, since a
    resident call reads its later sample groups inside the array loop (`xin`), one write each
    (`XWrite`, the one write site a bank both modes share): one read and one write a bank, within
    a true dual-port memory's two ports."""
    cfg, r = _rendered(ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml", tmp_path / "s")
    lbuf = [x for x in _sites(r) if (x["loop"], x["array"]) == ("Steps", "lbuf")]
    assert len(lbuf) == max(cfg.params["cols"], 8)      # max(cols, lanes) banks: 8 lanes of 8 bits in 64
    assert all((x["reads"], x["writes"]) == (1, 1) for x in lbuf)
    cfg, r = _rendered(ROOT / "configs" / "accel" / "bfp8_zcu104.yaml", tmp_path / "b")
    gemv = [x for x in _sites(r) if x["mode"] == "gemv=True"]
    assert sorted({x["array"] for x in gemv}) == ["wexp", "xexp", "xstore", "ybuf"]
    assert [(x["reads"], x["writes"]) for x in gemv if x["array"] == "wexp"] == [(1, 0)] * 16
    assert [(x["reads"], x["writes"]) for x in gemv if x["array"] == "ybuf"] == [(0, 1)] * (16 * 16)
    assert [(x["reads"], x["writes"]) for x in gemv if x["array"] == "xstore"] == [(1, 1)] * 16
    assert [(x["reads"], x["writes"]) for x in gemv if x["array"] == "xexp"] == [(0, 1)] * 16
    array = [x for x in _sites(r) if x["mode"] == "gemv=False" and x["loop"] == "Steps"]
    assert [(x["reads"], x["writes"]) for x in array if x["array"] == "xstore"] == [(1, 1)] * 16
    assert [(x["reads"], x["writes"]) for x in array if x["array"] == "xexp"] == [(1, 1)] * 16


def test_a_run_time_bank_index_in_gemv_posting_is_over_the_ports(tmp_path):
    """The old GEMV posting form, a read of wexp[(n0 + r) mod lanes] for each of the four rows
    posted a cycle, planted back: a run-time bank index per row, so every bank has five read
    sites (the rows' and the bank-major read's) against one read port."""
    cfg, r = _rendered(ROOT / "configs" / "accel" / "bfp8_zcu104.yaml", tmp_path)
    src = Path(r.dir) / "bfp_systolic.cpp"
    old = "(Cfg::kWeightExponentPerRow ? we[nb] : w_tensor_exp)"
    text = src.read_text()
    assert text.count(old) == 1
    src.write_text(text.replace(old, "(Cfg::kWeightExponentPerRow ? HLSNN_LOAD_AT(wexp[nb], w0, r) : w_tensor_exp)"))
    bad = over_ports(_sites(r))
    assert [(x["loop"], x["mode"], x["array"], x["reads"]) for x in bad] == [("Steps", "gemv=True", "wexp", 5)] * 16
