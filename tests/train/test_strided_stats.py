"""``calibration: strided_stats`` in hlsnn.train: a strided conv on sparse_cluster takes its
static output radix from every stride-1 result (``all``) or from the outputs the stride keeps
(``kept``); the prepared model in eval mode equals the deployment bit for bit under either
rule, and on an input whose dropped stride-1 results are 4 times the kept ones the two rules'
radixes differ by exactly 2."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import calibrate, deployed, prepare, quantized_layers  # noqa: E402

torch.set_num_threads(1)


def _model():
    """A 3x3 stride-2 conv (pad 1) whose only taps are the centres: its output at (i, j) is
    the input at (2i, 2j) scaled; the stride-1 form's odd positions read the odd pixels."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 2, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 10))
    with torch.no_grad():
        m[0].weight.zero_()
        m[0].weight[0, 0, 1, 1], m[0].weight[1, 0, 1, 1] = 1.0, 0.5
        m[0].bias.zero_()
    return m.eval()


def _x(n, rng):
    """Kept pixels (even, even) up to 0.25, the odd ones up to 1.0: the stride-1 results the
    stride drops are up to 4 times the kept ones."""
    x = np.zeros((n, 1, 8, 8))
    x[:, :, 0::2, 0::2] = rng.uniform(0.1, 0.25, (n, 1, 4, 4))
    x[:, :, 1::2, 1::2] = rng.uniform(0.1, 1.0, (n, 1, 4, 4))
    x[:, 0, 0, 0], x[:, 0, 1, 1] = 0.25, 1.0                  # the maxima, exactly
    return x


@pytest.mark.parametrize("rule,fmt", [("all", "sparse"), ("kept", "sparse"), ("kept", "fixed")])
def test_eval_equals_deployed_with_either_rule(tmp_path, rule, fmt):
    """``fixed``: ``radix: lse`` (its default), refined on the same outputs as DETERMINE."""
    rng = np.random.default_rng(3)
    x = _x(24, rng)
    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\ncalibration: {mode: static, strided_stats: "
                   f"{rule}}}\nformats:\n  f:\n    type: {fmt}\n    accel: sparse8_pynq-z2\n")
    radix = {}
    for r in ("all", "kept"):         # the config's rule, and prepare's argument over it
        m = prepare(_model(), cfg, strided_stats=None if r == rule else r)
        m.double().eval()
        calibrate(m, torch.tensor(x[:12]))
        radix[r] = dict(quantized_layers(m))["0"].oq.last_f
        if r == rule:
            with torch.no_grad():
                mine = m(torch.tensor(x[12:])).numpy()
    assert radix["kept"] == radix["all"] + 2 or fmt == "fixed"     # a quarter of the maximum: two bits finer
    assert radix["kept"] > radix["all"]
    with deployed(_model().float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:12])
        theirs = dep.run(x[12:])
        assert [e.f_out for e in dep.execs.values()][0] == radix[rule]
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


def test_a_wrong_rule_is_refused(tmp_path):
    from hlsnn.errors import ConfigError, InputError
    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\nformats:\n  f:\n    type: sparse\n"
                   "    accel: sparse8_pynq-z2\n")
    with pytest.raises(InputError, match="one of all, kept"):
        prepare(_model(), cfg, strided_stats="some")
    for cal, words in (("{strided_stats: some}", "'all', 'kept'"), ("{mode: dynamic, strided_stats: kept}", "static")):
        cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {cal}\nformats:\n  f:\n"
                       "    type: sparse\n    accel: sparse8_pynq-z2\n")
        with pytest.raises(ConfigError, match=words):
            prepare(_model(), cfg)


@pytest.mark.parametrize("cal,want", [
    ("{overflow_ratio: 0.01, mode: dynamic, update: e5, update_by: op_type, percent: 37}",
     dict(overflow_ratio=0.01, dynamic=True, update="e5", update_by="op_type", update_percent=37.0,
          strided_stats="all", clip_stats="off")),
    ("{overflow_ratio: 0.02, strided_stats: kept, clip_stats: clipped}",
     dict(overflow_ratio=0.02, dynamic=False, update="e1", update_by="layer", update_percent=20.0,
          strided_stats="kept", clip_stats="clipped"))])
def test_deployed_takes_every_calibration_key(tmp_path, monkeypatch, cal, want):
    """hlsnn.train's ``deployed``: a non-default value of each calibration key (and rounding)
    reaches the Deployment (as hlsnn deploy, open_deployment and hlsnn compile:
    tests/deploy/test_calibration_kwargs.py); the expected values are the YAML's."""
    import inspect
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.train import emulate
    seen = []

    def fake(*args, **kwargs):
        b = inspect.signature(Deployment.__init__).bind(None, *args, **kwargs)
        b.apply_defaults()
        seen.append({k: b.arguments[k] for k in (*want, "rounding", "host_bits")})
        raise LookupError("recorded")
    monkeypatch.setattr(emulate, "Deployment", fake)
    cfg = tmp_path / "d.yaml"
    cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {cal}\nrounding: truncate\nformats:\n"
                   "  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n")
    with pytest.raises(LookupError, match="recorded"):
        with deployed(_model().float(), torch.zeros(1, 1, 8, 8), cfg):
            pass
    assert seen == [dict(want, rounding="truncate", host_bits=None)]


def test_prepare_takes_the_configs_overflow_ratio(tmp_path):
    """prepare without ``overflow_ratio`` takes the config's ``calibration: overflow_ratio``, as the
    deployment does: the prepared model in eval mode equals the deployment bit for bit, and its
    radix is finer than with 0 (30 % of the values may saturate)."""
    rng = np.random.default_rng(4)
    x = _x(24, rng)
    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\ncalibration: {overflow_ratio: 0.3}\nformats:\n  f:\n"
                   "    type: sparse\n    accel: sparse8_pynq-z2\n")
    radix = {}
    for r in (None, 0.0):
        m = prepare(_model(), cfg, **({} if r is None else {"overflow_ratio": r}))
        m.double().eval()
        calibrate(m, torch.tensor(x[:12]))
        radix[r] = dict(quantized_layers(m))["0"].oq.last_f
        if r is None:
            with torch.no_grad():
                mine = m(torch.tensor(x[12:])).numpy()
    assert radix[None] > radix[0.0]
    with deployed(_model().float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:12])
        theirs = dep.run(x[12:])
        assert [e.f_out for e in dep.execs.values()][0] == radix[None]
    np.testing.assert_array_equal(mine, theirs)
