"""The shadow rows of a GEMM's last tile (issue 45): rows n_out .. n0 + rows - 1 of the last
tile of ``rows`` outputs may lie past the last word of the bias and row-exponent banks
(``kNWords = ceil(max_n / lanes)``): bfp8_ultra96v2 (28 rows, max_n 1024) for n_out 1009-1024,
bfp8_zcu104 (48 rows, max_n 2048) for n_out 2017-2048. PostRow reads nothing there (as GEMV
posting); before, the strict C-simulation stopped with an out-of-bounds read and
``hlsnn perf configs/accel/bfp8_ultra96v2.yaml --gemm 256,1024,1024`` exited 2."""
import numpy as np
import pytest

import hlsnn
from hlsnn import csim
from hlsnn.engines.bfp_systolic.spec import lanes

from conftest import accel_config, stable_seed

pytestmark = [pytest.mark.csim, pytest.mark.strict_csim]


def test_the_shipped_configs_have_shadow_rows_past_the_last_word():
    # the premise of the cases below, from the configs themselves: the last tile ends past
    # the banks' last row for n_out = max_n
    for name in ("bfp8_ultra96v2", "bfp8_zcu104"):
        p = hlsnn.load_config(accel_config(name)).params
        banks = lanes(p)
        last_tile_end = -(-p["max_n"] // p["rows"]) * p["rows"]     # the last tile's shadow rows' end
        assert last_tile_end > -(-p["max_n"] // banks) * banks


# slow: a strict library of each config (~30 CPU-s of g++); the quick suite's bfp csim cases
# (test_csim.py, bfp8_zcu104) post full tiles of the same PostRow
@pytest.mark.slow
@pytest.mark.parametrize("name,n", [("bfp8_ultra96v2", 1024), ("bfp8_ultra96v2", 1009), ("bfp8_zcu104", 2048),
                                    ("bfp8_zcu104", 2017)])
def test_a_last_tile_past_the_banks_last_word_equals_the_emulator(name, n):
    path = accel_config(name)
    rng = np.random.default_rng(stable_seed(name, n))
    x, w, b = rng.normal(size=(3, 40)), rng.normal(size=(n, 40)), rng.normal(size=n)
    with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
        assert csim.strict_default()
        np.testing.assert_array_equal(c.gemm(x, w, bias=b, relu=False), e.gemm(x, w, bias=b, relu=False))


@pytest.mark.slow
def test_the_readme_row_of_bfp8_ultra96v2_runs(capsys):
    # README: a GEMM of 256x1024x1024 on bfp8_ultra96v2 (n_out 1024, the last tile's shadow rows
    # 1024-1035 past the banks' last word); it exited 2 with the strict csim's out-of-bounds read
    from hlsnn.cli import main
    assert main(["perf", str(accel_config("bfp8_ultra96v2")), "--gemm", "256,1024,1024"]) == 0
    assert "out of" not in capsys.readouterr().err
