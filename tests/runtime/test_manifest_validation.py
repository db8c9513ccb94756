"""An overlay manifest (<name>.json) is validated like a config, also when its recorded hash was
recomputed after an edit (a plain SHA-256 anyone can redo): a name that is a path, or that
carries a newline (which reached run_hls.tcl and was executed by tclsh), is refused before
anything is rendered, compiled or written."""
import copy
import json

import numpy as np

import pytest

from hlsnn.config import load_config
from hlsnn.errors import HlsnnError
from hlsnn.runtime.pynq_target import config_from_manifest
from conftest import accel_config


def _manifest(cfg):
    return json.loads(json.dumps({"name": cfg.name, "config": cfg.as_dict(), "config_sha256": cfg.sha}))


def _recomputed(man):
    """The attacker's move: recompute the hash over the edited config."""
    import hashlib
    blob = json.dumps(man["config"], sort_keys=True, separators=(",", ":")).encode()
    man["config_sha256"] = hashlib.sha256(blob).hexdigest()
    return man


def test_an_honest_manifest_round_trips():
    cfg = load_config(accel_config("sparse8_pynq-z2"))
    assert config_from_manifest(_manifest(cfg)).sha == cfg.sha


@pytest.mark.parametrize("field,value", [
    (("name",), "../../x"), (("name",), "/tmp/evil"), (("name",), "ok\nexec touch /tmp/hlsnn-pwned"),
    (("name",), ""), (("board", "name"), "../boards/x"), (("board", "part"), "xc7z020 ; exec rm"),
    (("engine",), "no_such_engine"), (("bfp_systolic", "rows"), 10**9), (("clock_mhz",), "fast"),
])
def test_tampered_manifests_are_refused(field, value):
    cfg = load_config(accel_config("bfp16_pynq-z2"))
    man = _manifest(cfg)
    d = man["config"]
    for k in field[:-1]:
        d = d[k]
    d[field[-1]] = value
    with pytest.raises(HlsnnError) as exc:
        config_from_manifest(_recomputed(man))
    assert "Traceback" not in str(exc.value) and len(str(exc.value)) < 400


@pytest.mark.parametrize("bad", [None, [], {"config": None}, {"config": {"name": "x"}}, {"config": {"board": 3}}])
def test_malformed_manifests_are_clear_errors(bad):
    with pytest.raises(HlsnnError):
        config_from_manifest(copy.deepcopy(bad))


def test_a_wrong_register_map_is_refused_before_any_call(tmp_path):
    """The register map is checked against the .hwh's registers of the kernel: offsets swapped
    in the manifest (hash recomputed or not: the map is outside the hashed config) are refused
    when the overlay loads, instead of tripping the kernel's checks mid-call."""
    pytest.importorskip("pynq")
    import hlsnn
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    cfg = load_config(accel_config("bfp16_pynq-z2"))
    d = prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)
    with hlsnn.Accelerator(d, target="sim") as acc:                  # the honest map loads
        acc.gemm(np.ones((2, 4)), np.ones((3, 4)))
    js = d / f"{cfg.name}.json"
    m = json.loads(js.read_text())
    m["register_map"]["batch"], m["register_map"]["n_out"] = m["register_map"]["n_out"], m["register_map"]["batch"]
    js.write_text(json.dumps(m))
    with pytest.raises(HlsnnError, match=r"register_map disagrees with the \.hwh's register list: batch at 0x18"):
        hlsnn.Accelerator(d, target="sim")
