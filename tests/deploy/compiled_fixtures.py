"""What several deploy test modules share (a plain module: tests/conftest.py is the suite's conftest)."""
from conftest import ROOT

MODELS = ROOT / "configs" / "models"


def compiled_models(tmp_path_factory, folder, models=MODELS, **kw):
    """``get(model, assignment) -> path``: the shipped model's assignment (``models``/MODEL.yaml)
    compiled once (into a fresh ``folder``) with :func:`hlsnn.compiled.build.compile_model` and ``kw``."""
    from hlsnn.compiled.build import compile_model
    d = tmp_path_factory.mktemp(folder)
    cache = {}

    def get(model, assignment):
        key = (model, assignment)
        if key not in cache:
            cache[key] = d / f"{model}_{assignment.replace('+', '_')}.hlsnn"
            compile_model(models / f"{model}.yaml", assignment, cache[key], **kw)
        return cache[key]
    return get
