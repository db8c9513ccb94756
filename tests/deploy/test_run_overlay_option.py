"""`hlsnn run NAME.hlsnn --target pynq` needs each accelerator's overlay folder; the loader asked for
Python's `overlays={...}`, which the command line had no way to give. `--overlay ACCEL=FOLDER` gives
it (and says what is wrong with a malformed one); the errors name the option."""
from pathlib import Path

import numpy as np
import pytest

from hlsnn.cli import main
from hlsnn.commands.network import overlay_options
from hlsnn.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def test_overlay_options_parse_and_refuse():
    assert overlay_options(None) == {}
    assert overlay_options(["a=overlays/a_net", "b=x=y"]) == {"a": "overlays/a_net", "b": "x=y"}
    for bad in (["a"], ["=f"], ["a="], ["a=f", "a=g"]):
        with pytest.raises(InputError, match="--overlay"):
            overlay_options(bad)


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    pytest.importorskip("onnx")
    from hlsnn.network.build import compile_model
    d = tmp_path_factory.mktemp("lenet")
    (d / "m.yaml").write_text(f"name: lenet\nmodel: {ROOT / 'tests/data/torch/lenet_ts17.onnx'}\ndata: digits\n"
                              "layout: nchw\ncalibration: {samples: 16}\nformats:\n"
                              "  t: {type: twohot, accel: shift8_pynq-z2}\n")
    compile_model(d / "m.yaml", "t", d / "m.hlsnn", check_samples=0)
    np.save(d / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    return d


@pytest.mark.slow
def test_pynq_without_overlays_names_the_option(lenet, capsys):
    assert main(["run", str(lenet / "m.hlsnn"), "--input", str(lenet / "x.npy"), "--target", "pynq"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overlay shift8_pynq_z2=FOLDER" in err, err


@pytest.mark.slow
def test_overlays_reach_the_loader(lenet, capsys):
    args = ["run", str(lenet / "m.hlsnn"), "--input", str(lenet / "x.npy"), "--target", "pynq"]
    assert main(args + ["--overlay", "nope=overlays/nope"]) == 2       # the loader's check: not its accelerator
    err = capsys.readouterr().err
    assert "overlays: nope is not an accelerator of" in err and "it uses shift8_pynq_z2" in err, err
    assert main(args + ["--overlay", "shift8_pynq_z2"]) == 2
    assert "give ACCEL=FOLDER" in capsys.readouterr().err


def test_overlay_is_for_compiled_models(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((2, 8)))
    assert main(["run", "bfp16_pynq-z2", "--input", str(tmp_path / "x.npy"), "--target", "emu",
                 "--overlay", "a=b"]) == 2
    assert "--overlay: only for a compiled model" in capsys.readouterr().err
