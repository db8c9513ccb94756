"""CBAM's channel attention on the network path (issue 52): ``h * Sigmoid(mlp(avg(h)) + mlp(max(h)))``
keeps the map ``h`` (waiting for its gate) and the average-pooled branch's vector (waiting for the
max-pooled one's) live while the shared MLP writes a third tensor, so the network kernels get a
third activation buffer (:func:`hlsnn.engines.network.kernel.allocate`, ``act[3]`` in each engine's
``network.cpp``). One small net (:func:`netfixtures.cbam_net`) per engine: the network mode's
bits are the layer path's on emu, the C-simulation's and the simulated board's in one start, the
loops' iterations the perf model's, and every loop's derived II is 1."""
import numpy as np
import pytest

pytest.importorskip("onnx")

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from netfixtures import ENGINE, FORMATS, cbam_net, check_kernel_run, compile_onnx  # noqa: E402


@pytest.fixture(scope="module")
def cbam(tmp_path_factory):
    """fmt -> the compiled CBAM-like net, each compiled once for the module."""
    tmp = tmp_path_factory.mktemp("cbam")
    model = cbam_net(tmp / "cbam.onnx")
    cache = {}

    def get(fmt):
        if fmt not in cache:
            cache[fmt] = compile_onnx(tmp, "cbam", model, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                                      calibration_samples=16)
        return cache[fmt]
    return get


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _tables(net, tmp):
    """The kernel's tables of ``net`` (its engine's ``render`` into ``tmp``, no compile)."""
    from hlsnn.engine_registry import network_part
    return network_part(net.engine, "kernel").render(net, tmp)[2]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_runs_in_the_emu_network_mode_with_three_buffers(cbam, fmt, tmp_path):
    """The channel attention lowers whole (both pools, the shared MLP twice, the Add, the Sigmoid
    table, the gate), needs the third buffer, and gives the layer path's bits."""
    x = _x(32)
    net = hlsnn.load(cbam(fmt), "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("gate") == 1 and kinds.count("lut") == 1 and kinds.count("maxpool") == 1, kinds
    t = _tables(net.network, tmp_path)
    assert t["act_bufs"] == 3
    slots = {s for s, _ in t["place"].values() if s is not None}
    assert slots == {0, 1, 2}
    want = hlsnn.load(cbam(fmt), "emu", network=False)(x)
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(net(x), want)


@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_kernel_on_csim_and_the_simulated_board_in_one_start(cbam, fmt):
    """The rendered kernel declares three activation buffers (and the resource model counts
    them), and gives the layer path's bits on C-simulation and the simulated board in one start."""
    board = check_kernel_run(cbam(fmt), fmt, _x(6), board=True)
    k = board._kernel
    assert k.tables["act_bufs"] == 3
    cpp = (k.path.parent / "network.cpp").read_text()
    assert "act[3][Cfg::" in cpp and "act[2][Cfg::" not in cpp
    from hlsnn.engine_registry import network_part
    bufs = network_part(board.network.engine, "perf").buffers(board.network, k.tables)
    act = [b for b in (bufs[0] if isinstance(bufs, tuple) else bufs) if b.name == "act"]
    assert len(act) == 1 and act[0].dims[0] == 3


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_cbam_kernel_loops_stay_at_ii_1(cbam, fmt):
    """The derived II (perf/schedule.py, from the rendered C++) of every loop is 1 with the
    third buffer's run-time choice among three."""
    pytest.importorskip("clang.cindex")
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    from hlsnn.deploy import program as netmode
    prog, arrays = artifact.read(cbam(fmt))
    net = netmode.lower(prog, arrays)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert rows and all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]
