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

Away from :math:`\theta^*` the residual depends on y and the gradient has a mean; the exact
moments of the same one-sample gradient at any iterate (:func:`gradient_moments`) follow by
summing over the Y actions of each context, and :func:`gradient_squared_norms` draws it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.stage2 import regression_gradient

__all__ = [
    "gradient_moments",
    "gradient_squared_norms",
    "gradient_variance_formula",
    "gradient_variance_measured",
    "stratified_interval",
]


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


def gradient_moments(
    bandit: LogLinearBandit,
    theta: np.ndarray,
    v_hat: np.ndarray,
    beta2: float,
    entropy: float = 0.0,
    per_action: bool = False,
) -> dict[str, np.ndarray]:
    r"""Exact moments of the one-sample on-policy gradient at any iterate, batched.

    With one sample :math:`y_x \sim \pi_\theta(\cdot|x)` per context, the gradient of the round
    loss is :math:`g = \sum_x g_x`, :math:`g_x = 2\beta_2\rho(x)\,(u_\theta(x,y_x) + \hat V(x))
    \,s_\theta(x,y_x) + \epsilon\rho(x)\,E_{\pi_\theta}[\log\pi_\theta\,s_\theta]`, with
    :math:`u_\theta = \beta_2\log\frac{\pi_\theta}{\pi_{ref}} - r`, the score
    :math:`s_\theta(x,y) = \phi(x,y) - E_{\pi_\theta}\phi(x,\cdot)` and the exact entropy
    term (coefficient :math:`\epsilon`). The contexts are independent, so

    .. math::

        E\lVert g\rVert^2 = \lVert E g\rVert^2 + \sum_x \big(E\lVert g_x\rVert^2
        - \lVert E g_x\rVert^2\big),

    each expectation a sum over the Y actions. :math:`\hat V` drops out of :math:`E g` and
    enters only the second (noise) term; at :math:`\theta^*_{\beta_2}` without the entropy term
    this is :func:`gradient_variance_formula`.

    Args:
        bandit: The instance.
        theta: Parameters ``[S, d]``.
        v_hat: Value estimates ``[S, X]`` (or ``[X]``, shared).
        beta2: The regression's KL strength.
        entropy: The entropy-bonus coefficient :math:`\epsilon` (default 0).
        per_action: Also return ``per_action`` ``[S, X, Y]``, each action's term
            :math:`4\beta_2^2\rho(x)^2\pi_\theta(y|x)(u_\theta + \hat V)^2\lVert s_\theta
            \rVert^2` of the regression part's :math:`\sum_x E\lVert g_x\rVert^2`: which
            actions carry the moment (rare ones are what a few draws miss).

    Returns:
        ``second_moment`` :math:`E\lVert g\rVert^2`, ``mean_norm_sq`` :math:`\lVert E g\rVert^2`
        and ``noise`` (the trace of the covariance), each ``[S]``.
    """
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    v = np.broadcast_to(np.asarray(v_hat, dtype=np.float64), (len(th), bandit.n_contexts))
    logp = bandit.log_policy(th)  # [S, X, Y]
    sup = bandit.support
    pol = np.where(sup, np.exp(logp), 0.0)
    phi = bandit.features  # [X, Y, d]
    score = phi[None] - np.einsum("sxy,xyd->sxd", pol, phi)[:, :, None, :]  # [S, X, Y, d]
    log_ratio = np.where(sup, logp - np.where(sup, bandit.log_ref, 0.0), 0.0)
    resid = beta2 * log_ratio - bandit.rewards + v[..., None]  # [S, X, Y]
    rho = bandit.context_probs[None, :, None]  # [1, X, 1]
    a_mean = 2 * beta2 * rho * np.einsum("sxy,sxyd->sxd", pol * resid, score)
    terms = 4 * beta2**2 * rho**2 * pol * resid**2 * (score**2).sum(-1)  # [S, X, Y]
    a_sq = terms.sum(-1)
    noise = (a_sq - (a_mean**2).sum(-1)).sum(-1)
    ent = entropy * rho * np.einsum("sxy,sxyd->sxd", pol * np.where(sup, logp, 0.0), score)
    mean = (a_mean + ent).sum(1)  # [S, d]
    mean_sq = (mean**2).sum(-1)
    out = {"second_moment": mean_sq + noise, "mean_norm_sq": mean_sq, "noise": noise}
    return {**out, "per_action": terms} if per_action else out


def gradient_squared_norms(
    bandit: LogLinearBandit,
    theta: np.ndarray,
    v_hat: np.ndarray,
    beta2: float,
    n_draws: int,
    rng: np.random.Generator,
    entropy: float = 0.0,
) -> np.ndarray:
    r""":math:`\lVert g\rVert^2` of ``n_draws`` one-sample on-policy gradients per row (autograd).

    Args:
        bandit: The instance.
        theta: Parameters ``[S, d]``.
        v_hat: Value estimates ``[S, X]``.
        beta2: The regression's KL strength.
        n_draws: Gradients drawn per row (a batch axis), >= 1.
        rng: Source of the uniforms that pick the sampled actions.
        entropy: The entropy-bonus coefficient (default 0).

    Returns:
        ``[S, n_draws]``; row s estimates ``gradient_moments(...)["second_moment"][s]``.
    """
    th = np.atleast_2d(np.asarray(theta, dtype=np.float64))
    v = np.broadcast_to(np.asarray(v_hat, dtype=np.float64), (len(th), bandit.n_contexts))
    theta_rep, v_rep = np.repeat(th, n_draws, axis=0), np.repeat(v, n_draws, axis=0)
    u = rng.random((len(theta_rep), bandit.n_contexts))
    grad, _ = regression_gradient(bandit, theta_rep, v_rep, beta2, uniforms=u, entropy=entropy)
    return (grad**2).sum(-1).reshape(len(th), n_draws)


def stratified_interval(draws: np.ndarray) -> tuple[float, float, float]:
    r"""Mean over rows of the rows' means, with its 95% normal interval (equal draws per row).

    Rows are independent with their own distributions (seeds at their own iterates), so the
    standard error is :math:`\sqrt{\sum_s \hat\sigma_s^2 / n} / S`, not the pooled one.

    Args:
        draws: ``[S, n]`` with ``n >= 2``.

    Returns:
        ``(mean, lo, hi)``.
    """
    d = np.asarray(draws, dtype=float)
    if d.ndim != 2 or d.shape[1] < 2:
        raise ValueError(f"draws must be [S, n] with n >= 2, got {d.shape}.")
    s, n = d.shape
    m = float(d.mean())
    se = float(np.sqrt((d.var(1, ddof=1) / n).sum()) / s)
    return m, m - 1.959963984540054 * se, m + 1.959963984540054 * se


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
