"""Each pipelined loop's operators counted from the rendered code (tests/loop_operators.py), held
against what the loop declares to the strict C-simulation (``HLSNN_OPS``) and against the
resource model's multipliers of that loop, for every shipped config and the bfp GEMV configs
(issue 30: operators per loop module, none shared across loops). The expected products are
also counted by hand from the array shapes, and planted products make the check fail."""
from pathlib import Path

import pytest

import hlsnn
from conftest import ROOT
from hlsnn.codegen import render
from loop_operators import check, loop_operators

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
