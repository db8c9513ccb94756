"""bfp_systolic against the hardware rules of issue 30, without C-simulation: GEMV mode on the
array's DSPs (one loop, operands multiplexed by mode), index arithmetic without run-time multipliers or dividers, GEMV
posting bank-major, and the loop-back timing model (docs/hardware-rules.md)."""
import re
from pathlib import Path

import pytest
import yaml

import hlsnn
from hlsnn.engines import timing
from hlsnn.perf import timing as loops

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = Path(__file__).parent / "configs"
SHIPPED = sorted((ROOT / "configs" / "accel").glob("bfp*.yaml"))
TESTS = sorted(CONFIGS.glob("*.yaml"))


def _zcu104(weight_banks):
    raw = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8_zcu104.yaml").read_text())
    raw["bfp_systolic"]["weight_banks"] = weight_banks
    return raw


def test_gemv_mode_shares_the_array_dsps():
    # bfp8_zcu104 ships with GEMV mode over 16 columns (8 banks). By hand: the array's 48 x 16
    # tiles x 2 products are the only mantissa products (GEMV mode runs in the same loop and
    # multiplexes the tiles' operands), plus the rolling method's 8 squares + n*S2 (7 x 27 bits:
    # 2 DSP48E2) + S1*S1 (1) + k*sd (4 x 32: 2) = 13: 1,549 of 1,728, within 90% (1,555)
    cfg = hlsnn.load_config(ROOT / "configs" / "accel" / "bfp8_zcu104.yaml")   # checks the margins
    assert cfg.params["weight_banks"] == 8
    est = cfg.estimates
    muls = {m["name"]: m for m in est["multipliers"]}
    assert muls["w*x"]["dsp"] == 48 * 16 * 2 and muls["w*x"]["function"] == "Steps"
    assert not [m for m in est["multipliers"] if m["function"] == "GemvSteps"]
    assert est["resources"]["dsp"] == 1536 + 13 <= 0.9 * 1728
    # what GEMV mode costs instead: a 2:1 multiplexer in front of each operand of its 48 x 16
    # tiles (4 x 8 bits a tile) and the adder tree (48 rows x 31 adders of 32 bits)
    one_bank = hlsnn.load_config(_zcu104(1)).estimates["resources"]
    assert est["resources"]["dsp"] == one_bank["dsp"]
    assert est["resources"]["lut"] - one_bank["lut"] >= 48 * 16 * 4 * 8 + 48 * 31 * 32


def test_packed_gemv_uses_the_array_dsp_pairs():
    cfg = hlsnn.load_config(CONFIGS / "t8_packed_gemv.yaml")
    p = cfg.params
    names = [m["name"] for m in cfg.estimates["multipliers"]]
    assert not [n for n in names if "GEMV" in n]
    muls = {m["name"]: m for m in cfg.estimates["multipliers"]}
    assert muls["w*x (packed)"]["count"] == p["rows"] * p["cols"]
    from hlsnn.engines.bfp_systolic.spec import gemv_lut
    # by hand: 6 rows x 8 columns x six 8-bit operands a tile pair (3 a tile), and 6 x 7 adders of 24
    assert gemv_lut(p) == 6 * 8 * 3 * 8 + 6 * 7 * 24


@pytest.mark.parametrize("path", SHIPPED, ids=lambda q: q.stem)
def test_shipped_fit_with_two_accumulators_a_tile(path):
    """Every DSP accumulates its own product (no P = P + M + PCIN claim), so the fabric adds a
    tile's two accumulators once per group: acc_bits LUTs a tile are in the logic estimate, and
    the config still fits its board (the load checks the margins)."""
    cfg = hlsnn.load_config(path)
    rows = {b["name"] for b in cfg.estimates["buffers"]}
    assert ("acc1" in rows) == (not cfg.params["dsp_packing"])
    assert cfg.estimates["resources"]["dsp"] <= 0.9 * cfg.board.resources["dsp"]


# run-time index arithmetic that issue 30 found (products and quotients of two run-time values,
# or of a run-time value and a constant that is not a power of two); they must not come back
_BANNED = [r"tiles \* ", r"groups \* ", r"batch \* ", r"/ kp\b", r"/ steps\b", r"/ Cfg::kRows\b",
           r"/ Cfg::kCols\b", r"/ Cfg::kPassK\b", r"og \* nw", r"\* Cfg::kPassK", r"[cl]t \* Cfg::kRows\b",
           r"cg \* Cfg::kCols\b", r"Cfg::kCols \* nbo", r"\* Cfg::kStepBeats", r"slots \* kp", r"gt \* Cfg::kRows", r"Cfg::kWDepth / kp"]


