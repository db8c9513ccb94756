"""Every assignment of every shipped deployment config (``configs/models/*.yaml``), compiled:
the emulator's network mode and the simulated board (the network kernel's C-simulation behind
the unmodified pynq driver) give the layer-by-layer emulator's bits, and every assignment on one
accelerator runs in one kernel start. Slow: one network-kernel C-simulation per case."""
import numpy as np
import pytest
import yaml

pytest.importorskip("onnx")
pytest.importorskip("sklearn")

from compiled_fixtures import MODELS  # noqa: E402
from hlsnn.network.loader import load  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402

pytestmark = pytest.mark.fit_budget      # compiled models held to the fit budget (tests/conftest.py)

CASES = [(p.stem, a) for p in sorted(MODELS.glob("*.yaml"))
         for a in yaml.safe_load(p.read_text())["assignments"]]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "shipped", check_samples=2)


def _one_accelerator(model, assignment):
    d = yaml.safe_load((MODELS / f"{model}.yaml").read_text())
    a = d["assignments"][assignment]
    used = {a["default"], *(a.get("layers") or {}).values()}
    return len({d["formats"][f]["accel"] for f in used}) == 1


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("model,assignment", CASES)
def test_every_shipped_model_gives_the_emulators_bits_in_one_kernel_start(compiled, model, assignment):
    path = compiled(model, assignment)
    with load(path, "emu", network=False, self_check=False) as ref:
        layout = "nchw" if len(ref.input_shape) == 3 else "flat"
        data = "digits32" if ref.input_shape[-1] == 32 else "digits"
        x = datasets.load(data, layout=layout).x_test[:3]
        want = ref.logits(x)
    one = _one_accelerator(model, assignment)
    for target in ("emu", "sim"):
        with load(path, target) as net:                # the loader's self-check runs first
            got = net.logits(x)
            assert (net.network is not None) == one, (target, net.network)
            if target == "sim" and one:
                assert net.last_kernel_starts == 1
        assert np.asarray(got).view(np.uint64).tolist() == np.asarray(want).view(np.uint64).tolist(), target
