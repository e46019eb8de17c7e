"""The claims table's tally: verdicts counted per source, and the rows in the page's order."""

from __future__ import annotations

from experiments.theory_claims.verdicts import SOURCES, WORDS, Claim

__all__ = ["by_source", "counts", "counts_by_source"]


def counts(rows: list[Claim], source: str | None = None) -> dict[str, int]:
    """How many rows (of ``source``, or all) carry each verdict word (see ``verdicts.WORDS``)."""
    return {w: sum(r.word == w and source in (None, r.source) for r in rows) for w in WORDS}


def counts_by_source(rows: list[Claim]) -> dict[str, dict[str, int]]:
    """:func:`counts` for each of ``verdicts.SOURCES``, in that order."""
    return {src: counts(rows, src) for src in SOURCES}


def by_source(rows: list[Claim]) -> list[Claim]:
    """The rows grouped by source (in the order of ``verdicts.SOURCES``), page order within."""
    return [r for src in SOURCES for r in rows if r.source == src]
