r"""Stage 1 of Algorithm 1: the value estimate from N reference samples, and its exact error.

:func:`estimate_values` draws N actions per context from :math:`\pi_{ref}` and calls
``astarpo.optimal_value(rewards, beta1)`` (paper Eq. 3); :func:`estimate_values_adaptive`
spends the same budget with more samples where the first ones failed;
:func:`value_estimate_error` gives the exact bias and MSE for 0/1 rewards by summing over the
binomial law of the number of correct samples.
"""

from __future__ import annotations

import numpy as np

from astarpo import optimal_value
from astarpo.allocation import allocate
from astarpo.theory.bandit import LogLinearBandit

__all__ = ["estimate_values", "estimate_values_adaptive", "value_estimate_error"]


def _reference_rewards(
    bandit: LogLinearBandit, n_samples: int, rngs: list[np.random.Generator]
) -> np.ndarray:
    actions = np.stack([bandit.sample(bandit.ref_probs, g, n_samples) for g in rngs])
    return np.take_along_axis(bandit.rewards[None], actions, -1)


def estimate_values(
    bandit: LogLinearBandit,
    n_samples: int,
    beta1: float,
    rngs: list[np.random.Generator],
) -> tuple[np.ndarray, np.ndarray]:
    r"""Stage 1: N reference samples per context and seed, :math:`\hat V^*` via Eq. 3.

    Args:
        bandit: The instance.
        n_samples: N >= 1.
        beta1: KL strength of the value estimate.
        rngs: One generator per seed (S of them), e.g. ``generators(STAGE1, seed, S)``.

    Returns:
        ``(v_star [S, X], solved [S, X])``: the estimates, and whether any of the N samples had
        a positive reward (the paper's optional filter drops contexts where it is False).
    """
    if n_samples < 1:
        raise ValueError(f"n_samples (N) must be >= 1, got {n_samples}.")
    rewards = _reference_rewards(bandit, n_samples, rngs)  # [S, X, N]
    return optimal_value(rewards, beta1), rewards.max(-1) > 0


def estimate_values_adaptive(
    bandit: LogLinearBandit,
    budget: int,
    n_first: int,
    beta1: float,
    rngs: list[np.random.Generator],
    cap: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\hat V^*` with a per-context N chosen by :func:`~astarpo.allocation.allocate`
    (same total budget).

    ``n_first`` samples per context first, then the rest of ``budget`` (per seed) where they
    found few correct answers. Draws come from one stream per seed, so the first ``n_first``
    are a prefix of every context's samples.

    Args:
        bandit: The instance.
        budget: Total reference samples per seed (e.g. ``N * X`` to match uniform N).
        n_first: Samples per context of the first round.
        beta1: KL strength of the value estimate.
        rngs: One generator per seed.
        cap: Largest N of one context (default ``budget // 4``).

    Returns:
        ``(v_star [S, X], counts [S, X])``.
    """
    cap = max(n_first, budget // 4) if cap is None else cap
    rewards = _reference_rewards(bandit, cap, rngs)  # [S, X, cap]
    counts = allocate(rewards[..., :n_first], budget, cap)
    out = np.empty(counts.shape)
    for n in np.unique(counts):
        sel = counts == n
        out[sel] = optimal_value(rewards[..., :n], beta1)[sel]
    return out, counts


def value_estimate_error(
    solve_rate: np.ndarray, n_samples: int, beta1: float, v_true: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""Exact bias and MSE of :math:`\hat V^*` for 0/1 rewards, by summing over k ~ Bin(N, p).

    With k correct samples out of N, ``optimal_value`` gives
    :math:`\hat V^* = \beta_1 \log(1 + \tfrac{k}{N}(e^{1/\beta_1} - 1))`; the value for each k is
    computed by ``astarpo.optimal_value`` on the reward vector itself.

    Args:
        solve_rate: ``p(x)``, shape ``[X]``.
        n_samples: N.
        beta1: KL strength of the estimate.
        v_true: The value it is compared with, ``[X]`` (e.g. :math:`V^*_{\beta_1}` or
            :math:`V^*_{\beta_2}`).

    Returns:
        ``(bias [X], mse [X])`` of :math:`\hat V^*(x) - v_{true}(x)`.
    """
    from scipy.stats import binom

    k = np.arange(n_samples + 1)
    rewards = (np.arange(n_samples)[None, :] < k[:, None]).astype(np.float64)  # [N+1, N]
    v_k = optimal_value(rewards, beta1)  # [N+1]
    pmf = binom.pmf(k[None, :], n_samples, np.asarray(solve_rate)[:, None])  # [X, N+1]
    err = v_k[None, :] - np.asarray(v_true)[:, None]
    return (pmf * err).sum(-1), (pmf * err**2).sum(-1)
