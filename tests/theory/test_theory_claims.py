"""docs/theory.md's claims table: every verdict recomputed from the committed JSON.

The test fails when the page's text disagrees with what the rules of
``astarpo.theory.verdicts`` give on ``docs/_static/theory/*.json``, or when the page is not
what ``fill_page.py`` renders from the template and that JSON.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from astarpo.commands.theory import NAMES
from astarpo.theory.claims import claims, counts
from astarpo.theory.verdicts import RULES, WORDS, Claim, bound, combine, converges, order, rate

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "docs" / "_static" / "theory"
PAGE = ROOT / "docs" / "theory.md"
HEAD = "| claim; *source* | measured (experiment: numbers [95% interval]) | verdict (rule) |"


@pytest.fixture(scope="module")
def rows() -> list[Claim]:
    return claims({n: json.loads((STATIC / f"{n}.json").read_text()) for n in NAMES})


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
    for cells, row in zip(page, rows, strict=True):
        want = [f"{row.claim}; *{row.source}*", row.measured, f"{row.verdict} ({row.rule})"]
        if cells != want:
            out.append(f"{row.claim}: page {cells!r}, computed {want!r}")
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
    c = counts(rows)
    assert f"Counted as evidence: {c['agrees']} agree, {c['disagrees']}" in text
    for rule in RULES.values():
        assert rule in text


def test_the_page_is_what_fill_page_renders() -> None:
    spec = importlib.util.spec_from_file_location("fill_page", STATIC / "fill_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == PAGE.read_text(), (
        "docs/theory.md is stale: run python docs/_static/theory/fill_page.py"
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
