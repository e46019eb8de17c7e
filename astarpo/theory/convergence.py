r"""Has a stochastic run reached its fixed point? Window averages and the rule that decides.

A constant-step run does not converge to a point: its iterates keep a spread, and what settles
is their average. As in the rest of the ``update`` experiment, the *fixed point* of a run is
estimated by the parameters averaged over a window of steps and over the seeds. The rule
compares two successive windows of equal length, :math:`[T/2, 3T/4)` and :math:`[3T/4, T)`,
through the quantity the page reports (the KL of that average's policy to :math:`\pi^*`), and
runs from two starts must end at the same place (:data:`FIXED_POINT_RULE`, printed on
docs/theory.md).
Equal lengths matter: the average over a shorter window is noisier, and the KL is convex, so
a shorter first window would show a spurious fall.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from astarpo.analysis.stats import interval_order

__all__ = [
    "AT_OPTIMUM",
    "FIXED_POINT_RULE",
    "TOLERANCE",
    "fixed_point_verdict",
    "window_average",
    "window_change",
    "windows",
]

#: Relative change between the windows below which a start has settled (20%).
TOLERANCE = 0.20
#: A KL below this (nats) in both windows is the optimum up to rounding.
AT_OPTIMUM = 1e-12
#: Bootstrap resamples of the seeds.
RESAMPLES = 1000
_Z = 1.959963984540054

#: The rule as docs/theory.md prints it.
FIXED_POINT_RULE = (
    "the fixed point of a run is estimated by the parameters averaged over a window of steps "
    "and over the seeds; $c = \\ln(\\mathrm{KL}_{[3T/4,T)} / \\mathrm{KL}_{[T/2,3T/4)})$ "
    "compares two successive windows of equal length through the KL of that average's policy "
    "to $\\pi^*_{\\beta_2}$, with the 95% normal bootstrap interval over seeds (the same "
    f"resampled seeds for both windows, {RESAMPLES} resamples). A start is *still moving* when "
    "that interval excludes 0, *settled* when it lies within "
    f"$\\pm\\ln(1 + {TOLERANCE:g})$ (a change of less than {100 * TOLERANCE:.0f}%), and "
    f"*undecided* otherwise; a KL below {AT_OPTIMUM:g} nats in both windows is *at* $\\pi^*$ "
    "(rounding). A setting is **resolved** when both starts ($\\theta^*_{\\beta_2}$ and "
    "$\\pi_{\\mathrm{ref}}$) are settled or at $\\pi^*$ and the 95% intervals of their "
    "last-window KLs overlap (the order rule finds no difference); **settled apart** when both "
    "are settled but the intervals do not overlap (the update has more than one fixed point); "
    "**still moving** when a start is still moving; otherwise **not resolved**"
)


def windows(n_iterations: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The rule's two windows ``[T/2, 3T/4)`` and ``[3T/4, T)`` (T a multiple of 4)."""
    if n_iterations < 4 or n_iterations % 4:
        raise ValueError(f"T must be a multiple of 4 (>= 4), got {n_iterations}.")
    half, three = n_iterations // 2, 3 * n_iterations // 4
    return (half, three), (three, n_iterations)


def window_average(steps: np.ndarray, average_path: np.ndarray, start: int, end: int) -> np.ndarray:
    r"""The mean of :math:`\theta_{start} .. \theta_{end-1}`, from the recorded running averages.

    Args:
        steps: Evaluation points ``[K]`` (``Stage2Result.steps``); ``start`` and ``end`` must be
            among them (``Stage2Config.extra_points``), or ``start`` may be 0.
        average_path: Running averages ``[S, K, d]`` (``Stage2Result.average_path``): at point
            t, the mean of :math:`\theta_0 .. \theta_{t-1}`.
        start: First step of the window (>= 0).
        end: One past its last step (> ``start``).

    Returns:
        ``[S, d]``: :math:`(end\,\bar\theta_{end} - start\,\bar\theta_{start}) / (end - start)`.

    Raises:
        ValueError: when ``start`` or ``end`` is not an evaluation point, or ``end <= start``.
    """
    pts = [int(t) for t in steps]
    if not 0 <= start < end:
        raise ValueError(f"need 0 <= start < end, got [{start}, {end}).")
    missing = [t for t in (start, end) if t and t not in pts]
    if missing:
        raise ValueError(
            f"window ends {missing} are not evaluation points; pass them to the run as "
            "Stage2Config(extra_points=...)."
        )
    total_end = end * average_path[:, pts.index(end)]
    total_start = start * average_path[:, pts.index(start)] if start else 0.0
    return (total_end - total_start) / (end - start)


