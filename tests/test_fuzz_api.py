"""Property-based fuzzing of the Python API's arguments (issue 33): the Accelerator's operations
called with arrays of odd shapes, dtypes and values and with options of every type. Each call
either raises one clear hlsnn error (HlsnnError, one line) or returns the right thing: an array
of the operation's shape, finite, non-negative under ReLU, and equal to the same call made with
the canonical argument types (a flag given as numpy.bool_, an int as numpy.int64, a list for an
array). Derandomized, on the emulator; ``--hypothesis-seed=N`` explores."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlsnn import Accelerator
from hlsnn.errors import HlsnnError

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

ACC = {}


def acc(name):
    if name not in ACC:
        ACC[name] = Accelerator(name, "emu")
    return ACC[name]


odd = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True, allow_infinity=True),
                st.sampled_from(["no", "10", "", "same", "valid", "twohot", "pot"]), st.just([1, 2]),
                st.just(np.bool_(True)), st.just(np.int64(3)), st.just(1 + 2j))


@st.composite
def arrays(draw, ndim, integer=False):
    shape = tuple(draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, 9)) for _ in range(ndim))
    kind = draw(st.sampled_from(["float", "float", "int", "nan", "complex", "bool", "str"]))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    a = rng.normal(size=shape) * (4 if integer else 1)
    if kind == "int" or integer and kind == "float":
        return np.round(a).astype(np.int64)
    if kind == "nan" and a.size:
        a.flat[0] = np.nan
    if kind == "complex":
        return a + 1j
    if kind == "bool":
        return a > 0
    if kind == "str":
        return a.astype(str)
    return a


OPS = {
    ("bfp16_pynq-z2", "gemm"): (2, 2, ["bias", "relu", "method", "stats_k", "stats"]),
    ("shift8_pynq-z2", "gemm"): (2, 2, ["bias", "relu", "mode", "delta", "stats"]),
    ("shift8_pynq-z2", "gemm_int"): (2, 2, ["mode", "bias", "shift", "relu", "stats", "k_step", "raw"]),
    ("shift8_pynq-z2", "conv2d"): (3, 4, ["bias", "padding", "relu", "mode", "stats"]),
    ("sparse8_pynq-z2", "conv2d"): (3, 4, ["bias", "padding", "relu", "pool", "shift"]),
    ("shift8_pynq-z2", "conv2d_int"): (3, 4, ["padding", "mode", "bias", "shift", "relu", "stats", "raw"]),
    ("sparse8_pynq-z2", "conv2d_int"): (3, 4, ["bias", "shift", "padding", "relu", "pool", "stats"]),
}


@FUZZ
@given(op=st.sampled_from(sorted(OPS)), data=st.data())
def test_api_arguments_give_a_clear_error_or_a_right_result(op, data):
    name, method = op
    xdim, wdim, options = OPS[op]
    x = data.draw(arrays(xdim, integer=method.endswith("_int")), label="x")
    w = data.draw(arrays(wdim, integer=method.endswith("_int")), label="w")
    kw = data.draw(st.dictionaries(st.sampled_from(options), odd, max_size=2), label="options")
    a = acc(name)
    try:
        y = getattr(a, method)(x, w, **kw)
    except HlsnnError as e:
        assert str(e) and "Traceback" not in str(e)
        return
    y = np.asarray(y if not hasattr(y, "mantissa") else y.to_float())
    assert np.isfinite(y).all()
    if method.startswith("gemm"):
        assert y.shape == (x.shape[0], w.shape[0])
    else:
        assert y.ndim == 3 and y.shape[0] == w.shape[0]
    if kw.get("relu") is True and not kw.get("raw"):
        assert (y >= 0).all()
    # the same call with the canonical types gives the same bits
    canon = {k: (bool(v) if isinstance(v, np.bool_) else int(v) if isinstance(v, np.integer) else v)
             for k, v in kw.items()}
    assert np.array_equal(np.asarray(getattr(a, method)(x, w, **canon)), y)


def teardown_module():
    for a in ACC.values():
        a.close()