def _code(path):
    import tempfile
    from hlsnn.codegen import render
    with tempfile.TemporaryDirectory() as d:
        text = (render(hlsnn.load_config(path), d).dir / "bfp_systolic.cpp").read_text()
    text = re.sub(r"#ifndef __SYNTHESIS__.*?#endif", "", text, flags=re.S)   # C-simulation only
    return "\n".join(line.split("//")[0] for line in text.splitlines())


@pytest.mark.parametrize("path", SHIPPED + [CONFIGS / "t16_gemv.yaml", CONFIGS / "t8_packed_gemv.yaml"],
                         ids=lambda q: q.stem)
def test_no_run_time_index_products_or_quotients(path):
    code = _code(path)
    for pat in _BANNED:
        assert not re.search(pat, code), pat
    # the geometry's serial arithmetic keeps the tool from inferring a multiplier
    for fn in ("SerialMul", "SerialDiv"):
        body = code[code.index(f"ap_uint<32> {fn}("):]
        body = body[:body.index("\n}\n")]
        assert "ALLOCATION operation instances = mul limit = 0" in body, fn


def test_gemv_posting_is_bank_major():
    """GEMV posting reads wexp and bias and writes ybuf at a constant bank index (the unrolled
    bank j), once per bank: the rows take their bank's word through registers."""
    code = _code(CONFIGS / "t16_gemv.yaml")
    rows = code[code.index("GemvPostRows:"):code.index("GemvPostWrite:")]
    assert not re.search(r"\b(wexp|bias|ybuf)\[", rows)
    assert re.search(r"we\[j\] = held \? HLSNN_LOAD_AT\(wexp\[j\], wa, j\)", code)
    assert re.search(r"HLSNN_STORE_AT\(ybuf\[smp\]\[j\], ", code)


def test_timing_model_old_steps_chain_does_not_close():
    # the chain issue 30 read: the issue compare, the compute's counter, the oldest tile still
    # needed, its sum with the slots, the loader's compare (five 32-bit carry chains) and the
    # logic between: 0.75 + 5 * (0.55 + 32 * 0.03) + 5 * 0.55 = 11.05 ns on the Z-7020, against
    # 10 ns less 27% = 7.3 ns at 100 MHz
    old = [("carry", 32), ("lut", 2), ("carry", 32), ("carry", 32), ("carry", 32), ("carry", 32), ("lut", 1),
           ("lut", 2)]
    assert timing.chain_delay_ns(old, "zynq7") == pytest.approx(11.05)
    assert timing.budget_ns(100) == pytest.approx(7.3)
    assert timing.chain_delay_ns(old, "zynqmp") > timing.budget_ns(150)


#: configs for a network kernel's clock (``bfp8net_pynq-z2``: 200 MHz), whose layer kernel is not meant to run there
NETWORK_ONLY = {"bfp8net_pynq-z2"}


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.stem not in NETWORK_ONLY], ids=lambda q: q.stem)
def test_every_shipped_loop_back_closes(path):
    rows = loops.loop_timing(hlsnn.load_config(path))
    assert {r["loop"] for r in rows} >= {"Steps", "ReadSampleBeats", "WriteBeats"}
    assert all(r["ii"] == 1 and r["delay_ns"] < r["budget_ns"] for r in rows), rows


@pytest.mark.parametrize("name", sorted(NETWORK_ONLY))
def test_a_network_only_config_says_its_layer_kernel_does_not_close(name):
    """Its layer kernel's loops that do not close at its clock are derived at II 2 (and costed so), and
    its comment says to run layers on the 100 MHz config; its network kernel is held to II 1 by
    tests/deploy (every shipped model)."""
    path = ROOT / "configs" / "accel" / f"{name}.yaml"
    rows = {r["loop"]: r for r in loops.loop_timing(hlsnn.load_config(path))}
    slow = {k for k, r in rows.items() if r["delay_ns"] > r["budget_ns"]}
    assert slow and all(rows[k]["ii"] == 2 for k in slow), rows
    assert "For the network kernel only" in path.read_text()


