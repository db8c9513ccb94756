"""A GLU block's residual ``x + F.glu(conv(x))`` and a global pool of a GLU's output on the integer
network path (issue 52, rule 10d of :mod:`hlsnn.engines.network.gatein`): the gate's product,
wider than the kernels' codes, is taken as codes at a calibrated radix (``gate_in``) by the layer
path and the network modes alike, so a gated 1-D CNN (gated CNN / wav2letter style, the fourth
family's ``g_glu``) runs in one kernel start on ``shift_mac`` and ``sparse_cluster``.

Tiny modules exported by torch in the test (TorchScript at opset 17, the dynamo exporter).
References: onnxruntime on the same file (the values within the 8-bit formats' error), the
layer-by-layer emulator for the bits, the kernel's C-simulation."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import hlsnn  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}
F = torch.nn.functional


class _GluNet(torch.nn.Module):
    """1x1 conv, then two GLU blocks with residuals (the second grouped), or one GLU without
    (``res`` False: the global pool reads the gate's product), mean over the length, Linear."""

    def __init__(self, res):
        super().__init__()
        torch.manual_seed(6)
        self.inp = torch.nn.Conv1d(8, 8, 1)
        self.c1 = torch.nn.Conv1d(8, 16, 3, padding=1)
        self.c2 = torch.nn.Conv1d(8, 16, 3, padding=1, groups=4)
        self.fc = torch.nn.Linear(8, 10)
        self.res = res

    def forward(self, x):
        x = self.inp(x)
        if self.res:
            x = x + F.glu(self.c1(x), dim=1)
            x = x + F.glu(self.c2(x), dim=1)
        else:
            x = F.glu(self.c1(x), dim=1)
        return self.fc(x.mean(-1))


@pytest.fixture(scope="module")
def glu_models(tmp_path_factory):
    """``{(res, how): {fmt: path}}``: each model and export compiled in two-hot and fixed8."""
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("glu")
    out = {}
    for res in (True, False):
        for how in EXPORTS:
            path = tmp / f"glu{int(res)}_{how}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(_GluNet(res).eval(), (torch.randn(1, 8, 8),), str(path), **EXPORTS[how])
            out[res, how] = dict(onnx=path, **compile_each(tmp, f"glu{int(res)}_{how}", path, ["twohot", "fixed8"],
                                                           layout="ncl"))
    return out


def _x(n=24):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="ncl").x_test[:n]


@pytest.mark.parametrize("how", list(EXPORTS))
@pytest.mark.parametrize("res", [True, False])
def test_a_glu_residual_and_a_pool_of_a_glu_run_in_the_network_mode(glu_models, res, how):
    """Before: ``an Add of two fabric tensors of one shape is supported`` (the residual) and no
    integer rule for the global pool of a pending gate; both ran layer by layer. Now one program,
    the layer path's bits, and values near onnxruntime's."""
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    x = _x()
    sess = ort.InferenceSession(str(glu_models[res, how]["onnx"]), providers=["CPUExecutionProvider"])
    ref = np.concatenate([sess.run(None, {sess.get_inputs()[0].name: x[i:i + 1]})[0] for i in range(len(x))])
    for fmt in ("twohot", "fixed8"):
        path = glu_models[res, how][fmt]
        prog = artifact.read(str(path))[0]
        coded = [j for j in prog["layers"] if "gate_in" in j]
        ops = {j["op"] for j in coded}
        assert ops == ({"Add"} if res else {"GlobalAveragePool"}), (fmt, ops)
        assert len(coded) == (2 if res else 1)
        made = {la["output"]: la for la in prog["layers"]}

        def source(t):                   # the layer that computed t, through the views
            while made[t]["kind"] == "host" and made[t]["op"] in ("Reshape", "Flatten", "Identity"):
                t = made[t]["inputs"][0]
            return made[t]
        for j in coded:                  # exactly the operands that are the gate's product have a radix
            assert [f is not None for f in j["gate_in"]["f_in"][:len(j["inputs"])]] == \
                [source(t).get("op") == "Mul" for t in j["inputs"]]
        net_prog = kernel_network(*artifact.read(str(path)))[0]       # no InputError
        assert any(op.kind == "gate" for op in net_prog.ops) and any(op.kind == "add" for op in net_prog.ops)
        with hlsnn.load(path, "emu") as net, hlsnn.load(path, "emu", network=False) as layers:
            assert net.network is not None
            y = net(x)
            np.testing.assert_array_equal(y, layers(x))
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.1, fmt      # 8-bit codes of the float model


def test_a_program_without_the_codes_radix_stays_refused_by_name(glu_models):
    """A program compiled before rule 10d (no ``gate_in`` on the Add) runs layer by layer, and the
    network mode names why."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(str(glu_models[True, "ts17"]["twohot"]))[:2]
    for j in prog["layers"]:
        j.pop("gate_in", None)
    with pytest.raises(InputError, match="an Add of two fabric tensors of one shape"):
        netmode.lower(prog, arrays)


def test_a_glu_model_compiled_before_rule_10d_says_so_and_how_to_recompile(glu_models, tmp_path):
    """A revision-2 program (before rule 10d: no ``gate_in`` on the Adds) now needs the codes' radix
    in the layer path too: the load names the older hlsnn and the command to recompile."""
    from hlsnn.network import artifact
    prog, arrays = artifact.read(str(glu_models[True, "dynamo"]["fixed8"]))[:2]
    assert prog["revision"] >= 3
    for j in prog["layers"]:
        j.pop("gate_in", None)
    prog["revision"] = 2
    artifact.write(tmp_path / "old.hlsnn", prog, arrays)
    with pytest.raises(InputError) as e:
        hlsnn.load(tmp_path / "old.hlsnn", "emu", network=False)
    msg = str(e.value)
    assert "older hlsnn" in msg and "revision 2" in msg and "rule 10d" in msg and "hlsnn compile" in msg


def test_a_codes_radix_on_a_pools_missing_operand_is_refused_by_name(glu_models):
    """The compiled program's check: a GlobalAveragePool has one operand, so ``gate_in`` is
    ``[F, null]``; ``[null, F]`` is a damaged program, named."""
    from hlsnn.network import artifact, schema
    prog, arrays = artifact.read(str(glu_models[False, "dynamo"]["fixed8"]))[:2]
    schema.validate(prog, arrays)                                  # as compiled
    (j,) = [j for j in prog["layers"] if "gate_in" in j]
    j["gate_in"]["f_in"] = j["gate_in"]["f_in"][::-1]
    with pytest.raises(InputError, match="GlobalAveragePool's \\[F, null\\]"):
        schema.validate(prog, arrays)


@pytest.mark.csim
@pytest.mark.parametrize("res, how, fmt", [(True, "ts17", "twohot"),
                                           pytest.param(True, "dynamo", "fixed8", marks=pytest.mark.slow),
                                           pytest.param(False, "ts17", "fixed8", marks=pytest.mark.slow)])
def test_a_glu_network_runs_in_one_kernel_start(glu_models, res, how, fmt):
    """The kernel's C-simulation: the emulator's bits in one start, each loop's iterations the perf
    model's (no new loop: the gate loop writes the codes, the Add loop adds them)."""
    from netfixtures import check_kernel_run
    check_kernel_run(glu_models[res, how][fmt], fmt, _x(6))
