r"""Intervals shared by every measurement of the package.

* :func:`log_bootstrap_interval`: the normal bootstrap interval of a positive statistic, on
  the log scale: it contains its point and stays positive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["log_bootstrap_interval"]


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
