"""Tampered overlays (issue 33, finding 8): a damaged ``.hwh`` or ``<name>.json`` is one clear
HlsnnError when the overlay loads, never a raw ValueError/AttributeError/RecursionError."""
import json
import re
import shutil

import numpy as np
import pytest

from hlsnn.runtime.pynq_compat import ensure_pkg_resources  # noqa: E402

ensure_pkg_resources()
pytest.importorskip("pynq")
pytestmark = pytest.mark.csim

import hlsnn  # noqa: E402
from hlsnn.config import load_config  # noqa: E402
from hlsnn.engines import ENGINES  # noqa: E402
from hlsnn.errors import HlsnnError  # noqa: E402
from conftest import accel_config  # noqa: E402


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    cfg = load_config(accel_config("bfp16_pynq-z2"))
    return cfg, prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path_factory.mktemp("ov") / cfg.name)


def _param(name, value):
    return lambda t: re.sub(rf'(NAME="{name}" VALUE=")[^"]*', rf"\g<1>{value}", t, flags=re.I)


def _reg(value):
    def edit(text):
        m = json.loads(text)
        m["register_map"]["batch"] = value
        return json.dumps(m)
    return edit


CASES = {
    "sg_length_width abc": ("hwh", _param("C_SG_LENGTH_WIDTH", "abc"), "c_sg_length_width = 'abc'"),
    "sg_length_width 99": ("hwh", _param("C_SG_LENGTH_WIDTH", "99"), r"must be an integer in \[8, 26\]"),
    "no s2mm channel": ("hwh", _param("C_INCLUDE_S2MM", "0"), "c_include_s2mm = 0: the kernel needs both channels"),
    "kernel base 0xFFFFFFFFFFFF0000": (
        "hwh", lambda t: re.sub(r'(BASENAME="C_S_AXI_CONTROL_BASEADDR" BASEVALUE=")0x[0-9A-Fa-f]+',
                                r"\g<1>0xFFFFFFFFFFFF0000", t), "base address 0xffffffffffff0000"),
    "register given as a string": ("json", _reg("16"), r"register_map\['batch'\] = '16'"),
    "register map a list": ("json", lambda t: json.dumps({**json.loads(t), "register_map": [1, 2]}),
                            "register_map = .*must be a JSON object"),
    "JSON nested 100000 deep": ("json", lambda t: "[" * 100000 + "]" * 100000, "nested too deeply"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_tampered_overlay_is_one_clear_error(honest, tmp_path, case):
    cfg, d0 = honest
    kind, edit, match = CASES[case]
    d = tmp_path / cfg.name
    shutil.copytree(d0, d)
    f = d / f"{cfg.name}.{kind}"
    f.write_text(edit(f.read_text()))
    with pytest.raises(HlsnnError, match=match) as e:
        with hlsnn.Accelerator(d, target="sim") as acc:
            acc.gemm(np.ones((2, 4)), np.ones((3, 4)))
    assert "\n" not in str(e.value)
