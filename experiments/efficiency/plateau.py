"""The plateau rule of the paper protocol (``--protocol paper``): has the best algorithm's
held-out expected accuracy stopped rising by the last step? Read on the means of the
evaluations in the run's last two quarters, as a slope per :data:`PLATEAU_STEPS` steps, paired
over seeds with a 95% interval (:func:`plateau`).

The rule was stated before the 1,000-step run (``docs/figures/paper_1000.json``) was made;
an earlier rule read two single evaluations (the last step against ``3T/4``), which swing with
the policy: a 1,600-step pilot (``docs/figures/paper_plateau_pilot.json``) saw it flip from
one horizon to the next on runs whose window means stayed level. That reading is still
returned, as ``gain``.
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import paired_difference, value_at
from experiments.efficiency.summary import curve

__all__ = [
    "PLATEAU_BOUND",
    "PLATEAU_GAIN",
    "PLATEAU_STEPS",
    "by_horizon",
    "plateau",
    "value_at_step",
]

#: The plateau rule (:func:`plateau`), on the best run name's window gain read as a rate per
#: :data:`PLATEAU_STEPS` steps: its mean must be below this (expected accuracy; 0.02 over the
#: last quarter of a 1,000-step run) ...
PLATEAU_GAIN = 0.08
#: ... and the upper end of its 95% interval below this (a rise this fast is ruled out; one seed
#: gives no interval, so no plateau).
PLATEAU_BOUND = 0.2
#: The steps the plateau rule's rates are per.
PLATEAU_STEPS = 1000


def value_at_step(run: dict[str, Any], key: str, steps: float) -> float | None:
    """``run``'s held-out ``key`` at step ``steps``, on the straight line between its
    evaluations (``None`` for a run without evaluations)."""
    times, values = curve(run, key, "step")
    return value_at(times, values, steps) if times else None


def _window_mean(run: dict[str, Any], low: float, high: float) -> float | None:
    """The mean expected accuracy of ``run``'s evaluations at steps in ``(low, high]``."""
    steps, values = curve(run, "expected_accuracy", "step")
    inside = [v for s, v in zip(steps, values, strict=True) if low < s <= high]
    return sum(inside) / len(inside) if inside else None


def plateau(runs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    """The plateau rule on one run name's seeds.

    ``window`` is the rule's reading: per seed, the mean expected accuracy over the evaluations
    at steps in the last quarter, ``(3T/4, T]``, minus the mean over those in the quarter
    before, ``(T/2, 3T/4]`` (a seed with an empty window is left out), paired over the seeds
    with its 95% Student-t interval. ``rate`` is the same per :data:`PLATEAU_STEPS` steps (the
    window gain times ``PLATEAU_STEPS / (T/4)``): the rule reads a slope, so a short run's
    small gain over its short quarter is not taken for a plateau. ``plateaued``: the rate's mean
    is below :data:`PLATEAU_GAIN` and its interval's upper end below :data:`PLATEAU_BOUND`
    (fewer than two seeds: never).

    ``gain`` is the earlier rule's reading, printed beside: the paired difference of the
    expected accuracy at the last step and at ``3T/4`` (two single evaluations, which swing
    with the policy from one evaluation to the next).

    Args:
        runs: one run name's runs (``evals`` with ``step`` and ``expected_accuracy``).
        steps: ``T``, the steps every run trained for.

    Returns:
        ``{"window", "rate", "gain", "plateaued", "rule"}``; ``rate`` is ``{"diff", "low",
        "high"}``, ``rule`` is ``{"gain", "bound", "per_steps"}``.
    """
    at = [[value_at_step(r, "expected_accuracy", s) for r in runs] for s in (steps, 0.75 * steps)]
    last = [_window_mean(r, 0.75 * steps, steps) for r in runs]
    before = [_window_mean(r, 0.5 * steps, 0.75 * steps) for r in runs]
    window = paired_difference(last, before)
    scale = PLATEAU_STEPS / (steps / 4)
    rate = {k: float(window[k]) * scale for k in ("diff", "low", "high")}
    met = (
        window["pairs"] >= 2
        and math.isfinite(rate["high"])
        and rate["diff"] < PLATEAU_GAIN
        and rate["high"] < PLATEAU_BOUND
    )
    return {
        "window": window,
        "rate": rate,
        "gain": paired_difference(at[0], at[1]),
        "plateaued": bool(met),
        "rule": {"gain": PLATEAU_GAIN, "bound": PLATEAU_BOUND, "per_steps": PLATEAU_STEPS},
    }


def by_horizon(runs: list[dict[str, Any]], horizons: list[int]) -> list[dict[str, Any]]:
    """The plateau rule read at each horizon ``t`` of longer runs, on the run name that is best
    at ``t``: a run's first ``t`` steps stand for a ``t``-step run where the learning rate is
    constant and each step is seeded by its index (the library's trainers), so one long run
    answers "from which length on would the rule be met?".

    Args:
        runs: runs of one or more run names (``arm``), each with ``evals`` up to at least the
            largest horizon.
        horizons: the step counts ``t`` to read.

    Returns:
        Per horizon ``{"steps", "best", "accuracy", **plateau(best's runs, t)}``, ``accuracy``
        the mean expected accuracy at step ``t`` per run name.
    """
    names = sorted({r["arm"] for r in runs})
    rows = []
    for t in horizons:
        acc = {}
        for name in names:
            got = [value_at_step(r, "expected_accuracy", t) for r in runs if r["arm"] == name]
            vals = [v for v in got if v is not None]
            acc[name] = sum(vals) / len(vals) if vals else math.nan
        best = max(names, key=lambda n: -math.inf if math.isnan(acc[n]) else acc[n])
        rows.append(
            {
                "steps": t,
                "best": best,
                "accuracy": acc,
                **plateau([r for r in runs if r["arm"] == best], t),
            }
        )
    return rows
