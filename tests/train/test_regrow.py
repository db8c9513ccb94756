"""Prune-and-regrow (hlsnn.train.regrow), frozen masks (hlsnn.train.rewind) and selection on the
validation images (hlsnn.train.select): a worked drop/grow example, the exact count of zeros of
every balanced unit kept through training with regrowth (and the masks really moving, then
frozen after ``stop``), frozen masks that never move while a magnitude pruner's would, deployed
== eval bit for bit after regrowth, and a choice that reads no test figure."""
import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import BalancedPruner, fold_batchnorm, hold_zeros, prepare, quantized_layers  # noqa: E402
from hlsnn.train.regrow import RegrowPruner, cosine_fraction, regrow_masks  # noqa: E402
from hlsnn.train.rewind import FrozenMasks  # noqa: E402
from hlsnn.train.select import best_on_validation, selection_report  # noqa: E402

from .test_residual_depthwise import _cfg, _compare, _data, _net  # noqa: E402

torch.set_num_threads(1)


def test_regrow_worked_example():
    # one row keeps 3 of 6; fraction 1/3 drops round(1) = 1: the smallest kept |w| (index 2, 0.5
    # against 5 and -3) goes, the largest |grad| outside the remaining ones (index 1, 9) comes
    w = torch.tensor([[5.0, 0.0, 0.5, 0.0, -3.0, 0.0], [0.0, 2.0, 0.0, -1.0, 0.0, 4.0]])
    g = torch.tensor([[0.0, -9.0, 8.0, 2.0, 0.0, 7.0], [6.0, 0.0, 1.0, 0.0, 0.0, 0.0]])
    m = (w != 0).float()
    new, grown = regrow_masks(w, g, m, 1 / 3)
    assert new.tolist() == [[1, 1, 0, 0, 1, 0], [1, 1, 0, 0, 0, 1]]   # row 2: drops -1 (index 3), grows 6 (index 0)
    assert grown.tolist() == [[False, True, False, False, False, False], [True, False, False, False, False, False]]
    # a dropped weight whose gradient is the largest comes straight back (kept, not new)
    g2 = torch.tensor([[0.0, 1.0, 9.0, 2.0, 0.0, 7.0], [0.0] * 6])
    new2, grown2 = regrow_masks(w, g2, m, 1 / 3)
    assert torch.equal(new2[0], m[0]) and not grown2[0].any()
    # the whole tensor as one unit (a depthwise layer): 6 kept, round(0.4 * 6) = 2 drop (0.5 and
    # -1); the two largest gradients outside the other four are 9 at (0, 1) and 8 at (0, 2), the
    # dropped 0.5 (kept again), so only (0, 1) is new
    new3, grown3 = regrow_masks(w, g, m, 0.4, per_layer=True)
    assert int(new3.sum()) == 6 and new3[1, 3] == 0 and new3[0, 1] == 1 and new3[0, 2] == 1
    assert grown3.nonzero().tolist() == [[0, 1]]


def test_cosine_fraction():
    assert cosine_fraction(10, 0.3, 10, 110) == pytest.approx(0.3)
    assert cosine_fraction(60, 0.3, 10, 110) == pytest.approx(0.15)
    assert cosine_fraction(110, 0.3, 10, 110) == 0.0 and cosine_fraction(5, 0.3, 10, 110) == 0.0


def _train(m, steps, step, lr=1e-2, seed=0):
    x = torch.tensor(_data(), dtype=torch.float32)
    y = torch.tensor(np.arange(48) % 10)
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    m.train()
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        step()
        seen.append({n: (mod.weight == 0).clone() for n, mod in m.named_modules()
                     if isinstance(mod, (nn.Conv2d, nn.Linear))})
    return seen


@pytest.mark.parametrize("target", [0.75, 0.9])
def test_regrowth_keeps_every_units_zero_count(target):
    m = _net(3)
    pr = RegrowPruner(m, target, 0, 4, stop=24, every_regrow=2, alpha=0.5)
    masks = []

    def step():
        pr.step()
        masks.append({n: pr.masks[mod].clone() for n, mod in pr.named})
        for n, mod in pr.named:                           # every pruned weight is zero
            assert torch.all(mod.weight[pr.masks[mod] == 0] == 0), n

    _train(m, 30, step)
    for s, mk in enumerate(masks[4:], start=4):           # from the end of the schedule on
        for n, mod in pr.named:
            dw = isinstance(mod, nn.Conv2d) and mod.groups == mod.in_channels > 1
            z = (mk[n] == 0).reshape(1 if dw else mod.weight.shape[0], -1)
            want = math.floor(target * z.shape[1] + 0.5)  # balanced_mask's count, halves up
            assert z.sum(1).tolist() == [want] * z.shape[0], (s, n)
    assert pr.updates == 9 and pr.regrown > 0            # steps 6, 8, ..., 22 (none from stop = 24 on)
    moved = [s for s in range(5, 30) if any(not torch.equal(masks[s][n], masks[s - 1][n]) for n, _ in pr.named)]
    assert moved and max(moved) <= 22                     # the masks move at updates, then stay frozen
    assert all((s - 4) % 2 == 0 for s in moved)           # and only at the updates


