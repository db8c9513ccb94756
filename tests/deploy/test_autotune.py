"""``hlsnn autotune`` (issue 78) and the kernel-shaped deploy-time pruning it searches over
(``prune_shape: kernel``, :mod:`hlsnn.deploy.quantize.kprune`).

References: the pruner of ``hlsnn.train`` (torch) for the mask's shape, numpy's least squares
for the refit, the step schedule's own count of the pruned weights for the modelled time, the
layer-by-layer emulator and the C-simulation for the bits of a mixed assignment in one start."""
import shutil

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.deploy.quantize import kprune  # noqa: E402
from hlsnn.evaluation import autotune  # noqa: E402
from hlsnn.errors import HlsnnError  # noqa: E402

from conftest import ROOT  # noqa: E402

SIZED = "sparse8net_pynq-z2"


def _cnn(tmp, extra_assign=""):
    """digits_cnn's config beside a copy of its model, with the PYNQ-Z2's sized fixed format (its
    comments kept: the writer must keep them)."""
    shutil.copy(ROOT / "configs" / "models" / "digits_cnn.onnx", tmp)
    text = (ROOT / "configs" / "models" / "digits_cnn.yaml").read_text().replace("../accel/", f"{ROOT}/configs/accel/")
    text = text.replace("formats:\n", f"formats:\n  fixed8_z2: {{type: fixed, accel: {SIZED}}}\n")
    text = text.replace("assignments:\n", "assignments:\n  fixed8_z2: {default: fixed8_z2}\n" + extra_assign)
    path = tmp / "digits_cnn.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("shape,unfold", [((32, 16, 3, 3), False), ((16, 3, 3, 3), True), ((10, 64), False)])
@pytest.mark.parametrize("sparsity", [0.25, 0.5, 0.75, 0.875])
def test_the_mask_is_the_trainers_kernel_mask(shape, unfold, sparsity):
    torch = pytest.importorskip("torch")
    from hlsnn.train.prune import kernel_mask
    w = np.random.default_rng(3).normal(size=shape)
    ref = kernel_mask(torch.tensor(w), sparsity, 16, 16, 2, unfold=unfold).numpy()
    np.testing.assert_array_equal(kprune.mask(w, sparsity, 16, 16, 2, unfold=unfold), ref)


