"""--out never creates folders outside build/ and overlays/ (plot-quant and report used to make
any folder, / included)."""
import numpy as np
import pytest

from hlsnn.cli import main
from hlsnn.errors import InputError
from hlsnn.paths import out_parent


def test_out_parent_rules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    assert out_parent(tmp_path / "x.png") == tmp_path                        # an existing folder
    assert out_parent("build/a/b/x.png").is_dir()                            # made under the build root
    assert out_parent("overlays/o/x.json").is_dir()                          # and under overlays/
    with pytest.raises(InputError, match="does not exist; create it first"):
        out_parent(tmp_path / "elsewhere" / "deep" / "x.png")
    assert not (tmp_path / "elsewhere").exists()
    with pytest.raises(InputError, match="is a folder"):
        out_parent(tmp_path)


def test_plot_quant_refuses_to_make_folders(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "w.npy", np.random.default_rng(0).normal(size=(16, 8)))
    assert main(["plot-quant", "w.npy", "--out", str(tmp_path / "no" / "such" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "no").exists()
    assert main(["plot-quant", "w.npy", "--out", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").is_file()
