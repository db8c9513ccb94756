"""The network path of a compiled sparse_cluster model (fixed8, sparse50; issue 31): the network
mode's sparse rules (``hlsnn.compiled.netsparse``) and the sparse network kernel.

References: the layer-by-layer compiled network on the emulator (the deployment's own code,
itself tested against a fresh deployment), a plain-Python integer convolution with its own
rounding, and the original taps of a layer for their recovery from the stride-1 rewrite."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.compiled import netmode, netsparse  # noqa: E402
from hlsnn.compiled.build import compile_model  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.engines.convgeom import ConvGeom, as_stride1  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

MODELS = ROOT / "configs" / "models"
CAL = 16
P = {"rounding": "nearest_even"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("netsparse")
    cache = {}

    def get(model, assignment):
        if (model, assignment) not in cache:
            cache[model, assignment] = d / f"{model}_{assignment}.hlsnn"
            compile_model(MODELS / f"{model}.yaml", assignment, cache[model, assignment], calibration_samples=CAL,
                          check_samples=2)
        return cache[model, assignment]
    return get


def _x(model, n=24):
    if model == "resnet8_digits32":
        return datasets.load("digits32", layout="nchw").x_test[:n]
    return datasets.load("digits", layout="flat" if model == "digits_mlp" else "nchw").x_test[:n]


def _same(path, x):
    with hlsnn.load(path, "emu", network=False) as ref:
        y_ref, env_ref = ref.run(x, keep=True)
    with hlsnn.load(path, "emu", network=True) as net:      # the self-check passes too
        y, env = net.run(x, keep=True)
        assert net.last_kernel_starts == 0 and net.network.engine == "sparse_cluster"
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt].view(np.uint64), env_ref[lt].view(np.uint64))
    # the float output after a host Softmax: the same logits, a sum in another memory order
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=0)
    return net


@pytest.mark.parametrize("model,assignment", [("digits_mlp", "fixed8"), ("digits_cnn", "fixed8"),
                                              ("digits_cnn", "sparse50")])
def test_network_mode_equals_the_layer_by_layer_emulator(compiled, model, assignment):
    _same(compiled(model, assignment), _x(model))


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["fixed8", "sparse50"])
def test_resnet8_network_mode_equals_the_layer_by_layer_emulator(compiled, assignment):
    """Stride-2 3x3 and 1x1 convolutions (stored in their stride-1 form), residual Adds, the
    global pool: every layer on the fabric, the Softmax on the host."""
    net = _same(compiled("resnet8_digits32", assignment), _x("resnet8_digits32", 16))
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("conv") == 10 and kinds.count("add") == 3
    assert [j["op"] for j in net.network.host_after] == ["Softmax"]


def _round_even(fr):
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    return fl + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else fl


def test_sparse_conv_rule_against_plain_python():
    """Stride (2, 1), asymmetric padding, two groups, int8 taps with zeros, per-channel shifts
    (one negative: a saturating left shift), ReLU on one run and off on the other; the sum plus
    bias is never saturated (the engine's accumulators are exact)."""
    rng = np.random.default_rng(5)
    c, h, w, z, g, kh, kw = 4, 7, 6, 4, 2, 3, 2
    pads, (sh, sw) = (1, 0, 2, 1), (2, 1)
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    x = rng.integers(-128, 128, (2, c, h, w))
    taps = rng.integers(-128, 128, (z, c // g, kh, kw)) * (rng.random((z, c // g, kh, kw)) < 0.5)
    bias = rng.integers(-(1 << 29), 1 << 29, z) >> rng.integers(0, 20, z)
    shift = np.array([9, 14, 0, -1])
    for relu in (True, False):
        f = dict(c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, group=g, codes=taps,
                 bias=bias, shift=shift, relu=relu, engine="sparse_cluster")
        got = netmode.conv_ints(x, f, P)
        for b in range(2):
            for zz in range(z):
                j = zz // (z // g)
                for oy in range(oh):
                    for ox in range(ow):
                        acc = 0
                        for ci in range(c // g):
                            for ky in range(kh):
                                for kx in range(kw):
                                    iy, ix = oy * sh + ky - pads[0], ox * sw + kx - pads[1]
                                    if 0 <= iy < h and 0 <= ix < w:
                                        acc += int(x[b, j * (c // g) + ci, iy, ix]) * int(taps[zz, ci, ky, kx])
                        v = acc + int(bias[zz])
                        v = max(v, 0) if relu else v
                        y = max(-128, min(127, _round_even(Fraction(v) / Fraction(2) ** int(shift[zz]))))
                        assert got[b, zz, oy, ox] == y, (relu, b, zz, oy, ox)


@pytest.mark.parametrize("geom", [ConvGeom(3, 3, 2, 2, (1, 1, 1, 1)), ConvGeom(1, 1, 2, 2),
                                  ConvGeom(3, 2, 1, 2, (0, 1, 2, 0), group=2), ConvGeom(2, 2, group=4)])
def test_taps_come_back_from_the_stride1_form(geom):
    """The compiled model stores a general convolution's weight as the engine runs it (its
    stride-1 square form); the layer's own taps come back exactly."""
    rng = np.random.default_rng(geom.kh * 10 + geom.group)
    z, cg = 8, 2
    w = rng.integers(-128, 128, (z, cg, geom.kh, geom.kw))
    w1, _, _ = as_stride1(w, geom)
    j = {"name": "L", "kind": "conv", "w_shape": list(w.shape), "general": True, "blocks": None,
         "geom": {"kh": geom.kh, "kw": geom.kw, "dilations": [1, 1], "group": geom.group}}
    np.testing.assert_array_equal(netsparse.taps(j, {"L/wq": w1.astype(np.int8)}, None, InputError), w)
    bad = w1.copy()
    bad[0, -1, -1, -1] = 5 if geom.group > 1 or geom.kh != geom.kw else bad[0, -1, -1, -1]
    if geom.group > 1 or geom.kh != geom.kw:         # an entry the rewrite leaves zero
        with pytest.raises(InputError, match="non-zero entries outside the layer's taps"):
            netsparse.taps(j, {"L/wq": bad.astype(np.int8)}, None, InputError)


def test_lower_names_the_engine_without_a_network_mode(compiled):
    from hlsnn.compiled import artifact
    prog, arrays = artifact.read(compiled("digits_cnn", "fixed8"))
    acc = dict(next(iter(prog["accels"].values())), engine="bfp_systolic")
    with pytest.raises(InputError, match="engine bfp_systolic of .*: only shift_mac and sparse_cluster have a "
                                         "network mode so far"):
        netmode.lower(dict(prog, accels={"a": acc}), arrays)
