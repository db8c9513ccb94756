"""The strict C-simulation library (hlsnn/strict.h) is bit-exact too, config by config.

The test run's default library is the fast one (tests/conftest.py): the engines' csim tests
check the bits on it. Here each config's seeded compare sweep (which test_csim.py,
test_shift_mac.py and test_sparse_cluster.py run on the fast library) runs on the strict
library, with its rules (bounded FIFOs, DATAFLOW threads, dependence distances, bank
ports) in force: one small config per engine in the quick suite, every shipped and test
config in the slow one."""
import pytest

import hlsnn
from conftest import ROOT

pytestmark = [pytest.mark.csim, pytest.mark.strict_csim]

#: one config per engine in the quick suite: the smallest kernel, so its strict compile is cheap
QUICK = {"t2_tiny", "s_tiny", "sp_small"}
CONFIGS = sorted((ROOT / "configs" / "accel").glob("*.yaml")) + sorted((ROOT / "tests" / "engines").glob("*/configs/*.yaml"))


@pytest.mark.parametrize("path", [p if p.stem in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in CONFIGS],
                         ids=lambda p: p.stem)
def test_strict_csim_equals_the_emulator(path):
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(path)
    rep = compare(cfg, "csim", seed=1234, n_random=6)
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []
    st = rep["strict"]                        # present only when the strict library ran
    assert sorted(st) == ["banks", "fifos", "operators", "raw"]
    assert all(0 <= f["peak"] <= f["depth"] for f in st["fifos"])
    assert all(r["min_distance"] is None or r["min_distance"] >= r["required"] for r in st["raw"])


def test_one_quick_config_per_engine():
    engines = {hlsnn.load_config(p).engine for p in CONFIGS if p.stem in QUICK}
    assert engines == {"bfp_systolic", "shift_mac", "sparse_cluster"}
