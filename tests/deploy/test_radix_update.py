"""E5 in deployment (``calibration.update: e5`` / ``--radix-update e5``): per layer (or per
operation type) the faster of E2 and E4 by the cycle model, the choice equal to the fig. 15
cost model on the recorded times, the outputs equal to source 002's runners
(``formats.radix_update.run_e2`` / ``run_e4``) on the layer's wide results computed here, and the
choice shown in the deploy table, the JSON and the HTML report. Both fixed-point engines run
E4 through their raw modes: ``sparse_cluster`` (int32 wide results) and ``shift_mac``
(``Kernel.gemm_int(raw=True)``, int64 lanes for the shipped 42- and 44-bit accumulators;
signed on the PYNQ-Z2 config, unsigned on the ZCU104 one)."""
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("sklearn")

from hlsnn.cli import main  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import format_result, open_accelerators  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.deploy.quantize.quant import to_fixed  # noqa: E402
from hlsnn.errors import ConfigError, InputError  # noqa: E402
from hlsnn.formats import radix_update  # noqa: E402
from hlsnn.measure.layers import layer_cycles  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "configs" / "models"
MLP, CNN = MODELS / "digits_mlp.yaml", MODELS / "digits_cnn.yaml"
N_CAL = 64
#: the CNN's assignments the fixture calibrates: sparse_cluster, shift_mac (two-hot and dual
#: PoT, signed, shift8_pynq-z2), and two-hot on the unsigned shift8_zcu104 (fc in BFP: it has
#: no ReLU)
CNN_ASSIGNMENTS = ("fixed8", "twohot", "pot", "twohot_u")
#: the same assignments calibrated with an overflow ratio, so that outputs saturate
SATURATING = {f"{a}@sat": a for a in ("fixed8", "twohot", "twohot_u")}
OVERFLOW_RATIO = 0.02


def cnn_config(tmp):
    """digits_cnn's deployment config plus ``twohot_u``: two-hot on the unsigned shift8_zcu104."""
    text = CNN.read_text().replace("model: digits_cnn.onnx", f"model: {MODELS / 'digits_cnn.onnx'}")
    text = text.replace("../accel/", f"{ROOT / 'configs' / 'accel'}/")
    zcu = ROOT / "configs" / "accel" / "shift8_zcu104.yaml"
    text = text.replace("formats:\n", f"formats:\n  twohot_u: {{type: twohot, accel: {zcu}}}\n")
    text = text.replace("assignments:\n", "assignments:\n  twohot_u: {default: twohot_u, layers: {fc: bfp8}}\n")
    path = tmp / "digits_cnn_u.yaml"
    path.write_text(text)
    return load_deploy_config(path)


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """digits_cnn, calibrated with E5 per layer on 64 images in :data:`CNN_ASSIGNMENTS`:
    (deployment and tensors of the calibration run per assignment, x_cal)."""
    cfg = cnn_config(tmp_path_factory.mktemp("cnn"))
    net = load_onnx(cfg.model)
    x_cal = datasets.load("digits", layout="nchw").x_train[:N_CAL]
    accs = open_accelerators(cfg, "emu")
    out = {}
    try:
        for key, name in [(a, a) for a in CNN_ASSIGNMENTS] + list(SATURATING.items()):
            dep = Deployment(net, cfg.assignments[name], cfg.formats, accs, update="e5", rounding=cfg.rounding,
                             overflow_ratio=OVERFLOW_RATIO if key in SATURATING else 0.0)
            _, env = dep.run(x_cal, calibrate=True, keep=True)
            out[key] = (dep, env)
    finally:
        for a in accs.values():
            a.close()
    return out, x_cal


def _wide(ex, xi, bias):
    """The layer's wide results (accumulators + bias, ReLU), images first, in plain numpy
    (shift weights by their integer codes; no sum here reaches ``acc_bits``, so the
    accumulator's saturation never acts)."""
    if hasattr(ex.wq, "code_values"):              # shift_mac: (Z, C*k*k) codes of the GEMM weight
        w = ex.wq.code_values()
        if ex.layer.kind == "conv":
            w = w.reshape(ex.layer.w.shape)
    else:
        w = ex.wq.astype(np.int64)
    if ex.layer.kind == "dense":
        acc = xi.reshape(len(xi), -1) @ w.reshape(w.shape[0], -1).T
        acc = acc + bias
    else:
        k = w.shape[2]
        xp = np.pad(xi, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))      # the CNN's "same" 3x3
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
        acc = np.einsum("bchwij,zcij->bzhw", win, w) + bias[None, :, None, None]
    return np.maximum(acc, 0) if ex.layer.relu else acc


