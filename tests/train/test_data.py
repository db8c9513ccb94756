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
