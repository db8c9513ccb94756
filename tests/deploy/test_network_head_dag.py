"""Host ops after the network kernel that are a small DAG, not a chain (:mod:`hlsnn.deploy.lower.netafter`):
a binary classifier's head ``cat(1 - p, p)`` with ``p = sigmoid(logit)`` (scikit-learn's
``predict_proba`` as skl2onnx writes it), and ``cat(z, sigmoid(z))`` whose ``Concat`` reads the
kernel's output and the op before's. Before, the network mode took a chain only and such a model
ran layer by layer (one kernel start per layer on the board).

References: the layer path (the network mode must give its bits), onnxruntime on the file torch
wrote, and a property (each ``(1 - p, p)`` pair sums to one)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class _Head(torch.nn.Module):
    """A small MLP with 5 logits ``z``, then ``cat(1 - sigmoid(z), sigmoid(z))`` (``binary``) or
    ``cat(z, sigmoid(z))`` (``both``): 10 outputs either way (the digits' 10 classes)."""

    def __init__(self, head):
        super().__init__()
        torch.manual_seed(7)
        self.head = head
        self.net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 12), torch.nn.ReLU(),
                                       torch.nn.Linear(12, 5))

    def forward(self, x):
        z = self.net(x)
        p = torch.sigmoid(z)
        return torch.cat([1 - p, p], 1) if self.head == "binary" else torch.cat([z, p], 1)


def _compiled(tmp_path, head, fmt="fixed8"):
    from netfixtures import compile_onnx, torch_export
    path = torch_export(_Head(head), (1, 8, 8), tmp_path / f"{head}.onnx", "ts17")
    return path, compile_onnx(tmp_path, head, path, fmt, check_samples=2, calibration_samples=16)


_MADE = {}


def _compiled_once(tmp_path_factory, head):
    """:func:`_compiled` once per worker and head."""
    if head not in _MADE:
        _MADE[head] = _compiled(tmp_path_factory.mktemp(head), head)
    return _MADE[head]


def _x(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


def test_the_dag_check_takes_any_tensor_made_after_the_kernel():
    from hlsnn.deploy.lower.netafter import check
    from hlsnn.engines.network.program import _why
    from hlsnn.errors import InputError
    program = {"output": {"engine_tensor": "z", "name": "y"}, "input": {"name": "x"}}
    head = [dict(name="s", kind="host", op="Sigmoid", inputs=["z"], output="p"),
            dict(name="n", kind="host", op="Scale", inputs=["p"], output="m"),
            dict(name="c", kind="host", op="Concat", inputs=["m", "p"], output="y")]
    check(head, program, _why)                                   # p: made after the kernel
    with pytest.raises(InputError, match="reads h1, neither a tensor made after the kernel"):
        check(head[:2] + [dict(name="c", kind="host", op="Concat", inputs=["m", "h1"], output="y")], program, _why)
    with pytest.raises(InputError, match="end in m, not the model's output y"):
        check(head[:2], program, _why)


@pytest.mark.parametrize("head", ["binary", "both"])
def test_a_head_dag_runs_after_the_network_mode_with_the_layer_paths_bits(tmp_path_factory, head):
    import hlsnn
    path, art = _compiled_once(tmp_path_factory, head)
    x = _x(24)
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None                               # before: declined, layer by layer
    assert [j["op"] for j in net.network.host_after][-1] == "Concat"
    y = net(x)
    np.testing.assert_array_equal(y, hlsnn.load(art, "emu", network=False)(x))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input": x.astype(np.float32)})[0]
    assert np.abs(y - ref).max() < 0.1 * np.abs(ref).max()
    if head == "binary":
        np.testing.assert_allclose(y[:, :5] + y[:, 5:], 1.0, rtol=0, atol=1e-12)
    else:
        np.testing.assert_allclose(y[:, 5:], 1 / (1 + np.exp(-y[:, :5])), rtol=1e-12)


def test_its_modelled_end_to_end_is_one_start(tmp_path_factory):
    from hlsnn.network.latency import model
    _, art = _compiled_once(tmp_path_factory, "binary")
    res = model(art, board="pynq-z2")
    assert res["path"] == "network" and res["kernel_starts"] == 1
    assert res["host_only_layers"][-1] == "/Concat"


@pytest.mark.slow
def test_on_the_simulated_board_the_head_dag_follows_one_start(tmp_path_factory):
    """C-simulation and the simulated board of the fixed8 network kernel: one start, the
    layer-by-layer emulator's bits with the head DAG after it."""
    from netfixtures import check_kernel_run
    _, art = _compiled_once(tmp_path_factory, "binary")
    check_kernel_run(art, "fixed8", _x(3), board=True)
