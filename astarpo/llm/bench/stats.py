"""Statistics of the efficiency benchmark: intervals, time to target, curve bands, the LR rule.

Pure functions on plain lists (no torch), so the summary of a run can be checked on synthetic
curves with known answers:

* :func:`t_interval`: mean and two-sided Student-t interval over seeds;
* :func:`time_to_target`: first time a curve reaches a target, linearly interpolated between the
  two evaluations that bracket the crossing (``None``: not reached);
* :func:`paired_ratio`: the geometric mean over seeds of ``a_s / b_s`` with a t-interval on the
  log scale (seeds share the data order, so runs of the same seed are paired);
* :func:`band`: mean and interval of several curves on a common time grid;
* :func:`curve_area`: the time-average of a curve over ``[0, horizon]`` (the LR rule's score);
* :func:`select_lr`: the one learning-rate rule of the benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats as _scipy_stats

__all__ = [
    "band",
    "curve_area",
    "extend_grid",
    "paired_ratio",
    "select_lr",
    "t_interval",
    "target_levels",
    "time_to_target",
    "value_at",
]

NAN = float("nan")


def t_interval(
    xs: Sequence[float | None],
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``xs`` with a two-sided Student-t interval
    (``scipy.stats.t.interval`` at ``level``, ``n - 1`` degrees of freedom, scale the standard
    error ``s / sqrt(n)``).

    ``None`` and NaN values are left out. With fewer than two values the interval is
    ``(nan, nan)``; with none the mean is nan too. ``bounds=(lo, hi)`` clips the interval to
    the range the quantity can take (an accuracy: ``(0, 1)``), so a band over few seeds never
    leaves it.
    """
    vals = np.array([float(x) for x in xs if x is not None and not math.isnan(float(x))])
    if not vals.size:
        return NAN, NAN, NAN
    mean = float(vals.mean())
    if vals.size < 2:
        return mean, NAN, NAN
    sem = float(vals.std(ddof=1)) / math.sqrt(vals.size)
    if sem == 0.0:
        low = high = mean
    else:
        low, high = (float(x) for x in _scipy_stats.t.interval(level, vals.size - 1, mean, sem))
    if bounds is not None:
        low, high = min(max(low, bounds[0]), bounds[1]), min(max(high, bounds[0]), bounds[1])
    return mean, low, high


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


def paired_ratio(
    a: Sequence[float | None], b: Sequence[float | None], level: float = 0.95
) -> dict[str, float | int]:
    """Ratio ``a / b`` over paired seeds: geometric mean and t-interval of the log ratios.

    Pairs where either value is ``None`` (e.g. target not reached) are left out and counted.

    Returns:
        ``{"ratio", "low", "high", "pairs", "missing"}`` (nan without a usable pair; the
        interval needs two pairs).
    """
    if len(a) != len(b):
        raise ValueError(f"a ({len(a)}) and b ({len(b)}) must be paired (same length).")
    logs = [
        math.log(x / y)
        for x, y in zip(a, b, strict=True)
        if x is not None and y is not None and x > 0 and y > 0
    ]
    mean, low, high = t_interval(logs, level)
    return {
        "ratio": math.exp(mean) if logs else NAN,
        "low": math.exp(low) if not math.isnan(low) else NAN,
        "high": math.exp(high) if not math.isnan(high) else NAN,
        "pairs": len(logs),
        "missing": len(a) - len(logs),
    }


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