def test_a_loop_that_cannot_close_is_costed_at_its_ii(monkeypatch):
    """With the old Steps chain planted back, the model runs Steps at II = 2: the call costs
    its Steps iterations less one more (a pipelined loop costs (iterations - 1) * II + depth)."""
    from hlsnn.perf import bfp_systolic as page
    from hlsnn.perf.calls import call_cycles
    from hlsnn.perf.closed_form import bfp_call_counts
    from hlsnn.perf import schedule
    cfg = hlsnn.load_config(ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml")
    # the loop-back timing alone: no II derived from the C++ (hlsnn.perf.schedule, whose own
    # tests plant its bugs) on top of it
    monkeypatch.setattr(schedule, "config_schedule", lambda cfg: [])
    counts = bfp_call_counts(cfg.params, 44, 1024, 1024)
    base = call_cycles(cfg, counts).cycles
    old = [("carry", 32), ("lut", 2), ("carry", 32), ("carry", 32), ("carry", 32), ("carry", 32), ("lut", 1),
           ("lut", 2)]
    real = page.loopbacks
    monkeypatch.setattr(page, "loopbacks", lambda p: {**real(p), "Steps": old})
    assert loops.timing_ii(cfg) == {"Steps": 2}
    its, entries = counts["Steps"]
    assert call_cycles(cfg, counts).cycles == base + (its - entries)


@pytest.mark.parametrize("path", SHIPPED + TESTS, ids=lambda q: q.stem)
def test_declared_loop_operators_match_the_resource_model(path):
    """The products each pipelined loop declares to the strict C-simulation (HLSNN_OPS) are
    the resource model's multipliers of that loop: one module per loop, none shared."""
    from hlsnn.engines.bfp_systolic.spec import template_context
    cfg = hlsnn.load_config(path, check_fit=False)
    ctx = template_context(cfg)
    by_loop = {}
    for m in cfg.estimates["multipliers"]:
        by_loop[m["function"]] = by_loop.get(m["function"], 0) + m["dsp"]
    assert by_loop["Steps"] == ctx["steps_products"]
    assert "GemvSteps" not in by_loop        # GEMV mode runs in Steps, on its products


def test_stall_enable_model_by_hand():
    """bfp8_zcu104's Steps freezes, with one enable, its accumulators (2 x 768 x 32 bits), shadows
    (768 x 32) and the chains' registers (the resource model's 15,168 + 15,168 + 7,104 + 7,104 +
    3,552): 121,824 flip-flops. A tree of 64 loads a driver is 3 levels (64^2 < 121,824 <= 64^3),
    so the path is 0.40 + 2 x 0.35 (handshake) + 3 x 0.35 + 1.0 (route) = 3.15 ns of 4.87. At
    twice the clock it would not close."""
    import dataclasses
    cfg = hlsnn.load_config(ROOT / "configs" / "accel" / "bfp8_zcu104.yaml")
    e = timing.enable_timing(cfg)
    assert e["loads"] == 3 * 768 * 32 + 15168 * 2 + 7104 * 2 + 3552
    assert (e["levels"], e["delay_ns"], e["closes"]) == (3, pytest.approx(3.15), True)
    e2 = timing.enable_timing(dataclasses.replace(cfg, clock_mhz=300))
    assert e2["budget_ns"] == pytest.approx(1e3 / 300 * 0.73, abs=0.01) and not e2["closes"]


def test_an_enable_without_the_models_margin_renders_a_free_running_steps_loop(tmp_path):
    """The enable must leave a quarter of the budget free (timing.ENABLE_MARGIN: the model's
    constants are assumptions). bfp8_zcu104 at 150 MHz: 3.15 of 4.87 ns, 35% free: the stalled
    pipeline. At 220 MHz the budget is 1e3 / 220 x 0.73 = 3.32 ns: 3.15 still closes, but
    with 5% free, so the Steps loop is rendered free-running (style=frp, no global enable)."""
    import dataclasses
    from hlsnn import codegen
    cfg = hlsnn.load_config(ROOT / "configs" / "accel" / "bfp8_zcu104.yaml")
    e = timing.enable_timing(cfg)
    assert (e["closes_with_margin"], e["style"]) == (True, "stp")
    fast = dataclasses.replace(cfg, clock_mhz=220)
    e2 = timing.enable_timing(fast)
    assert e2["budget_ns"] == pytest.approx(3.32, abs=0.01) and e2["closes"]
    assert (e2["closes_with_margin"], e2["style"]) == (False, "frp")
    pragma = "#pragma HLS PIPELINE II = 1 style=frp"
    kernel = lambda c, d: dict(codegen.render(c, tmp_path / d).sources)["bfp_systolic.cpp"].decode()   # noqa: E731
    assert pragma not in kernel(cfg, "a")
    text = kernel(fast, "b")
    steps = text[text.index("  Steps:\n"):]
    assert steps[:steps.index("HLSNN_OPS(Steps")].count(pragma) == 1
