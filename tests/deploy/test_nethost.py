"""The network kernel's host step in C (hlsnn.network.nethost, native/netin.c).

References: rule 1 is :func:`hlsnn.deploy.quantize.quant.to_fixed_reference` (integers and
``fixed.convert``: the value written at radix ``g = max(F + 24, 0)`` with rint, then
``shift_round_sat`` to radix ``F``), independent of both the numpy fast path and the C code;
the bits of a whole network come from the layer-by-layer emulator. The register accesses per
start are counted by the simulated device at its bus (``SimDevice.mmio_counts``)."""
import numpy as np
import pytest

from hlsnn.network import nethost
from hlsnn.deploy.quantize.quant import to_fixed_reference

pytestmark = pytest.mark.skipif("not nethost.available()", reason="no C compiler for the C host path")

MODES = ("nearest_even", "nearest_away", "truncate")


def _edges(f, dtype):
    """Values at and around every place a rounding can go wrong at radix f: ties (k + 1/2) *
    2**-f and their float neighbours, the tiny values where rint at radix f + 24 moves a value
    onto a tie (1/2 - 2**-25 at radix f, 2**-25), zeros, subnormals, saturation, negatives."""
    ulp = np.finfo(dtype).smallest_subnormal
    k = np.arange(-140, 141, dtype=np.float64)
    base = np.concatenate([(k + 0.5), k, k + 0.25, k + 0.75, [0.5 - 2.0 ** -25, 2.0 ** -25, 2.0 ** -26, 0.25,
                                                              2.0 ** -24, 3 * 2.0 ** -26, 1e-3, 300.0, 1e4]])
    base = np.concatenate([base, -base])
    v = np.ldexp(base, -f).astype(dtype)
    inf = np.array(np.inf, dtype)
    near = np.concatenate([v, np.nextafter(v, inf), np.nextafter(v, -inf)])
    return np.concatenate([near, np.array([0.0, -0.0, ulp, -ulp, 3 * ulp, -3 * ulp], dtype)])


def _reference(x, f, bits, rounding):
    return to_fixed_reference(np.asarray(x, np.float64), f, bits, True, rounding)


def _c(x, f, bits, rounding):
    x = np.ascontiguousarray(x)
    return nethost.quantize_into(x, f, bits, nethost.MODES[rounding], np.empty(x.shape, np.int8)).astype(np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("f", [7, 5, 0, -3, -24, -27, 20])
@pytest.mark.parametrize("bits", [8, 5])
def test_the_c_input_rule_equals_the_integer_rule_on_edges_and_random_values(dtype, f, bits):
    rng = np.random.default_rng((f + 100) * 31 + bits)
    g = max(f + 24, 0)
    lim = 2.0 ** (60 - g)                                # the reference's int64 holds x * 2**g
    rnd = np.concatenate([rng.normal(0, 2.0 ** (3 - f), 4000), rng.uniform(-1, 1, 2000) * 2.0 ** -f,
                          rng.standard_cauchy(2000) * 2.0 ** -f]).astype(dtype)
    x = np.concatenate([_edges(f, dtype), rnd])
    x = x[np.abs(x.astype(np.float64)) < lim]
    for rounding in MODES:
        np.testing.assert_array_equal(_c(x, f, bits, rounding), _reference(x, f, bits, rounding),
                                      err_msg=f"{dtype.__name__} f={f} {rounding}")


@pytest.mark.parametrize("f,bits", [(7, 10), (12, 16), (0, 16)])
def test_16_bit_lanes_take_the_same_rule(f, bits):
    """Inputs of 9 to 16 bits (hlsnn_in_quantize16, the network kernel's 16-bit lanes): float32
    edges and random values, each rounding, against the integer rule."""
    rng = np.random.default_rng(f * 7 + bits)
    x = np.concatenate([_edges(f, np.float32), (rng.normal(0, 2.0 ** (bits - 2 - f), 3000)).astype(np.float32)])
    for rounding in MODES:
        got = nethost.quantize_into(x, f, bits, nethost.MODES[rounding], np.empty(x.shape, np.int16))
        np.testing.assert_array_equal(got.astype(np.int64), _reference(x, f, bits, rounding), err_msg=rounding)


def test_every_float32_bit_pattern_of_a_binade_sweep():
    """Every 2053rd float32 bit pattern (about 2 million values, all exponents, both signs, about
    8,000 per binade and sign; every 257th took 4.6 CPU-s) at radix 7, 8 bits, each rounding: the
    C rule's float32 shortcut against the integer rule."""
    bits = np.arange(0, 1 << 32, 2053, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < 2.0 ** 29)]
    for rounding in MODES:
        np.testing.assert_array_equal(_c(x, 7, 8, rounding), _reference(x, 7, 8, rounding), err_msg=rounding)


