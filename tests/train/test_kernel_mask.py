"""The pruner's kernel shape (``kernel=(P, B, S)``, :func:`hlsnn.train.kernel_mask`): the zeros
the board-sized sparse kernel skips. Checked against numpy reimplementations of the documented
rule (per block of P rows and per bank, the k columns of the largest L2 norm) and against the
kernel's own step schedule (:func:`hlsnn.engines.sparse_cluster.netsize.schedule`), which must
take ``k / S`` steps a pixel where the dense weights take ``ceil(n / S)``."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.engines.sparse_cluster import netsize  # noqa: E402
from hlsnn.train import BalancedPruner, kernel_mask  # noqa: E402
from hlsnn.train.prune import kernel_keep, parse_kernel  # noqa: E402

torch.set_num_threads(1)


def _reference(w, s, p, b, sub, unfold=False):
    """The documented rule in numpy: per block of ``p`` rows, per bank, the bank's k columns of the
    largest L2 norm over the block's rows (ties to the lower flat position)."""
    w = np.asarray(w, np.float64)
    z, c, kh, kw = w.shape
    bank = np.empty((c, kh, kw), np.int64)
    for ci in range(c):
        for kx in range(kw):
            bank[ci, :, kx] = ci + c * kx if unfold else ci % b
    bank = bank.reshape(-1)
    mask = np.zeros_like(w)
    for z0 in range(0, z, p):
        score = (w[z0:z0 + p] ** 2).sum(0).reshape(-1)
        keep = np.zeros(score.size, bool)
        for bk in np.unique(bank):
            cols = np.flatnonzero(bank == bk)
            n = cols.size
            k = int(round((1 - s) * n))
            k = min(n, max(sub, k - k % sub))
            order = sorted(cols, key=lambda i: (-score[i], i))
            keep[order[:k]] = True
        mask[z0:z0 + p] = keep.reshape(c, kh, kw)
    return mask


@pytest.mark.parametrize("shape,s,unfold", [((32, 16, 3, 3), 0.75, False), ((64, 32, 3, 3), 0.75, False),
                                            ((20, 40, 3, 3), 0.9, False), ((16, 3, 3, 3), 0.75, True),
                                            ((32, 16, 1, 1), 0.75, False)])
def test_mask_is_the_documented_rule(shape, s, unfold):
    torch.manual_seed(1)
    w = torch.randn(*shape)
    got = kernel_mask(w, s, 16, 16, 2, unfold=unfold).numpy()
    assert np.array_equal(got, _reference(w.numpy(), s, 16, 16, 2, unfold))


def test_keep_counts():
    """k: round((1 - s) n) down to a multiple of S, at least S, at most n."""
    assert [kernel_keep(9, 0.75, 2), kernel_keep(18, 0.75, 2), kernel_keep(36, 0.75, 2)] == [2, 4, 8]
    assert [kernel_keep(3, 0.75, 2), kernel_keep(1, 0.75, 2), kernel_keep(2, 0.9, 2)] == [2, 1, 2]
    assert kernel_keep(9, 0.0, 2) == 8 and kernel_keep(9, 0.0, 1) == 9


@pytest.mark.parametrize("cin,z", [(16, 16), (32, 32), (32, 64), (64, 64)])
def test_the_kernel_skips_what_the_mask_zeroes(cin, z):
    """The board kernel's schedule of the pruned weights: every block takes k / S steps (a pixel's
    cycles), against ceil(n / S) dense; the zeros cost nothing, and every kept column is read."""
    torch.manual_seed(2)
    w = torch.randn(z, cin, 3, 3)
    pruned = (w * kernel_mask(w, 0.75, 16, 16, 2)).numpy()
    codes = np.where(pruned != 0, np.sign(pruned) * np.maximum(1, np.abs(np.round(pruned * 40))), 0).astype(np.int64)
    n = cin // 16 * 9
    k = kernel_keep(n, 0.75, 2)
    dense = netsize.schedule(np.ones_like(codes), 16, 2, 16)
    sparse = netsize.schedule(codes, 16, 2, 16)
    assert [len(b) for b in dense] == [-(-n // 2)] * (z // 16)
    assert [len(b) for b in sparse] == [k // 2] * (z // 16)
    read = sum(int(np.count_nonzero(st[1])) for blk in sparse for st in blk)
    assert read == np.count_nonzero(codes)
    assert 1 - np.count_nonzero(codes) / codes.size >= 0.75


def test_pruner_kernel_shape_and_stem():
    """BalancedPruner(kernel=...): the first conv (3 channels x 3 columns fit 16 banks) is pruned
    with its taps unfolded (c + 3 kx a bank, ky its columns), the others by c mod 16; a mask is
    constant over each block's rows; depthwise layers keep the per-layer balance."""
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                      nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    pr = BalancedPruner(m, 0.75, 0, 1, kernel=(16, 16, 2))
    pr.apply(0.75)
    stem, conv, dw, fc = m[0].weight, m[3].weight, m[6].weight, m[10].weight
    assert np.array_equal((stem != 0).numpy(), _reference(stem.detach().numpy(), 0.75, 16, 16, 2, True) != 0)
    assert np.array_equal((conv != 0).numpy(), _reference(conv.detach().numpy(), 0.75, 16, 16, 2) != 0)
    for blk in (conv != 0).reshape(2, 16, -1):
        assert (blk == blk[0]).all()
    assert np.array_equal((fc != 0).numpy(),
                          _reference(fc.detach().numpy()[:, :, None, None], 0.75, 16, 16, 2)[:, :, 0, 0] != 0)
    assert float((dw == 0).float().mean()) == pytest.approx(0.75, abs=0.01)


def test_refusals():
    m = nn.Sequential(nn.Conv2d(3, 16, 3))
    with pytest.raises(ValueError, match="kernel"):
        BalancedPruner(m, 0.75, 0, 1, kernel=(16, 16))
    with pytest.raises(ValueError, match="not with lanes"):
        BalancedPruner(m, 0.75, 0, 1, kernel=(16, 16, 2), lanes=8)
    with pytest.raises(ValueError, match="P,B,S"):
        parse_kernel("16,0,2")
    assert parse_kernel("16,16,2") == (16, 16, 2)


def test_the_shape_comes_from_the_sized_config():
    """An accel config names the shape: its sizer's choice (net_lanes, net_banks, net_sub), read from
    the config file as the kernel reads it; a config without a sized sparse kernel is refused."""
    import hlsnn
    from hlsnn.engines.sparse_cluster.network.kernel import sized
    from hlsnn.paths import CONFIGS_DIR
    for name in ("sparse8net_pynq-z2", "sparse8net_zcu104"):
        sz = sized(hlsnn.load_config(CONFIGS_DIR / "accel" / f"{name}.yaml").params)
        assert parse_kernel(name) == (sz["net_lanes"], sz["net_banks"], sz["net_sub"])
    assert parse_kernel("sparse8net_pynq-z2") == (16, 16, 2)
    for bad, says in (("sparse8_pynq-z2", "no net_shape: board"), ("shift8_pynq-z2", "shift_mac"),
                      ("nope", "no such accel config")):
        with pytest.raises(ValueError, match=says):
            parse_kernel(bad)
