"""A TCN's last-step pick ``h[:, :, -1]`` (a ``Gather`` of one scalar index, a host ``SwMove``) on
the network path of every engine (issue 52, rule 14p of :mod:`hlsnn.engines.network.tokens.pick`): a
one-step reflect crop, run by the kernels' ``Move`` loop with its mirrored index starting at the
picked step; a pick of a pending residual Add takes the Add requantized for its consumer first.

Tiny causal TCNs exported by torch in the test (TorchScript at opset 17, the dynamo exporter).
References: numpy's ``take`` for the rule, onnxruntime on the same file for the values, the
layer-by-layer emulator for the bits, the kernel's C-simulation."""
import warnings

import numpy as np
import pytest

from hlsnn.errors import InputError

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


@pytest.mark.parametrize("shape, axis, idx", [((3, 5), 2, -1), ((3, 5), 2, 0), ((3, 5), -1, 2), ((2, 4, 3), 2, 3),
                                              ((2, 4, 3), 3, -2), ((2, 4, 3), -1, 0)])
def test_a_pick_is_a_one_step_reflect_crop_equal_to_numpys_take(shape, axis, idx):
    from hlsnn.deploy.lower.program import _why
    from hlsnn.engines.network import move
    from hlsnn.engines.network.tokens import pick
    from hlsnn.engines.network.program import Op
    j = dict(name="g", kind="host", op="SwMove", attrs=dict(fn="Gather", axis=axis, indices=idx))
    f = pick.fields(j, shape, _why)
    x = np.random.default_rng(0).integers(-128, 128, (4,) + shape)
    y = move.run(Op("pad", "g", ["x"], "y", f), lambda t: x, 4)
    np.testing.assert_array_equal(y.reshape(4, -1), np.take(x, idx, axis=axis).reshape(4, -1))
    assert f["oh"] * f["ow"] * f["c"] == np.take(x, idx, axis=axis)[0].size


@pytest.mark.parametrize("attrs, what", [(dict(axis=1, indices=0), "along axis 1"),
                                         (dict(axis=2, indices=[0, 1]), "one scalar index"),
                                         (dict(axis=2, indices=7), "index 7 of an axis of 5")])
def test_a_pick_of_the_channels_several_indices_or_out_of_range_is_refused_by_name(attrs, what):
    from hlsnn.deploy.lower.program import _why
    from hlsnn.engines.network.tokens import pick
    with pytest.raises(InputError, match=what):
        pick.fields(dict(name="g", kind="host", op="SwMove", attrs=dict(fn="Gather", **attrs)), (3, 5), _why)


def _tcn(torch, idx, res):
    F = torch.nn.functional

    class Tcn(torch.nn.Module):
        """Causal Conv1d (F.pad on the left), Relu, (a causal residual block,) the step idx, Linear."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(6)
            self.c1, self.c2 = torch.nn.Conv1d(8, 8, 3), torch.nn.Conv1d(8, 8, 3)
            self.fc = torch.nn.Linear(8, 10)

        def forward(self, x):
            h = torch.relu(self.c1(F.pad(x, (2, 0))))
            if res:
                h = torch.relu(h + self.c2(F.pad(h, (2, 0))))
            return self.fc(h[:, :, idx])
    return Tcn().eval()


@pytest.fixture(scope="module")
def tcn_models(tmp_path_factory):
    """``{(idx, res, how): {fmt: path, "onnx": path}}``."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("pick")
    out = {}
    for idx, res in ((-1, True), (3, False)):
        for how in EXPORTS:
            name = f"tcn{idx % 8}{int(res)}_{how}"
            path = tmp / f"{name}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(_tcn(torch, idx, res), (torch.randn(1, 8, 8),), str(path), **EXPORTS[how])
            out[idx, res, how] = dict(onnx=path, **compile_each(tmp, name, path, ["twohot", "fixed8", "bfp8"],
                                                                layout="ncl"))
    return out


def _x(n=24):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="ncl").x_test[:n]


@pytest.mark.parametrize("how", list(EXPORTS))
@pytest.mark.parametrize("idx, res", [(-1, True), (3, False)])
def test_a_tcns_last_step_runs_in_the_network_mode_of_every_engine(tcn_models, idx, res, how):
    """Before: ``node_select (SwMove): no integer rule for this host op here`` on every engine
    (layer by layer). Now one program with the pick as a pad op, the layer path's bits, values
    near onnxruntime's."""
    import hlsnn
    ort = pytest.importorskip("onnxruntime")
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    x = _x()
    sess = ort.InferenceSession(str(tcn_models[idx, res, how]["onnx"]), providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    for fmt in ("twohot", "fixed8", "bfp8"):
        path = tcn_models[idx, res, how][fmt]
        prog = artifact.read(str(path))[0]
        assert [j["attrs"]["fn"] for j in prog["layers"] if j["kind"] == "host" and j["op"] == "SwMove"] == ["Gather"]
        net_prog = kernel_network(*artifact.read(str(path)))[0]            # no InputError
        (p,) = [op for op in net_prog.ops if op.kind == "pad"]
        assert p.f["pick"] and p.f["oh"] == 1 and p.f["pads"][0] == idx % 8
        with hlsnn.load(path, "emu") as net, hlsnn.load(path, "emu", network=False) as layers:
            assert net.network is not None
            y = net(x)
            np.testing.assert_array_equal(y, layers(x))
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.1, fmt


@pytest.mark.csim
@pytest.mark.parametrize("key, fmt", [((-1, True, "ts17"), "twohot"),
                                      pytest.param((-1, True, "dynamo"), "fixed8", marks=pytest.mark.slow),
                                      pytest.param((3, False, "ts17"), "bfp8", marks=pytest.mark.slow)])
def test_a_pick_runs_in_one_kernel_start(tcn_models, key, fmt):
    """The kernel's C-simulation: the emulator's bits in one start, each loop's iterations the perf
    model's (the Move loop: one iteration per block of channels for the one step)."""
    from netfixtures import check_kernel_run
    check_kernel_run(tcn_models[key][fmt], fmt, _x(6))
