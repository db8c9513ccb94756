"""The BFP network on emu through ``hlsnn.deploy.run.bfpfast`` (issue 32's evaluation speed)
against the layer path it replaces (``Deployment.fast = False``: ``BfpExec.run`` ->
``Kernel.gemm_rows`` per layer and slice, the reference): the outputs' bits and each layer's
``sat_count``, ``input_density``, ``calls`` and ``in_shape``, on random networks (convolutions of
every geometry the layer path runs, a depthwise convolution, residual Adds, pools, a dense layer;
all-zero patches, saturating outputs; three roundings) and on the shipped models."""
import numpy as np
import pytest
import yaml

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.run import bfpfast as netbfpfast  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

ACCELS = ROOT / "configs" / "accel"
pytestmark = pytest.mark.skipif("netbfpfast.lib() is None", reason="no C compiler for the compiled helpers")


def _config(tmp_path, name, rounding=None):
    if rounding is None:
        return name
    data = yaml.safe_load((ACCELS / f"{name}.yaml").read_text())
    data["bfp_systolic"]["rounding"] = rounding
    data["name"] = f"{data['name']}_{rounding}"
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _net(seed):
    """conv 3x3 s2 asymmetric pads -> depthwise 3x3 -> Clip -> conv 1x1 (no ReLU) + shortcut conv (stride 2,
    dilated 3x3) -> Add -> Relu -> MaxPool -> Clip -> GAP -> Flatten -> dense -> Softmax."""
    rng = np.random.default_rng(seed)

    def conv(name, src, out, z, c, k, relu, **geom):
        return Layer(name, "conv", [src], out, w=rng.normal(0, 0.4, (z, c // geom.get("group", 1), k, k)),
                     b=rng.normal(0, 0.3, z), relu=relu, **geom)

    def host(name, op, ins, out, **attrs):
        return Layer(name, "host", ins, out, op=op, attrs=attrs)
    layers = [
        conv("c0", "x", "a0", 8, 3, 3, True, pads=(1, 0, 2, 1), strides=(2, 2)),
        conv("dw", "a0", "a1r", 8, 8, 3, True, pads=(1, 1, 1, 1), group=8),
        host("clip6", "Clip", ["a1r"], "a1", lo=None, hi=1.5),         # ReLU6-like: fused into dw
        conv("pw", "a1", "a2", 16, 8, 1, False),
        conv("sc", "a0", "a3", 16, 8, 3, False, pads=(2, 2, 2, 2), dilations=(2, 2)),
        host("add", "Add", ["a2", "a3"], "a4"),
        host("relu", "Relu", ["a4"], "a5"),
        host("pool", "MaxPool", ["a5"], "a6", kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0]),
        host("clip", "Clip", ["a6"], "a7", lo=None, hi=3.0),
        host("gap", "GlobalAveragePool", ["a7"], "a8"),
        host("flat", "Flatten", ["a8"], "a9", axis=1),
        Layer("fc", "dense", ["a9"], "a10", w=rng.normal(0, 0.5, (10, 16)), b=rng.normal(0, 0.2, 10)),
        host("soft", "Softmax", ["a10"], "y", axis=1),
    ]
    return Network(name="n", path="", input="x", input_shape=(None, 3, 13, 11), output="y", layers=layers)


def _inputs(seed, n):
    """Images with all-zero regions (all-zero patches) and a wide range of scales (saturation)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, 3, 13, 11)) * np.ldexp(1.0, rng.integers(-6, 6, (n, 1, 1, 1)))
    x[:, :, :5, :6] = 0
    x[::3] = np.where(rng.random((x[::3].shape)) < 0.7, 0.0, x[::3])
    x[1] = 0                                                       # an all-zero image
    return x


def _deployments(net, accel, x_cal):
    acc = Accelerator(accel, "emu")
    spec = FormatSpec("f", "bfp", str(accel), bias_correction="none")     # the compiled calibration pass
    deps = []
    for fast in (False, True):
        dep = Deployment(net, Assignment("a", "f", {}), {"f": spec}, {str(accel): acc})
        dep.fast = fast
        dep.calibrate(x_cal)
        deps.append(dep)
    return acc, deps


@pytest.fixture(autouse=True)
def ran(monkeypatch):
    """The batches netbfpfast ran to the end (its run returned the output)."""
    done = []
    run = netbfpfast.BfpNet.run

    def spy(self, x, *args, **kwargs):
        y = run(self, x, *args, **kwargs)
        done.append(y is not None)
        return y
    monkeypatch.setattr(netbfpfast.BfpNet, "run", spy)
    return done


def _stats(dep):
    return {k: (ex.stats.sat_count, ex.stats.input_density, ex.stats.calls, ex.in_shape)
            for k, ex in dep.execs.items()}


def _same(deps, x, ran):
    ref, fast = deps
    y_ref = ref.run(x)
    n = len(ran)
    y = fast.run(x)
    assert isinstance(fast._bfpnet, netbfpfast.BfpNet) and ran[n:] == [True]     # the compiled path ran
    assert not getattr(ref, "_bfpnet", None)
    assert y.shape == y_ref.shape and y.dtype == y_ref.dtype
    np.testing.assert_array_equal(y.view(np.uint64), y_ref.view(np.uint64))
    assert _stats(fast) == _stats(ref)
    return y


@pytest.mark.parametrize("accel,rounding", [("bfp8_zcu104", None), ("bfp16_pynq-z2", None),
                                            ("bfp8_pynq-z2", "nearest_away"), ("bfp8_zcu104", "truncate")])
def test_random_network_equals_the_layer_path(tmp_path, accel, rounding, ran):
    net = _net(3)
    x = _inputs(4, 75)
    acc, deps = _deployments(net, _config(tmp_path, accel, rounding), x[:20])
    try:
        for n in (75, 1, 31, 32, 33):             # slices of Deployment.chunk, a partial last one; one slice
            _same(deps, x[:n], ran)
        deps[0].chunk = deps[1].chunk = 8          # another slicing: the all-zero patches' exponent per slice
        _same(deps, x, ran)
        sat = {k: ex.stats.sat_count for k, ex in deps[1].execs.items()}
        if accel.startswith("bfp8") and rounding != "truncate":     # rounding up to 2**7: saturations compared
            assert sum(sat.values()) > 0
        assert all(0 < ex.stats.input_density < 1 for ex in deps[1].execs.values())
    finally:
        acc.close()


@pytest.mark.parametrize("share", [1 << 62, 1])
def test_calibration_pass_equals_the_layer_path(share, monkeypatch, ran):
    """The calibration pass (the whole batch at once) through netbfpfast, its layers split
    between threads (``share``: always, or never)."""
    monkeypatch.setattr(netbfpfast.BfpNet, "SHARE_ELEMS", share)
    net = _net(9)
    x = _inputs(10, 75)
    acc, deps = _deployments(net, "bfp8_zcu104", x[:3])
    try:
        assert all(isinstance(getattr(d, "_bfpnet", None), netbfpfast.BfpNet) == d.fast for d in deps)  # calibrated so
        n = len(ran)
        ys = [dep.run(x, calibrate=True) for dep in deps]
        assert ran[n:] == [True]
        np.testing.assert_array_equal(ys[1].view(np.uint64), ys[0].view(np.uint64))
        assert _stats(deps[1]) == _stats(deps[0]) and all(d.calibrated for d in deps)
        _same(deps, x[:20], ran)                         # one slice of the run, shared between threads too
    finally:
        acc.close()


@pytest.mark.parametrize("bias,same", [(0.0, True), (0.3 + 2.0 ** -9, True)])
def test_calibration_in_slices_gives_the_same_bits(bias, same, monkeypatch, ran):
    """The calibration pass runs in slices: the all-zero patches' exponent is the layer's
    (emulator rule 0), so their outputs do not depend on the slice, also with a bias whose
    alignment would drop bits at the large exponents of the second half's images; the layer
    path's bits (one call over the whole batch)."""
    verdicts = []
    check = netbfpfast.BfpNet._whole_from_slices
    monkeypatch.setattr(netbfpfast.BfpNet, "_whole_from_slices",
                        lambda self, *a: verdicts.append(check(self, *a)) or verdicts[-1])
    rng = np.random.default_rng(2)
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.4, (8, 3, 3, 3)), b=np.full(8, bias), relu=False,
                  pads=(1, 1, 1, 1))
    net = Network(name="n", path="", input="x", input_shape=(None, 3, 8, 8), output="y", layers=[layer])
    x = rng.uniform(-1, 1, (64, 3, 8, 8))
    x[:, :, :4, :4] = 0                                           # all-zero patches in every image
    x[:32] *= 2.0 ** -8
    x[32:] *= 2.0 ** 8
    acc, deps = _deployments(net, "bfp8_zcu104", x[:4])
    try:
        ys = [dep.run(x, calibrate=True) for dep in deps]
        assert verdicts == [same]
        np.testing.assert_array_equal(ys[1].view(np.uint64), ys[0].view(np.uint64))
        assert _stats(deps[1]) == _stats(deps[0])
    finally:
        acc.close()


