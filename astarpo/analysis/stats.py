r"""The one statistics module of the package: every interval a figure or a verdict shows.

Pure functions on numbers (no torch), checked against closed forms in
``tests/analysis/test_stats.py``:

* :func:`t_interval`: mean and two-sided Student-t interval of a sample (``None``/NaN left
  out), optionally clipped to the range the quantity can take (``bounds``);
* :func:`mean_interval`: :func:`t_interval` as a JSON-ready dict with the count of values;
* :func:`seed_curve`: several seeds' curves, evaluation by evaluation, with the interval at each;
* :func:`mean_ci`: the same over axis 0 of an array (seeds), with the geometric mean and the
  interval of the mean log for log-scale plots;
* :func:`paired_difference`: ``a - b`` over paired seeds, with its t-interval and p-value;
* :func:`paired_ratio`: ``a / b`` over paired seeds, a t-interval on the log scale (so the
  interval of a ratio of positive quantities stays positive);
* :func:`bootstrap_interval`: the percentile bootstrap of a statistic of few values;
* :func:`log_bootstrap_interval`: the normal bootstrap interval of a positive statistic on the
  log scale (it contains its point);
* :func:`holm`: Holm's step-down adjustment of the p-values of a stated family of comparisons.

Every function returns plain floats and lists (JSON-ready). NaN means "no interval" (fewer than
two values); :func:`astarpo.analysis.figures.errorbars` draws no bar for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "NAN",
    "bootstrap_interval",
    "holm",
    "interval_order",
    "log_bootstrap_interval",
    "mean_ci",
    "mean_interval",
    "paired_difference",
    "paired_ratio",
    "seed_curve",
    "t_interval",
    "t_test_p",
]

#: Not a number: the mean or bound of an interval that has none (fewer than two values).
NAN = float("nan")


def _clean(xs: Sequence[float | None] | np.ndarray) -> np.ndarray:
    """``xs`` as floats with ``None`` and NaN left out."""
    return np.array([float(x) for x in xs if x is not None and not math.isnan(float(x))])


def t_interval(
    xs: Sequence[float | None] | np.ndarray,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float, float]:
    r"""``(mean, low, high)``: the mean of ``xs`` and its two-sided Student-t interval.

    .. math:: \bar x \pm t_{n-1, (1+\text{level})/2}\; s / \sqrt n

    ``None`` and NaN values are left out. With fewer than two values the interval is
    ``(nan, nan)``; with none the mean is nan too. ``bounds=(lo, hi)`` clips the interval to the
    range the quantity can take (an accuracy: ``(0, 1)``; a time or a KL: ``(0, inf)``), so an
    interval over few seeds never leaves it; the mean lies in it whenever the values do.

    Args:
        xs: Values ``[n]``.
        level: Coverage.
        bounds: The quantity's range, or None.

    Returns:
        ``(mean, low, high)`` as floats.
    """
    from scipy.stats import t as student_t

    vals = _clean(xs)
    if not vals.size:
        return NAN, NAN, NAN
    mean = float(vals.mean())
    if vals.size < 2:
        return mean, NAN, NAN
    sem = float(vals.std(ddof=1)) / math.sqrt(vals.size)
    if sem == 0.0:
        low = high = mean
    else:
        low, high = (float(x) for x in student_t.interval(level, vals.size - 1, mean, sem))
    if bounds is not None:
        low, high = min(max(low, bounds[0]), bounds[1]), min(max(high, bounds[0]), bounds[1])
    return mean, low, high


def mean_interval(
    xs: Sequence[float | None] | np.ndarray,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, float | int]:
    """:func:`t_interval` of ``xs`` as ``{"mean", "low", "high", "n"}``, where ``n`` counts the
    values used (``None`` and NaN left out): the form a report stores an interval in."""
    mean, low, high = t_interval(xs, level, bounds)
    return {"mean": mean, "low": low, "high": high, "n": int(_clean(xs).size)}


def seed_curve(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]],
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> dict[str, Any]:
    """Several seeds' curves of one run name, evaluation by evaluation (the evaluations all of
    them have): ``time`` (mean over seeds), ``mean``, ``low``, ``high`` (the 95% t-interval of
    the values, clipped to ``bounds``; NaN with one seed) and ``n`` (seeds)."""
    curves = [c for c in curves if len(c[0])]
    times, mean, low, high = [], [], [], []
    for i in range(min((len(c[0]) for c in curves), default=0)):
        m, lo, hi = t_interval([c[1][i] for c in curves], bounds=bounds)
        times.append(float(np.mean([c[0][i] for c in curves])))
        mean.append(m)
        low.append(lo)
        high.append(hi)
    return {"time": times, "mean": mean, "low": low, "high": high, "n": len(curves)}


def t_test_p(xs: Sequence[float | None] | np.ndarray, null: float = 0.0) -> float:
    """Two-sided p-value of the one-sample t-test of ``mean(xs) == null`` (NaN below 2 values;
    0 or 1 when the values do not vary)."""
    from scipy.stats import t as student_t

    vals = _clean(xs)
    if vals.size < 2:
        return NAN
    sem = float(vals.std(ddof=1)) / math.sqrt(vals.size)
    diff = float(vals.mean()) - null
    if sem == 0.0:
        return 1.0 if diff == 0 else 0.0
    return float(2 * student_t.sf(abs(diff) / sem, vals.size - 1))


def mean_ci(values: np.ndarray | Sequence[Any]) -> dict[str, list[float] | float]:
    """Means over the seeds (axis 0) with 95% Student-t intervals, column by column.

    Returns:
        ``mean``/``lo``/``hi`` (arithmetic) and, for log-scale plots, ``gmean``/``glo``/``ghi``:
        the geometric mean and the interval of the mean of ``log10`` (values floored at 1e-300),
        which stays positive. With one seed the interval is the point.
    """
    from scipy.stats import t as student_t

    v = np.asarray(values, dtype=np.float64)

    def half(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = x.shape[0]
        mean = x.mean(0)
        if n < 2:
            return mean, np.zeros_like(mean)
        sem = x.std(0, ddof=1) / math.sqrt(n)
        return mean, float(student_t.ppf(0.975, n - 1)) * sem

    mean, h = half(v)
    lmean, lh = half(np.log10(np.maximum(v, 1e-300)))

    def out(x: np.ndarray) -> list[float] | float:
        return np.asarray(x, dtype=float).tolist()

    def exp10(z: np.ndarray) -> list[float] | float:
        return out(10 ** np.clip(z, -300, 300))

    return {
        "mean": out(mean),
        "lo": out(mean - h),
        "hi": out(mean + h),
        "gmean": exp10(lmean),
        "glo": exp10(lmean - lh),
        "ghi": exp10(lmean + lh),
    }


def _pairs(a: Sequence[float | None], b: Sequence[float | None]) -> list[tuple[float, float]]:
    if len(a) != len(b):
        raise ValueError(f"a ({len(a)}) and b ({len(b)}) must be paired (same length).")
    return [
        (float(x), float(y))
        for x, y in zip(a, b, strict=True)
        if x is not None and y is not None and not (math.isnan(x) or math.isnan(y))
    ]


def paired_difference(
    a: Sequence[float | None], b: Sequence[float | None], level: float = 0.95
) -> dict[str, float | int]:
    """``a - b`` over paired seeds: the mean difference, its t-interval and p-value.

    Pairs where either value is ``None`` or NaN are left out and counted as ``missing``.

    Returns:
        ``{"diff", "low", "high", "p", "pairs", "missing"}``.
    """
    pairs = _pairs(a, b)
    d = [x - y for x, y in pairs]
    mean, low, high = t_interval(d, level)
    return {
        "diff": mean,
        "low": low,
        "high": high,
        "p": t_test_p(d),
        "pairs": len(d),
        "missing": len(a) - len(d),
    }


def paired_ratio(
    a: Sequence[float | None], b: Sequence[float | None], level: float = 0.95
) -> dict[str, float | int]:
    r"""``a / b`` over paired seeds: the geometric mean of the ratios and its t-interval on the
    log scale, :math:`\exp(\overline{\log(a_s/b_s)} \pm t\, s/\sqrt n)`.

    Seeds that share the data order make runs of one seed a pair. Pairs where either value is
    ``None``, NaN or not positive (a target not reached) are left out and counted.

    Returns:
        ``{"ratio", "low", "high", "p", "pairs", "missing"}``: nan without a usable pair; the
        interval and ``p`` (the t-test of ratio 1) need two pairs.
    """
    logs = [math.log(x / y) for x, y in _pairs(a, b) if x > 0 and y > 0]
    mean, low, high = t_interval(logs, level)
    return {
        "ratio": math.exp(mean) if logs else NAN,
        "low": math.exp(low) if not math.isnan(low) else NAN,
        "high": math.exp(high) if not math.isnan(high) else NAN,
        "p": t_test_p(logs),
        "pairs": len(logs),
        "missing": len(a) - len(logs),
    }


def bootstrap_interval(
    xs: Sequence[float | None] | np.ndarray,
    stat: Callable[[np.ndarray], float] = np.mean,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(stat(xs), low, high)`` with the percentile bootstrap interval over resamples of ``xs``.

    For few seeds or a skewed statistic, where a t-interval's normality is doubtful; the
    resamples come from ``numpy.random.default_rng(seed)``, so the interval is reproducible.
    The percentile interval of a biased statistic can miss its point; it is then widened to
    reach the point (an interval without its point is refused by
    :func:`~astarpo.analysis.figures.check_interval`).

    Returns:
        ``(point, low, high)``; ``(nan, nan, nan)`` without values, no interval with one.
    """
    vals = _clean(xs)
    if not vals.size:
        return NAN, NAN, NAN
    point = float(stat(vals))
    if vals.size < 2:
        return point, NAN, NAN
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, vals.size, (n_boot, vals.size))
    boots = np.array([stat(vals[i]) for i in idx], dtype=float)
    a = (1 - level) / 2
    low, high = (float(q) for q in np.quantile(boots, [a, 1 - a]))
    return point, min(low, point), max(high, point)


