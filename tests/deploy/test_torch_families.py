"""tests/fixtures/torch_families, the generator of issue 52's test families: every family's table
is one the shared steps can run (a layout with data, a task they train for, no model name twice
across the families, so that no two families write the same file name), and each model's
deployment YAML is one ``hlsnn deploy`` reads, with its data and the task its model has.
"""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
from torch_families import FAMILIES, data  # noqa: E402

DIGITS = ("flat", "nchw", "ncl", "ntf")
TASKS = ("classification", "dense", "denoise", "fit", "tokens")


def test_every_table_row_is_one_the_steps_run():
    torch = pytest.importorskip("torch")
    seen = {}
    for family in FAMILIES.values():
        torch.manual_seed(0)
        table = family.models(torch, torch.nn)
        assert table, family.name
        for name, (model, layout, task, epochs) in table.items():
            assert name not in seen, f"{name} in {family.name} and {seen.get(name)}"
            seen[name] = family.name
            assert layout in DIGITS or layout in data.NPZ, (family.name, name, layout)
            assert task in TASKS and (task == "fit") == (layout in data.TARGETS), (family.name, name, task)
            assert isinstance(model, torch.nn.Module) or callable(model)
            assert isinstance(epochs, int) and (epochs == 0) == (task == "tokens"), (family.name, name)
    assert len(seen) >= 120


@pytest.mark.parametrize("layout,task", [("nchw", "classification"), ("ntf", "tokens"), ("seq64", "dense"),
                                         ("bc30", "classification"), ("sig64", "dense")])
def test_each_models_yaml_is_a_deploy_config_with_its_data(tmp_path, layout, task):
    from hlsnn.deploy.config import load_deploy_config
    for family in (FAMILIES["variant_family"], FAMILIES["variant_sixth"]):
        path = data.config(family, tmp_path, "m_ts17", {"layout": layout, "task": task})
        cfg = load_deploy_config(path)
        assert set(cfg.assignments) == set(data.FORMATS)
        regression = task == "dense" or (task == "tokens" and family.tokens_regression)
        assert ("task: regression" in path.read_text()) == regression
        assert ("targets: inputs" in path.read_text()) == (regression and layout not in data.TARGETS)
        ds = data.load(tmp_path, layout)
        assert len(ds.x_train) and ds.x_test.shape[0] == len(ds.y_test)
        if layout in data.NPZ:
            assert f"data: {tmp_path / (layout + '.npz')}" in path.read_text()
