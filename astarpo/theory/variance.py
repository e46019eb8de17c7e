r"""The variance of the one-sample Stage 2 gradient at :math:`\theta^*_{\beta_2}`: formula, draws.

At :math:`\pi^*_{\beta_2}` the residual
:math:`\beta_2\log\frac{\pi^*_{\beta_2}}{\pi_{ref}}(y|x) - r(x,y) + \hat V(x)` equals
:math:`\hat V(x) - V^*_{\beta_2}(x)` for every action y, so the gradient of the round loss with
one on-policy sample :math:`y_x` per context is

.. math::

    g = 2\beta_2 \sum_x \rho(x)\,(\hat V(x) - V^*_{\beta_2}(x))\,
        (\phi(x, y_x) - E_{\pi^*}\phi(x,\cdot)),

with mean zero and :math:`E\|g\|^2 = 4\beta_2^2 \sum_x \rho(x)^2 (\hat V(x) - V^*_{\beta_2}(x))^2
\operatorname{tr}\operatorname{Cov}_{\pi^*_{\beta_2}}[\phi(x,\cdot)]`. :math:`\beta_1` enters only
through :math:`\hat V`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.stage2 import regression_gradient

__all__ = ["gradient_variance_formula", "gradient_variance_measured"]


def gradient_variance_formula(bandit: LogLinearBandit, v_hat: np.ndarray, beta2: float) -> float:
    r""":math:`E\|g\|^2` at :math:`\theta^*_{\beta_2}` by the formula of the module docstring.

    Args:
        bandit: A realizable instance (so that :math:`\pi^*_{\beta_2}` is in the class).
        v_hat: The value estimate :math:`\hat V`, ``[X]``.
        beta2: The regression's KL strength.

    Returns:
        :math:`4\beta_2^2 \sum_x \rho(x)^2 (\hat V(x) - V^*_{\beta_2}(x))^2
        \operatorname{tr}\operatorname{Cov}_{\pi^*_{\beta_2}}[\phi(x,\cdot)]`.
    """
    pol = bandit.optimal_policy(beta2)  # [X, Y]
    phi = bandit.features  # [X, Y, d]
    mean = np.einsum("xy,xyd->xd", pol, phi)
    trace_cov = np.einsum("xy,xyd->x", pol, (phi - mean[:, None, :]) ** 2)
    delta = np.asarray(v_hat, dtype=float) - bandit.optimal_value(beta2)
    rho = bandit.context_probs
    return float(4 * beta2**2 * np.sum(rho**2 * delta**2 * trace_cov))


def gradient_variance_measured(
    bandit: LogLinearBandit,
    v_hat: np.ndarray,
    beta2: float,
    n_draws: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    r""":math:`\|g\|^2` of ``n_draws`` one-sample gradients at :math:`\theta^*_{\beta_2}`.

    Args:
        bandit: A realizable instance.
        v_hat: ``[X]``, or ``[K, X]`` (each row gets ``n_draws // K`` draws).
        beta2: The regression's KL strength.
        n_draws: Number of gradients drawn (a batch axis).
        rng: Source of the uniforms that pick the sampled actions.

    Returns:
        ``mean_ci`` of :math:`\|g\|^2` over the draws (its ``mean``, ``lo``, ``hi``), and the norm
        of the draws' mean gradient (``mean_gradient_norm``; 0 in expectation).
    """
    theta_star, _ = bandit.optimal_theta(beta2)
    v = np.atleast_2d(np.asarray(v_hat, dtype=float))
    v = np.repeat(v, max(n_draws // len(v), 1), axis=0)
    theta = np.repeat(theta_star[None], len(v), axis=0)
    u = rng.random((len(v), bandit.n_contexts))
    grad, _ = regression_gradient(bandit, theta, v, beta2, uniforms=u)
    sq = (grad**2).sum(-1)
    return {**mean_ci(sq[:, None]), "mean_gradient_norm": float(np.linalg.norm(grad.mean(0)))}
