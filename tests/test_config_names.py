"""Accelerator configs by name (``bfp16_pynq-z2``) wherever a path is accepted: the folders of
HLSNN_CONFIG_PATH first, then the shipped configs/accel."""
import numpy as np
import pytest

import hlsnn
from hlsnn.cli import main
from hlsnn.config import find_config, load_config
from hlsnn.errors import ConfigError
from conftest import ROOT

SHIPPED = ROOT / "configs" / "accel"


def test_shipped_names_with_or_without_suffix(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)                                  # nowhere near the repository's configs
    monkeypatch.delenv("HLSNN_CONFIG_PATH", raising=False)
    assert find_config("bfp16_pynq-z2") == SHIPPED / "bfp16_pynq-z2.yaml"
    assert find_config("sparse8_pynq-z2.yaml") == SHIPPED / "sparse8_pynq-z2.yaml"
    cfg = load_config("shift8_zcu104")
    assert cfg.name == "shift8_zcu104" and cfg.stem == "shift8_zcu104"
    assert hlsnn.Accelerator("bfp16_pynq-z2", "emu").config.name == "bfp16_pynq_z2"


def test_user_search_path_comes_first(monkeypatch, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    text = (SHIPPED / "bfp16_pynq-z2.yaml").read_text().replace("name: bfp16_pynq_z2", "name: my_bfp16")
    (mine / "bfp16_pynq-z2.yaml").write_text(text)
    monkeypatch.setenv("HLSNN_CONFIG_PATH", f"{tmp_path / 'empty'}:{mine}")
    assert load_config("bfp16_pynq-z2").name == "my_bfp16"
    assert load_config("bfp8_zcu104").name == "bfp8_zcu104"              # not shadowed: the shipped one


def test_paths_still_win_and_unknown_names_say_where_they_looked(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bfp16_pynq-z2").write_text("not: a config\n")           # an existing path is taken as it is
    with pytest.raises(ConfigError, match="engine"):
        load_config("bfp16_pynq-z2")
    with pytest.raises(ConfigError, match=r"no such config file, and no config of that name in .*configs/accel"):
        load_config("no_such_accel")
    with pytest.raises(ConfigError, match="no such config file$"):
        load_config("somewhere/no_such_accel.yaml")                      # a folder: never looked up by name
    # ... but a missing path whose file is a known config's (the README's configs/accel/X.yaml from an
    # installed wheel) names that config instead of loading it
    with pytest.raises(ConfigError, match=r"^configs/accel/bfp16_pynq-z2.yaml: no such config file; a config of "
                                          r"that name is installed \(.*\): give its name alone, bfp16_pynq-z2$"):
        load_config("configs/accel/bfp16_pynq-z2.yaml")


def test_an_unknown_name_lists_the_known_ones(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HLSNN_CONFIG_PATH", raising=False)
    assert main(["csim", "bfp16_pynq"]) == 2
    err = capsys.readouterr().err
    known = sorted(f.stem for f in SHIPPED.glob("*.yaml"))
    assert err.count("\n") == 1 and err.rstrip().endswith("known names: " + ", ".join(known)), err
    assert "did you mean bfp16_pynq-z2" in err, err                       # the closest names first


def test_a_name_spelt_with_underscores_is_the_config_spelt_with_dashes(monkeypatch, tmp_path, capsys):
    """build/ and overlays/ name bfp16_pynq-z2's folders bfp16_pynq_z2: that name finds the config; a path
    spelt so is not taken silently, it names the file that exists."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HLSNN_CONFIG_PATH", raising=False)
    assert load_config("bfp16_pynq_z2").path == load_config("bfp16_pynq-z2").path
    (tmp_path / "accel").mkdir()
    (tmp_path / "accel" / "my-conf.yaml").write_text((SHIPPED / "bfp16_pynq-z2.yaml").read_text())
    with pytest.raises(ConfigError, match=r"no such config file; did you mean accel/my-conf.yaml\?"):
        load_config("accel/my_conf.yaml")


def test_a_model_or_deployment_config_given_for_an_accelerator_says_to_compile_first(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.zeros((2, 64), np.float32))
    models = SHIPPED.parent / "models"
    for args in (["run", str(models / "digits_cnn.yaml"), "--input", "x.npy"],
                 ["perf", str(models / "digits_cnn.yaml"), "--gemm", "1,2,3"],
                 ["run", str(models / "digits_cnn.onnx"), "--input", "x.npy"],
                 ["info", str(models / "digits_cnn.onnx")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not an accelerator config" in err and "hlsnn compile" in err, (args, err)


def test_cli_takes_names(capsys):
    assert main(["info", "sparse8_pynq-z2"]) == 0
    assert "sparse8_pynq_z2: engine sparse_cluster" in capsys.readouterr().out
    assert main(["info", "nope"]) == 2


def test_deployment_config_names_its_accelerators(tmp_path):
    pytest.importorskip("onnx")
    from hlsnn.deploy.config import load_deploy_config
    src = (ROOT / "configs" / "models" / "digits_mlp.yaml").read_text()
    model = ROOT / "configs" / "models" / "digits_mlp.onnx"
    (tmp_path / "d.yaml").write_text(
        f"name: d\nmodel: {model}\ndata: digits\nformats:\n  bfp8: {{type: bfp, accel: bfp8_zcu104}}\n"
        "assignments:\n  bfp8: {default: bfp8}\n")
    cfg = load_deploy_config(tmp_path / "d.yaml")
    assert cfg.formats["bfp8"].accel == "bfp8_zcu104" and "accel" in src
    assert np.isfinite(load_config(cfg.formats["bfp8"].accel).clock_mhz)


def test_where_a_config_was_read_from_does_not_change_its_sources(tmp_path):
    """The rendered files (and so C-simulation's cache key, their hash) depend on the config,
    not on its file's name or folder: a copy under another name, or the config without a path
    (as an overlay's JSON gives it), renders the same bytes; a changed value does not."""
    import dataclasses
    from hlsnn import codegen
    text = (SHIPPED / "shift8_pynq-z2.yaml").read_text()
    (tmp_path / "copy with spaces;rm.yaml").write_text(text)
    a = load_config(SHIPPED / "shift8_pynq-z2.yaml")
    b = load_config(tmp_path / "copy with spaces;rm.yaml")
    c = dataclasses.replace(a, path=None)
    shas = {codegen.render(cfg, tmp_path / str(i)).sha for i, cfg in enumerate((a, b, c))}
    assert len(shas) == 1
    changed = tmp_path / "changed.yaml"
    changed.write_text(text.replace("name: shift8_pynq_z2", "name: shift8_other"))
    assert codegen.render(load_config(changed), tmp_path / "x").sha not in shas
