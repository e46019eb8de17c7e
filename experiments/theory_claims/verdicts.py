"""The rules that turn a measurement and its 95% interval into a verdict on docs/theory.md.

Each rule takes numbers from the experiments' JSON and returns ``(word, detail)``: ``word`` is
one of :data:`WORDS` and ``detail`` says which numbers decided. :data:`RULES` holds the text
the page prints for each rule, so the page states exactly what is computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astarpo.analysis import interval_order

__all__ = [
    "RULES",
    "SOURCES",
    "WORDS",
    "Claim",
    "bound",
    "combine",
    "converges",
    "coverage_row",
    "fmt",
    "gci",
    "interval",
    "learns",
    "near_optimum",
    "order",
    "rate",
    "slope_ci",
    "two_beta_cell",
]

#: The verdict words, in the order the page counts them.
WORDS = ("agrees", "disagrees", "partly", "inconclusive", "identity check", "not testable")

#: Where a claim comes from, in the order the page groups them: the paper's own claims about its
#: method and setting; what the paper implies (read by the old page, the review, the scripts'
#: use of its update, or this page); standard results checked as controls.
SOURCES = ("paper", "implied", "textbook")

#: Rule name -> the sentence the page prints.
RULES = {
    "rate": "a claimed exponent $e$ *agrees* when the 95% interval of the fitted exponent "
    "contains $e$ and *disagrees* when it excludes it.",
    "bound": "a standard rate $O(T^{e})$ is an upper bound: it *agrees* unless the whole 95% "
    "interval of the fitted exponent lies above $e$ (slower), then it *disagrees*.",
    "converges": "*agrees* when the 95% interval of the fitted exponent lies below 0.",
    "order": "two measurements differ only when their 95% intervals do not overlap (a "
    "conservative test); otherwise *inconclusive*.",
    "learns": "a context group *learns* when the upper end of its final gap's 95% interval is "
    "below half the reference's gap, and *does not learn* when the lower end is above it.",
    "near": r"a run is *at* $\pi^*$ when the upper end of its 95% interval of "
    r"$\mathrm{KL}(\pi_T\|\pi^*)$ is below 0.05 nats.",
    "fit": "of two fitted models the one with the smaller rms log residual fits better when the "
    "difference exceeds the median standard error of a cell's mean log gap; otherwise "
    "*inconclusive*.",
    "formula": "a closed form *agrees* with a measurement when it lies within 1% of it.",
    "identity": "the number is an exact computation or follows from an identity: an *identity "
    "check*, shown for completeness and not counted as evidence.",
    "untestable": "the claim needs what this simulator lacks: *not testable* here.",
}

Interval = tuple[float, float, float]


def fmt(x: float | str, d: int = 2) -> str:
    """``x`` with ``d`` significant digits (``1.2e-5`` style); strings pass through."""
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    return f"{x:.{d}g}".replace("e-0", "e-").replace("e+0", "e+")


def interval(c: Interval, fixed: bool = False, d: int = 2) -> str:
    """``"m [lo, hi]"``: two decimals when ``fixed`` (exponents), else ``d`` significant digits."""
    if fixed:
        return f"{c[0]:.2f} [{c[1]:.2f}, {c[2]:.2f}]"
    return f"{fmt(c[0], d)} [{fmt(c[1], d)}, {fmt(c[2], d)}]"


def rate(c: Interval, e: float) -> tuple[str, str]:
    """Rule ``rate``: is the claimed exponent ``e`` inside the interval ``c = (m, lo, hi)``?"""
    if c[1] <= e <= c[2]:
        return "agrees", f"{interval(c, True)} contains {e:g}"
    return "disagrees", f"{interval(c, True)} excludes {e:g}"


def bound(c: Interval, e: float) -> tuple[str, str]:
    """Rule ``bound``: an upper-bound rate ``T^e`` fails only if the interval lies above ``e``."""
    if c[1] > e:
        return "disagrees", f"{interval(c, True)} lies above {e:g} (slower)"
    if c[2] < e:
        return "agrees", f"{interval(c, True)} lies below {e:g} (faster)"
    return "agrees", f"{interval(c, True)} contains {e:g}"


def converges(c: Interval) -> tuple[str, str]:
    """Rule ``converges``: the fitted exponent's interval lies below 0."""
    if c[2] < 0:
        return "agrees", f"slope {interval(c, True)} < 0"
    return "disagrees", f"slope {interval(c, True)} not below 0"


def order(a: Interval, b: Interval) -> str:
    """Rule ``order``: :func:`~astarpo.analysis.stats.interval_order` of ``a`` against ``b``."""
    return interval_order(a, b)


def learns(c: Interval, reference: float) -> bool | None:
    """Rule ``learns``: True, False, or None when the interval straddles half the reference."""
    if c[2] < reference / 2:
        return True
    if c[1] > reference / 2:
        return False
    return None


def near_optimum(kl: Interval, tol: float = 0.05) -> bool:
    """Rule ``near``: the upper end of the KL interval is below ``tol`` nats."""
    return kl[2] < tol


def combine(words: Sequence[str]) -> str:
    """One word for several sub-verdicts: all equal -> that word; any inconclusive -> partly."""
    if len(set(words)) == 1:
        return words[0]
    return "partly"


@dataclass(frozen=True)
class Claim:
    """One row of the claims table.

    Args:
        claim: What is claimed.
        source: One of :data:`SOURCES`: ``"paper"`` (the paper's own claims about its method
            and setting), ``"implied"`` (what the paper implies) or ``"textbook"`` (a standard
            result checked as a control).
        measured: What was measured, with the interval that decided.
        verdict: ``"word: detail"``; the word is one of :data:`WORDS`.
        rule: The name of the rule of :data:`RULES` that gave the verdict.
        said_by: Who stated it, when not the paper itself (``"old page"``, ``"review"``, ...;
            default ``""``).

    Raises:
        ValueError: for a source outside :data:`SOURCES` or a rule outside :data:`RULES`.
    """

    claim: str
    source: str
    measured: str
    verdict: str
    rule: str
    said_by: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(
                f"source must be one of {SOURCES}, got {self.source!r}; put who said it "
                "(old page, review, ...) in said_by."
            )
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {sorted(RULES)}, got {self.rule!r}.")

    @property
    def word(self) -> str:
        """The verdict's first word(s): ``agrees``, ``disagrees``, ... (see ``WORDS``)."""
        return self.verdict.split(":")[0]


def gci(d: dict[str, Any], i: int = -1) -> tuple[float, float, float]:
    """(geometric mean, lo, hi) of a ``mean_ci`` dict at index ``i``."""
    return d["gmean"][i], d["glo"][i], d["ghi"][i]


def slope_ci(d: dict[str, Any]) -> tuple[float, float, float]:
    """(slope, lo, hi) of a ``fit_slope`` dict."""
    return d["slope"], d["lo"], d["hi"]


def coverage_row(res: dict[str, Any], fam: str, v: float) -> dict[str, Any]:
    """The ``coverage`` row of family ``fam`` at ``v_ref = v`` (``res``: name -> JSON)."""
    return next(r for r in res["coverage"]["families"][fam] if r["v_ref"] == v)


def two_beta_cell(res: dict[str, Any], b1: float, b2: float) -> dict[str, Any]:
    """The ``two-beta`` cell at ``(beta1, beta2)`` (``res``: name -> JSON)."""
    return next(c for c in res["two-beta"]["grid"] if c["beta1"] == b1 and c["beta2"] == b2)