@pytest.mark.parametrize("f", [7, 4, -2])
def test_uint8_images_as_stored(f):
    x = np.arange(256, dtype=np.uint8).repeat(3)
    for rounding in MODES:
        np.testing.assert_array_equal(_c(x, f, 8, rounding), _reference(x, f, 8, rounding))


def test_non_finite_values_are_refused_by_name():
    from hlsnn.errors import InputError
    x = np.array([0.5, np.nan, np.inf, 1.0], np.float32)
    with pytest.raises(InputError, match="2 non-finite value"):
        _c(x, 7, 8, "nearest_away")


@pytest.mark.parametrize("cc_flag", ["-ffast-math", "-Ofast", "-ffinite-math-only"])
def test_a_cc_with_fast_math_keeps_rule_1_and_the_count_of_non_finite_values(cc_flag, tmp_path, monkeypatch):
    """``CC`` may carry flags; with ``-ffast-math`` (or ``-Ofast``) netin.c's ``v - v == 0`` was
    folded to true, so NaN and inf images ran on the C host path (issue 84), and rule 1 gave
    other bits than the integer rule. The helpers' own ``-fno-fast-math`` comes after CC's flags."""
    from hlsnn import native
    from hlsnn.errors import InputError
    cc = native.c_compiler()
    monkeypatch.setenv("CC", f"{cc} {cc_flag}")
    monkeypatch.setenv("HLSNN_NATIVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(nethost, "_LIB", [])
    native.forget()
    try:
        x = np.array([0.5, np.nan, np.inf, -np.inf, 1.0], np.float32)
        for dt in (np.float32, np.float64):
            with pytest.raises(InputError, match="3 non-finite value"):
                _c(x.astype(dt), 7, 8, "nearest_even")
        for dt in (np.float32, np.float64):
            e = _edges(5, dt)
            for rounding in MODES:
                np.testing.assert_array_equal(_c(e, 5, 8, rounding), _reference(e, 5, 8, rounding),
                                              err_msg=f"{cc_flag} {dt.__name__} {rounding}")
        assert any(f"{cc_flag} " in p.read_text() and "-fno-fast-math" in p.read_text()
                   for p in (tmp_path / "cache").glob("libnetin_*.json")), "built with CC's flag, then ours"
    finally:
        native.forget()


def test_the_block_write_is_one_access_of_the_span():
    """The two 64-bit addresses and the batch (0x10..0x28 by the Vitis HLS map) in ONE bus
    write of seven words, the reserved words 0x18 and 0x24 zero; a lone batch is one word."""
    from hlsnn.engines.network import kernel as netkernel

    class Mmio:
        array = None                                  # a register-level device (no mapping)

        def __init__(self):
            self.calls = []

        def write(self, off, data):
            self.calls.append((off, data))

    class Ip:
        mmio = Mmio()
    n = nethost.write_block(Ip, netkernel.REGISTERS, {"in": 0x8_1234_5000, "out": 0x2000, "batch": 3})
    assert n == 7 and len(Ip.mmio.calls) == 1
    off, data = Ip.mmio.calls[0]
    assert off == 0x10 and np.frombuffer(data, np.uint32).tolist() == [0x12345000, 8, 0, 0x2000, 0, 0, 3]
    assert nethost.write_block(Ip, netkernel.REGISTERS, {"batch": 5}) == 1 and Ip.mmio.calls[-1] == (0x28, 5)
    with pytest.raises(ValueError, match="does not fit 32 bits"):
        nethost.write_block(Ip, netkernel.REGISTERS, {"batch": 1 << 32})


# ------------------------------------------------------------------ the sim board through the C path
@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("onnx")
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "nethost", calibration_samples=16, check_samples=2)


