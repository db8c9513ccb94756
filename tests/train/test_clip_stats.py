"""``calibration: clip_stats`` in hlsnn.train: a conv whose output only a ReLU6 reads takes its
static output radix from its results (``off``, the default) or from its results clipped at 6
(``clipped``); the prepared model in eval mode equals the deployment bit for bit under either
rule, and with a calibration maximum above 127/16 the two radixes are 3 and 4 (worked out with
numpy on the conv's results)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import calibrate, deployed, prepare, quantized_layers  # noqa: E402

torch.set_num_threads(1)


def _model():
    """A 3x3 conv (pad 1) whose only taps are the centres (channel k: the input times 1, 0.5),
    then ReLU6 (its ReLU fused into the conv, the clip at 6 on the host)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU6(), nn.Flatten(), nn.Linear(128, 10))
    with torch.no_grad():
        m[0].weight.zero_()
        m[0].weight[0, 0, 1, 1], m[0].weight[1, 0, 1, 1] = 1.0, 0.5
        m[0].bias.zero_()
    return m.eval()


def _x(n, rng):
    x = rng.uniform(0.1, 7.0, (n, 1, 8, 8))
    x[:, 0, 0, 0] = 8.4                        # the maximum: 8.375 at the input's radix 3
    return x


def _want(x):
    """DETERMINE with overflow ratio 0 on the conv's results (clipped at 6 or not): the largest
    value's MSB at the top magnitude bit 6 of int8, ``6 - floor(log2(max))``."""
    f_x = 6 - int(np.floor(np.log2(np.abs(x).max())))
    y = np.rint(x * 2.0 ** f_x) / 2.0 ** f_x                  # channel 0's results: the input's values
    return {"off": 6 - int(np.floor(np.log2(y.max()))), "clipped": 6 - int(np.floor(np.log2(np.minimum(y, 6).max())))}


@pytest.mark.parametrize("rule", ["off", "clipped"])
def test_eval_equals_deployed_with_either_rule(tmp_path, rule):
    rng = np.random.default_rng(3)
    x = _x(24, rng)
    want = _want(x[:12])
    assert want == {"off": 3, "clipped": 4}
    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\ncalibration: {mode: static"
                   + ("" if rule == "off" else f", clip_stats: {rule}")
                   + "}\nformats:\n  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n")
    radix = {}
    for r in ("off", "clipped"):      # the config's rule, and prepare's argument over it
        m = prepare(_model(), cfg, clip_stats=None if r == rule else r)
        m.double().eval()
        calibrate(m, torch.tensor(x[:12]))
        radix[r] = dict(quantized_layers(m))["0"].oq.last_f
        if r == rule:
            with torch.no_grad():
                mine = m(torch.tensor(x[12:])).numpy()
    assert radix == want
    with deployed(_model().float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:12])
        theirs = dep.run(x[12:])
        ex = next(iter(dep.execs.values()))
        assert ex.f_out == want[rule]
        assert ex.clip_saturation_free is (True if rule == "clipped" else None)
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


def test_a_wrong_rule_is_refused(tmp_path):
    from hlsnn.deploy.config import deployment_kwargs, load_deploy_config
    from hlsnn.errors import ConfigError, InputError
    cfg = tmp_path / "d.yaml"
    fmts = "formats:\n  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\n" + fmts)
    with pytest.raises(InputError, match="one of off, clipped"):
        prepare(_model(), cfg, clip_stats="some")
    for cal, words in (("{clip_stats: some}", "'off', 'clipped'"),
                       ("{mode: dynamic, clip_stats: clipped}", "static calibration"),
                       ("{update: e5, clip_stats: clipped}", "update: e1 only")):
        cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {cal}\n" + fmts)
        with pytest.raises(ConfigError, match=words):
            prepare(_model(), cfg)
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\ncalibration: {clip_stats: clipped}\n" + fmts)
    with pytest.raises(InputError, match="clip_stats: clipped .* e1 only"):      # the command line's e5
        deployment_kwargs(load_deploy_config(cfg), update="e5")
    assert deployment_kwargs(load_deploy_config(cfg))["clip_stats"] == "clipped"