@pytest.mark.parametrize("isa", ["portable", "avx2", "avx512", "avx512bw", "avx512vnni"])
def test_every_kernel_variant_gives_the_same_bits(isa, monkeypatch, ran):
    net = _net(5)
    x = _inputs(6, 40)
    acc, deps = _deployments(net, "bfp8_zcu104", x[:16])
    monkeypatch.setattr(netbfpfast.BfpNet, "isa", isa)
    try:
        _same(deps, x, ran)
    finally:
        acc.close()


def test_non_finite_activations_run_the_layer_path():
    net = _net(7)
    x = _inputs(8, 40)
    acc, deps = _deployments(net, "bfp8_zcu104", x[:16])
    try:
        x[37, 0, 6, 6] = np.nan
        outcomes = []
        for dep in deps:
            try:
                outcomes.append(("ok", dep.run(x)))
            except Exception as exc:                               # whatever the layer path does
                outcomes.append((type(exc), str(exc)))
        assert outcomes[0][0] == outcomes[1][0]
        if outcomes[0][0] == "ok":
            np.testing.assert_array_equal(outcomes[0][1], outcomes[1][1])
        else:
            assert outcomes[0][1] == outcomes[1][1]
    finally:
        acc.close()


def test_no_compiled_helper_layer_path(monkeypatch):
    """HLSNN_NATIVE=0: no BfpNet, the layer path runs."""
    from hlsnn import native
    net = _net(11)
    x = _inputs(12, 40)
    monkeypatch.setenv("HLSNN_NATIVE", "0")
    native.forget()
    try:
        acc, deps = _deployments(net, "bfp8_zcu104", x[:8])
        try:
            assert deps[1]._bfpnet is False
            np.testing.assert_array_equal(deps[1].run(x), deps[0].run(x))
        finally:
            acc.close()
    finally:
        monkeypatch.delenv("HLSNN_NATIVE")
        native.forget()


