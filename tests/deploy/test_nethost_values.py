"""The C host path's output values are used as they are (hlsnn.network.loader): the sim board's
``run_image`` returns the outputs dequantized in C (native/netin.c: ``ldexp``), and the loader
takes those, not dequantizing the integers again in Python. The reference is the layer-by-layer
emulator (``network=False`` on emu), bit for bit; the Python dequantize is counted."""
import numpy as np
import pytest

from hlsnn.network import nethost

pytestmark = pytest.mark.skipif("not nethost.available()", reason="no C compiler for the C host path")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("onnx")
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "nethost_values", calibration_samples=16, check_samples=2)


def _counting(monkeypatch):
    """Count calls of the Python dequantize (hlsnn.deploy.lower.program.dequantize and the bfp pairs'
    hlsnn.engines.bfp_systolic.network.lower.dequantize) while still computing them."""
    from hlsnn.deploy.lower import program
    from hlsnn.engines.bfp_systolic.network import lower
    calls = []
    for mod in (program, lower):
        real = mod.dequantize

        def wrapped(*a, _real=real, _name=mod.__name__, **k):
            calls.append(_name)
            return _real(*a, **k)
        monkeypatch.setattr(mod, "dequantize", wrapped)
    return calls


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("assignment", ["twohot", "bfp16"])
def test_the_c_hosts_values_are_the_output_without_a_second_dequantize(compiled, monkeypatch, assignment):
    import hlsnn
    from hlsnn.deploy import datasets
    path = compiled("digits_cnn", assignment)
    x = datasets.load("digits", layout="nchw").x_test[:4]
    with hlsnn.load(path, "emu", network=False) as ref:
        want_y, want = ref(x), ref.logits(x)
    with hlsnn.load(path, "sim", self_check=False) as net:
        calls = _counting(monkeypatch)
        got_y = net(x)
        assert calls == []                               # the C host's values, not dequantized again
        got = net.logits(x)                              # keep=True: the output tensor is those values too
        assert calls == []
        assert net.last_kernel_starts == 1
    np.testing.assert_array_equal(np.asarray(got_y).view(np.uint64), np.asarray(want_y).view(np.uint64))
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    # the emu network path (no C host) still dequantizes in Python: the counter sees it
    with hlsnn.load(path, "emu", self_check=False) as emu:
        emu(x)
    assert calls