def log_bootstrap_interval(
    point: float, resampled: Sequence[float] | np.ndarray, level: float = 0.95
) -> tuple[float, float]:
    r"""The normal bootstrap interval of a positive statistic, on the log scale.

    With :math:`\hat g` the statistic on the data, :math:`s` the standard deviation of
    :math:`\log g^*` over its bootstrap resamples and :math:`z` the standard normal's
    :math:`(1 + \text{level})/2` quantile,

    .. math:: \left[\hat g\, e^{-z s},\ \hat g\, e^{z s}\right].

    It contains :math:`\hat g` and stays positive whatever the statistic's bias. The percentile
    interval of the resamples does not: a convex statistic such as the gap at a mean parameter
    lies below most of its resamples' values, and their percentiles can miss it.

    Args:
        point: The statistic on the data, > 0.
        resampled: Its values on the bootstrap resamples ``[R]``, each > 0, ``R >= 2``.
        level: Coverage.

    Returns:
        ``(low, high)``, with ``low <= point <= high``.

    Raises:
        ValueError: a value that is not positive and finite, fewer than 2 resamples, or
            ``level`` outside (0, 1).
    """
    from scipy.stats import norm

    r = np.asarray(resampled, dtype=float)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}.")
    positive = r.size >= 2 and bool(np.all(np.isfinite(r) & (r > 0)))
    if not (math.isfinite(point) and point > 0 and positive):
        raise ValueError(
            "log_bootstrap_interval needs a positive, finite point and >= 2 positive resampled "
            f"values; got point {point:.6g} and {r.size} resampled values "
            f"(min {r.min() if r.size else 'n/a'})."
        )
    half = float(norm.ppf((1 + level) / 2)) * float(np.log(r).std(ddof=1))
    return point * math.exp(-half), point * math.exp(half)


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    r"""Holm's step-down adjusted p-values of one family of comparisons.

    With the family's :math:`m` p-values sorted, :math:`p_{(1)} \le \dots \le p_{(m)}`,

    .. math:: \tilde p_{(i)} = \max_{j \le i} \min\bigl(1, (m - j + 1)\, p_{(j)}\bigr).

    Rejecting where :math:`\tilde p < \alpha` keeps the family-wise error rate at
    :math:`\alpha` whatever the dependence between the comparisons. NaN p-values (a comparison
    without an interval) are left out of the family and stay NaN.

    Args:
        pvalues: Comparison name -> raw p-value.

    Returns:
        Comparison name -> adjusted p-value, in the input's order.
    """
    named = [(k, p) for k, p in pvalues.items() if not math.isnan(p)]
    m = len(named)
    adjusted: dict[str, float] = {}
    running = 0.0
    for j, (k, p) in enumerate(sorted(named, key=lambda kp: kp[1])):
        running = max(running, min(1.0, (m - j) * p))
        adjusted[k] = running
    return {k: adjusted.get(k, NAN) for k in pvalues}


def interval_order(a: Sequence[float], b: Sequence[float]) -> str:
    """Two measurements ``(mean, lo, hi)`` compared by their 95% intervals (a conservative
    test): ``"lower"`` when ``a``'s interval lies wholly below ``b``'s, ``"higher"`` when wholly
    above, ``"overlap"`` otherwise."""
    if a[2] < b[1]:
        return "lower"
    if a[1] > b[2]:
        return "higher"
    return "overlap"