def test_frozen_masks_never_move_where_magnitude_would():
    m = _net(4)
    pr = BalancedPruner(m, 0.75, 0, 3)
    _train(m, 4, pr.step)
    before = {n: (mod.weight == 0).clone() for n, mod in pr.named}
    m2 = copy.deepcopy(m)
    fz = FrozenMasks(pr)
    seen = _train(m, 12, fz.step, lr=5e-2)
    for zeros in seen:
        for n, _ in pr.named:
            assert torch.equal(zeros[n], before[n]), n
    # the same training with the magnitude pruner's step moves some mask (so the check can fail)
    pr2 = BalancedPruner(m2, 0.75, 0, 3)
    pr2.n = 4
    seen2 = _train(m2, 12, pr2.step, lr=5e-2)
    assert any(not torch.equal(seen2[-1][n], before[n]) for n, _ in pr2.named)
    with pytest.raises(ValueError, match="no masks"):
        FrozenMasks(BalancedPruner(_net(4), 0.5, 0, 3))


def test_regrown_model_deploys_bit_exact(tmp_path):
    m = _net(5)
    pr = RegrowPruner(m, 0.75, 0, 3, stop=12, every_regrow=2, alpha=0.5)
    _train(m, 14, pr.step)
    assert pr.regrown > 0
    zeros = {n: (mod.weight == 0).clone() for n, mod in pr.named}
    cfg = _cfg(tmp_path, "sparse", "sparse8_pynq-z2", "static")
    q = hold_zeros(prepare(fold_batchnorm(m.eval()), cfg))
    for n, layer in quantized_layers(q):
        assert torch.all(layer.quantized_weight()[zeros[n]] == 0), n
    mine, theirs = _compare(q, cfg, _data(), "static")
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


def test_selection_reads_only_validation():
    runs = [{"tag": "s0", "val": {"deployed_acc": 0.90, "float_acc": 0.95}, "deployed_acc": 0.99, "float_acc": 0.97},
            {"tag": "s1", "val": {"deployed_acc": 0.93, "float_acc": 0.94}, "deployed_acc": 0.80, "float_acc": 0.98},
            {"tag": "s2", "val": {"deployed_acc": 0.93, "float_acc": 0.96}, "deployed_acc": 0.99, "float_acc": 0.97}]
    assert best_on_validation(runs)["tag"] == "s1"       # highest val; the tie with s2 to the earlier
    rep = selection_report(runs)
    assert rep["chosen"] == "s1" and rep["test"] == 80.0 and rep["test_gap"] == -18.0 and rep["val_gap"] == -1.0
    with pytest.raises(ValueError, match="--val"):
        best_on_validation([{"tag": "x", "deployed_acc": 0.9}])


def test_selection_tie_to_the_lower_training_figure():
    def run(tag, val, loss, test):
        return {"tag": tag, "val": {"deployed_acc": val, "float_acc": 0.95}, "train": {"pruned_float_loss": loss},
                "deployed_acc": test, "float_acc": 0.97}
    runs = [run("p0", 0.93, 0.20, 0.99), run("p100", 0.95, 0.19, 0.50), run("p200", 0.95, 0.17, 0.60),
            run("p300", 0.95, 0.17, 0.99)]
    assert best_on_validation(runs)["tag"] == "p100"                            # the earlier of the tie
    assert best_on_validation(runs, tie="pruned_float_loss")["tag"] == "p200"   # lower loss, then earlier
    assert best_on_validation(runs[:1], tie="pruned_float_loss")["tag"] == "p0"
    assert selection_report(runs, tie="pruned_float_loss")["test"] == 60.0
    with pytest.raises(ValueError, match="--prune-seed"):
        best_on_validation([run("a", 0.9, 0.1, 0.9), {"tag": "b", "val": {"deployed_acc": 0.9}}],
                           tie="pruned_float_loss")
