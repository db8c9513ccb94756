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
* :func:`random_affine`: every image rotated and scaled about its centre by its own random angle
  and factor (bilinear, the uncovered border zero): the classic augmentation for handwritten
  digits, on top of the shifts.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import InputError


def validation_split(n, n_val, seed=0):
    """``(train_idx, val_idx)``: a seeded permutation of ``range(n)`` whose last ``n_val`` are the
    validation images (both sorted); the same ``n``, ``n_val`` and ``seed`` give the same split."""
    from .checks import COUNT
    n, n_val = COUNT.check("n", n), COUNT.check("n_val", n_val)
    COUNT.check("seed", seed)
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
    from .checks import COUNT, Range
    n = Range(2, 20, integer=True).check("n", n)
    k = Range(0, n - 1, integer=True).check("k", k)
    COUNT.check("seed", seed)
    x = np.concatenate([np.asarray(x_train), np.asarray(x_test)])
    y = np.concatenate([np.asarray(y_train), np.asarray(y_test)])
    tr, te = list(StratifiedKFold(int(n), shuffle=True, random_state=seed).split(np.zeros(len(y)), y))[int(k)]
    return x[tr], y[tr], x[te], y[te]


def split_images(ds, *, fold=None, val=0, val_seed=0):
    """``(x_train, y_train, x_val, y_val, x_test, y_test)`` (numpy) of data set ``ds``: its own
    split, or with ``fold`` (``"K/N"``) :func:`cross_validation_fold`'s; then, with ``val`` > 0, the
    :func:`validation_split` (seed ``val_seed``) of those training images held out as ``x_val``,
    ``y_val`` (both None without ``val``)."""
    from .checks import COUNT
    val, val_seed = COUNT.check("val", val), COUNT.check("val_seed", val_seed)
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
    from .checks import COUNT
    k = COUNT.check("max_shift", max_shift)
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


def parse_affine(text):
    """``"DEG,SCALE"`` -> ``(deg, scale)``: rotations up to ``DEG`` degrees each way (0-45) and
    scale factors in ``[1 - SCALE, 1 + SCALE]`` (0-0.5); a clear ValueError otherwise."""
    try:
        deg, scale = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"affine {text!r}: DEG,SCALE, e.g. 10,0.1 (up to 10 degrees, scale 0.9-1.1)") from None
    if not (0 <= deg <= 45 and 0 <= scale <= 0.5):
        raise ValueError(f"affine {text!r}: DEG between 0 and 45, SCALE between 0 and 0.5")
    return deg, scale


def affine_images(x, theta, s):
    """``x`` (N, C, H, W) with image ``i`` rotated by ``theta[i]`` radians and scaled by ``s[i]``
    about its centre: ``out[i, :, p] = x[i, :, R(theta_i) p / s_i]``, ``R`` the rotation
    ``[[cos, -sin], [sin, cos]]`` on ``(column, row)`` coordinates that run from -1 to 1 across the
    image (pixel ``j`` of ``W`` at ``(2j + 1) / W - 1``), sampled bilinearly between pixel centres
    (``torch.nn.functional.grid_sample``, ``align_corners=False``), zero outside the image. Every
    channel of an image moves the same way."""
    theta = torch.as_tensor(theta, dtype=torch.float64)
    s = torch.as_tensor(s, dtype=torch.float64)
    c, si = torch.cos(theta) / s, torch.sin(theta) / s
    zero = torch.zeros_like(c)
    mat = torch.stack([torch.stack([c, -si, zero], 1), torch.stack([si, c, zero], 1)], 1)
    grid = torch.nn.functional.affine_grid(mat.to(x.dtype), list(x.shape), align_corners=False)
    return torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def random_affine(x, degrees, scale, generator=None):
    """:func:`affine_images` of ``x`` (N, C, H, W), image ``i`` rotated by an angle uniform in
    ``[-degrees, degrees]`` degrees and scaled by a factor uniform in ``[1 - scale, 1 + scale]``,
    both drawn from ``generator``; ``degrees = scale = 0`` returns ``x`` itself."""
    from .checks import FRACTION_BELOW_1, NONNEG
    if not NONNEG.ok(degrees) or not FRACTION_BELOW_1.ok(scale):
        raise InputError(f"degrees = {degrees}, scale = {scale}: degrees >= 0 and 0 <= scale < 1")
    if degrees == 0 and scale == 0:
        return x
    n = x.shape[0]
    theta = (torch.rand(n, generator=generator, dtype=torch.float64) * 2 - 1) * (degrees * np.pi / 180)
    s = 1 + (torch.rand(n, generator=generator, dtype=torch.float64) * 2 - 1) * scale
    return affine_images(x, theta, s)
