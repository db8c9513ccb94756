"""Two shift codes per weight in one accumulator (``weight_terms: 2``, issue 52;
:mod:`hlsnn.deploy.quantize.twoterm`): the layer's integers are those of a float64 GEMM of the two
terms' summed codes, rounded once by the output rule; emu and csim agree bit for bit; the
network mode runs it with the layer path's bits; the option is checked."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from hlsnn.deploy.config import Assignment, FormatSpec, load_deploy_config  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import float_forward, Deployment  # noqa: E402
from hlsnn.errors import ConfigError  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

ACCEL = "shift8_pynq-z2"
C = 6


def _net(kind):
    rng = np.random.default_rng(0)
    if kind == "dense":
        layer = Layer("l", "dense", ["x"], "y", w=rng.normal(0, 0.3, (5, C * 16)), b=np.zeros(5), relu=False)
        return Network(name="n", path="", input="x", input_shape=(None, C * 16), output="y", layers=[layer])
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.3, (C, 1, 3, 3)), b=np.zeros(C), relu=True,
                  pads=(1, 1, 1, 1), strides=(1, 1), group=C)          # depthwise 3x3: nine weights per output
    return Network(name="n", path="", input="x", input_shape=(None, C, 4, 4), output="y", layers=[layer])


# inputs on a grid of 1/16 below 8: exact integers at the calibrated radix point (f_x = 4)
X = np.random.default_rng(1).integers(0, 100, (3, C, 4, 4)) / 16.0


def _run(net, x, terms, target="emu", fit="nearest"):
    acc = Accelerator(ACCEL, target)
    try:
        spec = FormatSpec("f", "twohot", "a", weight_fit=fit, weight_terms=terms)
        dep = Deployment(net, Assignment("a", "f", {}), {"f": spec}, {"a": acc})
        dep.calibrate(x)
        return dep.run(x), dep
    finally:
        acc.close()


@pytest.mark.parametrize("kind", ["depthwise", "dense"])
@pytest.mark.parametrize("fit", ["nearest", "output"])
def test_two_terms_are_one_gemm_of_the_summed_codes_rounded_once(kind, fit):
    net = _net(kind)
    x = X.reshape(len(X), -1) if kind == "dense" else X
    y, dep = _run(net, x, 2, fit=fit)
    ex = dep.execs["l"]
    assert ex.f_x == 4
    k = ex.wq.shape[1] // 2
    v = ex.wq.code_values().astype(np.float64)
    q1, q2 = v[:, :k], v[:, k:]
    assert np.count_nonzero(q2) > np.count_nonzero(q1) // 2    # the second term is there
    layer = net.layers[0]
    if kind != "dense":        # a pack of gp groups: block-diagonal rows; each output's own nine weights
        n = np.arange(C)
        q1, q2 = (q.reshape(C, ex.gp, 9)[n, n % ex.gp] for q in (q1, q2))
    wsum = np.ldexp(q1 + q2, -np.reshape(ex.f_w, (-1, 1)))      # the dequantized Q1 + Q2 of the layer
    xi = x * 16.0
    if kind == "dense":
        acc = xi @ (q1 + q2).T                                  # exact integers in float64
    else:
        xp = np.pad(xi, ((0, 0), (0, 0), (1, 1), (1, 1)))
        kern = (q1 + q2).reshape(C, 3, 3)
        acc = np.zeros((len(x), C, 4, 4))
        for i in range(3):
            for j in range(3):
                acc += xp[:, :, i:i + 4, j:j + 4] * kern[None, :, i, j, None, None]
    shift = ex.f_x + ex.f_w - ex.f_out
    bias = np.rint(np.ldexp(np.asarray(ex.b_fit if fit == "output" else layer.b, np.float64), ex.f_x + ex.f_w))
    z = acc + (bias[None, :, None, None] if kind != "dense" else bias[None])
    z = np.maximum(z, 0) if layer.relu else z
    want = np.clip(np.round(np.ldexp(z, -shift)), -128, 127)   # nearest, ties to even; 8 signed bits
    np.testing.assert_array_equal(np.ldexp(y, ex.f_out), want)
    # and the two terms are far nearer the float weights than one
    y1, dep1 = _run(net, x, 1, fit=fit)
    w = layer.w.reshape(len(wsum), -1)
    w1 = dep1.execs["l"].wq.dequantize()
    w1 = w1 if kind == "dense" else w1.reshape(C, ex.gp, 9)[n, n % ex.gp]
    assert np.abs(wsum - w).max() < np.abs(w1 - w).max() / 4
    ref = float_forward(net, x)
    assert np.abs(y - ref).mean() <= np.abs(y1 - ref).mean()


def test_the_network_mode_runs_two_terms_with_the_layer_paths_bits():
    """The network program of a two-term layer (it refused one before): its weights are each
    output's own Q1 + Q2, both terms' codes kept for the kernel's two shift-adds, and its integers
    are the layer path's (the shift_mac network kernel's csim: tests/deploy/test_network_act10.py)."""
    from hlsnn.deploy.lower import program as netmode
    y, dep = _run(_net("depthwise"), X, 2)
    prog = dep._lowered()
    conv, = prog.ops
    ex = dep.execs["l"]
    k = ex.wq.shape[1] // 2
    v = ex.wq.code_values()
    n = np.arange(C)
    q1, q2 = (q.reshape(C, ex.gp, 9)[n, n % ex.gp] for q in (v[:, :k], v[:, k:]))
    np.testing.assert_array_equal(conv.f["codes"].reshape(C, 9), q1 + q2)
    assert "zero2" in conv.f["fields"] and np.count_nonzero(q2)
    q = netmode.run_ints(prog, netmode.quantize_input(prog, X))
    np.testing.assert_array_equal(np.ldexp(np.asarray(q, np.float64).reshape(y.shape), -ex.f_out), y)
    assert dep.fast_network() is not None or not netfast_available()


def netfast_available():
    from hlsnn import native
    return native.load("netint") is not None


@pytest.mark.parametrize("fmt, terms, why", [("fixed", 2, "only the shift formats"), ("twohot", 3, r"\[1, 2\]")])
def test_weight_terms_is_checked(tmp_path, fmt, terms, why):
    accel = {"fixed": "sparse8_pynq-z2", "twohot": ACCEL}[fmt]
    p = tmp_path / "d.yaml"
    p.write_text(f"name: d\nmodel: m.onnx\nformats:\n  f: {{type: {fmt}, accel: {accel}, weight_terms: {terms}}}\n")
    with pytest.raises(ConfigError, match=rf"formats\.f\.weight_terms.*{why}"):
        load_deploy_config(p)


@pytest.mark.csim
@pytest.mark.slow
def test_two_term_layer_is_bit_exact_on_csim():
    y_emu, _ = _run(_net("depthwise"), X[:2], 2)
    y_sim, _ = _run(_net("depthwise"), X[:2], 2, target="csim")
    np.testing.assert_array_equal(y_sim, y_emu)


def test_the_modelled_cost_is_that_of_the_doubled_reduction():
    """The deploy report's modelled latency of a two-term dense layer is the cycle model's cost
    of the dense layer with 2K inputs (its weights [W | W]), more than one term's."""
    from types import SimpleNamespace
    from hlsnn.config import load_config
    from hlsnn.deploy.reports.evaluate import modelled_latency
    from hlsnn.measure.layers import layer_cycles
    net = _net("dense")
    x = X.reshape(len(X), -1)
    _, dep = _run(net, x, 2)
    spec = dep.formats["f"]
    got = modelled_latency(dep, SimpleNamespace(formats={"f": spec}), dep.assignment)["modelled_us_per_image"]
    la = net.layers[0]
    wide = Layer("l", "dense", ["x"], "y", w=np.hstack([la.w, la.w]), b=la.b, relu=False)
    cfg = load_config(ACCEL, check_fit=False)
    assert got == round(layer_cycles(wide, cfg, 1, fmt_type="twohot")["us"], 3)
    assert got > round(layer_cycles(la, cfg, 1, fmt_type="twohot")["us"], 3)
