"""Exact log-linear contextual bandits that test the paper's theory (Theorem 1).

* :mod:`astarpo.theory.bandit` -- :class:`LogLinearBandit`, exact pi*, V*, J, gaps, sampling.
* :mod:`astarpo.theory.algorithm` -- Algorithm 1 (Stage 1 + OGD Stage 2) and a PG baseline.
* :mod:`astarpo.theory.experiments` -- horizon, samples, coverage, two-beta (plain dicts).
* :mod:`astarpo.theory.stats` -- means with 95% intervals over seeds, fitted log-log slopes.
* :mod:`astarpo.theory.plots` -- the figures (matplotlib, imported lazily).
"""

from astarpo.theory.algorithm import (
    Stage2Config,
    Stage2Result,
    estimate_values,
    policy_gradient_baseline,
    regression_gradient,
    run_stage2,
    value_estimate_error,
)
from astarpo.theory.bandit import LogLinearBandit

__all__ = [
    "LogLinearBandit",
    "Stage2Config",
    "Stage2Result",
    "estimate_values",
    "policy_gradient_baseline",
    "regression_gradient",
    "run_stage2",
    "value_estimate_error",
]
