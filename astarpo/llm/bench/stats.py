"""Statistics of the efficiency benchmark: intervals, time to target, curve bands, the LR rule.

Pure functions on plain lists (no torch), so the summary of a run can be checked on synthetic
curves with known answers:

* :func:`time_to_target`: first time a curve reaches a target, linearly interpolated between the
  two evaluations that bracket the crossing (``None``: not reached);
* :func:`band`: mean and interval of several curves on a common time grid;
* :func:`curve_area`: the time-average of a curve over ``[0, horizon]`` (the LR rule's score);
* :func:`select_lr`: the one learning-rate rule of the benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from astarpo.analysis.stats import NAN, t_interval

__all__ = [
    "band",
    "curve_area",
    "extend_grid",
    "select_lr",
    "target_levels",
    "time_to_target",
    "value_at",
]


def time_to_target(times: Sequence[float], values: Sequence[float], target: float) -> float | None:
    """First time the curve ``(times, values)`` reaches ``target``.

    The crossing between two evaluations is placed by linear interpolation; a curve that starts
    at or above the target returns its first time. ``None`` when no evaluation reaches it.
    """
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
    one, the first value before the first one."""
    if not len(times):
        return NAN
    return float(np.interp(t, np.asarray(times, float), np.asarray(values, float)))


def curve_area(times: Sequence[float], values: Sequence[float], horizon: float) -> float:
    """Time-average of the curve over ``[0, horizon]`` (``np.trapezoid`` on the evaluations and
    both ends, read with :func:`value_at`, the last value held to the horizon): high when a
    run gets good early and stays good."""
    if horizon <= 0:
        raise ValueError(f"horizon must be > 0, got {horizon}.")
    grid = np.array(sorted({0.0, horizon, *[float(t) for t in times if 0.0 < t < horizon]}))
    ys = np.array([value_at(times, values, float(t)) for t in grid])
    return float(np.trapezoid(ys, grid)) / horizon


def band(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]],
    grid: Sequence[float],
    bounds: tuple[float, float] | None = None,
) -> dict[str, list[float]]:
    """Mean and t-interval of ``curves`` (``(times, values)`` each) at every time of ``grid``
    (each curve read with :func:`value_at`, only up to its last evaluation; the interval
    clipped to ``bounds``, see :func:`t_interval`)."""
    mean, low, high = [], [], []
    for t in grid:
        vals = [value_at(ts, vs, t) for ts, vs in curves if ts and t <= ts[-1] + 1e-9]
        m, lo, hi = t_interval(vals, bounds=bounds)
        mean.append(m)
        low.append(lo)
        high.append(hi)
    return {"time": [float(t) for t in grid], "mean": mean, "low": low, "high": high}


def target_levels(
    reference: float, best_final: float, fractions: Sequence[float]
) -> dict[str, float]:
    """Targets ``reference + f * (best_final - reference)`` keyed by the percentage ``f``."""
    return {f"{round(100 * f)}%": reference + f * (best_final - reference) for f in fractions}


def select_lr(scores: Mapping[float, float]) -> float:
    """The learning-rate rule: the highest score (:func:`curve_area` of the sweep run), the
    smaller learning rate on a tie (within 1e-9). NaN scores (a diverged run) never win."""
    if not scores:
        raise ValueError("select_lr needs at least one (learning rate, score) pair.")
    best_lr, best = None, -math.inf
    for lr in sorted(scores):
        s = scores[lr]
        if not math.isnan(s) and s > best + 1e-9:
            best_lr, best = lr, s
    return float(best_lr if best_lr is not None else min(scores))


def extend_grid(scores: Mapping[float, float]) -> float | None:
    """The next learning rate to try when :func:`select_lr`'s choice is an edge of the rates
    tried: one step of the grid beyond that edge (the ratio of the two rates nearest it, e.g.
    3e-5 below a grid 1e-4, 3e-4, ...), rounded to 3 significant digits. None when the choice
    is bracketed (a rate tried on each side), or fewer than two rates were tried."""
    rates = sorted(scores)
    if len(rates) < 2:
        return None
    chosen = select_lr(scores)
    if chosen == rates[0]:
        return float(f"{rates[0] * rates[0] / rates[1]:.3g}")
    if chosen == rates[-1]:
        return float(f"{rates[-1] * rates[-1] / rates[-2]:.3g}")
    return None
