"""tests/train needs PyTorch (``hlsnn[train]``): every test here is marked ``train`` and
``slow`` (the README's quick suite, ``-m "not slow"``, leaves them out; CI runs them in their
own stage after installing torch, ``.ci/run``), and each module skips when torch is absent."""
import pytest


def pytest_collection_modifyitems(items):
    for it in items:
        if "/tests/train/" in str(it.fspath).replace("\\", "/"):
            it.add_marker(pytest.mark.train)
            it.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path, config):
    """The quick suite (``-m "not slow"`` exactly, the README's command) deselects every test
    here: its processes leave the modules unimported (torch's import, about 4 CPU-seconds in
    each xdist worker)."""
    if config.getoption("markexpr", "") == "not slow" and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_"):
        return True
    return None
