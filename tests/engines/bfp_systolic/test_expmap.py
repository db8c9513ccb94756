"""The leading-one maps' writers and readers (:mod:`hlsnn.engines.bfp_systolic.network.expmap`,
issue 83): which descriptor rows write a map (a conv, a plain residual Add, a pooling Add's one
word, the unfolded image load) and which convs then read one instead of running an exponent
pass, on small programs built here; the bits themselves are the C-simulation's
(tests/deploy/test_network_bfp.py's board-sized kernel)."""
from types import SimpleNamespace

from hlsnn.engines.bfp_systolic.network import expmap

UNFOLD = dict(op="stem", c=3, kw=3, pl=1, w=32)


def _conv(name, src_t, out, src, dst, *, sb=0, kh=3, kw=3, ohw=1024, sa=4608):
    op = SimpleNamespace(kind="conv", name=name, out=out, ins=[src_t])
    d = dict(src=src, dst=dst, dual=0, sb=sb, mdiv=0, kh=kh, kw=kw, ohw=ohw, hw=ohw, sa=sa, n_iter=9216)
    return op, d


def _add(name, out, dst, *, gap=0, hw=1024, dual=0):
    op = SimpleNamespace(kind="add", name=name, out=out, ins=["a", "b"])
    return op, dict(src=0, dst=dst, dual=dual, gap=gap, hw=hw, sb=0, mdiv=0)


def _mark(prog, **kw):
    rows = [d for _, d, _ in prog]
    infos = [(op, 1, unf, op.ins[0] if op.kind == "conv" else None) for op, _, unf in prog]
    words = expmap.mark(rows, infos, lambda t: t, True, **kw)
    return {op.name: d for op, d, _ in prog}, words


def test_the_image_load_writes_the_stems_map_only_where_a_pair_finishes_two_words():
    place = (0, 0)
    assert expmap.load_map(UNFOLD, True, True, place, 1024)
    assert not expmap.load_map(UNFOLD, False, True, place, 1024), "a value a cycle: no pairs"
    assert not expmap.load_map(UNFOLD, True, False, place, 1024), "maps off"
    assert not expmap.load_map(dict(UNFOLD, kw=5, pl=2), True, True, place, 1024), "kw - 1 - pl = 2"
    assert expmap.load_map(dict(UNFOLD, kw=2, pl=0), True, True, place, 1024)
    assert not expmap.load_map(UNFOLD, True, True, (0, 1), 1024), "the image is a shortcut too"
    assert not expmap.load_map(UNFOLD, True, True, place, 2 * expmap.EXP_LEAD - 2), "channel passes too close"
    assert not expmap.load_map(None, True, True, place, 1024)


def test_every_conv_of_a_residual_stage_reads_a_map_and_runs_no_exponent_pass():
    stem, stem_d = _conv("stem", "x", "t0", 0, 1, kw=1)
    c1, c1_d = _conv("c1", "t0", "t1", 1, 0)
    add, add_d = _add("add1", "t2", 1)
    c2, c2_d = _conv("c2", "t2", "t3", 1, 0)          # after the Add: reads the Add's map
    pool, pool_d = _add("add2", "t4", 0, gap=1, hw=64)
    fc, fc_d = _conv("fc", "t4", "y", 0, 1, sb=1, kh=1, kw=1, ohw=1, sa=2)
    prog = [(stem, stem_d, True), (c1, c1_d, False), (add, add_d, False), (c2, c2_d, False),
            (pool, pool_d, False), (fc, fc_d, False)]
    d, words = _mark(prog, load=(0, "x"), pool=True)
    assert all(d[n]["mr"] and d[n]["sa"] == 0 for n in ("stem", "c1", "c2", "fc"))
    assert d["stem"]["n_iter"] == 9216 + 3 * 1 + expmap.EXP_LEAD        # its lead: kh x kw = 3 x 1 taps (unfolded)
    assert d["c2"]["n_iter"] == 9216 + 9 + expmap.EXP_LEAD
    assert d["add1"]["mw"] and d["add2"]["mw"] and words == 1024
    # without the pool's map the classifier keeps its exponent pass (it reads the pool buffer)
    for _, r, _ in prog:
        r.update(sa=4608 if r.get("kh") == 3 else 2, n_iter=9216)
    d, _ = _mark(prog, load=(0, "x"), pool=False)
    assert not d["fc"]["mr"] and d["fc"]["sa"] == 2 and d["c2"]["mr"]


def test_an_add_writes_no_map_where_its_word_comes_back_too_soon_or_it_is_a_shortcut_only():
    assert expmap.add_writes(dict(gap=0, dual=0, dst=1, hw=expmap.EXP_LEAD))
    assert not expmap.add_writes(dict(gap=0, dual=0, dst=1, hw=expmap.EXP_LEAD - 1))
    assert not expmap.add_writes(dict(gap=0, dual=2, dst=1, hw=1024))
    assert not expmap.add_writes(dict(gap=0, dual=0, dst=2, hw=1024)), "the third buffer has no map"
    assert not expmap.add_writes(dict(gap=1, dual=0, dst=1, hw=1024))
    # a small Add's output: the buffer's map no longer matches, so the conv after it keeps its pass
    c1, c1_d = _conv("c1", "x", "t1", 0, 1)
    add, add_d = _add("add1", "t2", 1, hw=4)
    c2, c2_d = _conv("c2", "t2", "t3", 1, 0)
    d, _ = _mark([(c1, c1_d, False), (add, add_d, False), (c2, c2_d, False)])
    assert not d["add1"]["mw"] and not d["c2"]["mr"] and d["c2"]["sa"] == 4608
