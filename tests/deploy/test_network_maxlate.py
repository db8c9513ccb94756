"""A max pool of a pending Add or gate in the network mode
(:mod:`hlsnn.engines.network.joins.maxlate`; issue 52's fifth family): a residual block's
``relu(x + conv(x))`` then ``AdaptiveMaxPool1d(1)`` (a keyword spotter), a SiLU (``x *
sigmoid(x)``, a gate) then ``torch.max(x, dim=2)[0]`` (a TC-ResNet), each before a Linear; files
torch writes (TorchScript at opset 17 and the dynamo exporter, untrained, seeded).

References: the layer-by-layer compiled network on the emulator for the bits (requantization
is monotone: the max of the requantized values is the requantized max), the C-simulated kernel
in one start.; the deployment's calibration against the layer path's (the emu fast calibration leaves a
pool of a materialized sum to the layer path)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402

FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}
EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


class _ResMax(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        torch.manual_seed(5)
        self.kind = kind
        self.c0, self.c1 = torch.nn.Conv1d(8, 12, 3, padding=1), torch.nn.Conv1d(12, 12, 3, padding=1)
        self.pool, self.fc = torch.nn.AdaptiveMaxPool1d(1), torch.nn.Linear(12, 10)

    def forward(self, x):
        h = torch.relu(self.c0(x))
        if self.kind == "add":
            h = torch.relu(h + self.c1(h))
            return self.fc(torch.flatten(self.pool(h), 1))
        h = torch.nn.functional.silu(self.c1(h))
        return self.fc(torch.max(h, dim=2)[0])


def _export(tmp_path, kind, how):
    import warnings
    path = tmp_path / f"{kind}_{how}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_ResMax(kind).eval(), (torch.randn(1, 8, 8),), str(path), **EXPORTS[how])
    return path


def _compile(tmp_path, kind, how, fmt):
    from netfixtures import compile_onnx
    return compile_onnx(tmp_path, f"{kind}_{how}", _export(tmp_path, kind, how), fmt, formats=FORMATS, layout="ncl")


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("fmt,kind", [("fixed8", "add"), ("fixed8", "gate"), ("twohot", "add"),
                                      ("twohot", "gate"), ("bfp8", "add"), ("bfp8", "gate")])
def test_a_max_pool_of_a_pending_add_or_gate_runs_in_the_network_mode_with_the_layer_paths_bits(tmp_path, kind,
                                                                                                  how, fmt):
    out = _compile(tmp_path, kind, how, fmt)
    x = datasets.load("digits", layout="ncl").x_test[:48]
    net = hlsnn.load(out, "emu", network=True)
    assert net.network is not None
    kinds = [op.kind for op in net.network.ops]
    pool = kinds.index("maxpool")
    if fmt != "bfp8" or kind == "add":      # bfp's gate keeps its own rules
        assert kinds[pool - 1] == ("add" if kind == "add" else "gate")     # materialized just before the pool
    np.testing.assert_array_equal(net(x), hlsnn.load(out, "emu", network=False)(x))


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
@pytest.mark.parametrize("kind", ["add", "gate"])
def test_the_fast_calibration_leaves_a_pooled_sum_to_the_layer_path(tmp_path, monkeypatch, fmt, kind):
    """The emu calibration at the run's speed (:mod:`hlsnn.deploy.quantize.calibrate`) picks a radix from
    an Add's sums, the layer path (the specification) from the pooled values its reader converts:
    with a pool of a materialized sum it leaves the calibration to the layer path, whose outputs
    the deployment then gives (before, the reader's ``F_x`` stayed unset)."""
    from hlsnn.deploy.quantize import calibrate
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    from netfixtures import write_config
    cfg = load_deploy_config(write_config(tmp_path, "m", _export(tmp_path, kind, "ts17"), formats=FORMATS,
                                          layout="ncl"))
    ds = datasets.load("digits", layout="ncl")
    outs = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(calibrate, "calibrate", lambda *a, **k: False)
        accs = open_accelerators(cfg, "emu")
        try:
            dep = Deployment(load_onnx(cfg.model), cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
            dep.calibrate(ds.x_train[:128])
            f_x = {k: ex.f_x for k, ex in dep.execs.items()}          # as calibrated (a run sets an unset one)
            outs.append((dep.run(ds.x_test[:64]), f_x))
        finally:
            for a in accs.values():
                a.close()
    assert outs[0][1] == outs[1][1] and all(v is not None for k, v in outs[0][1].items() if "fc" in k)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])


@pytest.mark.csim
@pytest.mark.parametrize("fmt,kind", [("fixed8", "add"), ("twohot", "gate"),
                                      pytest.param("bfp8", "add", marks=pytest.mark.slow)])
def test_the_kernel_pools_a_pending_add_or_gate_in_one_start(tmp_path, fmt, kind):
    out = _compile(tmp_path, kind, "ts17", fmt)
    x = datasets.load("digits", layout="ncl").x_test[:6]
    k = hlsnn.load(out, "csim", network=True)
    np.testing.assert_array_equal(k(x), hlsnn.load(out, "emu", network=False)(x))
    assert k.last_kernel_starts == 1
