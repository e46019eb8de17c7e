"""Summaries over seeds: means with 95% intervals and fitted log-log slopes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["fit_slope", "mean_ci"]


def _t_interval(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.stats import t as student_t

    n = v.shape[0]
    mean = v.mean(0)
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, student_t.ppf(0.975, n - 1) * v.std(0, ddof=1) / math.sqrt(n)


def mean_ci(values: np.ndarray) -> dict[str, list[float] | float]:
    """Means over the seeds (axis 0) with 95% Student-t intervals.

    Returns:
        ``mean``/``lo``/``hi`` (arithmetic) and, for log-scale plots, ``gmean``/``glo``/``ghi``:
        the geometric mean and the interval of the mean of ``log10`` (values floored at 1e-300).
    """
    v = np.asarray(values, dtype=np.float64)
    mean, half = _t_interval(v)
    lmean, lhalf = _t_interval(np.log10(np.maximum(v, 1e-300)))

    def exp10(z: np.ndarray) -> list[float] | float:
        return _list(10 ** np.clip(z, -300, 300))

    return {
        "mean": _list(mean),
        "lo": _list(mean - half),
        "hi": _list(mean + half),
        "gmean": exp10(lmean),
        "glo": exp10(lmean - lhalf),
        "ghi": exp10(lmean + lhalf),
    }


def _list(x: np.ndarray | float) -> list[float] | float:
    return np.asarray(x, dtype=float).tolist()  # type: ignore[no-any-return]


def fit_slope(x: np.ndarray, y: np.ndarray, x_min: float = 0.0) -> dict[str, Any]:
    """Log-log least-squares slope of ``y [S, K]`` on ``x [K]`` per seed, for ``x >= x_min``.

    Returns:
        ``{"slope", "lo", "hi", "per_seed", "x_min", "x_max"}``: the mean slope over seeds and
        its 95% t-interval (``lo``/``hi`` are ``None`` with one seed).
    """
    x = np.asarray(x, dtype=float)
    keep = x >= x_min
    lx = np.log10(x[keep])
    ly = np.log10(np.maximum(np.atleast_2d(y)[:, keep], 1e-300))
    slopes = np.array([np.polyfit(lx, row, 1)[0] for row in ly])
    out: dict[str, Any] = {
        "slope": float(slopes.mean()),
        "per_seed": slopes.tolist(),
        "x_min": float(x[keep].min()),
        "x_max": float(x[keep].max()),
        "lo": None,
        "hi": None,
    }
    if len(slopes) > 1:
        ci = mean_ci(slopes[:, None])
        out["lo"], out["hi"] = float(ci["lo"][0]), float(ci["hi"][0])  # type: ignore[index]
    return out