def test_e5_choice_is_the_cost_model_on_the_cycle_model(cnn):
    deps, x_cal = cnn
    dep, _ = deps["fixed8"]
    methods = {}
    for name, ex in dep.execs.items():
        u = ex.stats.update
        cfg = ex.acc.config
        in_hw = ex.in_shape[-2:] if ex.layer.kind == "conv" else None
        r = layer_cycles(ex.layer, cfg, N_CAL, fmt_type="fixed", in_hw=in_hw,
                         weight_sparsity=ex.stats.weight_sparsity, input_density=ex.stats.input_density)
        move = -(-r["m"] * r["n"] * 4 // (cfg.params["stream_bits"] // 8))     # int32 results, one beat a cycle
        assert (u["main_cycles"], u["wide_stream_cycles"], u["batch"]) == (r["cycles"], move, N_CAL)
        a, b = radix_update.sample_run(20)
        assert u["sampled_images"] == sum(i % b < a for i in range(N_CAL))
        assert u["percent"] == pytest.approx(100 * u["sampled_images"] / N_CAL)
        us = r["cycles"] / cfg.clock_mhz
        assert (u["t_prev_us"], u["t_pre_us"]) == pytest.approx((us, us))
        assert u["t_store_us"] == pytest.approx(us + 2 * move / cfg.clock_mhz)
        c = radix_update.cost_model(u["t_prev_us"], u["t_pre_us"], u["t_store_us"], u["percent"])
        assert (u["e2_us"], u["e4_us"]) == (c.e2, c.e4)
        assert u["method"] == ("e4" if c.e4 < c.e2 else "e2") == ex.update_choice
        assert u["e4_available"] and u["by"] == "layer" and u["note"] == ""
        assert ex.update_ran == ["e2", "e4"]             # iteration A: both ran (and agreed)
        methods[name] = u["method"]
    # the shipped CNN on 64 images: conv1 streams the most results per MAC (E2), the others E4
    assert methods == {"conv1": "e2", "conv2": "e4", "fc": "e4"}


@pytest.mark.parametrize("assignment", CNN_ASSIGNMENTS + tuple(SATURATING))
def test_e5_outputs_equal_the_chosen_runner(cnn, assignment):
    """Every fixed-point layer's calibration output, radix and saturation count equal
    ``run_e2`` / ``run_e4`` (the one chosen, and the other: they agree) on the wide results
    computed here from the layer's input, with the runner's DETERMINE clamps and the kernel's
    rounding and output format. Both methods ran on the layer (the runner checks their bits
    against each other: outputs, F_out, saturation count). ``@sat``: calibrated with an
    overflow ratio, so that some outputs saturate."""
    deps, x_cal = cnn
    dep, env = deps[assignment]
    layers = [(n, ex) for n, ex in dep.execs.items() if ex.stats.update]
    assert [n for n, _ in layers] == (["conv1", "conv2"] if "twohot_u" in assignment else ["conv1", "conv2", "fc"])
    for name, ex in layers:
        la = ex.layer
        bits, signed = (ex.bits, ex.signed) if hasattr(ex, "bits") else (8, True)
        assert ex.update_ran == ["e2", "e4"], name
        src = x_cal if la.inputs[0] == dep.net.input else env[la.inputs[0]]
        xi = to_fixed(src, ex.stats.f_in, bits, signed, dep.rounding)
        f_in = ex.stats.f_in + ex.f_w
        b = la.b if getattr(ex, "b_fit", None) is None else ex.b_fit     # shift_fit's corrected bias
        bias = np.rint(np.ldexp(b, f_in)).astype(np.int64)
        wide = _wide(ex, xi, bias)
        kw = dict(shape=wide.shape, axis=0, signed=signed, rounding=ex.p["rounding"], f_min=f_in - 63,
                  f_max=f_in + 63, overflow_ratio=dep.overflow_ratio)
        chosen = {"e2": radix_update.run_e2, "e4": radix_update.run_e4}[ex.update_choice]
        for runner in (chosen, radix_update.run_e2, radix_update.run_e4):
            r = runner(lambda mask: wide, f_in, bits, 20, **kw)
            got = np.rint(np.ldexp(env[la.output], r.f_out)).astype(np.int64)
            assert r.f_out == ex.f_out, name
            np.testing.assert_array_equal(got, r.out, err_msg=name)
            assert int(r.sat.sum()) == ex.stats.sat_count, name
    if assignment in SATURATING:
        assert all(ex.stats.sat_count > 0 for _, ex in layers if ex.layer.kind == "conv")   # fc: none of 640


@pytest.mark.parametrize("assignment", ["twohot", "pot", "twohot_u"])
def test_shift_mac_layers_choose_between_e2_and_e4(cnn, assignment):
    """shift_mac layers run both methods on the calibration batch and take the faster by the
    cycle model; E4's modelled transfer is the raw mode's lane (int64: acc_bits 42 and 44)."""
    from hlsnn.engines.shift_mac.protocol import raw_factor
    from hlsnn.engines.shift_mac.spec import LANE_BITS, raw_bits
    deps, _ = cnn
    dep, _ = deps[assignment]
    methods = {}
    for name, ex in dep.execs.items():
        u = ex.stats.update
        if u is None:
            continue
        p = ex.acc.config.params
        assert u["e4_available"] and u["note"] == "" and ex.update_ran == ["e2", "e4"]
        assert u["wide_bytes"] == raw_bits(p) // 8 == raw_factor(p) * LANE_BITS // 8 == 8
        r = layer_cycles(ex.layer, ex.acc.config, N_CAL, fmt_type=ex.fmt.type,
                         in_hw=ex.in_shape[-2:] if ex.layer.kind == "conv" else None,
                         weight_sparsity=ex.stats.weight_sparsity, input_density=ex.stats.input_density)
        assert u["wide_stream_cycles"] == -(-r["m"] * r["n"] * 8 // (p["stream_bits"] // 8))
        c = radix_update.cost_model(u["t_prev_us"], u["t_pre_us"], u["t_store_us"], u["percent"])
        assert (u["e2_us"], u["e4_us"]) == (c.e2, c.e4)
        assert u["method"] == ("e4" if c.e4 < c.e2 else "e2") == ex.update_choice
        methods[name] = u["method"]
    # 64 images on shift8_pynq-z2: the convolutions recompute faster than they stream 8-byte
    # results out and in, the dense layer (K = 288, 10 outputs) streams faster
    if assignment != "twohot_u":
        assert methods == {"conv1": "e2", "conv2": "e2", "fc": "e4"}


def test_e4_on_k_tiled_shift_layers_equals_one_call():
    """A shift layer run as raw calls over chunks of K (``ShiftExec.k_step``: the kernel's K
    tiling, its raw mode applied to the host's sum) gives E4 and E2 the same bits as one call."""
    cfg = load_deploy_config(CNN)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="nchw")
    accs = open_accelerators(cfg, "emu")
    try:
        got = []
        for step in (None, 9):
            dep = Deployment(net, cfg.assignments["twohot"], cfg.formats, accs, update="e5", rounding=cfg.rounding)
            for ex in dep.execs.values():
                ex.k_step = step
            dep.calibrate(ds.x_train[:32])
            y = dep.run(ds.x_test[:20])
            got.append((y, {n: (ex.f_out, ex.stats.update["method"], ex.update_ran) for n, ex in dep.execs.items()}))
        np.testing.assert_array_equal(got[0][0], got[1][0])
        assert got[0][1] == got[1][1]
        assert all(ran == ["e2", "e4"] for _, _, ran in got[0][1].values())
    finally:
        for a in accs.values():
            a.close()


def test_per_op_type_and_dynamic_batches_run_the_choice():
    """Per operation type the layers of a kind share the choice of their mean times; in
    dynamic mode a batch after the calibration runs only the chosen method."""
    cfg = load_deploy_config(CNN)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="nchw")
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["fixed8"], cfg.formats, accs, update="e5", update_by="op_type",
                         dynamic=True)
        dep.calibrate(ds.x_train[:N_CAL])
        ups = {n: ex.stats.update for n, ex in dep.execs.items()}
        want = radix_update.select_e5({n: u["e2_us"] for n, u in ups.items()}, {n: u["e4_us"] for n, u in ups.items()},
                               groups={n: u["op_type"] for n, u in ups.items()})
        for n, u in ups.items():
            assert (u["method"], u["compared_e2_us"], u["compared_e4_us"]) == tuple(want[n]) and u["by"] == "op_type"
        assert ups["conv1"]["method"] == ups["conv2"]["method"]
        y = dep.run(ds.x_test[:30])
        assert all(ex.update_ran == [ex.update_choice] for ex in dep.execs.values())
        ref = Deployment(net, cfg.assignments["fixed8"], cfg.formats, accs, update="e1", dynamic=True)
        assert y.shape == ref.run(ds.x_test[:30]).shape
    finally:
        for a in accs.values():
            a.close()


