"""scripts/suite_tiers.py: the README's five-minute check and the ``heavy`` tests CI runs after it."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("suite_tiers", ROOT / "scripts" / "suite_tiers.py")
tiers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiers)


def _profile(tmp_path, rows, worker="gw0"):
    (tmp_path / f"{worker}.tsv").write_text("<collection>\t2.0\t0.5\t3.0\n<total>\t9\t9\t0\n"
                                            + "".join(f"{n}\t{own}\t{child}\t1.0\n" for n, own, child in rows))
    return tmp_path


def test_the_most_expensive_go_until_the_rest_fits_and_no_more(tmp_path):
    rows = [(f"tests/t.py::t{i}", float(i), 0.5) for i in range(1, 11)]      # costs 1.5 .. 10.5, sum 60
    cost, coll = tiers.read_profile(_profile(tmp_path, rows))
    assert coll == [2.5] and sum(cost.values()) == pytest.approx(60.0)
    heavy, left = tiers.split(cost, 20.0)
    assert left <= 20.0 and left == pytest.approx(60.0 - sum(cost[n] for n in heavy))
    assert min(cost[n] for n in heavy) >= max(c for n, c in cost.items() if n not in heavy)
    assert left + min(cost[n] for n in heavy) > 20.0               # one fewer would not fit
    assert tiers.split(cost, 100.0) == ([], pytest.approx(60.0))


def test_the_list_keeps_a_given_one_and_names_every_test(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    prof = _profile(tmp_path / "p", [("tests/a.py::x", 5.0, 0.0), ("tests/a.py::y", 1.0, 0.0)])
    keep = tmp_path / "heavy.txt"
    keep.write_text("# a comment\ntests/b.py::old\n")
    assert tiers.main([str(prof), "--budget", "2", "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert [ln for ln in out.splitlines() if not ln.startswith("#")] == ["tests/a.py::x", "tests/b.py::old"]


@pytest.mark.parametrize("args,says", [(["--budget", "0"], "--budget must be > 0"),
                                       (["--keep", "/nonexistent/heavy.txt"], "--keep")])
def test_bad_arguments_are_one_clear_line(tmp_path, args, says):
    prof = _profile(tmp_path, [("tests/a.py::x", 1.0, 0.0)])
    with pytest.raises(SystemExit) as e:
        tiers.main([str(prof)] + args)
    assert says in str(e.value)


def test_an_empty_folder_or_a_broken_line_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="no \\*.tsv"):
        tiers.read_profile(tmp_path)
    (tmp_path / "gw0.tsv").write_text("only one field\n")
    with pytest.raises(SystemExit, match="4 tab-separated fields"):
        tiers.read_profile(tmp_path)


def test_the_heavy_list_names_tests_that_exist():
    """Every id of tests/heavy.txt (as tests/conftest.py reads it) is in a file of this suite (a file
    moved or deleted; a test renamed within its file: the next test)."""
    from conftest import HEAVY
    assert HEAVY
    for nid in HEAVY:
        assert (ROOT / nid.split("::", 1)[0]).is_file(), nid


def test_every_heavy_id_is_still_a_test(request):
    """An id of tests/heavy.txt that its file no longer has (a test renamed, a documentation block's
    line moved) would put that test back into the five-minute check unnoticed: name it here."""
    stale = getattr(request.config, "hlsnn_stale_heavy", None)
    if stale is None:
        pytest.skip("single tests were asked for: not every id of a file was collected")
    assert not stale, (f"tests/heavy.txt names {len(stale)} test(s) their files no longer have: {stale[:6]}; "
                       "put the new ids in their place (a doc block's id carries its line number)")
