r"""A GRPO-like policy-gradient baseline on the same bandit, for equal-sample comparisons.

Each round draws G on-policy actions per context, scores
:math:`f = r - \beta_2 \log(\pi_\theta/\pi_{ref})`, subtracts the group mean and steps along
:math:`\frac1G\sum_g (f_g - \bar f)\nabla\log\pi_\theta(y_g|x)`. The gradient is multiplied by
:math:`2\beta_2` so that, in expectation, it equals the A*-PO gradient up to the factor
:math:`(G-1)/G`. It spends G samples per context and round (A*-PO: N once, then 1 per round).
"""

from __future__ import annotations

import numpy as np
import torch

from astarpo.theory.bandit import LogLinearBandit, sample_actions
from astarpo.theory.stage2 import Stage2Config, log_policy_torch, run_loop
from astarpo.theory.streams import BASELINE, generators
from astarpo.theory.tracking import Stage2Result

__all__ = ["overconfident_gap", "policy_gradient_baseline", "split_gap"]


def policy_gradient_baseline(
    bandit: LogLinearBandit,
    cfg: Stage2Config,
    group_size: int,
    n_seeds: int,
    seed: int = 0,
) -> Stage2Result:
    r"""GRPO-like policy gradient on :math:`J_{\beta_2}` with a group-mean baseline.

    Args:
        bandit: The instance.
        cfg: Step sizes and T (rounds of the baseline); ``mode`` and the update variants
            (except ``radius``) are ignored.
        group_size: G >= 2.
        n_seeds: S.
        seed: Base seed (``generators(BASELINE, seed, S)``).

    Returns:
        A :class:`~astarpo.theory.tracking.Stage2Result`.
    """
    if group_size < 2:
        raise ValueError(
            f"group_size (G) must be >= 2 for a group-mean baseline, got {group_size}."
        )
    arrays = bandit.torch_arrays()
    rngs = generators(BASELINE, seed, n_seeds)

    def gradient(theta: np.ndarray, _sampling: np.ndarray, _t: int) -> np.ndarray:
        th = torch.from_numpy(theta).clone().requires_grad_(True)
        logp = log_policy_torch(bandit, th)
        u = torch.from_numpy(np.stack([g.random((bandit.n_contexts, group_size)) for g in rngs]))
        a = sample_actions(logp.detach().exp(), u)  # [S, X, G]
        logp_a = logp.gather(-1, a)
        ref_a = arrays["log_ref"].expand(n_seeds, -1, -1).gather(-1, a)
        f = arrays["rewards"].expand(n_seeds, -1, -1).gather(-1, a) - cfg.beta2 * (
            logp_a.detach() - ref_a
        )
        adv = f - f.mean(-1, keepdim=True)
        surrogate = -((adv * logp_a).mean(-1) * arrays["rho"]).sum()
        surrogate.backward()
        assert th.grad is not None
        return 2.0 * cfg.beta2 * th.grad.numpy()

    plain = Stage2Config(
        cfg.beta2,
        cfg.n_iterations,
        cfg.learning_rate,
        cfg.schedule,
        cfg.radius,
        per_decade=cfg.per_decade,
        track_fisher=cfg.track_fisher,
    )
    return run_loop(bandit, plain, n_seeds, gradient)


def overconfident_gap(bandit: LogLinearBandit, beta: float) -> float:
    r"""The gap at which the PG baseline stops once it has put (almost) no mass on wrong answers.

    With 0/1 rewards, a policy that puts no mass on wrong answers and splits the correct ones as
    :math:`\pi^*_\beta` does has gap :math:`\beta E_x[-\log \pi^*_\beta(C_x|x)]`, :math:`C_x` the
    correct answers. The group-centred PG gradient is exactly zero whenever every sampled action
    is correct and the correct ones have equal scores, so a step that overshoots into that region
    is absorbed there: only a wrong sample, whose probability the overshoot made tiny, moves it.

    Args:
        bandit: The instance (0/1 rewards).
        beta: The KL strength.

    Returns:
        :math:`\beta \sum_x \rho(x) (-\log \pi^*_\beta(C_x|x))`.
    """
    log_opt = bandit.log_optimal_policy(beta)
    correct = bandit.rewards > 0.5
    log_mass = np.logaddexp.reduce(np.where(correct, log_opt, -np.inf), axis=-1)
    return float(beta * (bandit.context_probs * -log_mass).sum())


def split_gap(bandit: LogLinearBandit, policy: np.ndarray, beta: float) -> float:
    r"""The part of the gap due to the mass a policy puts on wrong answers as a whole.

    :math:`\mathrm{KL}(\pi\|\pi^*)` splits into the KL between the Bernoulli laws of "correct"
    under :math:`\pi` and :math:`\pi^*`, plus the KLs within the correct and within the wrong
    answers; this returns :math:`\beta E_x` of the first term (0/1 rewards).

    Args:
        bandit: The instance.
        policy: :math:`\pi(y|x)`, ``[X, Y]``.
        beta: The KL strength.

    Returns:
        :math:`\beta \sum_x \rho(x)\,\mathrm{KL}(\mathrm{Ber}(\pi(C_x|x))\,\|\,
        \mathrm{Ber}(\pi^*(C_x|x)))`.
    """
    correct = bandit.rewards > 0.5
    p = np.clip((np.asarray(policy) * correct).sum(-1), 1e-300, 1 - 1e-16)
    q = np.clip((bandit.optimal_policy(beta) * correct).sum(-1), 1e-300, 1 - 1e-16)
    kl = p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))
    return float(beta * (bandit.context_probs * kl).sum())
