"""The user pages of the documentation read as a user's guide, not a development log (issue 81).

A user page is every ``docs/*.md``, ``docs/tutorials/*.md`` and ``docs/engines/*.md`` except the
changelog and the development page (and ``docs/history/``, which those link to): it names no
issue number and no commit hash (history goes to ``docs/development.md``'s "History of the guides"),
cites no algorithm as "source 00N" (``docs/references.md`` names each by what it is), and has at
least one fenced code block (``tests/test_readme.py`` runs the runnable ones). Quick: reads text only.
"""
import re

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
NOT_USER = {"changelog.md", "development.md"}
USER_PAGES = sorted(p for p in [*DOCS.glob("*.md"), *DOCS.glob("tutorials/*.md"), *DOCS.glob("engines/*.md")]
                    if p.name not in NOT_USER)

#: "issue 52", "issues 34-36", "Issue 52's", "(#123)", "see #81"
ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/#`])#\d+\b(?![\w-])", re.IGNORECASE)
#: 7 to 40 hex digits with at least one digit and one letter a-f, not a 0x constant
HASH = re.compile(r"(?<![\w.])(?!0x)(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w])")
SOURCE = re.compile(r"\bsources?\s+00\d", re.IGNORECASE)


def findings(text):
    """``[(line number, what, the match)]`` of the history and the private citations in ``text``."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        for what, pat in (("issue number", ISSUE), ("commit hash", HASH), ("'source 00N' citation", SOURCE)):
            out += [(no, what, m.group(0)) for m in pat.finditer(line)]
    return out


def test_the_checks_find_what_they_are_for():
    """The patterns on text of the kind issue 81 quotes, and on text they must leave alone."""
    bad = ("Issue 52 tried hlsnn; issues 34-36 moved it (#123), at ee82a2e0 and 4c79b3e5, "
           "from source 000 and sources 001")
    assert [w for _, w, _ in findings(bad)] == (["issue number"] * 3 + ["commit hash"] * 2
                                                 + ["'source 00N' citation"] * 2)
    good = ("## 3. Run it\nsee [deploy](deploy.md#radix-rule) and 0x7fffffff; 2,208 tests; "
            "1e-5; a 12345678 count; `decade`; ap_fixed<16,8>; issued 5 times")
    assert findings(good) == []


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_a_user_page_names_no_issue_or_commit(page):
    found = findings(page.read_text())
    assert not found, f"docs/{page.relative_to(DOCS)}: " + "; ".join(f"line {n}: {w} {m!r}" for n, w, m in found[:12])


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_a_user_page_has_an_example(page):
    assert re.search(r"^(```|:::)(?!\{toctree\})", page.read_text(), re.MULTILINE), f"docs/{page.relative_to(DOCS)} has no code block"


def test_there_are_user_pages():
    names = {str(p.relative_to(DOCS)) for p in USER_PAGES}
    assert {"index.md", "getting-started.md", "deploy-beyond-cnn.md", "tutorials/deploy-pytorch.md",
            "engines/shift_mac.md"} <= names
    assert not NOT_USER & names
