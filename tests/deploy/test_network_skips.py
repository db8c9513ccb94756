"""Several skips alive at once in the network kernels' shortcut buffer (issue 52,
hlsnn.engines.network.joins.skips): a 2-level U-Net's two skips wait in their own regions of ``sc``,
nested like a stack, and the whole model runs in one start of the network kernel.

References: the regions' layout written out by hand for a small 2-skip program (a stack: the
outer skip first, the inner one above it), and the layer-by-layer compiled network on the
emulator (one engine start per conv, the moves on the host) for the bits."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.kernel import allocate  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run  # noqa: E402
from test_torch_beyond import _data, compile_beyond  # noqa: E402

UNETS = ["v_unet_ct2_ts17", "v_unet_ct2_dynamo"]
FORMATS = ("bfp8", "twohot", "fixed8")


def _net(ops, shapes):
    return netmode.NetProgram("n", ops, shapes, {"name": "x"}, {"tensor": ops[-1].out}, [], {}, "a", {})


def two_skip_program():
    """conv -> a (4x8x8, the outer skip), pool, conv -> s (8x4x4, the inner skip), pool, conv,
    upsample, concat with s, conv, upsample, concat with a, conv: a 2-level U-Net's shape."""
    Op = netmode.Op
    ops = [Op("conv", "c1", ["x"], "a"), Op("maxpool", "p1", ["a"], "b"), Op("conv", "c2", ["b"], "s"),
           Op("maxpool", "p2", ["s"], "e"), Op("conv", "c3", ["e"], "g"), Op("upsample", "u1", ["g"], "h"),
           Op("concat", "cat2", ["h", "s"], "k"), Op("conv", "c4", ["k"], "m"), Op("upsample", "u2", ["m"], "n"),
           Op("concat", "cat1", ["n", "a"], "o"), Op("conv", "c5", ["o"], "y")]
    shapes = dict(x=(1, 8, 8), a=(4, 8, 8), b=(4, 4, 4), s=(8, 4, 4), e=(8, 2, 2), g=(8, 2, 2), h=(8, 4, 4),
                  k=(16, 4, 4), m=(4, 4, 4), n=(4, 8, 8), o=(8, 8, 8), y=(2, 8, 8))
    return _net(ops, shapes)


@pytest.mark.parametrize("pc, a_words, s_words", [(1, 4 * 64, 8 * 16), (4, 64, 2 * 16), (8, 64, 16)])
def test_allocate_nests_two_live_skips_like_a_stack(pc, a_words, s_words):
    """The outer skip a at word 0, the inner skip s above it (both live from c2 to cat2); the
    op writing a region and the op reading it carry its offset; sc is the two regions' words."""
    net = two_skip_program()
    place, _, sc_words = allocate(net, pc)
    assert place["a"][1] and place["s"][1] and not place["k"][1]
    base = {op.name: op.f["sc_base"] for op in net.ops}
    assert base["c1"] == base["cat1"] == 0
    assert base["c2"] == base["cat2"] == a_words
    assert sc_words == a_words + s_words
    assert {n for n, b in base.items() if b} == {"c2", "cat2"}


def test_allocate_keeps_one_region_at_offset_zero():
    """A ResNet's chain of shortcuts (one alive at a time; an Add's sum the next block's
    shortcut, written where it reads): every region at word 0, sc the largest tensor."""
    Op = netmode.Op
    ops = [Op("conv", "c0", ["x"], "a"), Op("conv", "c1", ["a"], "b"), Op("add", "add1", ["b", "a"], "s"),
           Op("conv", "c2", ["s"], "t"), Op("add", "add2", ["t", "s"], "u"), Op("conv", "c3", ["u"], "y")]
    net = _net(ops, dict(x=(1, 4, 4), a=(6, 4, 4), b=(6, 4, 4), s=(6, 4, 4), t=(6, 4, 4), u=(6, 4, 4), y=(2, 4, 4)))
    place, _, sc_words = allocate(net, 2)
    assert [t for t in place if place[t][1]] == ["a", "s"]
    assert all(op.f["sc_base"] == 0 for op in net.ops)
    assert sc_words == 3 * 16


def test_allocate_refuses_an_op_needing_two_offsets_by_name():
    """add1 reads shortcut a, which add2 reads again, and writes s, a shortcut too: one op
    would need the shortcut buffer at two offsets; refused naming the op and both tensors."""
    Op = netmode.Op
    ops = [Op("conv", "c0", ["x"], "a"), Op("conv", "c1", ["a"], "b"), Op("add", "add1", ["b", "a"], "s"),
           Op("conv", "c2", ["s"], "t"), Op("add", "add2", ["t", "a"], "u"), Op("conv", "c3", ["u"], "v"),
           Op("add", "add3", ["v", "s"], "y")]
    net = _net(ops, {t: (2, 4, 4) for t in "xabstuvy"})
    with pytest.raises(InputError, match=r"add1 reads shortcut a .* writes s"):
        allocate(net, 1)


@pytest.fixture(scope="module")
def unets(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netskips", UNETS, FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", UNETS)
def test_two_skip_unet_runs_in_the_emu_network_mode_with_the_layer_paths_bits(unets, name, fmt):
    x = _data(name).x_test[:16]
    want = hlsnn.load(unets[name, fmt], "emu", network=False)(x)
    net = hlsnn.load(unets[name, fmt], "emu", network=True)
    assert [op.kind for op in net.network.ops].count("concat") == 2
    np.testing.assert_array_equal(net(x), want)


def _run_kernel(unets, name, fmt, n=8, board=True):
    k_run = check_kernel_run(unets[name, fmt], fmt, _data(name).x_test[:n], board)
    cats = [op for op in k_run.network.ops if op.kind == "concat"]
    assert len(cats) == 2 and len({op.f["sc_base"] for op in cats}) == 2     # two regions, two offsets
    return k_run


@pytest.mark.csim
def test_two_skip_unet_in_one_start_of_the_shift_mac_kernel(unets):
    """The quick case: two-hot on shift_mac, C-simulation only: the two skips in their regions,
    one start, the layer path's bits, the loops' iterations the perf model's; the shortcut
    buffer (and the resource model's row of it) holds both skips' words per bank."""
    from hlsnn.engines.shift_mac.network import perf as netperf
    k = _run_kernel(unets, "v_unet_ct2_ts17", "twohot", n=4, board=False)
    net, t = k.network, k._kernel.tables
    skips = [op.f["short"] for op in net.ops if op.kind == "concat"]
    c, h, w = zip(*(net.shapes[s] for s in skips))
    want = sum(-(-cc // t["pc"]) * hh * ww for cc, hh, ww in zip(c, h, w))
    assert t["sc_words"] == want > max(-(-cc // t["pc"]) * hh * ww for cc, hh, ww in zip(c, h, w))
    row, = [b for b in netperf.buffers(net, t) if b.name == "sc"]
    assert row.dims == (t["pc"], want)


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", UNETS)
def test_two_skip_unet_in_one_start_on_csim_and_the_simulated_board(unets, name, fmt):
    """Both exports, every engine: C-simulation and the simulated board, one start, bit-exact."""
    _run_kernel(unets, name, fmt)
