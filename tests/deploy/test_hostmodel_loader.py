"""The latency model's host around the C call (hlsnn.network.hostmodel): the loader's steps
(net.run's input check and its own Python, the simulated board's share) and the host ops'
costs per element. Properties only: the constants are measurements (benchmarks/
bench_loader_host.py); what is tested is how the model uses them."""
import pytest

from hlsnn.network import hostmodel as hm

CPUS = ("x86-this-machine", "cortex-a9-650", "cortex-a53-1200")


@pytest.mark.parametrize("cpu", CPUS)
def test_the_loader_steps_grow_with_the_input_and_scale_by_the_python_factor(cpu):
    small = hm.loader_steps(cpu, n_in=64, batch=1)
    big = hm.loader_steps(cpu, n_in=64, batch=16)
    check = lambda st: next(s["us"] for s in st if s["step"].startswith("input check"))   # noqa: E731
    assert check(big) > check(small) > 0
    # the fixed part is the same; the per-value part 16 times the values
    x86 = hm.loader_steps("x86-this-machine", n_in=3072, batch=1)
    here = hm.loader_steps(cpu, n_in=3072, batch=1)
    f = hm.SCALE[cpu]["python"]
    for a, b in zip(x86, here):
        if a["step"].startswith("sim board"):
            continue
        assert b["us"] == pytest.approx(f * a["us"])
    sim = [s for s in here if s["step"].startswith("sim board")]
    assert bool(sim) == (cpu == "x86-this-machine")      # the simulated board's share: not on a board


def test_the_c_call_through_the_loader_quantizes_float64_whatever_is_stored():
    for dt in ("float32", "uint8"):
        via = {s["step"]: s["us"] for s in hm.host_steps("cortex-a9-650", n_in=3072, n_out=10, batch=1,
                                                             input_dtype=dt, via_loader=True)}
        direct = {s["step"]: s["us"] for s in hm.host_steps("cortex-a9-650", n_in=3072, n_out=10, batch=1,
                                                                input_dtype=dt)}
        assert "quantize (float64, C)" in via and f"quantize ({dt}, C)" in direct
        assert via["quantize (float64, C)"] > direct[f"quantize ({dt}, C)"]


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
