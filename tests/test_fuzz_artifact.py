"""A fuzz test of the compiled-model reader (issue 47): random damage to a real ``.hlsnn``
(byte flips, truncation, insertions) and random layer programs written with a valid checksum
end in the model (unchanged) or one InputError; never another exception, never a crash."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlsnn.network import artifact
from hlsnn.errors import HlsnnError, InputError

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                             HealthCheck.too_slow])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "deploy"))
    from compiled_fixtures import compiled_models
    path = compiled_models(tmp_path_factory, "fuzzart", check_samples=1)("digits_mlp", "twohot")
    return path, path.read_bytes(), artifact.read(path)


def _read(path, reference):
    try:
        program, arrays = artifact.read(path)
    except InputError as e:
        assert "\n" not in str(e)
        return
    p0, a0 = reference
    assert program == p0 and sorted(arrays) == sorted(a0)
    assert all(np.array_equal(arrays[k], a0[k]) for k in a0)


@SETTINGS
@given(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8),
       st.floats(0, 1), st.binary(max_size=64))
def test_damaged_containers(model, tmp_path, flips, cut, junk):
    path, data, reference = model
    b = bytearray(data)
    for where, mask in flips:
        b[int(where * len(b))] ^= mask
    b = bytes(b[:max(1, int(cut * len(b)))]) if cut < 0.98 else bytes(b) + junk
    bad = tmp_path / "bad.hlsnn"
    bad.write_bytes(b)
    _read(bad, reference)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
                    | st.text(max_size=12),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12)


@SETTINGS
@given(st.data())
def test_random_programs_with_a_valid_checksum(model, tmp_path, data):
    """A random edit of the layer program (a value anywhere replaced by random JSON), written
    through ``artifact.write`` (so the checksum is right): the model runs, or one HlsnnError."""
    path, _, (program, arrays) = model
    p = json.loads(json.dumps(program))
    node, parents = p, []
    for _ in range(data.draw(st.integers(1, 5))):
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        k = data.draw(st.sampled_from(keys))
        parents.append((node, k))
        node = node[k]
    if parents:
        holder, k = parents[-1]
        holder[k] = data.draw(JSON)
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, p, arrays)
    try:
        got, _ = artifact.read(bad)
    except HlsnnError as e:              # InputError, or a ConfigError of the stored accelerator config
        assert "\n" not in str(e)
        return
    import hlsnn
    try:
        with hlsnn.load(bad, target="emu", self_check=False) as net:
            net(np.zeros((1,) + net.input_shape))
    except HlsnnError as e:
        assert "\n" not in str(e)
