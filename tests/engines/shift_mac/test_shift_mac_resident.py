"""shift_mac: resident weights (``Kernel.load_weights``; protocol flags 3 resident and 4 keep).

The kernel's weight store is static: a call with the keep flag leaves its tiles side by side,
a resident call reads them instead of streaming weights. The emulator target models the
store (``emulate_stream(state=...)``), so emu and csim must agree on every call of a
sequence, including a resident call after a call that overwrote the store. Expected values
come from ordinary (streamed) calls, which the rest of the suite checks against independent
references."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from conftest import record_calls as record, stream_path as stream
from hlsnn.engines.shift_mac import emulate, protocol

CONFIGS = Path(__file__).parent / "configs"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


@pytest.mark.parametrize("target", TARGETS)
def test_loaded_weights_stream_once_then_stay(target):
    rng = np.random.default_rng(1)
    with hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", "emu") as ref:
        w, w2 = rng.normal(size=(7, 20)), rng.normal(size=(7, 20))
        xs = [np.abs(rng.normal(size=(5, 20))) for _ in range(4)]
        calls = record(acc)
        acc.load_weights(w, mode="pot")
        assert acc.kernel.resident is None                    # nothing on chip before the first call
        y = [acc.gemm(xs[0], w, mode="pot"), acc.gemm(xs[1], w, mode="pot")]
        assert acc.kernel.resident == (7, 20, "pot")
        y.append(acc.gemm(xs[2], w2, mode="pot"))              # other weights: streamed, the store overwritten
        assert acc.kernel.resident is None
        y.append(acc.gemm(xs[3], w, mode="pot"))               # the loaded ones again: keep, streamed once more
        K, R = protocol.FLAG_KEEP, protocol.FLAG_RESIDENT
        assert [f & (K | R) for f, _ in calls] == [K, R, 0, K]
        # a resident call streams no weight beats: 7 PoT neurons are two tiles of 6 (3 rows of two
        # neurons), each 20 steps of 3 register lanes, 2 beats of 2 lanes
        assert calls[0][1] - calls[1][1] == protocol.weight_beats(acc.config.params, n=7, k=20, mode="pot") == 80
        for yi, xi, wi in zip(y, xs, [w, w, w2, w]):
            np.testing.assert_array_equal(yi, ref.gemm(xi, wi, mode="pot"))


@pytest.mark.parametrize("target", TARGETS)
def test_resident_convolution_and_gemm_share_the_store(target):
    """A convolution keeps all its tiles on chip; loaded 4-D weights make the next
    convolution resident, with the same outputs as streamed ones."""
    rng = np.random.default_rng(2)
    with hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", "emu") as ref:
        w = rng.normal(size=(5, 2, 3, 3))
        x1, x2 = np.abs(rng.normal(size=(2, 6, 7))), np.abs(rng.normal(size=(2, 5, 9)))
        calls = record(acc)
        acc.load_weights(w, mode="twohot", delta=2)
        a = acc.conv2d(x1, w, mode="twohot", delta=2)
        b = acc.conv2d(x2, w, mode="twohot", delta=2)
        assert [f & (protocol.FLAG_KEEP | protocol.FLAG_RESIDENT) for f, _ in calls] == \
            [protocol.FLAG_KEEP, protocol.FLAG_RESIDENT]
        np.testing.assert_array_equal(a, ref.conv2d(x1, w, mode="twohot", delta=2))
        np.testing.assert_array_equal(b, ref.conv2d(x2, w, mode="twohot", delta=2))


@pytest.mark.csim
def test_the_weight_store_is_the_same_on_emu_and_csim():
    """Raw calls: a streamed GEMM of two tiles without keep leaves its last tile at step 0 of
    the store; a resident one-tile call then computes with that tile. The emulator's store
    and the C++'s agree, and the result is that of a streamed call with those registers."""
    rng = np.random.default_rng(3)
    outs = {}
    for target in ("emu", "csim"):
        with hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", target, **stream(target)) as acc:
            p = acc.config.params
            rng = np.random.default_rng(3)        # the same data on both targets
            regs = protocol.pack_registers(p, rng.integers(0, 8, (6, 4)), rng.integers(0, 2, (6, 4)), 0,
                                           rng.integers(0, 8, (6, 4)), rng.integers(0, 2, (6, 4)), 0, 0)
            x = rng.integers(0, 64, (3, 4))
            bias, shift = np.zeros(6, np.int64), np.full(6, 4)
            first = acc.target.run(protocol.pack_input(p, regs=regs, bias=bias, shift=shift, n=6, mode="twohot", x=x),
                                   [3, 6, 4, 0, 0, 0, 0, 0, 0, 0, 0], protocol.n_output_beats(p, 3, 6))
            beats = protocol.pack_input(p, regs=None, bias=bias[:3], shift=shift[:3], n=3, mode="twohot", x=x,
                                        resident=True)
            out, regs_out = acc.target.run(beats, [3, 3, 4, protocol.FLAG_RESIDENT, 0, 0, 0, 0, 0, 0, 0],
                                           protocol.n_output_beats(p, 3, 3))
            outs[target] = (protocol.unpack_output(p, first[0], 3, 6, "twohot"),
                            protocol.unpack_output(p, out, 3, 3, "twohot"), int(regs_out[2]))
    np.testing.assert_array_equal(outs["emu"][0], outs["csim"][0])
    np.testing.assert_array_equal(outs["emu"][1], outs["csim"][1])
    assert outs["emu"][2] == outs["csim"][2]
    y, _ = emulate(p, x, regs[3:], bias[:3], shift[:3], n=3, mode="twohot")      # tile 1 of the first call
    np.testing.assert_array_equal(outs["csim"][1], y)
    np.testing.assert_array_equal(outs["csim"][0][:, 3:], y)


def test_weights_that_do_not_fit_the_store_are_refused():
    with hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", "emu") as acc:     # w_depth = 4 x 128 = 512 steps
        p = acc.config.params
        assert p["w_depth"] == 512
        acc.load_weights(np.ones((12, 128)), mode="twohot")                  # 4 tiles of 3 rows x 128 steps
        with pytest.raises(hlsnn.InputError, match=r"take 5 tiles x 128 = 640 steps.*w_depth = 512"):
            acc.load_weights(np.ones((13, 128)), mode="twohot")
        with pytest.raises(hlsnn.InputError, match="max_n = 40"):
            acc.load_weights(np.ones((41, 4)), mode="twohot")
