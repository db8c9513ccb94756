"""hlsnn.train.data: the validation split is a deterministic partition of the training images,
and each randomly shifted image equals its input moved by a whole-pixel offset within the bound
(checked against numpy slicing), the border zero."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hlsnn.train.data import random_shift, validation_split  # noqa: E402


def test_validation_split_partitions_deterministically():
    tr, va = validation_split(1437, 287)
    assert len(va) == 287 and len(tr) == 1150
    assert sorted(np.concatenate([tr, va]).tolist()) == list(range(1437))
    tr2, va2 = validation_split(1437, 287)
    assert np.array_equal(va, va2) and np.array_equal(tr, tr2)
    assert not np.array_equal(va, validation_split(1437, 287, seed=1)[1])
    with pytest.raises(ValueError, match="n_val = 0"):
        validation_split(10, 0)


def _moved(img, dy, dx):
    out = np.zeros_like(img)
    h, w = img.shape[-2:]
    out[:, max(0, dy):h + min(0, dy), max(0, dx):w + min(0, dx)] = \
        img[:, max(0, -dy):h + min(0, -dy), max(0, -dx):w + min(0, -dx)]
    return out


def test_random_shift_moves_each_image_within_the_bound():
    x = torch.rand(40, 3, 8, 9) + 0.1           # no zeros inside: the offset is recoverable
    y = random_shift(x, 2, torch.Generator().manual_seed(0)).numpy()
    seen = set()
    for i in range(len(x)):
        hits = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)
                if np.array_equal(y[i], _moved(x[i].numpy(), dy, dx))]
        assert len(hits) == 1
        seen.add(hits[0])
    assert len(seen) > 5                          # the offsets vary
    assert random_shift(x, 0) is x


def test_cross_validation_folds_test_every_image_once_stratified():
    """Folds 0..4 of the pooled digits: disjoint test sets whose union is every image once (checked
    on the images themselves), each fold's training set the rest, every class within one image of
    its share, the same folds each call; a bad K/N is refused by name."""
    from hlsnn.deploy import datasets
    from hlsnn.train.data import cross_validation_fold, parse_fold
    ds = datasets.load("digits")
    pooled = np.concatenate([ds.x_train, ds.x_test]).reshape(len(ds.x_train) + len(ds.x_test), -1)
    labels = np.concatenate([ds.y_train, ds.y_test])
    seen = []                            # compared as multisets of the images' bytes (a few digits repeat)
    for k in range(5):
        xtr, ytr, xte, yte = cross_validation_fold(ds.x_train, ds.y_train, ds.x_test, ds.y_test, k, 5)
        assert len(xtr) + len(xte) == len(pooled) and 359 <= len(xte) <= 360
        counts, total = np.bincount(yte, minlength=10), np.bincount(labels, minlength=10)
        assert np.all(np.abs(counts - total / 5) <= 1)
        both = np.concatenate([xtr, xte]).reshape(len(pooled), -1)
        assert sorted(map(bytes, both)) == sorted(map(bytes, pooled))      # a partition of the same images
        seen.extend(map(bytes, xte.reshape(len(xte), -1)))
        again = cross_validation_fold(ds.x_train, ds.y_train, ds.x_test, ds.y_test, k, 5)
        assert all(np.array_equal(u, v) for u, v in zip(again, (xtr, ytr, xte, yte)))
    assert sorted(seen) == sorted(map(bytes, pooled))                       # every image tested once
    assert parse_fold("3/5") == (3, 5)
    for bad in ("5/5", "x", "1/1", "-1/5", "1/5/2"):
        with pytest.raises(ValueError, match="fold"):
            parse_fold(bad)


def test_split_images_is_the_fold_then_the_held_out_images():
    """split_images(ds, fold, val, val_seed) == cross_validation_fold, then validation_split of its
    training images (what train_qat.py and int8_ablation.py both hold out); without either, ds's own."""
    from hlsnn.deploy import datasets
    from hlsnn.train.data import cross_validation_fold, split_images
    ds = datasets.load("digits")
    xtr, ytr, xte, yte = cross_validation_fold(ds.x_train, ds.y_train, ds.x_test, ds.y_test, 3, 5)
    tr, va = validation_split(len(xtr), 100, seed=4)
    got = split_images(ds, fold="3/5", val=100, val_seed=4)
    for g, want in zip(got, (xtr[tr], ytr[tr], xtr[va], ytr[va], xte, yte)):
        np.testing.assert_array_equal(g, want)
    plain = split_images(ds)
    assert plain[2] is None and plain[3] is None
    for g, want in zip(plain[:2] + plain[4:], (ds.x_train, ds.y_train, ds.x_test, ds.y_test)):
        np.testing.assert_array_equal(g, want)


