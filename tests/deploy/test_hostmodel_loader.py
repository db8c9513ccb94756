"""The latency model's host around the C call (hlsnn.network.hostmodel): the loader's steps
(net.run's input check and its own Python, the simulated board's share) and the host ops'
costs per element. Properties only: the constants are measurements (benchmarks/
bench_loader_host.py); what is tested is how the model uses them."""
import pytest

from hlsnn.network import hostmodel as hm

CPUS = ("x86-this-machine", "cortex-a9-650", "cortex-a53-1200")


@pytest.mark.parametrize("cpu", CPUS)
def test_the_loader_steps_grow_with_the_input_and_scale_by_the_python_factor(cpu):
    """With a prefix net.run makes its own finiteness pass: it grows with the values; the rest
    scales by the Python factor. bfp words make none (the C call's pass that writes them counts
    the non-finite values)."""
    small = hm.loader_steps(cpu, n_in=64, batch=1, prefix=True)
    big = hm.loader_steps(cpu, n_in=64, batch=16, prefix=True)
    check = lambda st: next(s["us"] for s in st if s["step"].startswith("input check"))   # noqa: E731
    assert check(big) > check(small) > 0
    assert check(hm.loader_steps(cpu, n_in=64, batch=16, words=True)) == 0.0
    # the fixed part is the same; the per-value part 16 times the values
    x86 = hm.loader_steps("x86-this-machine", n_in=3072, batch=1, prefix=True)
    here = hm.loader_steps(cpu, n_in=3072, batch=1, prefix=True)
    f = hm.SCALE[cpu]["python"]
    for a, b in zip(x86, here):
        if a["step"].startswith("sim board"):
            continue
        assert b["us"] == pytest.approx(f * a["us"])
    sim = [s for s in here if s["step"].startswith("sim board")]
    assert bool(sim) == (cpu == "x86-this-machine")      # the simulated board's share: not on a board


def test_the_c_call_through_the_loader_sees_the_image_as_stored_but_a_bfp_networks_uint8_as_float64():
    for dt in ("float32", "float64", "uint8"):
        via = [s["step"] for s in hm.host_steps("cortex-a9-650", n_in=3072, n_out=10, batch=1, input_dtype=dt,
                                                via_loader=True)]
        assert f"quantize ({dt}, C)" in via
        check = hm.loader_steps("cortex-a9-650", n_in=3072, batch=1, input_dtype=dt)[0]["step"]
        assert check == f"input check ({dt})"
    words = hm.loader_steps("cortex-a9-650", n_in=3072, batch=1, input_dtype="uint8", words=True)[0]
    assert words["step"] == "input check (uint8 -> float64)"
    assert hm.stored_dtype("uint8", words=True) == "float64" and hm.stored_dtype("float32", words=True) == "float32"


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8"])
def test_without_a_prefix_the_c_call_counts_the_non_finite_values(dtype):
    """No finiteness pass of the loader's own: the check is the dtype and shape (in the loader's
    Python), whatever the image's size; with a prefix a float image gets its pass."""
    for n in (64, 1 << 16):
        st = hm.loader_steps("cortex-a9-650", n_in=n, batch=1, input_dtype=dtype)[0]
        assert st["step"] == f"input check ({dtype})" and st["us"] == 0.0
    assert hm.counts_in_c() and not hm.counts_in_c(prefix=True) and hm.counts_in_c(words=True)
    assert not hm.counts_in_c(words=True, prefix=True)
    with_prefix = hm.loader_steps("cortex-a9-650", n_in=3072, batch=1, input_dtype=dtype, prefix=True)[0]["us"]
    assert (with_prefix > 0) == (dtype != "uint8")


@pytest.mark.parametrize("cpu", CPUS)
def test_the_softmax_in_the_c_call_grows_with_the_values_at_the_c_factor(cpu):
    a, b = hm.softmax_c_us(cpu, 10), hm.softmax_c_us(cpu, 1000)
    assert b["us"] == pytest.approx(100 * a["us"]) and a["us"] > 0
    assert a["us"] == pytest.approx(hm.SCALE[cpu]["c"] * hm.softmax_c_us("x86-this-machine", 10)["us"])
    assert a["us"] < hm.op_us(cpu, "Softmax", 10)["us"] / 10        # against numpy's Softmax of the same values
    assert a["basis"].startswith("measured" if cpu == "x86-this-machine" else "estimate")


def test_a_converted_image_costs_the_check_more_than_one_taken_as_stored():
    kept = hm.loader_steps("x86-this-machine", n_in=3072, batch=1, input_dtype="uint8")[0]["us"]
    conv = hm.loader_steps("x86-this-machine", n_in=3072, batch=1, input_dtype="uint8", words=True)[0]["us"]
    assert conv > kept


