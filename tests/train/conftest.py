import pytest

torch = pytest.importorskip("torch")


def pytest_collection_modifyitems(items):
    for it in items:
        if "tests/train" in str(it.fspath).replace("\\", "/"):
            it.add_marker(pytest.mark.train)