def window_change(
    before: np.ndarray,
    after: np.ndarray,
    kl: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """The rule for one start: the seed-averaged window averages and the change between them.

    Args:
        before: Window averages of the first window, per seed ``[S, d]`` (S >= 2).
        after: Those of the second window, ``[S, d]``.
        kl: Maps parameters ``[R, d]`` to their KL ``[R]`` (>= 0).
        rng: Source of the bootstrap's resampled seeds.

    Returns:
        ``state`` (``"at optimum"``, ``"still moving"``, ``"settled"`` or ``"undecided"``),
        ``direction`` (``"falling"``, ``"rising"`` or ``None``), ``change``/``lo``/``hi`` (the
        log change and its interval; ``None`` at the optimum) and ``kl_before``/``kl_after``
        (``(kl, lo, hi)``: the KL of the seed mean with its log-scale bootstrap interval).
    """
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if a.shape != b.shape or a.ndim != 2 or len(a) < 2:
        raise ValueError(f"before and after must be [S, d] with S >= 2, got {a.shape}, {b.shape}.")
    idx = rng.integers(0, len(a), (RESAMPLES, len(a)))
    k_a, k_b = (float(kl(x.mean(0)[None])[0]) for x in (a, b))
    boot_a, boot_b = kl(a[idx].mean(1)), kl(b[idx].mean(1))
    out: dict[str, Any] = {
        "kl_before": _log_interval(k_a, boot_a),
        "kl_after": _log_interval(k_b, boot_b),
    }
    if max(k_a, k_b) < AT_OPTIMUM:
        none = {"change": None, "lo": None, "hi": None}
        return {**out, "state": "at optimum", "direction": None, **none}
    tiny = 1e-300
    c = math.log(max(k_b, tiny) / max(k_a, tiny))
    boot = np.log(np.maximum(boot_b, tiny) / np.maximum(boot_a, tiny))
    half = _Z * float(boot.std(ddof=1))
    lo, hi = c - half, c + half
    tol = math.log1p(TOLERANCE)
    if lo > 0 or hi < 0:
        state = "still moving"
    elif -tol <= lo and hi <= tol:
        state = "settled"
    else:
        state = "undecided"
    direction = None if state != "still moving" else ("rising" if lo > 0 else "falling")
    return {**out, "state": state, "direction": direction, "change": c, "lo": lo, "hi": hi}


def _log_interval(point: float, boots: np.ndarray) -> tuple[float, float, float]:
    """(point, lo, hi): normal bootstrap interval on the log scale (contains the point)."""
    b = np.asarray(boots, dtype=float)
    if not (point > 0 and np.all(b > 0) and np.all(np.isfinite(b))):
        return point, point, point  # exact zero (at the optimum): no spread to show
    half = _Z * float(np.log(b).std(ddof=1))
    return point, point * math.exp(-half), point * math.exp(half)


def fixed_point_verdict(starts: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """A setting's verdict from its starts' :func:`window_change` results.

    Args:
        starts: Start name -> :func:`window_change` result (two or more starts).

    Returns:
        ``(word, detail)``: ``"resolved"``, ``"settled apart"``, ``"still moving"`` or
        ``"not resolved"``, and which start decided.
    """
    states = {k: v["state"] for k, v in starts.items()}
    moving = [k for k, s in states.items() if s == "still moving"]
    if moving:
        return "still moving", ", ".join(f"from {k}: {starts[k]['direction']}" for k in moving)
    if not all(s in ("settled", "at optimum") for s in states.values()):
        return "not resolved", ", ".join(f"from {k}: {s}" for k, s in states.items())
    same = all(
        interval_order(starts[a]["kl_after"], starts[b]["kl_after"]) == "overlap"
        for a, b in itertools.pairwise(starts)
    )
    if not same:
        return "settled apart", "both starts settled, at different KLs"
    return "resolved", "both starts settled at the same KL"
