"""bfp_systolic: the array is systolic (issue 14, "a systolic array in fact").

Tile (d, c) works on the step that entered the array d + c array cycles before: row d's
weights pass from tile to tile along the row after a skew of d registers, column c's samples
down the column after a skew of c registers (kernel.cpp.j2, the chain comment). The numbers do
not change: ``hlsnn compare`` holds the kernel to the emulator on every shipped config. These
tests show that the comparison sees the wavefront, by planting the mistakes a systolic array
invites (a missing skew, a shadow row posted before its last tile has finished, the DSP48E1
accumulator pair not added), and check the resource model's count of the chains against the
positions the tiles read."""
from pathlib import Path

import pytest

import hlsnn
from conftest import ROOT, planted_csim

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = sorted((ROOT / "configs" / "accel").glob("bfp*.yaml"))


def _bad_cases(tmp_path, config, old, new):
    from hlsnn import codegen
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(config)
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "bfp_systolic.cpp", old, new)
    rep = compare(cfg, "csim", seed=0, n_random=2, target_obj=tgt)
    return {c["case"] for c in rep["results"] if c["mismatches"]}, {c["case"] for c in rep["results"]}


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
@pytest.mark.parametrize("what, old, new", [
    # row d's weights without their skew of d registers: tile (d, c) multiplies the weights of
    # step s + d by the samples of step s
    ("no weight skew", "const mant_t w0 = wch0[d][d + c];", "const mant_t w0 = wch0[d][c];"),
    # the shadow row posted as soon as the group's last step has entered: the tiles to the
    # right of column 0 have not yet added it
    ("shadow posted early", "pend.lag = Cfg::kCols - 1;", "pend.lag = 0;"),
])
def test_a_broken_wavefront_fails_compare(tmp_path, what, old, new):
    # t16_row: 4 x 3 tiles on pynq-z2
    bad, cases = _bad_cases(tmp_path, CONFIGS / "t16_row.yaml", old, new)
    # every case with more than one output row or more than one sample goes wrong; the
    # comparison does not pass a single random case
    assert len(bad) >= len(cases) // 2, (what, sorted(cases - bad))
    assert {c for c in cases if c.startswith("random")} <= bad


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
def test_dsp48e1_accumulator_pair_is_added(tmp_path):
    # pynq-z2 (DSP48E1): a tile keeps two accumulators; without their sum only the even
    # products reach the shadow
    bad, cases = _bad_cases(tmp_path, CONFIGS / "t16_row.yaml", "shv[d][c] = acc[d][c] + acc1[d][c];",
                            "shv[d][c] = acc[d][c];")
    assert len(bad) >= len(cases) // 2


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
@pytest.mark.strict_csim
def test_output_beats_wait_for_their_group(tmp_path):
    # the output beats that stream during the array loop read a group's results only once its
    # block of the last tile has posted every row: one group early, they read a result store
    # that still holds the partial tiles (and exponents not yet fixed). The strict C-simulation
    # refuses the read before its write is visible (ybuf, or the exponents o_exp / wexp_o, which are
    # checked too since they carry DEPENDENCE inter false); the fast one shows the wrong bits.
    from hlsnn import csim
    from hlsnn.errors import StrictCsimError
    old = "const bool out_beat = out_on && ob < batch && og < gdone;"
    new = "const bool out_beat = out_on && ob < batch && og <= gdone;"
    with pytest.raises(StrictCsimError, match="(ybuf|o_exp|wexp_o).*loop Steps"):
        _bad_cases(tmp_path / "strict", CONFIGS / "t16_row.yaml", old, new)
    was = csim.strict_default()
    csim.set_strict_default(False)
    try:
        bad, cases = _bad_cases(tmp_path / "fast", CONFIGS / "t16_row.yaml", old, new)
    finally:
        csim.set_strict_default(was)
    assert bad, "no case caught output beats read before their group was complete"
    assert {c for c in cases if c.startswith("random")} & bad


@pytest.mark.parametrize("config", SHIPPED + [CONFIGS / "t7_packed_e1.yaml"], ids=lambda p: p.stem)
def test_chains_counted_as_the_positions_tiles_read(config):
    """The model counts a chain's registers up to the last position a tile reads: enumerate
    the tiles and the positions they read (kernel: wch*[d][d + c], xch*/cch[c][c + d]; with
    dsp_packing the tiles of rows 2D and 2D+1 both read position 2D + c)."""
    from hlsnn.engines.bfp_systolic.spec import buffers, template_context
    cfg = hlsnn.load_config(config)
    ctx = template_context(cfg)
    rows, cols, m = ctx["rows"], ctx["cols"], ctx["mantissa_bits"]
    packed = cfg.params["dsp_packing"]
    pos = (lambda d, c: 2 * (d // 2) + c) if packed else (lambda d, c: d + c)
    last_w = {d: max(pos(d, c) for c in range(cols)) for d in range(rows)}
    last_x = {c: max(pos(d, c) for d in range(rows)) for c in range(cols)}
    want_w = sum(last_w[d] + 1 for d in range(rows))      # positions 0 .. last, each row
    want_x = sum(last_x[c] + 1 for c in range(cols))
    # the chains are declared rows + cols - 1 long; packed, their last register is never read
    assert ctx["chain"] == max(max(last_w.values()), max(last_x.values())) + 1 + packed
    from hlsnn import resources
    bufs, _ = buffers(ctx)
    mapped = {b.name: resources.map_buffer(b) for b in bufs}
    for name, width, want in [("wch0", m, want_w), ("wch1", m, want_w), ("xch0", m, want_x),
                              ("xch1", m, want_x), ("cch", 4, want_x)]:
        assert mapped[name].storage == "registers"
        assert mapped[name].ff == want * width, name
    # unpacked, each DSP accumulates its own product on either family (no P = P + M + PCIN), so
    # a tile keeps a second accumulator; packed, the fabric accumulates, one accumulator
    assert ("acc1" in mapped) == (not packed)