@pytest.mark.slow
@pytest.mark.csim
def test_the_sim_board_through_the_c_host_path_gives_the_emulators_bits_in_one_write_per_start(compiled):
    """The C host path on the simulated board (its registers reached by callbacks): the
    layer-by-layer emulator's bits for float32 and float64 images, with float32 images as
    stored; per start after the first exactly ONE register write (ap_start) and one read (the
    poll: the simulated kernel is done when it is read), the argument registers written once as
    one block (seven words) at allocation, and again only for a new batch size (one word)."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "twohot")
    x = datasets.load("digits", layout="nchw").x_test[:5]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        sim = net._kernel
        dev = sim.sim
        base = dict(dev.mmio_counts)
        got = net.logits(x)                             # allocation: the block write, then the start
        first = {k: dev.mmio_counts[k] - base.get(k, 0) for k in ("writes", "write_words", "reads")}
        assert first == {"writes": 2, "write_words": 8, "reads": 1}
        np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
        ops = len(dev.cache_ops)
        for i in range(3):                              # the same batch: one write, one read each
            c0 = dict(dev.mmio_counts)
            q, y = sim.run_image(x.astype(np.float32))
            assert (dev.mmio_counts["writes"] - c0["writes"], dev.mmio_counts["write_words"] - c0["write_words"],
                    dev.mmio_counts["reads"] - c0["reads"]) == (1, 1, 1)
        assert len(dev.cache_ops) == ops                 # uncached buffers: no flush, no invalidate
        np.testing.assert_array_equal(y.reshape(want.shape).view(np.uint64), want.view(np.uint64))
        runs = sim.model.runs
        assert len({(r[0]["in"], r[0]["out"]) for r in runs}) == 1 and runs[-1][0]["batch"] == 5
        c0 = dict(dev.mmio_counts)
        one = net.logits(x[2:3])                        # a new batch size: its one word, then the start
        assert (dev.mmio_counts["writes"] - c0["writes"], dev.mmio_counts["write_words"] - c0["write_words"]) == (2, 2)
        np.testing.assert_array_equal(one.view(np.uint64), want[2:3].view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_net_run_hands_float32_and_uint8_images_to_the_c_call_as_stored_with_the_emulators_bits(compiled):
    """net.run on sim: a float32 or uint8 batch goes to the C call as it is (no float64 copy,
    hostmodel.stored_dtype): the C context's dtype is the image's, and the bits are the layer
    path's on the same values as float64."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "twohot")
    x = np.asarray(datasets.load("digits", layout="nchw").x_test[:3], np.float32)
    u8 = np.rint(x * 16).astype(np.uint8)
    with hlsnn.load(path, "emu", network=False) as ref, hlsnn.load(path, "sim", self_check=False) as net:
        for img, code in ((x, 0), (u8, 2)):
            got = net.logits(img)
            assert net._kernel.board._chost.ctx.dtype == code
            want = ref.logits(img.astype(np.float64))
            np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_uint8_images_with_the_values_their_codes_stand_for(compiled):
    """The digits are k/16 (k = 0..16): as uint8 codes k with u8_values = code / 16, the C path's
    table gives the bits of the float images through the emulator."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "twohot")
    x = datasets.load("digits", layout="nchw").x_test[:4]
    codes = np.rint(x * 16).astype(np.uint8)
    assert np.array_equal(codes / 16.0, x)                   # the data set's values are the codes / 16
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        board = net._kernel
        host = nethost.CHost(board.board, u8_values=np.arange(256) / 16.0)
        with board._lock, board.sim:
            q, y = host.run(codes)
    np.testing.assert_array_equal(y.reshape(want.shape).view(np.uint64), want.view(np.uint64))
    with pytest.raises(Exception, match="256 values"):
        nethost.CHost(board.board, u8_values=np.arange(10))


@pytest.mark.slow
@pytest.mark.csim
def test_cacheable_buffers_are_flushed_and_invalidated_by_the_c_path(compiled):
    """cacheable=True: the C path calls back into pynq for the input's flush and the output's
    invalidate once per start, and the strict cache model of the sim board finds nothing stale."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "twohot")
    x = datasets.load("digits", layout="nchw").x_test[:3]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False, cacheable=True) as net:
        dev = net._kernel.sim
        got = net.logits(x)
        n = len(dev.cache_ops)
        again = net.logits(x)
        assert [op.op for op in dev.cache_ops[n:]] == ["flush", "invalidate"]
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(again.view(np.uint64), want.view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_a_bfp_network_through_the_c_host_path(compiled):
    """bfp_systolic: the image's float32 words written by C (two to a 64-bit word), the output
    words (the elements, then the status word) read once and unpacked in C: the emulator's bits,
    one register write and one read per start; a value not exact in float32 is refused by name
    (NotExact)."""
    import hlsnn
    from hlsnn.engines.bfp_systolic.network.lower import NotExact
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "bfp16")
    x = datasets.load("digits", layout="nchw").x_test[:3]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        sim = net._kernel
        dev = sim.sim
        got = net.logits(x)
        assert sim.board._chost.words
        c0 = dict(dev.mmio_counts)
        again = net.logits(x)
        assert (dev.mmio_counts["writes"] - c0["writes"], dev.mmio_counts["reads"] - c0["reads"]) == (1, 1)
        one = net.logits(x[1:2])                         # batch 1: the pairs from C alone
        (m, e), y = sim.run_image(x[1:2])
        from hlsnn.engines.bfp_systolic.network.kernel import unpack_output
        words = sim.board._chost.q8.view(np.uint64)[:, :10]
        mr, er = unpack_output(words)
        assert np.array_equal(m, mr) and np.array_equal(e, er)
        bad = x.astype(np.float64).copy()
        bad[0, 0, 0, 0] = 0.1                            # not a float32 value
        with pytest.raises(NotExact, match="exact in float32"):
            net.logits(bad)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(again.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(one.view(np.uint64), want[1:2].view(np.uint64))


@pytest.mark.slow
@pytest.mark.csim
def test_a_bfp8_networks_softmax_runs_in_the_c_call_with_the_emulators_bits(compiled):
    """bfp8 (8-bit mantissas, 8-bit exponents): the Softmax after the logits runs in the C call
    (nethost.softmax_rule: the logits are the fc's one output pixel, one exponent, which
    bfp_exp_table covers): net.run on sim gives the layer-by-layer emulator's output (its numpy
    Softmax) bit for bit; with a table that covers no row, CHost.run applies numpy's, the same bits."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "bfp8")
    x = datasets.load("digits", layout="nchw").x_test[:5]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.run(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        assert net._c_run[-1] and not net._c_run[-2]     # folded: no host layer after the call
        got = net.run(x)
        host = net._kernel.board._chost
        assert host._sm and host.ctx.softmax == 1 and host.ctx.sm_left == 0
        host.ctx.sm_ne = 0                               # no row covered: numpy's Softmax after the call
        again = net.run(x)
        assert host.ctx.sm_left == 1
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(again.view(np.uint64), want.view(np.uint64))


# ------------------------------------------------------------------ hlsnn perf NAME.hlsnn --json
def test_perf_json_reports_both_windows_and_the_host_steps(compiled, capsys):
    """The host steps of the C path (their basis named; the boards' steps estimates), the image
    in -> logits out figure, MLPerf Tiny's window (fabric + the host layers after the logits) and
    the double-buffered figures, for each input dtype; the numpy driver with --host python."""
    import json
    from hlsnn.cli import main
    from hlsnn.network import hostmodel
    path = str(compiled("digits_cnn", "twohot"))
    got = {}
    for dtype in ("float32", "uint8"):
        assert main(["perf", path, "--json", "--input-dtype", dtype]) == 0
        got[dtype] = res = json.loads(capsys.readouterr().out)
        h = res["host"]
        assert h["path"] == "c" and h["input_dtype"] == dtype and res["cpu"] == "cortex-a9-650"
        steps = {s["step"]: s for s in h["steps"]}
        # net.run's steps: its input check hands the C call the image as stored
        assert list(steps) == [f"input check ({dtype})", "python call", f"quantize ({dtype}, C)",
                               "input stores (uncached)", "ap_start and the last poll", "outputs read once (C)",
                               "loader's Python"]
        assert all(s["basis"].startswith("estimate") for s in h["steps"])       # no board measured
        # by hand: 64 input values, 10 outputs, the constants of hostmodel at the A9's factors
        pf, c = hostmodel.SCALE["cortex-a9-650"]["python"], hostmodel.SCALE["cortex-a9-650"]["c"]
        q = hostmodel.X86["quant_ns"][dtype] * 64 * c / 1e3
        assert steps[f"quantize ({dtype}, C)"]["us"] == pytest.approx(q)
        lo = hostmodel.LOADER
        # no prefix, no words: the dtype and shape in the loader's Python, the non-finite values
        # counted by the C call in its rule 1 pass (uint8: none to count)
        assert steps[f"input check ({dtype})"]["us"] == 0.0
        assert ("counted by the C call" if dtype == "float32" else "uint8 values are finite") \
            in steps[f"input check ({dtype})"]["basis"]
        assert steps["loader's Python"]["us"] == pytest.approx(lo["loader_us"] * pf)
        assert steps["outputs read once (C)"]["us"] == pytest.approx(10 * 0.15)
        assert h["us"] == pytest.approx(sum(s["us"] for s in h["steps"]))
        soft = next(r["host_us"] for r in res["layers"] if r["name"] == "softmax")
        # the Softmax over the 10 outputs runs in the C call (nethost.softmax_rule): per value, the C factor
        assert next(r["kind"] for r in res["layers"] if r["name"] == "softmax") == "host Softmax (C)"
        assert soft == pytest.approx(hostmodel.X86["softmax_c_ns"] * 10 * c / 1e3)
        assert res["host_us"] == pytest.approx(h["us"] + soft)          # the breakdown sums to the total
        assert res["logits_out_us"] == pytest.approx(h["us"] + res["fabric_us"])
        assert res["end_to_end_us"] == pytest.approx(res["logits_out_us"] + soft)
        assert res["mlperf_window_us"] == pytest.approx(res["fabric_us"] + soft)
        # double-buffered starts (CHost.run_pipelined, not through net.run): the C call's steps of
        # the stored dtype, plus the two address words
        h1 = sum(s["us"] for s in hostmodel.host_steps("cortex-a9-650", n_in=64, n_out=10, batch=1,
                                                          input_dtype=dtype)) \
            + 2 * hostmodel.BOARD_IO["cortex-a9-650"]["mmio_write_us"]
        assert h["steady_state_us_per_image"] == pytest.approx(max(h1, res["fabric_us"]))
        assert h["pipelined_us_per_image"] == pytest.approx(h1 + res["fabric_us"])        # batch 1: no overlap
    assert got["uint8"]["logits_out_us"] < got["float32"]["logits_out_us"]
    assert main(["perf", path, "--json", "--batch", "4"]) == 0
    r4 = json.loads(capsys.readouterr().out)
    b4 = r4["host"]                                              # four starts of one image, overlapped
    h1 = sum(s["us"] for s in hostmodel.host_steps("cortex-a9-650", n_in=64, n_out=10, batch=1)) \
        + 2 * hostmodel.BOARD_IO["cortex-a9-650"]["mmio_write_us"]
    f1 = r4["fabric_us"] / 4
    assert b4["pipelined_us_per_image"] == pytest.approx((h1 + f1 + 3 * max(h1, f1)) / 4)
    assert b4["pipelined_us_per_image"] < got["float32"]["logits_out_us"]
    assert main(["perf", path, "--json", "--host", "python"]) == 0
    py = json.loads(capsys.readouterr().out)
    assert py["host"]["path"] == "python" and py["host"]["steps"] is None
    assert py["host"]["us"] == pytest.approx(py["host_python_us"])
    assert py["host"]["us"] > got["float32"]["host"]["us"]


@pytest.mark.slow
@pytest.mark.csim
def test_double_buffered_starts_alternate_the_two_slots_and_give_the_emulators_bits(compiled):
    """Five images in double-buffered starts of one image each: the emulator's bits; the kernel
    reads and writes the two halves of the buffers by turns (its address registers as each
    start saw them); per start after the first, two address words and ap_start, and one read."""
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", "twohot")
    x = datasets.load("digits", layout="nchw").x_test[:5]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        sim = net._kernel
        dev = sim.sim
        c0 = dict(dev.mmio_counts)
        q, y = sim.run_pipelined(x)
        writes, reads = dev.mmio_counts["writes"] - c0["writes"], dev.mmio_counts["reads"] - c0["reads"]
        runs = sim.model.runs[-5:]
        board = sim.board
        row_in, row_out = board.in_words * 8, board.out_words * 8
        base_in, base_out = board.inb.device_address, board.outb.device_address
        assert [(r[0]["in"] - base_in, r[0]["out"] - base_out, r[0]["batch"]) for r in runs] == \
            [((i % 2) * row_in, (i % 2) * row_out, 1) for i in range(5)]
        # the allocation's block write, batch = 1, five starts, four switches of two words
        assert (writes, reads) == (1 + 1 + 5 + 4 * 2, 5)
        again = net.logits(x[:2])                        # the single-start path after it: slot 0 again
        q4, y4 = sim.run_pipelined(x[:4])                # the last image in slot 1: pointed back at slot 0
        assert sim.model.runs[-1][0]["in"] == base_in + row_in
        one = net.logits(x[3:4])
        assert sim.model.runs[-1][0]["in"] == base_in
    np.testing.assert_array_equal(y.reshape(want.shape).view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(y4.reshape(want[:4].shape).view(np.uint64), want[:4].view(np.uint64))
    np.testing.assert_array_equal(one.view(np.uint64), want[3:4].view(np.uint64))
    np.testing.assert_array_equal(again.view(np.uint64), want[:2].view(np.uint64))


def test_the_c_host_is_portable_c99():
    """The board path builds for the boards' ARM cores: strict C99 (pedantic, warnings as
    errors), and no x86 intrinsics or headers in the source."""
    import re
    import shutil
    import subprocess
    from hlsnn.native import SOURCE_DIR
    src = SOURCE_DIR / "netin.c"
    text = src.read_text()
    assert not re.search(r"immintrin|xmmintrin|emmintrin|__m128|__m256|__m512|_mm_|__builtin_ia32|__x86_64__", text)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    proc = subprocess.run([cc, "-std=c99", "-pedantic", "-Werror", "-Wall", "-Wextra", "-fsyntax-only", str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_perf_text_gives_the_constants_in_brief_and_in_full_behind_sources(compiled, capsys):
    """``hlsnn perf NAME.hlsnn``'s text wraps at 110 columns (it printed every host constant's source
    on one line of about 3,700 characters); ``--sources`` prints each source in full, and the JSON
    keeps them (``host.basis``, ``constants``)."""
    import json
    from hlsnn.cli import main
    from hlsnn.network import hostmodel
    from hlsnn.network.latency import CPUS
    path = str(compiled("digits_cnn", "twohot"))
    full = [hostmodel.X86["source"], hostmodel.LOADER["source"], hostmodel.SCALE["cortex-a9-650"]["source"],
            hostmodel.BOARD_IO["cortex-a9-650"]["source"], CPUS["cortex-a9-650"]["source"]]
    for argv in (["perf", path], ["perf", path, "--host", "python"], ["perf", path, "--layer-by-layer"]):
        assert main(argv) == 0
        text = capsys.readouterr().out
        body = text.splitlines()[1:]                   # the first line: the model's and the board's names
        assert max(len(ln) for ln in body) <= 120, max(body, key=len)
        assert not any(" ".join(src.split()) in " ".join(text.split()) for src in full)
    assert main(["perf", path]) == 0
    brief = capsys.readouterr().out
    assert "--sources" in brief and "Python x 10 and C x 12" in brief and "(estimate)" in brief
    assert main(["perf", path, "--sources"]) == 0
    text = capsys.readouterr().out
    assert max(len(ln) for ln in text.splitlines()[1:]) <= 120
    words = " ".join(text.split())                      # wrapping moves only the line breaks
    assert all(" ".join(src.split()) in words for src in full)
    assert main(["perf", path, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert hostmodel.X86["source"] in res["host"]["basis"] and res["constants"]["cpu"]["source"] == full[-1]


def test_perf_schedule_all_lists_the_network_kernels_ii_1_loops_and_foreign_flags_are_refused(compiled, capsys):
    """``--schedule-all`` was ignored for a NAME.hlsnn (the table kept only the loops above II 1);
    the options of one operation (``--gemm`` ... ``--seed``) were ignored silently there, and a
    compiled model's options (``--batch`` ... ``--sources``) with an accel config: each is refused
    by name now."""
    import json
    from hlsnn.cli import main
    path = str(compiled("digits_cnn", "twohot"))
    assert main(["perf", path, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["schedule"]
    ii1 = [r["loop"] for r in rows if r["ii"] == 1]
    assert ii1                                          # the network kernel has loops at II 1
    assert main(["perf", path]) == 0
    short = capsys.readouterr().out
    assert main(["perf", path, "--schedule-all"]) == 0
    every = capsys.readouterr().out
    assert "every pipelined loop" in every and "loops above II 1" in short
    table = every[every.index("schedule of"):]
    assert all(f" {loop} " in table for loop in ii1)
    assert not any(f" {loop} " in short[short.index("schedule of"):] for loop in ii1)
    for flag in (["--seed", "3"], ["--target", "sim"], ["--loops"], ["--conv", "1,8,8,4,3"]):
        assert main(["perf", path] + flag) == 2
        err = capsys.readouterr().err
        assert flag[0] in err and "only for an accel config" in err, err
    from conftest import accel_config
    accel = str(accel_config("shift8_pynq-z2"))
    for flag in (["--batch", "4"], ["--sources"], ["--host", "python"]):
        assert main(["perf", accel, "--gemm", "1,8,8"] + flag) == 2
        err = capsys.readouterr().err
        assert flag[0] in err and "NAME.hlsnn" in err, err
