r"""Instance families: where the hard contexts can learn from the easy ones, and where not.

* ``shared`` -- :meth:`LogLinearBandit.random` (realizable): d = 8 features shared by all
  contexts, so :math:`\theta^*` is one vector and every context's samples move every context.
* ``tabular`` -- the same rewards and reference with one-hot features :math:`\phi(x, y) =
  e_{(x, y)}` (d = X Y): realizable, but a context only learns from its own samples.
* ``nonrealizable`` -- :meth:`LogLinearBandit.random` with ``realizable=False``: the reward is
  not in the feature span and :math:`\pi^*_\beta` is not in the class.
* ``misspecified`` -- the ``shared`` features plus Gaussian noise of standard deviation
  ``misspecification`` (default 0.3): the reward is close to, but not in, the span.

The hard contexts (:math:`p(x) = v_{ref}` exactly) are the first ``n_hard`` indices by
construction (:func:`hard_contexts`), never selected by comparing floating-point rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.theory.bandit import LogLinearBandit

__all__ = ["FAMILIES", "hard_contexts", "make_instance", "radius_for"]

FAMILIES = ("shared", "tabular", "nonrealizable", "misspecified")


def hard_contexts(n_contexts: int, n_hard: int | None = None) -> np.ndarray:
    """Indices of the contexts that :meth:`LogLinearBandit.random` sets to ``p = v_ref``."""
    n = max(1, n_contexts // 8) if n_hard is None else n_hard
    return np.arange(n)


def make_instance(family: str, misspecification: float = 0.3, **kwargs: Any) -> LogLinearBandit:
    """An instance of ``family`` (see the module docstring); ``kwargs`` go to ``random``.

    Raises:
        ValueError: for an unknown family.
    """
    if family == "shared":
        return LogLinearBandit.random(**kwargs, realizable=True)
    if family == "nonrealizable":
        return LogLinearBandit.random(**kwargs, realizable=False)
    if family == "tabular":
        base = LogLinearBandit.random(**kwargs, realizable=True)
        x, y = base.n_contexts, base.n_actions
        onehot = np.eye(x * y).reshape(x, y, x * y)
        return LogLinearBandit(onehot, base.rewards, base.ref_probs, base.context_probs)
    if family == "misspecified":
        base = LogLinearBandit.random(**kwargs, realizable=True)
        noise = np.random.default_rng([7, int(kwargs.get("seed", 0) or 0)])
        feats = base.features + misspecification * noise.standard_normal(base.features.shape)
        return LogLinearBandit(feats, base.rewards, base.ref_probs, base.context_probs)
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}.")


def radius_for(bandit: LogLinearBandit, beta: float, factor: float = 2.0) -> float:
    r"""``factor`` times :math:`\|\theta^*_\beta\|` (least-squares fit of :math:`r/\beta`).

    The bounded parameter set the analysis assumes, with room to spare: on realizable
    instances it contains :math:`\theta^*_\beta`.
    """
    theta, _ = bandit.optimal_theta(beta)
    return float(factor * np.linalg.norm(theta))
