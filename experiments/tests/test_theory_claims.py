"""docs/theory.md's claims table: every verdict recomputed from the committed JSON.

The test fails when the page's text disagrees with what the rules of
``experiments.theory_claims.verdicts`` give on ``docs/_static/theory/*.json``, or when the page is
not
what ``fill_page.py`` renders from the template and that JSON.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from astarpo.commands.theory import NAMES
from experiments.theory_claims import claims_baselines
from experiments.theory_claims.claims import claims
from experiments.theory_claims.tally import by_source, counts
from experiments.theory_claims.verdicts import (
    RULES,
    SOURCES,
    WORDS,
    Claim,
    bound,
    combine,
    converges,
    order,
    rate,
)

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "_static" / "theory"
PAGE = ROOT / "docs" / "theory.md"
INDEX = ROOT / "docs" / "index.md"
HEAD = (
    "| source | claim (*who said it*) | measured (experiment: numbers [95% interval]) "
    "| verdict (rule) |"
)
#: A tally line of the page, e.g. "- **paper** (9 claims): counted as evidence 2 agree, ...".
TALLY = re.compile(
    r"^- \*\*(?P<source>\w+)\*\* \((?P<n>\d+) claims\): counted as evidence (?P<agrees>\d+) "
    r"agree, (?P<disagrees>\d+) disagree, (?P<partly>\d+) partly, (?P<inconclusive>\d+) "
    r"inconclusive; not counted (?P<identity>\d+) identity checks, (?P<untestable>\d+) not "
    r"testable\.$",
    re.M,
)


def _results() -> dict[str, Any]:
    return {n: json.loads((STATIC / f"{n}.json").read_text()) for n in NAMES}


@pytest.fixture(scope="module")
def rows() -> list[Claim]:
    return claims(_results())


def _page_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = lines.index(HEAD) + 2
    out = []
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        out.append([c.strip() for c in line[2:-2].split(" | ")])
    return out


def _mismatches(text: str, rows: list[Claim]) -> list[str]:
    """What the page's claims table says differently from the computed rows."""
    page = _page_rows(text)
    if len(page) != len(rows):
        return [f"the page has {len(page)} claims, the JSON gives {len(rows)}"]
    out = []
    for cells, row in zip(page, by_source(rows), strict=True):
        who = f" (*{row.said_by}*)" if row.said_by else ""
        want = [row.source, row.claim + who, row.measured, f"{row.verdict} ({row.rule})"]
        if cells != want:
            out.append(f"{row.claim}: page {cells!r}, computed {want!r}")
    return out


def _tally_mismatches(text: str, rows: list[Claim]) -> list[str]:
    """The page's per-source tally against a count of the rows made here, independently."""
    want = Counter((r.source, r.word) for r in rows)
    found = {m["source"]: m for m in TALLY.finditer(text)}
    if list(found) != list(SOURCES):
        return [f"the page tallies the sources {list(found)}, not {list(SOURCES)}"]
    key = {
        "agrees": "agrees",
        "disagrees": "disagrees",
        "partly": "partly",
        "inconclusive": "inconclusive",
        "identity check": "identity",
        "not testable": "untestable",
    }
    out = []
    for src, m in found.items():
        if int(m["n"]) != sum(r.source == src for r in rows):
            out.append(f"{src}: the page counts {m['n']} claims")
        for word, group in key.items():
            if int(m[group]) != want[src, word]:
                out.append(f"{src}: the page counts {m[group]} {word}, the JSON {want[src, word]}")
    return out


def test_every_verdict_on_the_page_is_the_computed_one(rows: list[Claim]) -> None:
    assert _mismatches(PAGE.read_text(), rows) == []


def test_every_row_has_a_known_rule_word_and_an_interval(rows: list[Claim]) -> None:
    for row in rows:
        assert row.rule in RULES, row.rule
        assert row.word in WORDS, row.verdict
        if row.rule == "identity":
            assert row.word == "identity check"
        if row.rule == "untestable":
            assert row.word == "not testable"
        if row.word not in ("identity check", "not testable") and row.rule != "formula":
            # an interval (or an exact, paired comparison) behind every counted verdict
            assert "[" in row.measured + row.verdict or "exact" in row.verdict, row.claim
    c = counts(rows)
    assert sum(c.values()) == len(rows)
    assert c["identity check"] >= 5 and c["not testable"] == 4


