r"""Step-size tuning at equal samples: A*-PO and the PG baseline, each with its best constant c.

As in ``horizon``: each method runs with every c of a grid (used as :math:`c/\beta_2^2`,
:math:`c/\sqrt t` steps, the same projection radius) and keeps the c whose final gap over all
contexts (geometric mean over seeds) is smallest. The choice never looks at the hard contexts,
so no method is tuned on the number it is judged by. A*-PO spends N Stage 1 samples and then
one per step; PG spends G per round, so PG gets :math:`\lfloor (T + N)/G \rfloor` rounds.

A*-PO runs several variants at once (its seed axis holds variant blocks of S seeds, as
``coverage`` does); :func:`best_c` picks one c per block.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.baseline import policy_gradient_baseline
from astarpo.theory.experiments.common import config
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.tracking import Stage2Result

__all__ = ["astarpo_runs", "best_c", "final_by_c", "pg_runs", "seed_slice"]


def seed_slice(run: Stage2Result, sl: slice) -> Stage2Result:
    """The seeds ``sl`` of ``run`` (every per-seed array sliced on its first axis)."""
    per_seed = {f.name: getattr(run, f.name)[sl] for f in dataclasses.fields(run)}
    return dataclasses.replace(run, **{**per_seed, "steps": run.steps})


def _final(run: Stage2Result, sl: slice) -> float:
    return float(np.exp(np.log(np.maximum(run.last[sl, -1], 1e-300)).mean()))


def best_c(runs: dict[float, Stage2Result], sl: slice = slice(None)) -> float:
    """The c whose seeds ``sl`` end with the smallest geometric-mean gap (ties: smallest c)."""
    return min(sorted(runs), key=lambda c: _final(runs[c], sl))


def final_by_c(runs: dict[float, Stage2Result], sl: slice = slice(None)) -> dict[str, Any]:
    """Every c's final gap over all contexts (``mean_ci`` over seeds ``sl``), keyed by str(c)."""
    return {str(c): mean_ci(runs[c].last[sl, -1:]) for c in sorted(runs)}


def pg_runs(
    bandit: LogLinearBandit,
    beta: float,
    t_max: int,
    n: int,
    group: int,
    radius: float,
    seeds: int,
    seed: int,
    grid: tuple[float, ...],
    known: dict[float, Stage2Result] | None = None,
) -> dict[float, Stage2Result]:
    """PG (G = ``group``) at the samples of A*-PO's N + T, one run per c of ``grid``.

    Args:
        bandit: The instance.
        beta: :math:`\\beta_2` of the objective.
        t_max: A*-PO's T (PG gets ``(t_max + n) // group`` rounds).
        n: A*-PO's N.
        group: G >= 2.
        radius: Projection radius.
        seeds: S.
        seed: Base seed.
        grid: The constants c to try.
        known: Runs already made, by c (reused instead of rerun).

    Returns:
        ``{c: Stage2Result}``.
    """
    known = known or {}
    out = {}
    for c in grid:
        cfg = config(beta, (t_max + n) // group, c=c, radius=radius, track_fisher=False)
        out[c] = (
            known[c] if c in known else policy_gradient_baseline(bandit, cfg, group, seeds, seed)
        )
    return out


def astarpo_runs(
    bandit: LogLinearBandit,
    v_star: np.ndarray,
    beta: float,
    t_max: int,
    radius: float,
    seed: int,
    grid: tuple[float, ...],
    weights: np.ndarray | None = None,
    known: dict[float, Stage2Result] | None = None,
) -> dict[float, Stage2Result]:
    """A*-PO's Stage 2 on ``v_star`` ``[S', X]`` (and ``weights``), one run per c of ``grid``."""
    known = known or {}
    out = {}
    for c in grid:
        cfg = config(beta, t_max, c=c, radius=radius, track_fisher=False)
        out[c] = (
            known[c] if c in known else run_stage2(bandit, v_star, cfg, seed=seed, weights=weights)
        )
    return out
