"""An activation after a nearest upsample (issue 52: ``act(up(conv(x)))`` ran layer by layer on
the network path: a ``Clip`` is a conv's output clamp only when it reads the conv, a BFP table
reads a BFP layer's output): :mod:`hlsnn.deploy.rewrite.actup` moves it before the upsample, which
only copies values, so every function of one element commutes with it.

References: onnxruntime's outputs of the files torch wrote (the imported float network against
them), the layer path of the same model imported without the rewrite (its bits), and the
network path on emu, C simulation and the simulated board."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.rewrite import actup  # noqa: E402
from hlsnn.deploy.importer.graph import Layer  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_each  # noqa: E402

SMALL = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
         "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


def _layers(act_op="Clip", attrs=None, readers=1):
    ls = [Layer("c", "conv", ["x"], "c"), Layer("u", "host", ["c"], "u", op="Upsample", attrs={"factors": (2, 2)}),
          Layer("a", "host", ["u"], "a", op=act_op, attrs=attrs if attrs is not None else {"lo": 0.0, "hi": 6.0}),
          Layer("d", "conv", ["a"], "y")]
    if readers > 1:
        ls.insert(3, Layer("m", "host", ["u"], "m", op="Relu"))
    return ls


def test_rewrite_swaps_the_two_and_keeps_every_readers_tensor():
    out = actup.rewrite(_layers(), "y")
    assert [(la.name, la.inputs, la.output) for la in out] == [
        ("c", ["x"], "c"), ("a", ["c"], "u"), ("u", ["u"], "a"), ("d", ["a"], "y")]


@pytest.mark.parametrize("case", ["two readers", "output", "slope per column", "no table", "Relu"])
def test_what_does_not_commute_or_is_read_elsewhere_stays(case):
    kw = {"two readers": dict(readers=2), "output": {}, "Relu": dict(act_op="Relu", attrs={}),
          "slope per column": dict(act_op="PRelu", attrs={"slope": np.arange(4.0).reshape(1, 4)}),
          "no table": dict(act_op="Gelu", attrs={"approximate": "odd"})}[case]
    ls = _layers(**kw)
    before = [(la.name, list(la.inputs), la.output) for la in ls]
    out = actup.rewrite(ls, "u" if case == "output" else "y")
    assert [(la.name, la.inputs, la.output) for la in out] == before


def test_per_channel_constants_move():
    for slope in (np.arange(4.0).reshape(4, 1, 1), np.arange(4.0).reshape(1, 4, 1, 1), np.float32(0.25)):
        out = actup.rewrite(_layers("PRelu", {"slope": slope}), "y")
        assert out[1].op == "PRelu" and out[1].inputs == ["c"]


ACTS = {"relu6": lambda nn: nn.ReLU6(), "hardtanh": lambda nn: nn.Hardtanh(), "elu": lambda nn: nn.ELU(),
        "leaky": lambda nn: nn.LeakyReLU(0.1)}


def up_act_model(path, act, seed=5, swapped=False):
    """conv 1 -> 4 stride 2 (8 x 8 -> 4 x 4), ``nn.Upsample(scale_factor=2)``, the activation, conv 4 -> 1
    (``swapped``: the activation before the upsample), as torch's TorchScript exporter writes it
    (opset 17, dynamic batch)."""
    from torch import nn
    torch.manual_seed(seed)
    mid = [nn.Upsample(scale_factor=2), ACTS[act](nn)]
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, stride=2), *(mid[::-1] if swapped else mid),
                      nn.Conv2d(4, 1, 3, padding=1)).eval()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.zeros(1, 1, 8, 8),), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
    return path


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:6]


@pytest.mark.parametrize("act", list(ACTS))
def test_imported_float_network_is_onnxruntimes(tmp_path, act):
    ort = pytest.importorskip("onnxruntime")
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    p = up_act_model(tmp_path / f"{act}.onnx", act)
    net = load_onnx(p)
    assert [la.op for la in net.layers if la.kind == "host"][-1] == "Upsample"
    x = _x().astype(np.float32)
    ref = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-5, atol=1e-5)


#: (activation, format): ReLU6 and Hardtanh are Clips (two-hot, fixed8: a conv's clamp), ELU and
#: LeakyReLU tables (bfp8: rule 9b of a BFP layer's output)
CASES = [("relu6", "twohot"), ("hardtanh", "fixed8"), ("elu", "bfp8"), ("leaky", "bfp8")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """``get(act, fmt)`` -> (the compiled model, the same compiled without the rewrite, the model
    written with the activation before the upsample), each compiled on first use."""
    tmp = tmp_path_factory.mktemp("actup")
    cache = {}

    def get(act, fmt):
        if (act, fmt) not in cache:
            p = up_act_model(tmp / f"{act}.onnx", act)
            new = compile_each(tmp, f"{act}", p, [fmt], formats=SMALL, check_samples=2, calibration_samples=16)[fmt]
            mp = pytest.MonkeyPatch()
            mp.setattr(actup, "rewrite", lambda layers, output: layers)
            try:
                old = compile_each(tmp, f"{act}_old", p, [fmt], formats=SMALL, check_samples=2,
                                   calibration_samples=16)[fmt]
            finally:
                mp.undo()
            sw = compile_each(tmp, f"{act}_sw", up_act_model(tmp / f"{act}_sw.onnx", act, swapped=True), [fmt],
                              formats=SMALL, check_samples=2, calibration_samples=16)[fmt]
            cache[act, fmt] = new, old, sw
        return cache[act, fmt]
    return get


@pytest.mark.parametrize("act, fmt", [CASES[0], pytest.param(*CASES[1], marks=pytest.mark.slow), CASES[2],
                                      pytest.param(*CASES[3], marks=pytest.mark.slow)])
def test_one_network_program_with_the_layer_paths_bits_of_before(compiled, act, fmt):
    """The network mode runs it (before: layer by layer) and gives the layer path's bits; the
    layer path's bits are those of the model written with the activation before the upsample,
    and for a Clip those of the model imported without the rewrite too (a float ``np.clip`` of
    the format's values, exact either way). A BFP table (rule 9b) rounds where the host's float64
    ELU did not: there the layer path's bits are the written-swapped model's, not those of before."""
    new, old, sw = compiled(act, fmt)
    x = _x()
    net = hlsnn.load(new, "emu", network=True)
    assert net.network is not None
    from hlsnn.errors import InputError
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    with pytest.raises(InputError, match="this network runs layer by layer"):        # before
        kernel_network(*artifact.read(str(old)))
    layers = hlsnn.load(new, "emu", network=False)(x)
    np.testing.assert_array_equal(net(x), layers)
    np.testing.assert_array_equal(layers, hlsnn.load(sw, "emu", network=False)(x))
    if fmt != "bfp8":
        np.testing.assert_array_equal(layers, hlsnn.load(old, "emu", network=False)(x))


@pytest.mark.csim
@pytest.mark.parametrize("act, fmt", [CASES[0], pytest.param(*CASES[1], marks=pytest.mark.slow),
                                      pytest.param(*CASES[2], marks=pytest.mark.slow)])
def test_one_kernel_start_on_csim_and_the_board(compiled, act, fmt):
    check_kernel_run(compiled(act, fmt)[0], fmt, _x(), board=True)