def test_default_is_e1_and_records_nothing():
    cfg = load_deploy_config(MLP)
    assert (cfg.calibration["update"], cfg.calibration["update_by"], cfg.calibration["percent"]) == \
        ("e1", "layer", 20.0)
    res = deploy(MLP, "emu", assignments=["fixed8"], test_samples=20)
    assert res["radix_update"]["update"] == "e1" and "radix_update" not in res["assignments"]["fixed8"]
    assert "radix-point update" not in format_result(res)


def test_bad_options_are_named(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(f"name: t\nmodel: {MODELS / 'digits_mlp.onnx'}\ncalibration: {{update: e3}}\n")
    with pytest.raises(ConfigError, match="calibration.update"):
        load_deploy_config(p)
    p.write_text(f"name: t\nmodel: {MODELS / 'digits_mlp.onnx'}\ncalibration: {{percent: 0}}\n")
    with pytest.raises(ConfigError, match="calibration.percent"):
        load_deploy_config(p)
    with pytest.raises(InputError, match="radix update by = 'net'"):
        deploy(MLP, "emu", radix_update="e5", radix_update_by="net")


def test_cli_shows_the_choice_in_the_table_and_the_json(capsys):
    args = ["deploy", str(MLP), "--assignment", "fixed8", "--assignment", "twohot", "--test-samples", "20",
            "--radix-update", "e5"]
    assert main(args + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["radix_update"] == {"update": "e5", "by": "layer", "percent": 20.0}
    for asg in ("fixed8", "twohot"):
        ups = res["assignments"][asg]["radix_update"]
        assert set(ups) == {"fc1", "fc2"}
        for u in ups.values():
            assert u["e4_available"]                     # sparse_cluster and shift_mac both have a raw mode
            assert u["method"] == ("e4" if u["e4_us"] < u["e2_us"] else "e2")
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "radix-point update: E5 per layer" in text
    for asg in ("fixed8", "twohot"):
        for ln, u in res["assignments"][asg]["radix_update"].items():
            line = next(s for s in text.splitlines() if s.split()[:2] == [asg, ln])
            assert f"{u['e2_us']:.2f}" in line and f"{u['e4_us']:.2f}" in line and u["method"].upper() in line


def test_report_shows_the_choice(tmp_path):
    pytest.importorskip("matplotlib")
    from html.parser import HTMLParser

    from hlsnn.evaluation.report import write_report
    cfgp = tmp_path / "mlp.yaml"
    cfgp.write_text(f"name: mlp_e5\nmodel: {MODELS / 'digits_mlp.onnx'}\ndata: digits\n"
                    "calibration: {samples: 64, update: e5}\ntest_samples: 20\n"
                    f"formats: {{fixed8: {{type: fixed, accel: {ROOT / 'configs/accel/sparse8_pynq-z2.yaml'}}}}}\n")
    out = write_report(cfgp, "emu", out=tmp_path / "r.html")
    res = deploy(cfgp, "emu", per_layer=True)

    class Rows(HTMLParser):
        rows, cur, on = [], None, False

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.on = dict(attrs).get("id") == "radix-update-table"
            if tag == "tr" and self.on:
                self.cur = []
                self.rows.append(self.cur)

        def handle_data(self, data):
            if self.on and self.cur is not None and data.strip():
                self.cur.append(data.strip())

        def handle_endtag(self, tag):
            if tag == "table":
                self.on = False
    page = Rows()
    text = out.read_text()
    page.feed(text)
    assert 'id="radix-update"' in text and "e5: E2 or E4 per layer" in text
    head, body = page.rows[0], page.rows[1:]
    assert [r[1] for r in body] == ["fc1", "fc2"]
    for r in body:
        u = res["assignments"]["fixed8"]["radix_update"][r[1]]
        row = dict(zip(head, r))
        assert row["chosen"] == u["method"].upper()
        assert (row["E2 us"], row["E4 us"]) == (f"{u['e2_us']:.2f}", f"{u['e4_us']:.2f}")


def test_e2_e4_disagreement_is_an_error(monkeypatch):
    """The runner checks the two methods' bits against each other when it runs both."""
    from hlsnn.deploy.quantize import update
    from hlsnn.errors import HlsnnError
    real = update._convert
    monkeypatch.setattr(update, "_convert", lambda stored, *a: (real(stored, *a)[0] + 1, real(stored, *a)[1]))
    cfg = load_deploy_config(MLP)
    net = load_onnx(cfg.model)
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["fixed8"], cfg.formats, accs, update="e5")
        with pytest.raises(HlsnnError, match="layer fc1: E2 and E4 disagree"):
            dep.calibrate(datasets.load("digits", layout="flat").x_train[:16])
    finally:
        for a in accs.values():
            a.close()


@pytest.mark.csim
@pytest.mark.parametrize("assignment", ["fixed8", "twohot"])
def test_e5_on_csim_equals_emu(assignment):
    """E4's raw calls (wide results and their histogram in one call) on the C-simulated
    kernel: the same choices and the same bits as on the emulator (sparse_cluster, and
    shift_mac's int64 raw lanes); both methods ran on every layer."""
    cfg = load_deploy_config(MLP)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="flat")
    fmt = {assignment: cfg.formats[assignment]}
    outs, ups = [], []
    for target in ("emu", "csim"):
        accs = open_accelerators(type(cfg)(**{**cfg.__dict__, "formats": fmt}), target)
        try:
            dep = Deployment(net, cfg.assignments[assignment], fmt, accs, update="e5")
            dep.calibrate(ds.x_train[:32])
            outs.append(dep.run(ds.x_test[:24]))
            ups.append({n: (ex.stats.update["method"], ex.f_out, ex.update_ran) for n, ex in dep.execs.items()})
        finally:
            for a in accs.values():
                a.close()
    np.testing.assert_array_equal(outs[0], outs[1])
    assert ups[0] == ups[1]
    assert all(ran == ["e2", "e4"] for _, _, ran in ups[0].values())


