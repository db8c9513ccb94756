"""bfp_systolic ``dsp_packing``: tiles (2D, c) and (2D+1, c) share the sample mantissa, so each
DSP multiplies it by both rows' weights packed into its A port, and the fabric splits the
DSP pair's sum into the two rows' pair sums (kernel.cpp.j2, ``PackedPairs``).

Packing changes no arithmetic (the split is exact), so the expected values are the
emulator's, which the rest of the suite holds against independent references. The inputs
are built from mantissas, to reach the split's edge cases: every mantissa at ``-2**(M-1)``
makes a row's pair sum ``+2**(2M-1)``, the largest the low field holds; mixed signs make the
low field borrow from the high one. The cycle counts are those of the unpacked array (the
same schedule), and the resource model counts one DSP per tile instead of two."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from conftest import planted_csim, record_calls as record
from hlsnn.engines.bfp_systolic import protocol, spec
from hlsnn.errors import ConfigError
from hlsnn.formats import bfp
from hlsnn.perf.closed_form import bfp_call_counts

CONFIGS = Path(__file__).parent / "configs"
ROOT = Path(__file__).resolve().parents[3]
PACKED = ["t8_packed", "t8_packed_gemv", "t7_packed_e1"]


def _edge_mantissas(rng, shape, m):
    """Mantissas drawn from the edges of the M-bit range (and a few ordinary values)."""
    lo, hi = -(1 << (m - 1)), (1 << (m - 1)) - 1
    return rng.choice(np.array([lo, lo, lo + 1, -1, 0, 1, hi, hi, 3, -5]), size=shape)


def _tensor(mant, exps, p, per_row):
    m, e = p["mantissa_bits"], p["exponent_bits"]
    if per_row:
        return bfp.BFPTensor.from_parts(mant, exps.reshape(-1, 1).astype(np.int32), m, exponent_bits=e, axis=1)
    return bfp.BFPTensor.from_parts(mant, np.full((1, 1), int(exps[0]), np.int32), m, exponent_bits=e, axis=None)


def _cases(p, rng):
    """(x, w, bias, relu) BFP operands: every mantissa -2**(M-1), then edge mixes; K odd and
    even, N ragged against the rows, batches over one and two groups of columns."""
    m, per_row = p["mantissa_bits"], p["weight_exponent"] == "row"
    lo = -(1 << (m - 1))
    k_max, n_max = p["max_k"], p["max_n"]
    for i, (b, k, n) in enumerate([(p["cols"], k_max, n_max), (p["cols"] + 1, k_max - 1, n_max - 1),
                                   (1, 3, 5), (2, k_max, p["rows"] + 1)]):
        if i == 0:
            xm, wm = np.full((b, k), lo), np.full((n, k), lo)
        else:
            xm, wm = _edge_mantissas(rng, (b, k), m), _edge_mantissas(rng, (n, k), m)
        x = _tensor(xm, rng.integers(-3, 3, size=b), p, True)
        w = _tensor(wm, rng.integers(-3, 3, size=n), p, per_row)
        bias = bfp.BFPTensor.from_parts(_edge_mantissas(rng, n, m), np.full(1, 2, np.int32), m,
                                           exponent_bits=p["exponent_bits"], axis=None) if i % 2 else None
        yield x, w, bias, bool(i % 2)


def _same(a, b):
    np.testing.assert_array_equal(a.mantissas, b.mantissas)
    np.testing.assert_array_equal(a.exponents, b.exponents)


@pytest.mark.csim
@pytest.mark.parametrize("name", PACKED)
def test_packed_array_gives_the_emulator_bits_at_the_edges(name):
    """Streamed calls, and a keep call followed by a resident one (GEMV mode where the config
    has it), on every packed config: the kernel's bits, saturation counts and cycle counts."""
    cfg = hlsnn.load_config(CONFIGS / f"{name}.yaml")
    p = cfg.params
    assert p["dsp_packing"]
    with hlsnn.Accelerator(cfg, "csim") as acc, hlsnn.Accelerator(cfg, "emu") as ref:
        calls = record(acc)
        for x, w, bias, relu in _cases(p, np.random.default_rng(14)):
            _same(acc.gemm_bfp(x, w, bias, relu), ref.gemm_bfp(x, w, bias, relu))
            assert acc.kernel.last_sat_count == ref.kernel.last_sat_count
            assert acc.kernel.last_cycles.counts == bfp_call_counts(p, x.shape[0], x.shape[1], w.shape[0],
                                                                    bias=bias is not None,
                                                                    stats_method=p["output_exponent"] == "stats")
        rng = np.random.default_rng(15)
        xf, wf = rng.normal(size=(1, p["max_k"])), rng.normal(size=(p["max_n"], p["max_k"]))
        expected = ref.gemm(xf, wf, relu=True)
        acc.load_weights(wf)
        kept = acc.gemm(xf, wf, relu=True)
        resident = acc.gemm(xf, wf, relu=True)
        assert calls[-1][0] & protocol.FLAG_RESIDENT
        assert ("GemvSteps" in acc.kernel.last_cycles.counts) == (spec.gemv_cols(p) > 1)
        acc.kernel.unload_weights()
        np.testing.assert_array_equal(kept, expected)
        np.testing.assert_array_equal(resident, expected)


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
@pytest.mark.parametrize("old,new", [
    # the high field's borrow correction dropped: wrong wherever row 2D's pair sum is negative
    ("(packsum_t)(p[Cfg::kPackShift - 1] ? 1 : 0)", "(packsum_t)0"),
    # the low field one bit short (its sign lost): wrong wherever row 2D's pair sum is negative
    ("p.range(Cfg::kPackShift - 1, 0)", "p.range(Cfg::kPackShift - 2, 0)"),
])
def test_a_planted_packing_bug_fails_compare(tmp_path, old, new):
    """hlsnn compare finds a wrong split of the DSP pair's sum (so the test above can fail)."""
    from hlsnn import codegen
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(CONFIGS / "t8_packed.yaml")
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "bfp_systolic.cpp", old, new)
    rep = compare(cfg, "csim", seed=0, n_random=2, target_obj=tgt)
    assert rep["mismatches"] > 0


