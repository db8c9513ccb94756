"""K tiling in the deploy runner (issue 16): a sparse layer of more input channels than
``max_in_channels``, or a shift layer (two-hot / PoT) whose K exceeds ``max_k``, runs as raw
calls (the exact sums of a chunk of K) added on the host, then the kernel's own output rules.
The property that holds it: a layer whose K fits one call gives the same bits, the same
statistics and the same saturation count when it is forced through the tiled path."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

SPARSE4 = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"     # max_in_channels 64
SHIFT8 = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"       # max_k 1024


def _net(kind, cin, cout, seed=0, relu=True):
    rng = np.random.default_rng(seed)
    if kind == "dense":
        layer = Layer("l", "dense", ["x"], "y", w=rng.normal(0, 0.2, (cout, cin)), b=rng.normal(0, 0.1, cout),
                      relu=relu)
        shape = (None, cin)
    else:
        layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.2, (cout, cin, 3, 3)), b=rng.normal(0, 0.1, cout),
                      relu=relu, pad=1)
        shape = (None, cin, 6, 6)
    return Network(name="n", path="", input="x", input_shape=shape, output="y", layers=[layer])


def _x(kind, cin, seed=1, n=5):
    rng = np.random.default_rng(seed)
    shape = (n, cin) if kind == "dense" else (n, cin, 6, 6)
    return rng.uniform(0, 1, shape) * (rng.random(shape) < 0.6)


def _run(net, x, target="emu", force_chunk=None, fmt="fixed"):
    acc = Accelerator(SHIFT8 if fmt in ("twohot", "pot") else SPARSE4, target)
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", fmt, "a")}, {"a": acc})
        dep.fast = False                 # the layer path's kernel calls (the compiled one makes none)
        ex = dep.execs["l"]
        if force_chunk:
            ex.k_step = force_chunk
        dep.calibrate(x)
        y = dep.run(x)
        return y, ex.stats
    finally:
        acc.close()


@pytest.mark.parametrize("kind", ["dense", "conv"])
@pytest.mark.parametrize("relu", [True, False])
def test_tiled_path_equals_one_call(kind, relu):
    net = _net(kind, 40, 12, relu=relu)
    x = _x(kind, 40)
    y1, s1 = _run(net, x)
    y2, s2 = _run(net, x, force_chunk=16)                # 16 + 16 + 8 channels
    np.testing.assert_array_equal(y1, y2)
    assert (s1.f_out, s1.sat_count, s1.histogram) == (s2.f_out, s2.sat_count, s2.histogram)
    assert s2.calls > s1.calls


@pytest.mark.csim
def test_tiled_layer_is_bit_exact_on_csim():
    net = _net("conv", 80, 6)                             # 80 > max_in_channels = 64: two raw calls per pass
    x = _x("conv", 80, n=2)
    y_emu, _ = _run(net, x)
    y_csim, _ = _run(net, x, "csim")
    np.testing.assert_array_equal(y_emu, y_csim)


@pytest.mark.parametrize("kind", ["dense", "conv"])
def test_layers_beyond_max_in_channels_deploy(kind):
    """A 128-wide dense layer (issue 16's example) and a 96-channel conv on sparse8_pynq-z2,
    whose max_in_channels is 64: within int8 error of the float layer."""
    cin = 128 if kind == "dense" else 96
    net = _net(kind, cin, 10)
    x = _x(kind, cin)
    y, st = _run(net, x)
    layer = net.layers[0]
    if kind == "dense":
        want = np.maximum(x @ layer.w.T + layer.b, 0)
    else:
        from hlsnn.engines.convgeom import conv_float
        want = np.maximum(conv_float(x, layer.w, layer.b, layer.geom), 0)
    assert st.calls >= 2
    assert np.abs(y - want).max() <= 0.03 * np.ptp(want)


def test_report_models_the_raw_calls():
    """The report's cycle model makes the runner's calls: a 128-wide dense layer on sparse8
    (max_in_channels 64) is two raw calls of 64 channels for a batch that fits one map."""
    from hlsnn import load_config
    from hlsnn.measure.layers import layer_cycles
    cfg = load_config(SPARSE4)
    r = layer_cycles(_net("dense", 128, 10).layers[0], cfg, 5)
    assert r["calls"] == 2 and r["k"] == 128


# ---------------------------------------------------------------- shift_mac (two-hot / PoT)

@pytest.mark.parametrize("fmt", ["twohot", "pot"])
@pytest.mark.parametrize("kind", ["dense", "conv"])
def test_shift_tiled_path_equals_one_call(fmt, kind):
    """A shift layer whose K fits max_k, forced into raw calls of 50 columns of K (dense K = 120,
    conv C*k*k = 144): the same bits, radix, saturation count and histogram."""
    cin = 120 if kind == "dense" else 16
    net = _net(kind, cin, 12)
    x = _x(kind, cin)
    y1, s1 = _run(net, x, fmt=fmt)
    y2, s2 = _run(net, x, fmt=fmt, force_chunk=50)
    np.testing.assert_array_equal(y1, y2)
    assert (s1.f_out, s1.sat_count, s1.histogram) == (s2.f_out, s2.sat_count, s2.histogram)
    assert s2.calls > s1.calls


@pytest.mark.parametrize("kind", ["dense", "conv"])
def test_shift_layers_beyond_max_k_deploy(kind):
    """A 1100-wide dense layer and a 3x3 conv of 128 channels (K = 1152) on shift8_pynq-z2
    (max_k 1024): refused before issue 16, now two raw calls per pass, within the two-hot
    format's error of the float layer."""
    cin = 1100 if kind == "dense" else 128
    net = _net(kind, cin, 10, relu=True)
    x = _x(kind, cin)
    y, st = _run(net, x, fmt="twohot")
    layer = net.layers[0]
    if kind == "dense":
        want = np.maximum(x @ layer.w.T + layer.b, 0)
    else:
        from hlsnn.engines.convgeom import conv_float
        want = np.maximum(conv_float(x, layer.w, layer.b, layer.geom), 0)
    assert st.calls >= 4                              # preceding and main operation, two raw calls each
    assert np.abs(y - want).max() <= 0.1 * np.ptp(want)


@pytest.mark.csim
def test_shift_tiled_layer_is_bit_exact_on_csim():
    net = _net("dense", 1100, 6)                      # 1100 > max_k = 1024
    x = _x("dense", 1100, n=3)
    y_emu, _ = _run(net, x, fmt="twohot")
    y_csim, _ = _run(net, x, "csim", fmt="twohot")
    np.testing.assert_array_equal(y_emu, y_csim)


def test_report_models_the_shift_raw_calls():
    """The report's cycle model makes the kernel's raw calls: a 1100-wide dense layer on
    shift8_pynq-z2 (max_k 1024) is two raw calls of 550 (a batch that fits one call)."""
    from hlsnn import load_config
    from hlsnn.measure.layers import layer_cycles
    cfg = load_config(SHIFT8)
    r = layer_cycles(_net("dense", 1100, 10).layers[0], cfg, 5, fmt_type="twohot")
    assert r["calls"] == 2 and r["k"] == 1100
