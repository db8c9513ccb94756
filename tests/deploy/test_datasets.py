"""hlsnn.deploy.datasets: the bundled digits split and .npz data sets."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

from hlsnn.deploy.datasets import Dataset, load  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    return load("digits")


def test_digits_split_sizes_and_dtypes(digits):
    assert isinstance(digits, Dataset) and digits.name == "digits"
    assert digits.x_train.shape == (1437, 64) and digits.x_test.shape == (360, 64)
    assert digits.y_train.shape == (1437,) and digits.y_test.shape == (360,)
    assert digits.x_train.dtype == np.float32 and digits.y_train.dtype == np.int64
    assert digits.num_classes == 10


def test_digits_range(digits):
    for x in (digits.x_train, digits.x_test):
        assert x.min() == 0.0 and x.max() == 1.0
        assert np.allclose(x * 16, np.round(x * 16))      # the original 0..16 grey levels / 16


def test_digits_split_is_stratified_and_disjoint(digits):
    from sklearn.datasets import load_digits
    full = np.bincount(load_digits().target, minlength=10) / 1797
    for y, n in ((digits.y_train, 1437), (digits.y_test, 360)):
        counts = np.bincount(y, minlength=10)
        assert np.all(np.abs(counts - full * n) <= 1)
    # every image lands in exactly one split: the union is the full data set
    both = np.concatenate([digits.x_train, digits.x_test]) * 16
    ref = load_digits().data
    assert sorted(map(bytes, both.astype(np.uint8))) == sorted(map(bytes, ref.astype(np.uint8)))


def test_digits_is_deterministic(digits):
    again = load("digits")
    assert np.array_equal(again.x_test, digits.x_test) and np.array_equal(again.y_train, digits.y_train)


def test_digits_layouts(digits):
    nchw = load("digits", layout="nchw")
    assert nchw.x_train.shape == (1437, 1, 8, 8) and nchw.x_test.shape == (360, 1, 8, 8)
    assert np.array_equal(nchw.x_test.reshape(360, 64), digits.x_test)
    assert np.array_equal(nchw.y_test, digits.y_test)
    assert load("digits", layout="flat").x_train.shape == (1437, 64)
    for layout in ("ncl", "ntf"):          # rank 3: the image's rows as channels or tokens
        ds = load("digits", layout=layout)
        assert ds.x_test.shape == (360, 8, 8) and np.array_equal(ds.x_test.reshape(360, 64), digits.x_test)


def test_npz(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "mine.npz"
    np.savez(path, x_train=rng.random((5, 3, 4)), y_train=np.arange(5) % 2,
             x_test=rng.integers(0, 255, (4, 3, 4), dtype=np.uint8), y_test=np.array([0, 1, 1, 0], np.int32))
    ds = load(path)
    assert ds.name == "mine" and ds.x_train.shape == (5, 3, 4) and ds.x_test.shape == (4, 3, 4)
    assert ds.x_train.dtype == ds.x_test.dtype == np.float32 and ds.y_test.dtype == np.int64
    assert load(str(path), layout="flat").x_test.shape == (4, 12)
    assert load(path, layout="nchw").x_test.shape == (4, 1, 3, 4)
    assert load(path, layout="ncl").x_test.shape == load(path, layout="ntf").x_test.shape == (4, 3, 4)


def test_npz_rank3_layouts(tmp_path):
    path = tmp_path / "signal.npz"
    np.savez(path, x_test=np.arange(12.0).reshape(3, 4))            # (N, L): one channel / one token
    assert load(path, layout="ncl").x_test.shape == (3, 1, 4)
    np.savez(path, x_test=np.zeros((3, 1, 2, 2)))
    with pytest.raises(InputError, match=r"\(3, 1, 2, 2\) cannot be given layout 'ntf' \(store it as \(N, T, F\)"):
        load(path, layout="ntf")


def test_npz_without_train(tmp_path):
    path = tmp_path / "calib.npz"
    np.savez(path, x_test=np.zeros((2, 1, 2, 2), np.float32), y_test=np.array([3, 4]))
    ds = load(path, layout="nchw")
    assert ds.x_train is None and ds.y_train is None and ds.x_test.shape == (2, 1, 2, 2)


@pytest.mark.parametrize("bad", ["mnist", "Digits", "", 3, None, "missing.npz"])
def test_bad_names(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        load(bad)
    msg = str(err.value)
    assert "\n" not in msg
    assert repr(bad) in msg or repr(str(bad)) in msg
    assert "digits" in msg and ".npz" in msg


def test_bad_npz(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, y_test=np.zeros(2, int))
    with pytest.raises(InputError, match="x_test"):
        load(path)
    np.savez(path, x_test=np.zeros((2, 4)), y_test=np.zeros((2, 3), int))
    with pytest.raises(InputError, match="one class label per sample"):
        load(path)
    np.savez(path, x_test=np.zeros((2, 4)), y_test=np.zeros(3, int))
    with pytest.raises(InputError, match="x_test"):
        load(path)
    np.savez(path, x_test=np.zeros((2, 4)), y_test=np.zeros(2, int))
    with pytest.raises(InputError, match="nchw"):
        load(path, layout="nchw")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="junk.npz"):
        load(tmp_path / "junk.npz")


def test_bad_layout():
    with pytest.raises(InputError, match="layout"):
        load("digits", layout="nhwc")


def test_missing_sklearn_is_an_input_error(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(InputError, match=r'pip install "hlsnn\[deploy\]"'):
        load("digits")


def test_npz_regression_targets_and_no_labels(tmp_path):
    """Issue 32: y_* may be float targets of any shape, or absent."""
    path = tmp_path / "ae.npz"
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    np.savez(path, x_train=x, x_test=x[:2], y_test=x[:2, :, None] * 0.5)
    ds = load(path)
    assert ds.y_train is None and ds.y_test.dtype == np.float64 and ds.y_test.shape == (2, 8, 1)
    assert ds.num_classes == 0
    np.savez(path, x_test=x)
    ds = load(path)
    assert ds.y_test is None and ds.x_train is None