def _variant(tmp_path, name, **changes):
    """A copy of test config ``name`` with bfp_systolic keys changed (YAML flow mapping)."""
    import yaml
    data = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    data["bfp_systolic"].update(changes)
    data["name"] = f"{name}_variant"
    path = tmp_path / f"{name}_variant.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_packing_halves_the_array_dsps_and_moves_the_accumulators_to_the_fabric(tmp_path):
    for name in PACKED:
        packed = hlsnn.load_config(CONFIGS / f"{name}.yaml")
        plain = hlsnn.load_config(_variant(tmp_path, name, dsp_packing=False))
        p = packed.params
        tiles = p["rows"] * p["cols"]
        ep, eu = spec.estimate(packed), spec.estimate(plain)
        array = [m for m in ep["multipliers"] if m["name"].startswith("w*x") and m["function"] == "Steps"]
        assert len(array) == 1 and array[0]["count"] == tiles and array[0]["dsp_each"] == 1
        assert array[0]["a_bits"] == 3 * p["mantissa_bits"] + 2
        # GEMV mode has no products of its own (it multiplexes the tiles' operands)
        assert eu["resources"]["dsp"] - ep["resources"]["dsp"] == tiles
        # each tile's accumulator is a fabric adder; the unpacked tile already has one on either
        # family (the sum of its two DSPs' accumulators), and packing drops its second accumulator.
        # With GEMV mode, packing also saves a tile's fourth operand multiplexer (three operands
        # of M bits a tile pair's six, against four a tile) and half the adder tree's inputs
        # (gc partial sums a row, not 2 gc): rows * gc * (M + acc_bits) LUTs fewer
        gc = spec.template_context(packed)["gemv_cols"]
        saved = p["rows"] * gc * (p["mantissa_bits"] + p["acc_bits"]) if gc > 1 else 0
        lut_more = ep["resources"]["lut"] - eu["resources"]["lut"]
        assert lut_more == -saved and eu["resources"]["ff"] - ep["resources"]["ff"] >= p["acc_bits"] * tiles
        # the schedule does not change
        assert spec.template_context(packed)["steps_max"] == spec.template_context(plain)["steps_max"]
        assert bfp_call_counts(p, 5, p["max_k"], p["max_n"]) == bfp_call_counts(plain.params, 5, p["max_k"],
                                                                                 p["max_n"])


@pytest.mark.parametrize("name,changes,match", [
    ("t8_packed", {"mantissa_bits": 9, "acc_bits": 26}, r"mantissa_bits.*at most 8 with dsp_packing on DSP48E2"),
    ("t7_packed_e1", {"mantissa_bits": 8, "acc_bits": 22}, r"mantissa_bits.*at most 7 with dsp_packing on DSP48E1"),
    ("t8_packed", {"rows": 3}, r"rows.*must be even with dsp_packing"),
])
def test_what_packing_cannot_take_is_a_config_error(tmp_path, name, changes, match):
    with pytest.raises(ConfigError, match=match):
        hlsnn.load_config(_variant(tmp_path, name, **changes))

