"""An output conv's host-quantized input in two int8 terms (``input_terms: 2``, hlsnn.deploy.quantize.twoin;
issue 52): the layer equals the integer convolution of ``hi * 2**7 + lo`` written out here in
numpy (with the engine's output rule), is nearer the float layer than one term, runs layer by
layer in a compiled model (the network kernel refuses it by name) with the deployment's bits,
and gives csim's bits."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.quantize import twoin  # noqa: E402
from hlsnn.deploy.config import Assignment, ConfigError, FormatSpec, load_deploy_config  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

SPARSE8 = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"     # rounding nearest_even
SP_SMALL = ROOT / "tests" / "engines" / "sparse_cluster" / "configs" / "sp_small.yaml"    # truncate, 8 channels a call


def _net(cin=3, cout=2, kh=3, kw=3, stride=1, pads=(1, 1, 1, 1), relu=False, seed=0):
    rng = np.random.default_rng(seed)
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.3, (cout, cin, kh, kw)), b=rng.normal(0, 0.1, cout),
                  relu=relu, pads=pads, strides=(stride, stride))
    return Network(name="n", path="", input="x", input_shape=(None, cin, 7, 6), output="y", layers=[layer])


def _x(cin=3, n=4, seed=1):
    return np.random.default_rng(seed).uniform(-1.3, 2.9, (n, cin, 7, 6))


def _run(net, x, terms, config=SPARSE8, target="emu"):
    acc = Accelerator(config, target)
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a", input_terms=terms)},
                         {"a": acc})
        dep.calibrate(x)
        return dep.run(x), dep.execs["l"]
    finally:
        acc.close()


def _round(v, mode):
    if mode == "nearest_even":
        return np.rint(v)
    if mode == "truncate":
        return np.floor(v)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)                # nearest_away, the deployment's default


def _reference(net, x, ex, rounding="nearest_even"):
    """int8 hi at F_x, the residual at F_x + 7 (the deployment's rounding: half away from zero),
    the integer convolution of hi * 128 + lo with the int8 taps, the bias at F_in, then the
    output shift with the accel's rounding and saturation to int8."""
    layer = net.layers[0]
    g = layer.geom
    fx, fw, fo = ex.f_x, int(np.ravel(ex.f_w)[0]), ex.f_out
    hi = np.clip(_round(x * 2.0 ** fx, "nearest_away"), -128, 127)
    lo = np.clip(_round((x - hi * 2.0 ** -fx) * 2.0 ** (fx + 7), "nearest_away"), -128, 127)
    assert np.abs(lo).max() <= 64
    v = hi * 128 + lo
    w = np.clip(np.rint(layer.w * 2.0 ** fw), -128, 127)
    np.testing.assert_array_equal(w, ex.w_taps)
    f_in = fx + 7 + fw
    xp = np.pad(v, ((0, 0), (0, 0), (g.pads[0], g.pads[2]), (g.pads[1], g.pads[3])))
    oh = (xp.shape[2] - g.kh) // g.sh + 1
    ow = (xp.shape[3] - g.kw) // g.sw + 1
    acc = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(g.kh):
        for j in range(g.kw):
            acc += np.einsum("bchw,zc->bzhw", xp[:, :, i:i + g.sh * (oh - 1) + 1:g.sh, j:j + g.sw * (ow - 1) + 1:g.sw],
                             w[:, :, i, j])
    t = acc + np.rint(layer.b * 2.0 ** f_in)[None, :, None, None]
    if layer.relu:
        t = np.maximum(t, 0)
    return np.clip(_round(t / 2.0 ** (f_in - fo), rounding), -128, 127) * 2.0 ** -fo


@pytest.mark.parametrize("geom", [dict(), dict(stride=2, pads=(1, 0, 2, 1), relu=True), dict(kh=7, kw=2, pads=(3, 0, 3, 1))])
def test_two_terms_are_the_integer_convolution_of_hi_and_lo(geom, monkeypatch):
    """A simple 3x3 conv, a general one (stride 2, uneven padding, ReLU) and a 7x2 kernel beyond
    max_ksize 5 (blocks of taps); two terms wherever the rule applies (WORTH 0)."""
    monkeypatch.setattr(twoin, "WORTH", 0.0)
    net = _net(**geom)
    x = _x()
    y, ex = _run(net, x, 2)
    assert ex.in_terms == 2 and ex.two
    np.testing.assert_array_equal(y, _reference(net, x, ex))
    y1, ex1 = _run(net, x, 1)
    assert ex1.in_terms == 1 and not ex1.two
    f = net.layers[0]
    from hlsnn.engines import convgeom
    yf = convgeom.conv_float(x, f.w, f.b, f.geom)
    yf = np.maximum(yf, 0) if f.relu else yf
    err = lambda a: np.linalg.norm(a - yf) / np.linalg.norm(yf)      # noqa: E731
    assert err(y) < err(y1)


def test_only_an_output_conv_with_a_host_quantized_input_takes_two_terms():
    rng = np.random.default_rng(3)
    l1 = Layer("a", "conv", ["x"], "h", w=rng.normal(0, 0.3, (4, 3, 3, 3)), b=np.zeros(4), relu=True, pads=(1, 1, 1, 1))
    l2 = Layer("l", "conv", ["h"], "y", w=rng.normal(0, 0.3, (2, 4, 3, 3)), b=np.zeros(2), relu=False, pads=(1, 1, 1, 1))
    net = Network(name="n", path="", input="x", input_shape=(None, 3, 7, 6), output="y", layers=[l1, l2])
    acc = Accelerator(SPARSE8, "emu")
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a", input_terms=2)}, {"a": acc})
        dep.calibrate(_x())
        assert dep.execs["a"].in_terms == 1                  # not the output layer
        assert dep.execs["l"].in_terms == 2 and dep.execs["l"].two is False     # its input: int8 codes already
    finally:
        acc.close()


def _cancelling(seed=0):
    """Two input channels nearly equal, weights +1 / -1 on them: an output far smaller than its
    terms (a one-term input's rounding is a large part of it)."""
    rng = np.random.default_rng(seed)
    w = np.zeros((1, 2, 3, 3))
    w[0, 0, 1, 1], w[0, 1, 1, 1] = 0.9, -0.9
    w[0, 0] += rng.normal(0, 0.01, (3, 3))
    layer = Layer("l", "conv", ["x"], "y", w=w, b=np.zeros(1), relu=False, pads=(1, 1, 1, 1))
    net = Network(name="n", path="", input="x", input_shape=(None, 2, 7, 6), output="y", layers=[layer])
    a = rng.uniform(0, 3.5, (4, 1, 7, 6))
    return net, np.concatenate([a, a + rng.normal(0, 0.05, a.shape)], axis=1)


def test_two_terms_only_where_one_costs_the_output_more_than_worth():
    """``cost``: the residual's part of the layer's output, written out here; two terms above
    ``WORTH`` (1 %), one below (the random conv of _net: its input's rounding is a small part)."""
    net, x = _cancelling()
    y, ex = _run(net, x, 2)
    fx, fw = ex.f_x, int(np.ravel(ex.f_w)[0])
    hi = np.clip(_round(x * 2.0 ** fx, "nearest_away"), -128, 127)
    lo = np.clip(_round((x - hi * 2.0 ** -fx) * 2.0 ** (fx + 7), "nearest_away"), -128, 127)
    w = ex.w_taps * 2.0 ** -fw
    from hlsnn.engines import convgeom
    part = convgeom.conv_float(lo * 2.0 ** -(fx + 7), w, np.zeros(1), net.layers[0].geom)
    whole = convgeom.conv_float(hi * 2.0 ** -fx + lo * 2.0 ** -(fx + 7), w, np.zeros(1), net.layers[0].geom)
    want = np.linalg.norm(part) / np.linalg.norm(whole)
    assert ex.two and ex.two_cost == pytest.approx(want, rel=1e-12) and want > twoin.WORTH
    np.testing.assert_array_equal(y, _reference(net, x, ex))
    _, ex2 = _run(_net(), _x(), 2)
    assert ex2.two is False and 0 < ex2.two_cost < twoin.WORTH


@pytest.mark.csim
def test_two_terms_give_csim_s_bits(monkeypatch):
    monkeypatch.setattr(twoin, "WORTH", 0.0)
    net = _net(cin=10)                                       # sp_small: 8 channels a call, K tiled too
    x = _x(cin=10, n=2)
    y, ex = _run(net, x, 2, SP_SMALL)
    np.testing.assert_array_equal(y, _reference(net, x, ex, "truncate"))
    yc, exc = _run(net, x, 2, SP_SMALL, "csim")
    np.testing.assert_array_equal(yc, y)
    assert (exc.f_x, exc.f_out, exc.stats.histogram) == (ex.f_x, ex.f_out, ex.stats.histogram)


def test_a_compiled_model_runs_it_layer_by_layer_with_the_deployment_s_bits(tmp_path, monkeypatch):
    monkeypatch.setattr(twoin, "WORTH", 0.0)
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.deploy.quantize import task_formats
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.errors import InputError
    from hlsnn.network.build import compile_model
    rng = np.random.default_rng(5)
    w = rng.normal(0, 0.4, (1, 1, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"]),             # a host op's float values
                           helper.make_node("Conv", ["s", "w"], ["y"], pads=[1, 1, 1, 1])], "c",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 1, 8, 8])],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "c.onnx")
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(f"name: c\nmodel: {tmp_path / 'c.onnx'}\ndata: digits\nlayout: nchw\ntask: regression\n"
                        "calibration: {samples: 16}\nformats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    out = tmp_path / "c.hlsnn"
    program = compile_model(cfg_path, "fixed8", out, check_samples=2)
    (j,) = [j for j in program["layers"] if j.get("kind") == "conv"]
    assert j["in_terms"] == 2
    from hlsnn.network import artifact
    from hlsnn.deploy.lower.program import lower
    with pytest.raises(InputError, match="2 int8 terms.*runs layer by layer"):
        lower(*artifact.read(out))
    cfg = load_deploy_config(cfg_path)
    ds = datasets.load("digits", layout="nchw")
    x = np.asarray(ds.x_test[:20], np.float64)
    formats = task_formats.resolve(cfg.formats, "regression")
    assert formats["fixed8"].input_terms == 2 and cfg.formats["fixed8"].input_terms == 1
    accs = open_accelerators(cfg, "emu", ["fixed8"])
    try:
        dep = Deployment(load_onnx(cfg.model), cfg.assignments["fixed8"], formats, accs)
        dep.calibrate(ds.x_train[:16])
        want = dep.run(x)
    finally:
        for a in accs.values():
            a.close()
    with hlsnn.load(out) as net:
        np.testing.assert_array_equal(net.run(x), want)


def test_input_terms_is_for_the_fixed_point_formats(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(f"name: c\nmodel: {ROOT / 'configs' / 'models' / 'digits_mlp.onnx'}\ndata: digits\n"
                 "formats:\n  b: {type: bfp, accel: bfp8_zcu104, input_terms: 2}\n")
    with pytest.raises(ConfigError, match="input_terms.*fixed, sparse"):
        load_deploy_config(p)
    p.write_text(p.read_text().replace("type: bfp, accel: bfp8_zcu104", "type: fixed, accel: sparse8_pynq-z2")
                 .replace("input_terms: 2", "input_terms: 3"))
    with pytest.raises(ConfigError, match="input_terms"):
        load_deploy_config(p)
    assert twoin.TERMS == (1, 2)
