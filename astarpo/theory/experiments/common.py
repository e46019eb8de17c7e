"""What the experiments share: the default instance, step sizes, headers and curve summaries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.stage2 import Stage2Config
from astarpo.theory.tracking import Stage2Result

__all__ = [
    "INSTANCE",
    "STEP_C",
    "config",
    "crossings",
    "curve_summary",
    "header",
    "progress",
]

#: The default instance: X contexts, Y actions, d features, realizable, v_ref = 0.1.
INSTANCE: dict[str, Any] = {"n_contexts": 32, "n_actions": 16, "dim": 8, "v_ref": 0.1, "seed": 0}
#: Step-size constants c (used as c / beta2**2), chosen once on the default instance.
STEP_C = {"constant": 0.3, "inverse_sqrt": 1.0, "inverse": 1.0}

SEED_SCHEME = (
    "seed s of a consumer with role r (1 Stage 1, 2 Stage 2, 3 PG baseline) and tag k draws "
    "from numpy default_rng([r, k, base_seed, s]); no two consumers share a stream"
)


def progress(items: Iterable[Any], desc: str, show: bool) -> Iterable[Any]:
    """``items``, wrapped in a tqdm bar when ``show``."""
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(list(items), desc=desc, leave=False)


def header(
    name: str,
    seeds: int,
    seed: int,
    quick: bool,
    cfg: dict[str, Any],
    instance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The common part of every result dict (config, seeds, version)."""
    from astarpo import __version__

    return {
        "experiment": name,
        "version": __version__,
        "quick": quick,
        "seeds": list(range(seeds)),
        "base_seed": seed,
        "seed_scheme": SEED_SCHEME,
        "n_seeds": seeds,
        "config": {"instance": dict(INSTANCE if instance is None else instance), **cfg},
    }


def config(
    beta2: float,
    t: int,
    schedule: str = "inverse_sqrt",
    c: float | None = None,
    **kwargs: Any,
) -> Stage2Config:
    """A :class:`Stage2Config` with learning rate ``c / beta2**2`` (``c`` from STEP_C)."""
    c = STEP_C[schedule] if c is None else c
    return Stage2Config(beta2, t, c / beta2**2, schedule, **kwargs)  # type: ignore[arg-type]


def curve_summary(out: Stage2Result, sl: slice = slice(None)) -> dict[str, Any]:
    """Means and 95% intervals of the four gap curves and the Fisher floor of seeds ``sl``."""
    return {
        "last": mean_ci(out.last[sl]),
        "average": mean_ci(out.average[sl]),
        "mixture": mean_ci(out.mixture[sl]),
        "mean_gap": mean_ci(out.mean_gap[sl]),
        "fisher_min": mean_ci(out.fisher_min[sl]),
    }


def crossings(x_a: np.ndarray, y_a: np.ndarray, x_b: np.ndarray, y_b: np.ndarray) -> list[float]:
    """Abscissas where curve a (``x_a``, ``y_a``) and curve b cross, on log-log axes.

    Both are interpolated (linearly in log x, log y) on the union of their abscissas within
    the common range; returns the crossing points, empty when one stays below the other.
    """
    lo, hi = max(np.min(x_a), np.min(x_b)), min(np.max(x_a), np.max(x_b))
    grid = np.unique(np.concatenate([x_a, x_b]))
    grid = np.log10(grid[(grid >= lo) & (grid <= hi)])
    if len(grid) < 2:
        return []
    da = np.interp(grid, np.log10(x_a), np.log10(np.maximum(y_a, 1e-300)))
    db = np.interp(grid, np.log10(x_b), np.log10(np.maximum(y_b, 1e-300)))
    diff = da - db
    out = []
    for i in np.nonzero(np.sign(diff[:-1]) * np.sign(diff[1:]) < 0)[0]:
        f = diff[i] / (diff[i] - diff[i + 1])
        out.append(float(10 ** (grid[i] + f * (grid[i + 1] - grid[i]))))
    return out
