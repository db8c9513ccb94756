"""A BFP image's result does not depend on the images that share its batch: an all-zero input
row (a sample, an im2col patch) takes the layer's exponent, ``clamp(be - max we, emin, emax)``
(rule 0 of ``hlsnn.engines.bfp_systolic.emulator``), not one of the call's other rows, so its
outputs are exactly the bias. Before, it took the largest exponent of the call's rows: at batch 1
the bias vanished (emin), in a batch it was rounded at a neighbour's exponent, and the network
mode refused such batches (NotExact).

References: a worked example by hand, each image run alone (batch 1), and the layer path on the
emulator (for the network mode and the C-simulated network kernel)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import accel_config  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402

CAL = 16


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "bfpbatch", calibration_samples=CAL, check_samples=2)


def _digits(n):
    """Digits with all-zero images (every patch of the first conv all zero: its outputs the
    bias, the next layers' inputs the bias's image) and images with an all-zero region."""
    x = np.array(datasets.load("digits", layout="nchw").x_test[:n])
    x[[1, 4]] = 0.0
    x[2, :, :5] = 0.0
    x[5:, :, :, :3] = 0.0
    return x


def _bits(a):
    return np.asarray(a, np.float64).view(np.uint64)


def test_an_all_zero_sample_gives_exactly_the_bias_beside_any_other():
    """Worked by hand on bfp8_zcu104 (M = 8, the max rule): w rows (1, 0.5) and (0.125, 0.0625)
    have exponents -6 and -9 (mantissas 64, 32 each); the bias (0.3, -0.05) one exponent -8,
    mantissas (77, -13). The zero sample's exponent is be - max we = -2, so e3 = (-8, -11),
    the bias alignment a left shift by (0, 3): acc = (77, -104); the max rule's leading one
    max(6 - 8, 6 - 11) = -2, e4 = -8, the mantissas (77, -13): (77, -13) / 256, the quantized
    bias exactly, whether the sample runs alone or beside a sample a million times larger (whose
    exponent, 13, rounded the bias to 0 before)."""
    cfg = hlsnn.load_config(accel_config("bfp8_zcu104"))
    acc = hlsnn.Accelerator(cfg, "emu")
    w = np.array([[1.0, 0.5], [0.125, 0.0625]])
    bias = np.array([0.3, -0.05])
    want = np.array([77.0, -13.0]) / 256
    alone = acc.gemm(np.zeros((1, 2)), w, bias)
    beside = acc.gemm(np.array([[0.0, 0.0], [1e6, 1e6]]), w, bias)
    np.testing.assert_array_equal(alone[0], want)
    np.testing.assert_array_equal(beside[0], want)
    kern = acc.kernel
    wq, bq = kern.quantize_weights(w), kern._quantize_bias(bias, 2)
    for x in (np.zeros((1, 2)), np.array([[0.0, 0.0], [1e6, -1e6], [1e-9, 0.0]])):
        np.testing.assert_array_equal(kern.gemm_rows(x, wq, bq)[0], want)
        xq = kern.quantize_activations(x, wq, bq)
        assert int(np.asarray(xq.exponents).reshape(-1)[0]) == -2
        np.testing.assert_array_equal(kern.gemm_bfp(xq, wq, bq).dequantize()[0], want)


@pytest.mark.parametrize("assignment", ["bfp8", "bfp16"])
def test_layer_path_and_network_mode_are_batch_free(compiled, assignment):
    """digits_cnn with all-zero images and regions: the layer path's logits at batch 12 are each
    image's at batch 1, bit for bit, and the network mode (emu) gives them at batch 12 (it
    refused such a batch before) and at batch 1."""
    path = compiled("digits_cnn", assignment)
    x = _digits(12)
    with hlsnn.load(path, "emu", network=False) as ref:
        whole = ref.logits(x)
        alone = np.concatenate([ref.logits(x[i:i + 1]) for i in range(len(x))])
    np.testing.assert_array_equal(_bits(whole), _bits(alone))
    with hlsnn.load(path, "emu", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 0 and net.network.engine == "bfp_systolic"
        np.testing.assert_array_equal(_bits(got), _bits(whole))
        for i in (1, 2, 7):
            np.testing.assert_array_equal(_bits(net.logits(x[i:i + 1])), _bits(whole[i:i + 1]))
    assert not np.array_equal(whole[1], whole[2])


@pytest.mark.csim
@pytest.mark.slow      # a kernel build; the emu test above covers the rule, test_network_bfp's csim case the kernel
def test_network_kernel_batch_with_all_zero_images_equals_the_layer_path(compiled):
    """The C-simulated network kernel (the descriptor's xz for the all-zero patches): one start
    for a batch of 4 with two all-zero images, the layer path's bits image by image."""
    path = compiled("digits_cnn", "bfp8")
    x = _digits(6)[:4]
    with hlsnn.load(path, "emu", network=False) as ref:
        want = np.concatenate([ref.logits(x[i:i + 1]) for i in range(len(x))])
    with hlsnn.load(path, "csim", network=True) as net:
        got = net.logits(x)
        assert net.last_kernel_starts == 1
    np.testing.assert_array_equal(_bits(got), _bits(want))
