"""Exact log-linear contextual bandits that test the paper's theory (Theorem 1).

* :mod:`astarpo.theory.bandit` -- :class:`~astarpo.theory.bandit.LogLinearBandit`: exact pi*,
  V*, J, gaps, sampling.
* :mod:`astarpo.theory.instances` -- instance families (shared features, tabular,
  non-realizable) and the hard contexts by index.
* :mod:`astarpo.theory.streams` -- independent random streams per consumer.
* :mod:`astarpo.theory.stage1` -- Stage 1 (the V* estimate) and its exact error.
* :mod:`astarpo.theory.stage2` -- Stage 2 (OGD on the regression loss) and its variants.
* :mod:`astarpo.theory.tracking` -- what a run records (four gap curves, norms, Fisher floor).
* :mod:`astarpo.theory.baseline` -- a GRPO-like policy-gradient baseline.
* :mod:`astarpo.theory.fisher` -- the Fisher-information floor (Assumption 4).
* :mod:`astarpo.theory.fits` -- intervals over seeds, slopes, local slopes, additive fits.
* :mod:`astarpo.theory.convergence` -- has a stochastic run reached its fixed point.
* :mod:`astarpo.theory.experiments` -- the experiments (plain dicts) and their figures
  (:data:`~astarpo.theory.experiments.EXPERIMENTS`; ``astarpo theory NAME`` runs one).

The names a user calls are importable from here (``from astarpo.theory import
LogLinearBandit, run_stage2, EXPERIMENTS``), with the update experiment's rules
(:data:`~astarpo.theory.convergence.FIXED_POINT_RULE`, ``CHECKABLE``, ``VALUE_LABEL``) that
docs/theory.md's claims apply.
"""

from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.baseline import overconfident_gap, policy_gradient_baseline
from astarpo.theory.convergence import FIXED_POINT_RULE
from astarpo.theory.experiments import EXPERIMENTS
from astarpo.theory.experiments.update_paper import CHECKABLE, VALUE_LABEL
from astarpo.theory.instances import hard_contexts, make_instance
from astarpo.theory.stage1 import estimate_values, estimate_values_adaptive, value_estimate_error
from astarpo.theory.stage2 import Stage2Config, regression_gradient, run_stage2
from astarpo.theory.tracking import Stage2Result

__all__ = [
    "CHECKABLE",
    "EXPERIMENTS",
    "FIXED_POINT_RULE",
    "VALUE_LABEL",
    "LogLinearBandit",
    "Stage2Config",
    "Stage2Result",
    "estimate_values",
    "estimate_values_adaptive",
    "hard_contexts",
    "make_instance",
    "overconfident_gap",
    "policy_gradient_baseline",
    "regression_gradient",
    "run_stage2",
    "value_estimate_error",
]