@pytest.mark.parametrize("sparsity", [0.5, 0.75])
def test_the_mask_zeroes_whole_columns_of_a_block_and_keeps_a_multiple_of_sub_in_every_bank(sparsity):
    w = np.random.default_rng(1).normal(size=(32, 32, 3, 3))
    m = kprune.mask(w, sparsity, 16, 16, 2)
    for z0 in (0, 16):
        blk = m[z0:z0 + 16]
        assert (blk == blk[:1]).all()                          # one column pattern per block of lanes
        for b in range(16):                                    # channels b and b + 16 share bank b
            kept = int(blk[0, [b, b + 16]].sum())
            assert kept % 2 == 0 and kept == min(18, max(2, int(round((1 - sparsity) * 18)) // 2 * 2))


def test_the_refit_is_least_squares_on_the_kept_columns():
    """A dense layer: the kept weights and the bias are numpy's least squares of the float outputs
    on the kept inputs (the ridge is negligible here), and the output error is below the mask's alone."""
    from types import SimpleNamespace
    rng = np.random.default_rng(0)
    w, b = rng.normal(size=(16, 64)), rng.normal(size=16)
    x = rng.normal(size=(400, 64)) + 0.3 * rng.normal(size=(400, 1))        # correlated inputs
    layer = SimpleNamespace(w=w, b=b, kind="dense")
    nw, nb = kprune.refit_layer(layer, x, x, 0.5, (16, 16, 2), False)
    kept = np.flatnonzero(nw[0])
    assert len(kept) == 32 and (nw[:, np.setdiff1d(np.arange(64), kept)] == 0).all()    # 2 of 4 a bank
    a = np.concatenate([x[:, kept], np.ones((400, 1))], axis=1)
    ref = np.linalg.lstsq(a, x @ w.T + b, rcond=None)[0]
    np.testing.assert_allclose(nw[:, kept], ref[:-1].T, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(nb, ref[-1], rtol=1e-3, atol=1e-3)
    masked = w * (nw != 0)
    assert np.linalg.norm(x @ nw.T + nb - (x @ w.T + b)) < np.linalg.norm(x @ masked.T + b - (x @ w.T + b))


def test_a_depthwise_refit_keeps_each_channels_own_positions_by_least_squares():
    """A depthwise 3x3 conv of 32 channels at 50%: every channel keeps :func:`kprune.keep` positions
    of its own (the executor's mask keeps exactly them), and its kept weights and bias are numpy's
    least squares of the float output on its own input channel."""
    from types import SimpleNamespace
    from hlsnn.engines.convgeom import ConvGeom
    rng = np.random.default_rng(2)
    c = 32
    w, b = rng.normal(size=(c, 1, 3, 3)), rng.normal(size=c)
    x = rng.normal(size=(6, c, 8, 8)) + 0.5 * rng.normal(size=(6, c, 8, 1))    # correlated along a row
    g = ConvGeom(3, 3, 1, 1, (1, 1, 1, 1))
    layer = SimpleNamespace(w=w, b=b, kind="conv", geom=g, group=c)
    assert kprune._depthwise(layer)
    nw, nb = kprune.refit_depthwise(layer, x, x, 0.5, (16, 16, 2))
    k = kprune.keep(9, 0.5, 2)
    kept = nw.reshape(c, 9) != 0
    assert (kept.sum(1) == k).all() and len({tuple(r) for r in kept}) > 1      # own positions, not one pattern
    np.testing.assert_array_equal(kprune.mask(nw, 0.5, 16, 16, 2, depthwise=True) != 0, nw != 0)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.stack([xp[:, :, i:i + 8, j:j + 8] for i in range(3) for j in range(3)], -1)    # (N, C, 8, 8, 9)
    for ch in (0, 21):
        p_ch = patches[:, ch].reshape(-1, 9)
        cols = np.flatnonzero(nw[ch, 0].reshape(9))
        a = np.concatenate([p_ch[:, cols], np.ones((len(p_ch), 1))], axis=1)
        ref = np.linalg.lstsq(a, p_ch @ w[ch, 0].reshape(9) + b[ch], rcond=None)[0]
        np.testing.assert_allclose(nw[ch, 0].reshape(9)[cols], ref[:-1], rtol=1e-3, atol=1e-3)
        assert nb[ch] == pytest.approx(ref[-1], rel=1e-3, abs=1e-3)


def test_prune_shape_is_checked(tmp_path):
    from hlsnn.deploy.config import load_deploy_config
    cfg = _cnn(tmp_path)
    bad = cfg.read_text().replace("formats:\n", "formats:\n  f2: {type: fixed, accel: %s, prune_shape: kernel}\n" % SIZED)
    cfg.write_text(bad)
    with pytest.raises(HlsnnError, match="prune_shape.*only format type 'sparse' prunes"):
        load_deploy_config(cfg)


def test_the_kernel_prune_needs_the_sized_kernel(tmp_path):
    cfg = _cnn(tmp_path)
    cfg.write_text(cfg.read_text().replace(
        "formats:\n", "formats:\n  k: {type: sparse, accel: sparse8_pynq-z2, prune: 0.5, prune_shape: kernel}\n")
        .replace("assignments:\n", "assignments:\n  k: {default: k}\n"))
    from hlsnn.network.build import compile_model
    with pytest.raises(HlsnnError, match="prune_shape: kernel needs the board-sized"):
        compile_model(cfg, "k", tmp_path / "k.hlsnn", check_samples=0, calibration_samples=16)


def test_validation_split_is_beyond_calibration_and_never_the_test_split():
    v = autotune.split(1437, 128, 300)
    assert len(v) == 300 and v.min() >= 128 and v.max() < 1437 and len(set(v)) == 300
    np.testing.assert_array_equal(v, autotune.split(1437, 128, 300))
    with pytest.raises(HlsnnError, match="validation split needs images beyond"):
        autotune.split(128, 128)
    # a model trained without its last 400 training images (validation: 400): those, and only those
    np.testing.assert_array_equal(autotune.split(1437, 128, held=400), np.arange(1037, 1437))
    v = autotune.split(1437, 128, 100, held=400)
    assert len(v) == 100 and v.min() >= 1037
    with pytest.raises(HlsnnError, match="validation 1400 held-out images and calibration.samples 128 overlap"):
        autotune.split(1437, 128, held=1400)


def test_the_bound_is_one_standard_error_on_held_out_images_and_two_on_training_images(tmp_path):
    from types import SimpleNamespace
    float_ok = np.array([True] * 380 + [False] * 20)
    ok = float_ok.copy()
    ok[:6] = False                                     # 6 lost
    ok[390:392] = True                                 # 2 gained
    for held, z in ((400, 1.0), (0, 2.0)):
        r = autotune.Search.drops(SimpleNamespace(float_ok=float_ok, held=held), ok)
        assert (r["lost"], r["gained"]) == (6, 2) and r["drop"] == pytest.approx(1.0)
        assert r["bound"] == pytest.approx(1.0 + z * 100 * np.sqrt(8) / 400)
    from hlsnn.deploy.config import load_deploy_config
    cfg = _cnn(tmp_path)
    cfg.write_text(cfg.read_text() + "validation: 300\n")
    assert load_deploy_config(cfg).validation == 300
    cfg.write_text(cfg.read_text().replace("validation: 300", "validation: -3"))
    with pytest.raises(HlsnnError, match="validation"):
        load_deploy_config(cfg)


def test_pareto_keeps_only_undominated_points():
    rs = [dict(cost=c, accuracy=a) for c, a in [(10, 0.9), (8, 0.95), (12, 0.99), (8, 0.9), (5, 0.5), (11, 0.99)]]
    assert [(r["cost"], r["accuracy"]) for r in autotune.pareto(rs)] == [(5, 0.5), (8, 0.95), (11, 0.99)]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autotune")
    cfg = _cnn(tmp)
    before = cfg.read_text()
    res = autotune.run(cfg, board="pynq-z2", max_drop=2.0, levels=(0.5, 0.75), val_images=400, name="tuned")
    return cfg, before, res


def test_search_stays_within_the_drop_and_is_no_slower_than_the_base(tuned):
    cfg, _, res = tuned
    c = res["chosen"]
    import json
    assert json.loads(json.dumps(res))["chosen"]["within"] is True          # --json prints it
    assert c["within"] and c["confirm"]["drop"] <= c["confirm"]["bound"] <= 2.0 + 1e-9
    assert c["cost"] <= res["base_result"]["cost"]
    assert c["starts"] == 1                                   # one network kernel start
    assert c["energy_uj"] == pytest.approx(1.65 * c["end_to_end_us"])    # --objective energy: the PYNQ-Z2's 1.65 W
    assert res["validation_images"] == 400 and res["confirmation_images"] == 200 and res["base"] == "fixed8_z2"
    # the front: cost rises, accuracy rises
    pf = res["pareto"]
    assert all(a["cost"] <= b["cost"] and a["accuracy"] < b["accuracy"] for a, b in zip(pf, pf[1:]))
    # the choice: the path up to its first state over the drop on the confirmation images
    path = res["path"]
    k = next((i for i, r in enumerate(path) if r["confirm"]["bound"] > 2.0), len(path))
    assert path[0]["levels"] == [0] * len(res["layers"]) and c["levels"] == path[max(k - 1, 0)]["levels"]
    # the bound: the paired flips against float, two standard errors over the drop, on each half
    for r in pf + path:
        for part, n in ((r, 200), (r["confirm"], 200)):
            assert part["drop"] == pytest.approx(100 * (part["lost"] - part["gained"]) / n)
            assert part["bound"] == pytest.approx(part["drop"] + 200 * np.sqrt(part["lost"] + part["gained"]) / n)
        assert r["accuracy"] * 400 == pytest.approx(res["float_val"] * 400 - (r["lost"] + r["confirm"]["lost"])
                                                    + (r["gained"] + r["confirm"]["gained"]))
    # the config's single-format assignments on the PYNQ-Z2 were measured too (bfp8 runs on the ZCU104)
    assert {r["name"] for r in res["baselines"]} == {"bfp16", "twohot", "pot", "fixed8", "sparse50", "sparse80"}


def test_the_halves_are_disjoint_seeded_and_the_share_asked():
    conf = autotune.halves(400)
    assert conf.dtype == bool and conf.sum() == 200
    np.testing.assert_array_equal(conf, autotune.halves(400))
    assert autotune.halves(401, 0.25).sum() == 100
    with pytest.raises(HlsnnError, match="cannot be split into search and confirmation"):
        autotune.halves(1)


class _Fake:
    """A search over three layers with stubbed measurements: layer ``a`` saves 10 or 20 us of 100,
    ``b`` 0.5 or 0.6 (under :data:`autotune.MIN_SAVING` of the base's cost), ``c`` 5 or 8; every move
    is free on the search images, and the confirmation images lose ``fails[i]`` images at path
    state ``i``."""
    layers, levels, base, float_val = ["a", "b", "c"], (0.5, 0.75), "f", 1.0
    conf = np.array([False] * 100 + [True] * 100)

    def __init__(self, confirm_lost):
        self.confirm_lost, self.seen, self.log = confirm_lost, [], lambda m: None

    def evaluate(self, lv):
        lv = tuple(lv)
        self.seen.append(lv)
        cost = 100.0 - (0, 10, 20)[lv[0]] - (0, 0.5, 0.6)[lv[1]] - (0, 5, 8)[lv[2]]
        lost = self.confirm_lost.get(lv, 0)
        return dict(levels=lv, cost=cost, end_to_end_us=cost, accuracy=1.0, drop=0.0, bound=0.0, lost=0, gained=0,
                    confirm=dict(drop=lost, bound=2.0 * lost, lost=lost, gained=0))


def test_the_descent_skips_tiny_savings_and_confirms_its_path_in_order():
    # the path: base, a 50%, a 75%, c 50%, c 75% (ratio ties: the most time first); b never moves
    s = _Fake({(2, 0, 1): 1, (2, 0, 2): 0})         # c 50% over the drop of 1.0 on confirmation, c 75% not
    chosen, _, path = autotune.search(s, 1.0)
    assert [r["levels"] for r in path] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (2, 0, 1), (2, 0, 2)]
    assert all(a["cost"] - b["cost"] >= autotune.MIN_SAVING * 100.0 for a, b in zip(path, path[1:]))
    assert chosen["levels"] == (2, 0, 0)               # fixed sequence: stops at the first failure
    s = _Fake({(0, 0, 0): 1})                           # the base itself over the drop: nothing confirmed
    chosen, _, _ = autotune.search(s, 1.0)
    assert chosen["levels"] == (0, 0, 0) and not autotune.within(chosen, 1.0)


def test_pruning_a_layer_in_the_kernels_shape_costs_fewer_steps(tuned):
    """The modelled time falls with the sparsity (each uniform level below the base), since the
    sized kernel skips every column no lane of a block needs."""
    _, _, res = tuned
    costs = [res["base_result"]["cost"]] + [u["cost"] for u in res["uniform"]]
    assert all(a > b for a, b in zip(costs, costs[1:]))


def test_the_written_assignment_keeps_the_comments_and_compiles_in_one_start(tuned, tmp_path):
    cfg, before, res = tuned
    after = cfg.read_text()
    assert after.startswith(before.split("formats:\n")[0])             # the header comments as they were
    assert [ln for ln in before.splitlines() if ln.strip().startswith("#")] == \
        [ln for ln in after.splitlines() if ln.strip().startswith("#") and "hlsnn autotune" not in ln]
    from hlsnn.deploy.config import load_deploy_config
    c = load_deploy_config(cfg)
    a = c.assignments["tuned"]
    assert a.default == "fixed8_z2" and a.layers == res["chosen"]["layers"]
    for f in a.formats() - {"fixed8_z2"}:
        assert c.formats[f].prune_shape == "kernel" and c.formats[f].type == "sparse"
    with pytest.raises(HlsnnError, match="already has an assignment"):
        autotune.write_assignment(cfg, "tuned", "fixed8_z2", {}, None)
    autotune.Search(cfg, board="pynq-z2", levels=(0.5, 0.75), val_images=20).close()   # a second search reads them
    cfg2 = _cnn(tmp_path)                                # a format of a level's name that is not the level
    cfg2.write_text(cfg2.read_text().replace("formats:\n", "formats:\n  fixed8_z2_k500: {type: sparse, accel: %s, "
                                             "prune: 0.4, prune_shape: kernel, radix: lse}\n" % SIZED))
    with pytest.raises(HlsnnError, match="'fixed8_z2_k500' exists and is not fixed8_z2 pruned to 0.5"):
        autotune.Search(cfg2, board="pynq-z2", levels=(0.5, 0.75), val_images=20)
    from hlsnn.network.build import compile_model
    from hlsnn.network.latency import model
    out = tmp_path / "tuned.hlsnn"
    compile_model(cfg, "tuned", out, check_samples=2)
    perf = model(out)
    assert perf["path"] == "network" and perf["kernel_starts"] == 1
    assert abs(perf["end_to_end_us"] - res["chosen"]["end_to_end_us"]) < 1e-6


def test_a_mixed_assignment_in_one_start_on_the_emulator_equals_the_layer_path(tmp_path):
    """A hand-mixed assignment (two layers kernel-pruned at different levels, one dense): the compiled
    network's one program gives the layer-by-layer emulator's bits."""
    cfg = _cnn(tmp_path, "  mix: {default: fixed8_z2, layers: {conv1: k50, conv2: k75}}\n")
    cfg.write_text(cfg.read_text().replace("formats:\n", "formats:\n"
                   f"  k50: {{type: sparse, accel: {SIZED}, prune: 0.5, prune_shape: kernel, radix: lse}}\n"
                   f"  k75: {{type: sparse, accel: {SIZED}, prune: 0.75, prune_shape: kernel, radix: lse}}\n"))
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    out = tmp_path / "mix.hlsnn"
    compile_model(cfg, "mix", out, check_samples=4, calibration_samples=64)
    x = datasets.load("digits", layout="nchw").x_test[:12]
    net = hlsnn.load(out, "emu", network=False)
    np.testing.assert_array_equal(hlsnn.load(out, "emu")(x), net(x))


@pytest.mark.slow
@pytest.mark.csim
def test_a_mixed_assignment_runs_in_one_kernel_start_bit_exact_on_csim_and_the_sim_board(tmp_path):
    """The layer-by-layer emulator's bits from the sized kernel's C-simulation in one start, its loop
    counters the cycle model's iterations (:func:`check_sized`), and the simulated board's bits."""
    cfg = _cnn(tmp_path, "  mix: {default: fixed8_z2, layers: {conv1: k50, conv2: k75}}\n")
    cfg.write_text(cfg.read_text().replace("formats:\n", "formats:\n"
                   f"  k50: {{type: sparse, accel: {SIZED}, prune: 0.5, prune_shape: kernel, radix: lse}}\n"
                   f"  k75: {{type: sparse, accel: {SIZED}, prune: 0.75, prune_shape: kernel, radix: lse}}\n"))
    from hlsnn.deploy import datasets
    from hlsnn.network.build import compile_model
    out = tmp_path / "mix.hlsnn"
    compile_model(cfg, "mix", out, check_samples=2, calibration_samples=64)
    check_sized(out, datasets.load("digits", layout="nchw").x_test[:3])


def check_sized(path, x):
    """The compiled model ``path`` on the sized sparse kernel: csim in one start gives the
    layer-by-layer emulator's bits, its loop counters (an op's instances summed) are
    ``sparse_cluster``'s network perf model's iterations, and the simulated board gives the same bits
    in one start."""
    from hlsnn.engines.sparse_cluster.network import perf as sparseperf
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref(x)
    with hlsnn.load(path, "csim", network=True) as net:
        got = net(x)
        assert net.network.engine == "sparse_cluster" and net.last_kernel_starts == 1
        k = net._kernel
        counted = {}
        for m, (it, _) in k.counters.items():
            counted[m.split(".")[0]] = counted.get(m.split(".")[0], 0) + it
        assert counted == {m: len(x) * v for m, v in sparseperf.iterations(net.network, k.tables).items()}
    np.testing.assert_array_equal(got, want)
    with hlsnn.load(path, "sim", network=True) as sim:
        np.testing.assert_array_equal(sim(x), got)
        assert sim.last_kernel_starts == 1

def test_the_table_and_the_plot(tuned, tmp_path):
    pytest.importorskip("matplotlib")
    cfg, _, res = tuned
    text = autotune.format_result(res)
    assert "Pareto front" in text and f"chosen (tuned): {res['chosen']['cost']:.1f} us" in text
    assert len([ln for ln in text.splitlines() if ln.startswith("  ") and "%" in ln]) >= len(res["pareto"])
    out = autotune.plot(res, tmp_path / "front.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,says", [
    (["--max-drop", "-1"], "--max-drop -1.0: accuracy points, 0..100"),
    (["--levels", "0.5,x"], "--levels '0.5,x': sparsities between 0 and 1"),
    (["--levels", "0.5,1.0"], "sparsities between 0 and 1 (exclusive)"),
    (["--board", "kv260"], "no fixed format(s) on a board-sized sparse_cluster kernel (net_shape: board) of kv260"),
    (["--base", "fixed8"], "--base 'fixed8': not a fixed or unpruned sparse format"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, args, says):
    from hlsnn.cli import main
    cfg = _cnn(tmp_path)
    before = cfg.read_text()
    assert main(["autotune", str(cfg), "-q"] + args) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert cfg.read_text() == before


def test_another_engines_faster_single_format_is_chosen_over_the_mix(tmp_path, monkeypatch):
    """The engine per model: a single format of the board that is faster within the drop than every
    evaluated mix is the choice, written as ``{default: F}`` (its measurement stubbed here)."""
    cfg = _cnn(tmp_path)
    fake = dict(name="twohot", default="twohot", accuracy=1.0, drop=0.0, bound=0.0, lost=0, gained=0,
                confirm=dict(drop=0.0, bound=0.0, lost=0, gained=0), end_to_end_us=1.0, energy_uj=1.65, starts=1,
                cost=1.0)
    monkeypatch.setattr(autotune, "baselines", lambda s: [fake])
    res = autotune.run(cfg, board="pynq-z2", max_drop=1.0, levels=(0.75,), val_images=100, name="fast")
    assert res["chosen"]["single"] == "twohot" and res["chosen"]["layers"] == {} and res["speedup"] == 1.0
    from hlsnn.deploy.config import load_deploy_config
    a = load_deploy_config(cfg).assignments["fast"]
    assert a.default == "twohot" and a.layers == {}
    assert "another engine's single format is faster" in autotune.format_result(res)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("model", ["resnet8_digits32_holdout", "dscnn_digits32"])
def test_the_shipped_autotune_choice_runs_in_one_start_bit_exact(tmp_path, model):
    """The assignment ``hlsnn autotune`` wrote into a shipped config (docs/tutorials/autotune.md) gives
    some layer a format other than its default (a mix, or every layer at one level), and compiled it
    runs in one start of the sized kernel on csim and the simulated board with the layer-by-layer
    emulator's bits (:func:`check_sized`)."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.network.build import compile_model
    cfg = ROOT / "configs" / "models" / f"{model}.yaml"
    a = load_deploy_config(cfg).assignments["autotune"]
    assert a.layers and any(f != a.default for f in a.layers.values())
    out = tmp_path / f"{model}.hlsnn"
    compile_model(cfg, "autotune", out, check_samples=2)
    check_sized(out, datasets.load("digits32").x_test[:2])


def test_a_single_format_whose_kernel_does_not_fit_is_no_baseline(tmp_path, monkeypatch):
    from types import SimpleNamespace
    from hlsnn.deploy.config import load_deploy_config
    cfg = load_deploy_config(_cnn(tmp_path))
    said = []
    s = SimpleNamespace(board="pynq-z2", cfg=cfg, base="fixed8_z2", log=said.append)
    monkeypatch.setattr(autotune, "single", lambda s, name: dict(name=name, fits=name != "twohot"))
    names = {r["name"] for r in autotune.baselines(s)}
    assert "twohot" not in names and {"fixed8", "pot"} <= names
    assert any("twohot" in line and "does not fit" in line for line in said)


def test_a_uniform_level_faster_within_the_drop_is_chosen_over_the_mix(tmp_path, monkeypatch):
    """Every layer at one level is a single format of the base's kernel: when it is within the drop
    on the confirmation images (stubbed: everything is) and faster than the confirmed mix, it is the
    choice, written as every layer at that level (one kernel start, as any mix)."""
    cfg = _cnn(tmp_path)
    monkeypatch.setattr(autotune, "baselines", lambda s: [])
    monkeypatch.setattr(autotune, "within", lambda r, max_drop: True)
    res = autotune.run(cfg, board="pynq-z2", max_drop=1.0, levels=(0.75,), val_images=100, name="uni")
    c = res["chosen"]
    assert c["uniform"] == "fixed8_z2_k750" and c["levels"] == [1, 1, 1]
    assert c["cost"] == min(u["cost"] for u in res["uniform"]) < res["base_result"]["cost"]
    from hlsnn.deploy.config import load_deploy_config
    a = load_deploy_config(cfg).assignments["uni"]
    assert a.default == "fixed8_z2" and set(a.layers.values()) == {"fixed8_z2_k750"} and len(a.layers) == 3
    assert "a uniform level is faster" in autotune.format_result(res)