def _affine_reference(img, theta, s):
    """affine_images' rule in numpy, pixel by pixel: output pixel (r, c) at centred coordinates
    u = (2c + 1) / W - 1, v = (2r + 1) / H - 1 samples the input at (R(theta) (u, v)) / s, bilinearly
    between pixel centres, zero outside."""
    ch, h, w = img.shape
    out = np.zeros_like(img, dtype=np.float64)
    padded = np.zeros((ch, h + 2, w + 2))
    padded[:, 1:-1, 1:-1] = img
    for r in range(h):
        for c in range(w):
            u, v = (2 * c + 1) / w - 1, (2 * r + 1) / h - 1
            su = (np.cos(theta) * u - np.sin(theta) * v) / s
            sv = (np.sin(theta) * u + np.cos(theta) * v) / s
            x, y = ((su + 1) * w - 1) / 2, ((sv + 1) * h - 1) / 2        # source pixel coordinates
            x0, y0 = int(np.floor(x)), int(np.floor(y))
            fx, fy = x - x0, y - y0
            for dy, wy in ((0, 1 - fy), (1, fy)):
                for dx, wx in ((0, 1 - fx), (1, fx)):
                    yy, xx = y0 + dy, x0 + dx
                    if -1 <= yy <= h and -1 <= xx <= w:
                        out[:, r, c] += wy * wx * padded[:, yy + 1, xx + 1]
    return out


def test_affine_images_follows_its_rule():
    from hlsnn.train.data import affine_images
    x = torch.rand(3, 2, 7, 9, dtype=torch.float64)
    theta, s = [0.0, np.pi / 2, -0.3], [1.0, 1.0, 0.8]
    y = affine_images(x, theta, s).numpy()
    assert np.allclose(y[0], x[0].numpy(), atol=1e-12)               # identity
    sq = torch.rand(1, 2, 8, 8, dtype=torch.float64)                  # a quarter turn of a square image
    turned = affine_images(sq, [np.pi / 2], [1.0]).numpy()[0]
    # out[r, c] samples (u, v) -> (-v, u): the input at row c, column W - 1 - r, which is numpy's rot90
    assert np.allclose(turned, np.rot90(sq[0].numpy(), k=1, axes=(1, 2)), atol=1e-12)
    for i in range(3):
        assert np.allclose(y[i], _affine_reference(x[i].numpy(), theta[i], s[i]), atol=1e-9), i


def test_random_affine_draws_within_its_bounds():
    from hlsnn.train.data import affine_images, parse_affine, random_affine
    x = torch.rand(20, 3, 16, 16)
    y = random_affine(x, 10, 0.1, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)                              # the same draws, by hand
    theta = (torch.rand(20, generator=g, dtype=torch.float64) * 2 - 1) * (10 * np.pi / 180)
    s = 1 + (torch.rand(20, generator=g, dtype=torch.float64) * 2 - 1) * 0.1
    assert theta.abs().max() <= 10 * np.pi / 180 and ((s - 1).abs() <= 0.1).all()
    assert len(set(theta.tolist())) == 20
    assert torch.equal(y, affine_images(x, theta, s))
    assert random_affine(x, 0, 0) is x
    assert parse_affine("10,0.1") == (10.0, 0.1)
    for bad in ("10", "a,b", "50,0.1", "10,0.6", "-1,0"):
        with pytest.raises(ValueError, match="affine"):
            parse_affine(bad)
