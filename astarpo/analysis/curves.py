"""Reading a measured curve (a metric at a run's evaluations): pure functions on plain lists.

:func:`time_to_target` (the first time a curve reaches a target, linear between the two
evaluations that bracket the crossing; ``None``: not reached), :func:`value_at` (the curve at a
time: linear between evaluations, held after the last), :func:`curve_area` (its time-average
over ``[0, horizon]``, a sweep's score) and :func:`target_levels`. The interval of several
seeds' curves is :func:`astarpo.analysis.stats.seed_curve`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["curve_area", "target_levels", "time_to_target", "value_at"]


def time_to_target(times: Sequence[float], values: Sequence[float], target: float) -> float | None:
    """First time the curve ``(times, values)`` reaches ``target`` (see the module doc); a
    curve that starts at or above it returns its first time."""
    if len(times) != len(values):
        raise ValueError(f"times ({len(times)}) and values ({len(values)}) differ in length.")
    for i, (t, v) in enumerate(zip(times, values, strict=True)):
        if v >= target:
            if i == 0 or values[i - 1] >= v:
                return float(t)
            t0, v0 = times[i - 1], values[i - 1]
            return float(t0 + (target - v0) / (v - v0) * (t - t0))
    return None


def value_at(times: Sequence[float], values: Sequence[float], t: float) -> float:
    """The curve at time ``t`` (``np.interp``): linear between evaluations, held after the last
    one, the first value before the first one; NaN without evaluations."""
    if not len(times):
        return float("nan")
    return float(np.interp(t, np.asarray(times, float), np.asarray(values, float)))


def curve_area(times: Sequence[float], values: Sequence[float], horizon: float) -> float:
    """Time-average of the curve over ``[0, horizon]`` (``np.trapezoid`` on the evaluations and
    both ends, read with :func:`value_at`): high when a run gets good early and stays good."""
    if horizon <= 0:
        raise ValueError(f"horizon must be > 0, got {horizon}.")
    grid = np.array(sorted({0.0, horizon, *[float(t) for t in times if 0.0 < t < horizon]}))
    ys = np.array([value_at(times, values, float(t)) for t in grid])
    return float(np.trapezoid(ys, grid)) / horizon


def target_levels(
    reference: float, best_final: float, fractions: Sequence[float]
) -> dict[str, float]:
    """Targets ``reference + f * (best_final - reference)`` keyed by the percentage ``f``."""
    return {f"{round(100 * f)}%": reference + f * (best_final - reference) for f in fractions}
