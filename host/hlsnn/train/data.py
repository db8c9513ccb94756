"""Data helpers for training with few images (scripts/train_qat.py; issue 49's 1437 digits):

* :func:`validation_split`: a deterministic hold-out of the training images, to choose training
  settings on images that are neither trained on nor the test set.
* :func:`cross_validation_fold`: fold ``k`` of ``n`` stratified folds of every image (training
  and test images together), so that a recipe can be measured with each image a test image once
  instead of on one fixed test set whose luck every seed shares.
* :func:`split_images`: the training, held-out and test images of a ``scripts/train_qat.py`` run
  (its ``--fold`` and ``--val``/``--val-seed``), which ``scripts/int8_ablation.py`` must hold out
  the same way.
* :func:`random_shift`: every image moved by its own random whole-pixel offset, at most
  ``max_shift`` each way, the uncovered border zero (the digits' background) — a cheap and strong
  augmentation for small centred images.
"""
from __future__ import annotations

import numpy as np
import torch


def validation_split(n, n_val, seed=0):
    """``(train_idx, val_idx)``: a seeded permutation of ``range(n)`` whose last ``n_val`` are the
    validation images (both sorted); the same ``n``, ``n_val`` and ``seed`` give the same split."""
    n, n_val = int(n), int(n_val)
    if not 0 < n_val < n:
        raise ValueError(f"n_val = {n_val}: between 1 and {n - 1} of the {n} training images")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n - n_val]), np.sort(perm[n - n_val:])


def parse_fold(text):
    """``"K/N"`` -> ``(K, N)``: fold K (0-based) of N, ``2 <= N <= 20``; a clear ValueError otherwise."""
    try:
        k, n = (int(v) for v in str(text).split("/"))
    except ValueError:
        raise ValueError(f"fold {text!r}: K/N, fold K (from 0) of N folds, e.g. 0/5") from None
    if not 2 <= n <= 20 or not 0 <= k < n:
        raise ValueError(f"fold {text!r}: N between 2 and 20 and K between 0 and N - 1")
    return k, n


def cross_validation_fold(x_train, y_train, x_test, y_test, k, n, seed=0):
    """``(x_train, y_train, x_test, y_test)`` of fold ``k`` of ``n``: the images of both sets pooled
    (training images first, then test images, in their order), split by scikit-learn's
    ``StratifiedKFold(n, shuffle=True, random_state=seed)``; fold ``k``'s images are the test set,
    the others the training set, each in pooled order. Over ``k = 0 .. n - 1`` every image is a
    test image exactly once, and each fold holds every class in proportion."""
    from sklearn.model_selection import StratifiedKFold
    x = np.concatenate([np.asarray(x_train), np.asarray(x_test)])
    y = np.concatenate([np.asarray(y_train), np.asarray(y_test)])
    tr, te = list(StratifiedKFold(int(n), shuffle=True, random_state=seed).split(np.zeros(len(y)), y))[int(k)]
    return x[tr], y[tr], x[te], y[te]


def split_images(ds, *, fold=None, val=0, val_seed=0):
    """``(x_train, y_train, x_val, y_val, x_test, y_test)`` (numpy) of data set ``ds``: its own
    split, or with ``fold`` (``"K/N"``) :func:`cross_validation_fold`'s; then, with ``val`` > 0, the
    :func:`validation_split` (seed ``val_seed``) of those training images held out as ``x_val``,
    ``y_val`` (both None without ``val``)."""
    x_train, y_train, x_test, y_test = ds.x_train, ds.y_train, ds.x_test, ds.y_test
    if fold is not None:
        x_train, y_train, x_test, y_test = cross_validation_fold(x_train, y_train, x_test, y_test,
                                                                 *parse_fold(fold))
    x_val = y_val = None
    if val:
        tr, va = validation_split(len(x_train), val, seed=val_seed)
        x_val, y_val = x_train[va], y_train[va]
        x_train, y_train = x_train[tr], y_train[tr]
    return x_train, y_train, x_val, y_val, x_test, y_test


def random_shift(x, max_shift, generator=None):
    """``x`` (N, C, H, W) with image ``i`` shifted by ``(dy_i, dx_i)``, each uniform in
    ``[-max_shift, max_shift]`` (``out[i, :, y, x] = x[i, :, y - dy_i, x - dx_i]``, zero where that
    falls outside)."""
    k = int(max_shift)
    if k < 0:
        raise ValueError(f"max_shift = {max_shift}: a whole number of pixels >= 0")
    if k == 0:
        return x
    n, _, h, w = x.shape
    xp = torch.nn.functional.pad(x, (k, k, k, k))
    dy = torch.randint(-k, k + 1, (n,), generator=generator)
    dx = torch.randint(-k, k + 1, (n,), generator=generator)
    rows = (k - dy)[:, None] + torch.arange(h)[None, :]
    cols = (k - dx)[:, None] + torch.arange(w)[None, :]
    idx_n = torch.arange(n)[:, None, None, None]
    idx_c = torch.arange(x.shape[1])[None, :, None, None]
    return xp[idx_n, idx_c, rows[:, None, :, None], cols[:, None, None, :]]