def test_the_page_counts_and_states_the_rules(rows: list[Claim]) -> None:
    text = PAGE.read_text()
    assert _tally_mismatches(text, rows) == []
    assert sum(sum(counts(rows, src).values()) for src in SOURCES) == len(rows)
    for rule in RULES.values():
        assert rule in text


def test_every_claim_has_one_of_the_three_sources(rows: list[Claim]) -> None:
    assert {r.source for r in rows} == set(SOURCES)
    # the paper's own claims: its abstract, its setting, its filter, its table, its theorem
    paper = [r for r in rows if r.source == "paper"]
    assert 5 <= len(paper) <= 12
    with pytest.raises(ValueError, match="said_by"):
        Claim("c", "old page", "m", "agrees: x", "order")


@pytest.mark.pages
def test_the_page_is_what_fill_page_renders() -> None:
    from experiments.theory_claims import fill_page

    assert fill_page.render() == PAGE.read_text(), (
        "docs/theory.md is stale: run python -m experiments.theory_claims.fill_page"
    )


def test_rules_decide_as_stated() -> None:
    assert rate((-0.84, -0.96, -0.71), -0.75)[0] == "agrees"
    assert rate((-1.18, -1.40, -0.95), -0.75)[0] == "disagrees"
    assert bound((-0.82, -0.90, -0.74), -0.5)[0] == "agrees"  # faster than the bound
    assert bound((-0.3, -0.4, -0.2), -0.5)[0] == "disagrees"  # slower
    assert converges((-0.1, -0.2, 0.01))[0] == "disagrees"
    assert order((1.0, 0.9, 1.1), (2.0, 1.5, 2.5)) == "lower"
    assert order((1.0, 0.9, 1.6), (2.0, 1.5, 2.5)) == "overlap"
    assert combine(["agrees", "agrees"]) == "agrees"
    assert combine(["agrees", "disagrees"]) == "partly"


def test_a_wrong_verdict_on_the_page_is_caught(rows: list[Claim]) -> None:
    """Flip one verdict in a copy of the page: the comparison must see it."""
    text = PAGE.read_text()
    row = next(r for r in rows if r.word == "disagrees")
    flipped = text.replace(f"| {row.verdict} (", "| agrees: typed by hand (", 1)
    assert flipped != text
    assert len(_mismatches(flipped, rows)) == 1


def test_a_flipped_verdict_breaks_the_tally(rows: list[Claim]) -> None:
    """One row's verdict flipped: the committed page's tally no longer matches."""
    i = next(i for i, r in enumerate(rows) if r.source == "paper" and r.word == "disagrees")
    flipped = [*rows[:i], dataclasses.replace(rows[i], verdict="agrees: flipped"), *rows[i + 1 :]]
    problems = _tally_mismatches(PAGE.read_text(), flipped)
    assert any(p.startswith("paper: the page counts") for p in problems), problems
    assert _mismatches(PAGE.read_text(), flipped)


def test_a_changed_rule_changes_the_tally(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recompute every row from the JSON with the order rule broken (it never separates two
    intervals): verdicts flip, and the committed page's tally no longer matches."""
    monkeypatch.setattr(claims_baselines, "order", lambda a, b: "overlap")
    broken = claims(_results())
    assert _tally_mismatches(PAGE.read_text(), broken)


def test_the_index_says_what_the_bound_rule_shows(rows: list[Claim]) -> None:
    """docs/index.md's first finding states the last-iterate rate exactly as the rule does."""
    row = next(r for r in rows if r.claim.startswith("Last iterate with"))
    detail = row.verdict.split(": ", 1)[1]
    phrase = (
        "faster than"
        if "lies below" in detail
        else "slower than"
        if "lies above" in detail
        else "not significantly slower than"
    )
    first = next(line for line in INDEX.read_text().splitlines() if line.startswith("| On exact"))
    assert f"{phrase} the standard $T^{{-1/2}}$ rate" in first, first
    assert "at least as fast" not in first
