"""Rates fitted to the experiments' gaps: log-log slopes over seeds, local slopes, and the
additive rate model ``gap ~ a T^-p + b N^-q + c`` with bootstrap intervals (the intervals
themselves come from :mod:`astarpo.analysis.stats`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci

__all__ = ["fit_additive", "fit_slope", "local_slopes"]


def fit_slope(
    x: np.ndarray, y: np.ndarray, x_min: float = 0.0, x_max: float = math.inf
) -> dict[str, Any]:
    """Log-log least-squares slope of ``y [S, K]`` on ``x [K]`` per seed, ``x_min <= x <= x_max``.

    Returns:
        ``{"slope", "lo", "hi", "per_seed", "x_min", "x_max"}``: the mean slope over seeds and
        its 95% t-interval (``lo``/``hi`` are ``None`` with one seed).
    """
    x = np.asarray(x, dtype=float)
    keep = (x >= x_min) & (x <= x_max)
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


def local_slopes(x: np.ndarray, y: np.ndarray) -> list[float]:
    """Slopes of successive points on log-log axes: ``dlog y / dlog x`` between ``x[i], x[i+1]``.

    A power law has equal local slopes; a curve that bends does not.
    """
    lx = np.log10(np.asarray(x, dtype=float))
    ly = np.log10(np.maximum(np.asarray(y, dtype=float), 1e-300))
    return (np.diff(ly) / np.diff(lx)).tolist()


def _additive(params: np.ndarray, t: np.ndarray, n: np.ndarray) -> np.ndarray:
    la, p, lb, q, lc = params
    return np.log(np.exp(la) * t**-p + np.exp(lb) * n**-q + np.exp(lc))


def _product(params: np.ndarray, t: np.ndarray, n: np.ndarray) -> np.ndarray:
    la, p, q, lc = params
    return la - p * np.log(t) + np.log(n**-q + np.exp(lc))


#: name -> (log-model, parameter names, which are fitted as logs, lower and upper bounds)
_MODELS: dict[str, tuple[Any, tuple[str, ...], set[str], list[float], list[float]]] = {
    "additive": (
        _additive,
        ("a", "p", "b", "q", "c"),
        {"a", "b", "c"},
        [-60, 0.0, -60, 0.0, -60],
        [20, 3.0, 20, 3.0, 20],
    ),
    "product": (
        _product,
        ("a", "p", "q", "c"),
        {"a", "c"},
        [-60, 0.0, 0.0, -60],
        [20, 3.0, 3.0, 20],
    ),
}


def _fit_once(model: str, t: np.ndarray, n: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.optimize import least_squares

    fn, names, _, lo, hi = _MODELS[model]
    ly = np.log(np.maximum(y, 1e-300))
    top, low = np.log(y.max()), np.log(y.min() / 2)
    start = {"a": top, "b": top, "c": low, "p": 0.5, "q": 0.5}
    if model == "product":
        start["c"] = -3.0
    x0 = np.clip([start[k] for k in names], np.array(lo) + 1e-6, np.array(hi) - 1e-6)
    fit = least_squares(lambda prm: fn(prm, t, n) - ly, x0, bounds=(lo, hi))
    return fit.x


def fit_additive(
    t: np.ndarray,
    n: np.ndarray,
    gaps: np.ndarray,
    n_boot: int = 200,
    seed: int = 0,
    model: str = "additive",
) -> dict[str, Any]:
    r"""Fit a rate model to the seed-mean gaps of an (N, T) grid, in log space.

    ``model="additive"``: :math:`g(T, N) = a T^{-p} + b N^{-q} + c` (the terms add: a floor in
    N that more steps cannot remove). ``model="product"``: :math:`g = a T^{-p}(N^{-q} + c)`
    (the N term scales the T term: N sets the noise level and more steps remove it).

    Args:
        t: T of each grid cell, ``[K]``.
        n: N of each grid cell, ``[K]``.
        gaps: Gaps per seed and cell, ``[S, K]``; the model is fitted to the mean over seeds.
        n_boot: Bootstrap resamples of the seeds for the 95% intervals.
        seed: Seed of the bootstrap.
        model: ``"additive"`` or ``"product"``.

    Returns:
        The point estimates by name (``a, p, b, q, c`` or ``a, p, q, c``), ``"ci"`` (2.5% and
        97.5% bootstrap percentiles of each), ``"rms_log_residual"`` (the misfit, natural log)
        and ``"model"``.
    """
    fn, names, expo, _, _ = _MODELS[model]
    t, n = np.asarray(t, dtype=float), np.asarray(n, dtype=float)
    g = np.atleast_2d(np.asarray(gaps, dtype=float))
    best = _fit_once(model, t, n, g.mean(0))
    rng = np.random.default_rng(seed)
    boots = np.array(
        [_fit_once(model, t, n, g[rng.integers(0, len(g), len(g))].mean(0)) for _ in range(n_boot)]
    )

    def value(i: int, v: np.ndarray | float) -> float:
        return float(np.exp(v)) if names[i] in expo else float(v)

    lo, hi = np.percentile(boots, [2.5, 97.5], axis=0)
    resid = fn(best, t, n) - np.log(np.maximum(g.mean(0), 1e-300))
    return {
        "model": model,
        **{k: value(i, best[i]) for i, k in enumerate(names)},
        "ci": {k: [value(i, lo[i]), value(i, hi[i])] for i, k in enumerate(names)},
        "rms_log_residual": float(np.sqrt(np.mean(resid**2))),
    }
