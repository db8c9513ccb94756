"""The search rules of engines.tiling against brute force."""
from hypothesis import given, strategies as st

from hlsnn.engines import tiling


@given(st.integers(1, 300), st.integers(0, 400))
def test_largest_is_the_largest_fitting_m(hi, cut):
    fits = lambda m: m <= cut                                      # noqa: E731
    assert tiling.largest(hi, fits) == max([m for m in range(1, hi + 1) if fits(m)], default=0)


@given(st.integers(1, 300), st.integers(1, 40), st.integers(0, 400))
def test_outputs_per_call_is_step_or_the_largest_whole_tile_multiple(step, tile, cut):
    fits = lambda m: m <= cut                                      # noqa: E731
    got = tiling.outputs_per_call(step, tile, fits)
    if step <= tile or fits(step):
        assert got == step
    else:
        multiples = [t * tile for t in range(1, (step - 1) // tile + 1) if fits(t * tile)]
        assert got == max(multiples, default=tile)
