"""``radix: lse`` (hlsnn.deploy.quantize.radix_lse) on the shift formats (twohot, pot on shift_mac): the
config takes it, and the compiled calibration chooses the layer path's radix points, saturation
counts and histograms, so both run the same bits (test_radix_lse.py does the same for fixed)."""
import numpy as np
import pytest
from conftest import ROOT
from hlsnn.deploy.run import fast as netfast
from hlsnn.deploy.config import Assignment, FormatSpec, load_deploy_config
from hlsnn.deploy.importer.graph import Layer, Network
from hlsnn.deploy.run.runner import Deployment
from hlsnn.errors import ConfigError
from hlsnn.runtime import Accelerator
from netfixtures import lse_batches, lse_calibrates_as_the_layer_path

DATA = ROOT / "tests" / "data" / "torch" / "beyond"
SHIFT = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"


def test_radix_lse_is_a_shift_formats_field(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"name: m\nmodel: {DATA / 'v_f_unet_bil_ts17.onnx'}\ndata: digits\nformats:\n"
                   "  t: {type: twohot, accel: shift8_pynq-z2, radix: lse}\n"
                   "  p: {type: pot, accel: shift8_pynq-z2, radix: lse}\n"
                   "  m: {type: twohot, accel: shift8_pynq-z2, radix: msb}\n")
    got = {k: f.radix for k, f in load_deploy_config(cfg).formats.items()}
    assert got == {"t": "lse", "p": "lse", "m": "msb"}
    cfg.write_text(f"name: m\nmodel: {DATA / 'v_f_unet_bil_ts17.onnx'}\ndata: digits\n"
                   "formats:\n  b: {type: bfp, accel: bfp8_zcu104, radix: lse}\n")
    with pytest.raises(ConfigError, match="radix.*shift formats"):
        load_deploy_config(cfg)


def _net(rng):
    """x -> c1 (3x3 ReLU) -> maxpool -> c2 (3x3 depthwise) -> c3 (1x1) -> dense."""
    c, h, z = int(rng.integers(1, 4)), 16, int(rng.choice([8, 16]))
    w = lambda *s: rng.normal(0, 0.4, s)
    b = lambda n: rng.normal(0, 0.1, n)
    layers = [Layer("c1", "conv", ["x"], "t1", w=w(z, c, 3, 3), b=b(z), relu=True, pad=1),
              Layer("mp", "host", ["t1"], "t2", op="MaxPool", attrs={"kernel_shape": [2, 2], "strides": [2, 2],
                                                                    "pads": [0, 0, 0, 0]}),
              Layer("c2", "conv", ["t2"], "t3", w=w(z, 1, 3, 3), b=b(z), relu=True, pad=1, group=z),
              Layer("c3", "conv", ["t3"], "t4", w=w(12, z, 1, 1), b=b(12), relu=False),
              Layer("fl", "host", ["t4"], "t5", op="Flatten", attrs={"axis": 1}),
              Layer("fc", "dense", ["t5"], "y", w=w(10, 12 * 8 * 8), b=b(10))]
    return Network(name="n", path="", input="x", input_shape=(None, c, h, h), output="y", layers=layers), c


@pytest.mark.skipif("netfast.lib() is None", reason="no C compiler for the compiled helpers")
@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_calibration_chooses_the_layer_paths_radix_points_on_shift_mac(seed):
    rng = np.random.default_rng([seed, 53])
    net, c = _net(rng)
    typ = "twohot" if seed % 2 == 0 else "pot"
    fmt = FormatSpec("f", typ, "a", radix="lse")
    rounding = ["nearest_away", "nearest_even", "truncate"][seed % 3]
    x_cal, x = lse_batches(rng, c)
    acc = Accelerator(SHIFT, "emu")
    try:
        mk = lambda f: Deployment(net, Assignment("a", "f", {}), {"f": f}, {"a": acc}, rounding=rounding)
        fast, ref, msb = mk(fmt), mk(fmt), mk(FormatSpec("f", typ, "a"))
        finer = lse_calibrates_as_the_layer_path(fast, ref, msb, x_cal, x)
        # the rule moves some radix on these tails
        assert finer or fast.execs["c1"].f_x > msb.execs["c1"].f_x, "lse chose DETERMINE's radix everywhere"
    finally:
        acc.close()
