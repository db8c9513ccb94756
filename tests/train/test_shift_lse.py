"""``radix: lse`` on the shift formats (twohot, pot on shift_mac; hlsnn.deploy.quantize.radix_lse): the
prepared model's eval-mode outputs equal the deployed emulator's bit for bit, static and dynamic
radix points (test_residual_depthwise.py's model and harness), and (static) the rule moves some radix."""
import pytest

torch = pytest.importorskip("torch")

from hlsnn.train import quantized_layers

from .test_residual_depthwise import _data, eval_equals_deployed


def _cfg(tmp_path, fmt, radix, mode):
    p = tmp_path / f"d-{radix}.yaml"
    p.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {{mode: {mode}}}\nformats:\n"
                 f"  f: {{type: {fmt}, accel: shift8_pynq-z2, radix: {radix}}}\n")
    return p


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("fmt", ["twohot", "pot"])
def test_lse_eval_equals_deployed_on_shift_mac(tmp_path, fmt, mode):
    x = _data()
    radii = {}
    for radix in ("lse", "msb"):
        q = eval_equals_deployed(_cfg(tmp_path, fmt, radix, mode), x, mode)
        radii[radix] = [(m.aq.last_f, m.oq.last_f) for _, m in quantized_layers(q)]
    if mode == "static":                            # (dynamic: the last batch's radii happen to agree)
        assert radii["lse"] != radii["msb"]         # the rule chose a finer radix somewhere
