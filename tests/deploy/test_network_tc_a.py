"""A residual Add whose operand is another Add's sum (issue 52, hlsnn.engines.network.joins.chain):
v_tc_a's second block adds its body to the first block's ``Relu(Add)``, which the layer path
keeps as an exact float64 sum (only the next conv requantizes it), so the network mode keeps it
exactly too: a wide sum on the integer engines (in the shortcut buffer, kScBits wide), bfp's
pairs as they are. The network path runs the whole model in one start on every engine.

References: the layer-by-layer compiled network on the emulator (its float64 tensors, its
outputs). The inputs are doubled so that the first block's sum leaves the 8-bit range (the
digits themselves keep it below 128, where a sum narrowed to 8 bits would pass unnoticed)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.kernel import allocate  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import ENGINE, check_kernel_run  # noqa: E402
from test_torch_beyond import _data, compile_beyond  # noqa: E402

TC = ["v_tc_a_ts17", "v_tc_a_dynamo"]
FORMATS = ("bfp8", "twohot", "fixed8")
#: block 1's Relu(Add) as each export names it (read by block 2's conv and block 2's Add)
SKIP = {"v_tc_a_ts17": "/3/act/Relu_output_0", "v_tc_a_dynamo": "relu_2"}


@pytest.fixture(scope="module")
def tca(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "nettca", TC, FORMATS)


def _x(name, n=48):
    return _data(name).x_test[:n] * 2.0          # exact in float32 (bfp's rule 1)


def _chained(net):
    """The Add ops whose output another Add reads as an operand: the exact sum."""
    adds = [op for op in net.ops if op.kind == "add"]
    return [op for op in adds if any(op.out in other.ins for other in adds if other is not op)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", TC)
def test_the_chained_sum_is_the_layer_paths_float_sum(tca, name, fmt):
    """The network mode's kept sum is the layer path's float64 Relu(Add), value for value, and
    on the integer engines it needs more than the 8 activation bits here."""
    x = _x(name)
    _, env = hlsnn.load(tca[name, fmt], "emu", network=False).run(x, keep=True)
    net = netmode.lower(*artifact.read(tca[name, fmt]))
    chained, = _chained(net)
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    s = ints[chained.out]
    if fmt == "bfp8":
        got = netmode.dequantize(net, s)
    else:                                        # integers at the radix of the sum's finer operand
        got = np.ldexp(s.astype(np.float64), -chained.f["radix"])
        assert chained.f["out_bits"] > 8 and np.abs(s).max() >= 128
    want = env[SKIP[name]]
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", TC)
def test_runs_in_the_emu_network_mode_with_the_layer_paths_bits(tca, name, fmt):
    x = _x(name)
    want = hlsnn.load(tca[name, fmt], "emu", network=False)(x)
    net = hlsnn.load(tca[name, fmt], "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    assert len(_chained(net.network)) == 1
    np.testing.assert_array_equal(net(x), want)
    np.testing.assert_array_equal(net(x / 2), hlsnn.load(tca[name, fmt], "emu", network=False)(x / 2))


def test_a_chained_sum_read_by_a_conv_is_refused_by_name():
    """The wide sum lives in the shortcut buffer alone, for Adds: a conv reading it is refused."""
    Op = netmode.Op
    ops = [Op("conv", "c0", ["x"], "a"), Op("conv", "c1", ["a"], "b"),
           Op("add", "s1", ["b", "a"], "s", dict(c=2, hw=16, sa=0, sb=0, relu=True, gap=False, shift=0,
                                                  out_bits=9)),
           Op("conv", "c2", ["s"], "y")]
    net = netmode.NetProgram("n", ops, {t: (2, 4, 4) for t in "xabsy"}, {"name": "x"}, {"tensor": "y"}, [], {},
                             "a", {})
    with pytest.raises(InputError, match=r"chained sum s \(9 bits\)"):
        allocate(net, 1)


def _run_kernel(tca, name, fmt, n=6, board=True):
    k_run = check_kernel_run(tca[name, fmt], fmt, _x(name, n), board)
    if fmt != "bfp8":                              # the sum's words: wider than an activation
        assert k_run._kernel.tables["sc_bits"] == _chained(k_run.network)[0].f["out_bits"] > 8
    return k_run


@pytest.mark.csim
@pytest.mark.slow   # the quick csim case of a chained sum (sc_add, kScBits words) on every engine, strict:
#                     test_network_branches.py::test_the_branches_pass_the_strict_csim_in_one_start
def test_the_shift_mac_kernel_runs_v_tc_a_in_one_start(tca):
    """Two-hot on shift_mac, C-simulation only, the doubled inputs."""
    _run_kernel(tca, "v_tc_a_ts17", "twohot", n=4, board=False)


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", TC)
def test_v_tc_a_in_one_start_on_csim_and_the_simulated_board(tca, name, fmt):
    """Both exports, every engine: C-simulation and the simulated board, one start, bit-exact."""
    _run_kernel(tca, name, fmt)


@pytest.mark.csim
@pytest.mark.slow
def test_v_tc_a_in_one_start_of_the_board_sized_sparse_kernel(tmp_path):
    """The board-sized sparse_cluster kernel (net_shape: board, sub-banked activations): its Add
    writes every bank copy and the chained sum into sc, one pixel a cycle (the two-pixel
    AddPairs loop has no sc write and is not rendered then); one start, the layer path's bits."""
    from hlsnn.network.build import compile_model
    from test_torch_beyond import _config
    name = "v_tc_a_ts17"
    cfg = tmp_path / "t.yaml"
    cfg.write_text(_config(tmp_path, name).read_text().split("formats:")[0]
                   + "formats:\n  sized: {type: fixed, accel: sparse8net_pynq-z2}\nassignments:\n"
                   "  sized: {default: sized}\n")
    out = tmp_path / "t.hlsnn"
    compile_model(cfg, "sized", out)
    x = _x(name, 8)
    board = hlsnn.load(out, "csim", network=True)
    t = board._kernel.tables
    assert t.get("sized") is not None and not t["fast_add"] and t["sc_bits"] > 8
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