def test_layer_path_when_a_layer_has_several_packs():
    """A grouped conv of more than one pack of groups is left to the layer path (None)."""
    rng = np.random.default_rng(0)
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.3, (64, 1, 3, 3)), b=rng.normal(0, 0.1, 64),
                  relu=True, pads=(1, 1, 1, 1), group=64)
    net = Network(name="n", path="", input="x", input_shape=(None, 64, 8, 8), output="y", layers=[layer])
    x = rng.uniform(0, 1, (40, 64, 8, 8))
    acc, deps = _deployments(net, "bfp8_zcu104", x[:8])
    try:
        packs = deps[1].execs["l"].groups
        y_ref, y = deps[0].run(x), deps[1].run(x)
        np.testing.assert_array_equal(y, y_ref)
        assert (deps[1]._bfpnet is False) == (packs > 1)
    finally:
        acc.close()


MODELS = [(ROOT / "tests" / "data" / "torch" / "tiny" / "mobilenet_relu6_ts17.yaml", "bfp8"),
          (ROOT / "configs" / "models" / "resnet8_digits32.yaml", "bfp8"),
          (ROOT / "configs" / "models" / "resnet8_digits32.yaml", "bfp16")]


@pytest.mark.parametrize("cfg_path,fmt", MODELS, ids=["mobilenet-bfp8", "resnet8-bfp8", "resnet8-bfp16"])
def test_shipped_models_equal_the_layer_path(cfg_path, fmt, ran):
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import _layout, open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    cfg = load_deploy_config(cfg_path)
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    deps, accs_all = [], []
    for fast in (False, True):
        accs = open_accelerators(cfg, "emu", [fmt])
        accs_all.append(accs)
        dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, overflow_ratio=cfg.calibration["overflow_ratio"],
                         rounding=cfg.rounding)
        dep.fast = fast
        dep.calibrate(ds.x_train[:32])
        deps.append(dep)
    try:
        _same(deps, ds.x_test[:70], ran)
        _same(deps, ds.x_test[:5], ran)
    finally:
        for accs in accs_all:
            for a in set(map(id, accs.values())):
                next(v for v in accs.values() if id(v) == a).close()
