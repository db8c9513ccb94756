"""What several deploy test modules share (a plain module: tests/conftest.py is the suite's conftest)."""
from conftest import ROOT

MODELS = ROOT / "configs" / "models"


_SHARED = {}     # (models, model, assignment, kw) -> path: the compiles of share=True callers, once per process


def compiled_models(tmp_path_factory, folder, models=MODELS, share=False, **kw):
    """``get(model, assignment) -> path``: the shipped model's assignment (``models``/MODEL.yaml)
    compiled once (into a fresh ``folder``) with :func:`hlsnn.network.build.compile_model` and ``kw``,
    and read back through the compiled-model schema (:func:`hlsnn.network.artifact.read`: a file
    today's compile writes must pass it; a few ms). ``share``: the same compile of an earlier
    ``share=True`` caller in this process is reused (callers that only read the file)."""
    from hlsnn.network import artifact
    from hlsnn.network.build import compile_model
    d = tmp_path_factory.mktemp(folder)
    cache = {}

    def get(model, assignment):
        key = (model, assignment)
        shared = (str(models), model, assignment, tuple(sorted(kw.items())))
        if key not in cache and share and shared in _SHARED and _SHARED[shared].is_file():
            cache[key] = _SHARED[shared]
        if key not in cache:
            cache[key] = d / f"{model}_{assignment.replace('+', '_')}.hlsnn"
            compile_model(models / f"{model}.yaml", assignment, cache[key], **kw)
            artifact.read(cache[key])
            if share:
                _SHARED[shared] = cache[key]
        return cache[key]
    return get


def digits_cnn_three_formats(tmp_path_factory, folder):
    """The shipped digits_cnn compiled in two-hot, fixed8 and bfp8 (shared compiles, two check
    samples): ``{assignment: path}``, the known-good files the hostile-input tests edit."""
    get = compiled_models(tmp_path_factory, folder, check_samples=2, share=True)
    return {k: get("digits_cnn", k) for k in ("twohot", "fixed8", "bfp8")}


def layer_named(program, name):
    """The layer ``name`` of a compiled model's program dict."""
    return next(j for j in program["layers"] if j["name"] == name)


def assert_grams_are_the_products(got, rows, g):
    """``shift_fit._grams``' result ``got`` is, bit for bit, the float64 ``r.T @ r`` and
    ``r.mean(axis=0)`` of each of the ``g`` groups' columns ``r`` of the im2col ``rows``."""
    import numpy as np
    kg = rows.shape[1] // g
    assert len(got) == g
    for j, (gram, mean) in enumerate(got):
        r = rows[:, j * kg:(j + 1) * kg]
        np.testing.assert_array_equal(gram.view(np.uint64), (r.T @ r).view(np.uint64))
        np.testing.assert_array_equal(mean.view(np.uint64), r.mean(axis=0).view(np.uint64))