@pytest.mark.parametrize("op", sorted(hm.HOST_OPS) + ["Tanh"])
def test_a_host_op_costs_more_on_more_elements_and_more_on_a_slower_core(op):
    a, b = hm.op_us("x86-this-machine", op, 64), hm.op_us("x86-this-machine", op, 16384)
    assert b["us"] > a["us"] > 0
    assert hm.op_us("cortex-a9-650", op, 64)["us"] == pytest.approx(hm.SCALE["cortex-a9-650"]["python"] * a["us"])
    assert a["basis"].startswith("measured")
    if op not in hm.HOST_OPS:                           # an op kind not timed: named so, at the timed ops' median
        assert "not timed" in a["basis"]
        fixed = sorted(f for k, (f, _) in hm.HOST_OPS.items() if k != "bfp patches")
        assert fixed[0] <= hm.op_cost_x86(op)[0] <= fixed[-1]


def test_the_input_check_keeps_what_the_c_host_path_takes_as_stored_and_refuses_non_finite_values():
    """The model's "input check (float32)" is what the loader does: on the C host path a float32
    or uint8 image is checked, not copied to float64 (a bfp_systolic network's uint8 is); a NaN
    or Inf is refused either way."""
    from types import SimpleNamespace
    import numpy as np
    from hlsnn.errors import InputError
    from hlsnn.network.loader import CompiledNet
    me = SimpleNamespace(input_shape=(3, 4), network=SimpleNamespace(engine="shift_mac"))
    bfp = SimpleNamespace(input_shape=(3, 4), network=SimpleNamespace(engine="bfp_systolic"))
    x32 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert CompiledNet._check_input(me, x32, stored=True) is x32
    assert CompiledNet._check_input(me, x32).dtype == np.float64                  # elsewhere: float64
    u8 = x32.astype(np.uint8)
    assert CompiledNet._check_input(me, u8, stored=True) is u8
    assert CompiledNet._check_input(bfp, u8, stored=True).dtype == np.float64
    assert CompiledNet._check_input(bfp, x32, stored=True) is x32
    bad = x32.copy()
    bad[1, 2, 3] = np.inf
    with pytest.raises(InputError, match="1 non-finite"):
        CompiledNet._check_input(me, bad, stored=True)


def _rnn_node(op, f, h, dirs=1):
    """A recurrent ONNX node with its weight ``W`` (dirs, gates x h, f) as a constant input."""
    import numpy as np
    onnx = pytest.importorskip("onnx")
    gates = 3 if op == "GRU" else 4
    node = onnx.helper.make_node(op, ["x", "W", "R"], ["Y"], hidden_size=h,
                                 direction="bidirectional" if dirs == 2 else "forward")
    return node, {"W": np.zeros((dirs, gates * h, f), np.float32), "R": np.zeros((dirs, gates * h, h), np.float32)}


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_a_host_fallback_rnn_costs_its_steps_of_each_sample_at_the_fitted_rate(op):
    """A --host-fallback GRU/LSTM (onnx's reference, a Python loop over the steps): the fitted fixed
    cost + steps x directions its cost per step, the steps the input's elements per sample over the
    input size (T x 1 x F for the (T, 1, F) input of a batch-1 file); run on each sample (a batch-1
    file, ``per_sample``) the batch costs batch times one sample; one run covering the batch costs
    one sample's plus a smaller, linear part per further sample; on a board times the Python factor.
    Another fallback node has no estimate of its own (None: the caller's generic op)."""
    fixed, per, slope = hm.FALLBACK_RNN[op]
    assert fixed > 0 and per > 0 and 0 < slope < per
    node, consts = _rnn_node(op, f=16, h=32)
    one = hm.fallback_us("x86-this-machine", node, consts, in_elems=8 * 16, batch=1)
    assert one["us"] == pytest.approx(fixed + 8 * per) and "host-fallback estimate" in one["basis"]
    assert "one run a sample" in one["basis"]
    four = hm.fallback_us("x86-this-machine", node, consts, 8 * 16, batch=4)
    assert four["us"] == pytest.approx(4 * one["us"])
    whole = [hm.fallback_us("x86-this-machine", node, consts, 8 * 16, batch=b, per_sample=False)["us"]
             for b in (1, 2, 4, 32)]
    assert whole[0] == pytest.approx(one["us"])
    assert one["us"] < whole[1] < whole[2] < four["us"] and whole[3] < 32 * one["us"] / 4
    assert whole[2] - whole[1] == pytest.approx(2 * (whole[1] - whole[0]))        # linear in the batch
    assert "one run for the batch" in hm.fallback_us("x86-this-machine", node, consts, 128, 4, per_sample=False)["basis"]
    bi, bc = _rnn_node(op, f=16, h=32, dirs=2)
    assert hm.fallback_us("x86-this-machine", bi, bc, 8 * 16, batch=1)["us"] == pytest.approx(fixed + 16 * per)
    a9 = hm.fallback_us("cortex-a9-650", node, consts, 8 * 16, batch=1)["us"]
    assert a9 == pytest.approx(hm.SCALE["cortex-a9-650"]["python"] * one["us"])
    onnx = pytest.importorskip("onnx")
    assert hm.fallback_us("x86-this-machine", onnx.helper.make_node("Mod", ["a", "b"], ["c"]), {}, 8, 1) is None
