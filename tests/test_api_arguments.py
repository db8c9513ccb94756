"""The Python API's arguments (issue 33, findings 6 and 8): flags are booleans, integer options
integers, a config a name, path, dict or Config; anything else is one clear InputError, never a
silent wrong result (``raw="no"`` returned raw accumulators) or a raw traceback."""
import numpy as np
import pytest
import yaml

from hlsnn import Accelerator
from hlsnn.errors import InputError
from conftest import ROOT


@pytest.fixture(scope="module")
def shift8():
    with Accelerator("shift8_pynq-z2", "emu") as acc:
        yield acc


@pytest.mark.parametrize("op", ["gemm_int", "conv2d_int"])
@pytest.mark.parametrize("flag", ["raw", "relu", "stats"])
def test_flags_must_be_booleans(shift8, op, flag):
    x = np.ones((2, 8), np.int64) if op == "gemm_int" else np.ones((2, 5, 5), np.int64)
    w = np.zeros((4, 8), np.int64) if op == "gemm_int" else np.zeros((4, 2, 3, 3), np.int64)
    with pytest.raises(InputError, match=f"{flag} = 'no': must be True or False"):
        getattr(shift8, op)(x, w, **{flag: "no"})


@pytest.mark.parametrize("value", ["10", 10.0, True])
def test_k_step_must_be_an_integer(shift8, value):
    with pytest.raises(InputError, match="k_step = .*must be an integer"):
        shift8.gemm_int(np.ones((2, 8), np.int64), np.zeros((4, 8), np.int64), k_step=value)


def test_a_parsed_config_dict_is_a_config():
    raw = yaml.safe_load((ROOT / "configs/accel/bfp8_zcu104.yaml").read_text())
    x, w = np.random.default_rng(0).normal(size=(3, 16)), np.random.default_rng(1).normal(size=(5, 16))
    with Accelerator(raw, "emu") as a, Accelerator("bfp8_zcu104", "emu") as b:
        assert np.array_equal(a.gemm(x, w), b.gemm(x, w))


@pytest.mark.parametrize("config", [42, None, ["bfp8_zcu104"], b"bfp8_zcu104"])
def test_other_configs_are_one_input_error(config):
    with pytest.raises(InputError, match="must be a config name"):
        Accelerator(config, "emu")
