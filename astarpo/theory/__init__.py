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
* :mod:`astarpo.theory.experiments` -- the experiments (plain dicts) and their figures.
* :mod:`astarpo.analysis.figures` -- figure helpers (matplotlib, imported lazily).
"""

from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.baseline import policy_gradient_baseline
from astarpo.theory.stage1 import estimate_values, estimate_values_adaptive, value_estimate_error
from astarpo.theory.stage2 import Stage2Config, regression_gradient, run_stage2
from astarpo.theory.tracking import Stage2Result

__all__ = [
    "LogLinearBandit",
    "Stage2Config",
    "Stage2Result",
    "estimate_values",
    "estimate_values_adaptive",
    "policy_gradient_baseline",
    "regression_gradient",
    "run_stage2",
    "value_estimate_error",
]
