"""The one-pass setting of the efficiency study: a pool large enough that no prompt is seen twice,
so that A*-PO pays Stage 1 for every prompt it trains on, once (in the main runs the pool is
revisited and Stage 1 amortised). A*-PO streams Stage 1 there
(:mod:`astarpo.llm.training.stream`): V* of each prompt is estimated when the prompt is first
drawn, inside the training clock, so it pays for no prompt it does not train on.

A run that trains on ``rate`` prompts per second of Stage 2 and spends ``s1`` seconds of Stage 1
per pool prompt inside its budget ``B`` trains on ``rate * (B - s1 * P)`` prompts of a pool of
``P``; it never revisits one when that is at most ``P``::

    P >= rate * B / (1 + rate * s1)          (s1 = 0 for the algorithms without Stage 1)

The pool is the largest such bound over the main runs, times ``margin``, rounded up to whole
steps (:func:`one_pass_pool_size`); the report gives the passes each run made.
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import paired_ratio
from experiments.efficiency.mechanism import seen
from experiments.efficiency.summary import REUSED
from experiments.harness.report import fmt, fmt_ci, fmt_ratio, table

__all__ = ["ONE_PASS_ARMS", "markdown_lines", "one_pass_pool_size"]

#: The algorithms run again in the one-pass setting (those of the study's ``algos``).
ONE_PASS_ARMS = ("astarpo", "grpo")


def one_pass_pool_size(
    runs: list[dict[str, Any]],
    budget_s: float,
    batch_size: int,
    margin: float = 1.1,
    limit: int | None = None,
) -> dict[str, Any]:
    """The one-pass pool size from the main runs of :data:`ONE_PASS_ARMS` (see the module doc).

    Args:
        runs: The main runs' results (``arm``, ``seed``, ``steps``, ``train_s``, ``stage1_s``,
            ``pool``).
        budget_s: A run's wall-clock budget ``B``.
        batch_size: Prompts per step (the size is a multiple of it).
        margin: Factor over the largest bound, > 0.
        limit: Most prompts available (None: no limit); a larger size is capped.

    Returns:
        ``pool_size``; per arm ``need`` (the largest bound over its seeds), ``rate`` and
        ``stage1_s_per_prompt`` (of that seed); ``margin``; ``capped``.

    Raises:
        ValueError: no run of :data:`ONE_PASS_ARMS`, one without Stage 2 time, or ``margin``,
            ``budget_s`` or ``batch_size`` not positive.
    """
    if not (budget_s > 0 and batch_size > 0 and margin > 0):
        raise ValueError(
            f"budget_s, batch_size and margin must be > 0, got {budget_s}, {batch_size}, {margin}."
        )
    need: dict[str, float] = {}
    rate: dict[str, float] = {}
    s1: dict[str, float] = {}
    for r in (r for r in runs if r["arm"] in ONE_PASS_ARMS):
        if not r["train_s"] > 0:
            raise ValueError(f"run {r['arm']} seed {r['seed']} has no Stage 2 time.")
        per_s, per_prompt = seen(r, batch_size) / r["train_s"], r["stage1_s"] / r["pool"]
        bound = per_s * budget_s / (1.0 + per_s * per_prompt)
        if bound > need.get(r["arm"], -1.0):
            need[r["arm"]], rate[r["arm"]], s1[r["arm"]] = bound, per_s, per_prompt
    if not need:
        raise ValueError(f"no main run of {ONE_PASS_ARMS} to size the one-pass pool from.")
    size = batch_size * math.ceil(margin * max(need.values()) / batch_size)
    capped = limit is not None and size > limit
    return {
        "pool_size": min(size, limit) if limit is not None else size,
        "need": need,
        "rate": rate,
        "stage1_s_per_prompt": s1,
        "margin": margin,
        "capped": capped,
    }


def _ratios(summary: dict[str, Any], name: str, labels: list[str]) -> list[str]:
    """``name``'s time to each target over GRPO's, paired by seed (n/a without both)."""
    arms = summary["arms"]
    if name not in arms or "grpo" not in arms:
        return ["n/a"] * len(labels)
    ttt = arms[name]["time_to_target"], arms["grpo"]["time_to_target"]
    return [fmt_ratio(paired_ratio(ttt[0][k]["times"], ttt[1][k]["times"])) for k in labels]


def markdown_lines(one_pass: dict[str, Any], main_summary: dict[str, Any]) -> list[str]:
    """The report's one-pass section: the pool, per run its passes, Stage 1 time and final
    expected accuracy beside the main runs', and A*-PO's time-to-target ratios to GRPO's in both
    settings (``one_pass``: ``bench.json``'s ``"one_pass"``; ``main_summary``: its
    ``"summary"``)."""
    sizing, s = one_pass["sizing"], one_pass["summary"]
    lines = [
        "",
        "## One pass: no prompt seen twice",
        "",
        f"Pool of {sizing['pool_size']} prompts (the main runs' pool revisited; here the "
        "largest bound rate x budget / (1 + rate x Stage 1 s per prompt) over the main runs, "
        + ", ".join(f"{a} {v:.0f}" for a, v in sizing["need"].items())
        + f", times {sizing['margin']:g}"
        + (", capped by the prompts available" if sizing["capped"] else "")
        + "). Same seeds, learning rates and targets as the main runs; A*-PO streams Stage 1 "
        "(V* of each prompt estimated when first drawn, N as in the main runs, inside the "
        "budget), so it pays Stage 1 for the prompts it trains on and no others.",
        "",
    ]
    rows = []
    for name, rv in s["mechanism"]["revisits"].items():  # not REUSED: the ratios below
        a, main = s["arms"][name], main_summary["arms"].get(name)
        cell = fmt(main["final"]["expected_accuracy"]["mean"]) if main is not None else "n/a"
        used, fin = f"{rv['passes']:.2f} ({rv['max_passes']:.2f})", a["final"]["expected_accuracy"]
        stage1 = a["phases_s"].get("stage1", 0.0)  # up front or streamed
        rows.append([name, used, f"{stage1:.1f}", fmt_ci(fin), cell])
    header = ["run", "passes over pool (max)", "Stage 1 s", "expected acc, one pass"]
    lines += table([*header, "expected acc, main"], rows)
    if "grpo" in s["ratios"] and "grpo" in main_summary["ratios"]:
        labels = list(s["targets"])
        settings = [
            ("main (pool revisited)", main_summary, "astarpo"),
            ("one pass", s, "astarpo"),
            ("main, Stage 1 reused", main_summary, REUSED),
            ("one pass, Stage 1 reused", s, REUSED),
        ]
        rows = [[label, *_ratios(summary, name, labels)] for label, summary, name in settings]
        lines += ["", "A*-PO's time to target over GRPO's (< 1: A*-PO faster), paired by seed:", ""]
        lines += table(["setting", *labels], rows)
        lines += [
            "",
            "Time to target is read on the evaluations (every `eval_every_seconds` of "
            "training): a target reached before the first one is read on the straight line "
            "from the reference to it.",
        ]
    return lines