def test_choose_leaves_layers_without_e4_out_of_the_type_means():
    """A conv layer on an engine without a raw output mode (``WIDE_OUT = False``; no shipped
    fixed-point engine lacks one now) takes E2 and does not enter the conv mean."""
    from types import SimpleNamespace as NS

    from hlsnn.deploy.quantize import update
    from hlsnn.deploy.run.executors import LayerStats

    def ex(kind, wide, e2, e4, engine="sparse_cluster"):
        return NS(layer=NS(kind=kind), WIDE_OUT=wide, update_times={"e2_us": e2, "e4_us": e4},
                  stats=LayerStats(), acc=NS(config=NS(engine=engine)), update_choice=None)
    execs = {"a": ex("conv", True, 10.0, 9.0), "b": ex("conv", True, 5.0, 5.5),
             "c": ex("conv", False, 1.0, 100.0, "no_raw"), "d": ex("dense", True, 2.0, 3.0)}
    update.choose(execs, "op_type")
    got = {n: (e.update_choice, e.stats.update["compared_e2_us"], e.stats.update["compared_e4_us"])
           for n, e in execs.items()}
    assert got == {"a": ("e4", 7.5, 7.25), "b": ("e4", 7.5, 7.25), "c": ("e2", 1.0, 100.0), "d": ("e2", 2.0, 3.0)}
    assert execs["c"].stats.update["by"] == "layer"
    assert execs["c"].stats.update["note"] == "E4 not available: no_raw streams no wide results"
