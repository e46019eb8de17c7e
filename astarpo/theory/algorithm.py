r"""Algorithm 1 (A*-PO) on a :class:`~astarpo.theory.bandit.LogLinearBandit`, and a PG baseline.

* Stage 1 draws ``n_samples`` (N) actions per context from :math:`\pi_{ref}` and forms
  :math:`\hat V^*(x)` with ``astarpo.optimal_value(rewards, beta1)`` (paper Eq. 3).
* Stage 2 runs T rounds of ``astarpo.OnlineGradientDescent`` on the round-t regression loss
  (Eq. 4, ``astarpo.advantage_regression_loss`` with ``beta2``)

  .. math::

      \ell_t(\theta) = E_{x\sim\rho} E_{y\sim\pi_t(\cdot|x)}
          \Big(\beta_2 \log\frac{\pi_\theta(y|x)}{\pi_{ref}(y|x)} - r(x,y) + \hat V^*(x)\Big)^2,

  with one on-policy sample per context (``mode="stochastic"``) or the exact expectation over
  y (``mode="deterministic"``). Its gradient at :math:`\theta_t` equals
  :math:`-2\beta_2 \nabla J_{\beta_2}(\pi_{\theta_t})` in expectation, whatever :math:`\hat V^*`
  is, because :math:`E_{y\sim\pi_\theta}\nabla\log\pi_\theta(y|x) = 0`.

Seeds are a batch axis: parameters ``[S, d]``, one OGD over the last axis. Seed ``s`` uses its
own generator ``numpy.random.default_rng([seed, s])``, so its samples do not depend on S (its
results, up to floating-point rounding); the same seed and S give bitwise identical results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from astarpo import OnlineGradientDescent, advantage_regression_loss, optimal_value
from astarpo.oracle import Schedule
from astarpo.theory.bandit import LogLinearBandit, sample_actions

__all__ = [
    "Stage2Config",
    "Stage2Result",
    "estimate_values",
    "log_checkpoints",
    "policy_gradient_baseline",
    "regression_gradient",
    "run_stage2",
    "seed_generators",
    "value_estimate_error",
]

Mode = Literal["stochastic", "deterministic"]


def seed_generators(seed: int, n_seeds: int) -> list[np.random.Generator]:
    """One independent generator per seed: ``default_rng([seed, s])`` for ``s < n_seeds``."""
    return [np.random.default_rng([seed, s]) for s in range(n_seeds)]


def log_checkpoints(n_iterations: int, per_decade: int = 8) -> np.ndarray:
    """Iteration counts ``1 <= t <= T``, log-spaced with ``per_decade`` points, ``T`` included."""
    n = max(2, math.ceil(per_decade * math.log10(max(n_iterations, 10))) + 1)
    pts = np.unique(np.round(np.logspace(0, math.log10(n_iterations), n)).astype(int))
    return np.unique(np.append(pts, n_iterations))


# ---------------------------------------------------------------------------- Stage 1
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
        rngs: One generator per seed (S of them).

    Returns:
        ``(v_hat [S, X], solved [S, X])``: the estimates, and whether any of the N samples had
        a positive reward (the paper's optional filter drops contexts where it is False).
    """
    if n_samples < 1:
        raise ValueError(f"n_samples (N) must be >= 1, got {n_samples}.")
    actions = np.stack([bandit.sample(bandit.ref_probs, g, n_samples) for g in rngs])
    rewards = np.take_along_axis(bandit.rewards[None], actions, -1)  # [S, X, N]
    return optimal_value(rewards, beta1), rewards.max(-1) > 0


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


# ---------------------------------------------------------------------------- Stage 2
@dataclass(frozen=True)
class Stage2Config:
    """Settings of Stage 2 (and of the PG baseline).

    Args:
        beta2: KL strength of the regression (and of the objective it optimizes), > 0.
        n_iterations: T, the number of OGD rounds, >= 1.
        learning_rate: The constant ``c`` of the step size, > 0.
        schedule: ``"constant"``, ``"inverse_sqrt"`` (``c/sqrt(t)``, default) or ``"inverse"``.
        radius: Optional L2 ball the iterates are projected on (``None``: no projection).
        mode: ``"stochastic"`` (one on-policy sample per context, default) or
            ``"deterministic"`` (exact expected gradient).
        per_decade: Evaluation points per decade of t (log-spaced, T included), default 8.
    """

    beta2: float
    n_iterations: int
    learning_rate: float
    schedule: Schedule = "inverse_sqrt"
    radius: float | None = None
    mode: Mode = "stochastic"
    per_decade: int = 8

    def __post_init__(self) -> None:
        if not self.beta2 > 0:
            raise ValueError(f"beta2 must be > 0, got {self.beta2}.")
        if self.n_iterations < 1:
            raise ValueError(f"n_iterations (T) must be >= 1, got {self.n_iterations}.")
        if self.mode not in ("stochastic", "deterministic"):
            raise ValueError(f"mode must be 'stochastic' or 'deterministic', got {self.mode!r}.")
        if self.per_decade < 1:
            raise ValueError(f"per_decade must be >= 1, got {self.per_decade}.")
        self.optimizer()  # validates learning_rate, schedule, radius

    def optimizer(self) -> OnlineGradientDescent:
        """The ``OnlineGradientDescent`` these settings describe."""
        return OnlineGradientDescent(self.learning_rate, self.schedule, self.radius)


@dataclass(frozen=True)
class Stage2Result:
    """Learning curves of a batch of seeds.

    Attributes:
        steps: Evaluation points t, ``[K]`` (suboptimality of theta after t updates).
        last: Suboptimality under ``J_beta2`` of the last iterate, ``[S, K]``.
        average: The same for the OGD average iterate (the mean of the t iterates played,
            ``theta_0 .. theta_{t-1}``), ``[S, K]``.
        theta: Final parameters ``[S, d]``.
        theta_average: Final average iterate ``[S, d]``.
    """

    steps: np.ndarray
    last: np.ndarray
    average: np.ndarray
    theta: np.ndarray
    theta_average: np.ndarray


def _log_policy_t(bandit: LogLinearBandit, theta: torch.Tensor) -> torch.Tensor:
    arrays = bandit.torch_arrays()
    x, y = bandit.n_contexts, bandit.n_actions
    logits = (arrays["phi_flat"] @ theta.T).T.reshape(-1, x, y) + arrays["log_ref"]
    return torch.log_softmax(logits, dim=-1)


def regression_gradient(
    bandit: LogLinearBandit,
    theta: np.ndarray,
    v_hat: np.ndarray,
    beta2: float,
    uniforms: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient of the round loss :math:`\ell_t` at :math:`\theta = \theta_t`.

    Args:
        bandit: The instance.
        theta: Parameters ``[S, d]``.
        v_hat: Stage 1 values ``[S, X]``.
        beta2: Regression strength.
        uniforms: ``[S, X]`` uniforms for one on-policy sample per context (stochastic), or
            ``None`` for the exact expectation over :math:`y\sim\pi_\theta` (deterministic).
        weights: Context weights ``[S, X]`` (default: the context distribution); rows are
            normalized to sum to 1 (all-zero rows give a zero gradient).

    Returns:
        ``(grad [S, d], loss [S])``, the gradient of ``advantage_regression_loss`` averaged over
        contexts, by autograd.
    """
    arrays = bandit.torch_arrays()
    th = torch.from_numpy(np.asarray(theta, dtype=np.float64)).clone().requires_grad_(True)
    logp = _log_policy_t(bandit, th)  # [S, X, Y]
    v = torch.from_numpy(np.asarray(v_hat, dtype=np.float64))
    w = arrays["rho"].expand(th.shape[0], -1) if weights is None else torch.from_numpy(weights)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    if uniforms is None:
        support = arrays["support"]
        logp_s = torch.where(support, logp, torch.zeros((), dtype=logp.dtype))
        loss = advantage_regression_loss(
            logp_s, arrays["log_ref_safe"], arrays["rewards"], v[..., None], beta2
        )
        per_x = (logp.detach().exp() * loss).sum(-1)
    else:
        a = sample_actions(logp.detach().exp(), torch.from_numpy(uniforms)[..., None])
        s = th.shape[0]
        logp_a = logp.gather(-1, a)[..., 0]
        ref_a = arrays["log_ref"].expand(s, -1, -1).gather(-1, a)[..., 0]
        r_a = arrays["rewards"].expand(s, -1, -1).gather(-1, a)[..., 0]
        per_x = advantage_regression_loss(logp_a, ref_a, r_a, v, beta2)
    per_seed = (per_x * w).sum(-1)
    per_seed.sum().backward()
    assert th.grad is not None
    return th.grad.numpy(), per_seed.detach().numpy()


def _curves(
    bandit: LogLinearBandit,
    cfg: Stage2Config,
    n_seeds: int,
    step_fn: object,
    theta0: np.ndarray | None,
) -> Stage2Result:
    ogd = cfg.optimizer()
    theta = np.zeros((n_seeds, bandit.dim)) if theta0 is None else np.array(theta0, dtype=float)
    state = ogd.init(theta)
    steps = log_checkpoints(cfg.n_iterations, cfg.per_decade)
    last = np.empty((n_seeds, len(steps)))
    avg = np.empty((n_seeds, len(steps)))
    k = 0
    for t in range(1, cfg.n_iterations + 1):
        grad = step_fn(theta)  # type: ignore[operator]
        theta, state = ogd.update(theta, grad, state)
        if t == steps[k]:
            # OGD's average: the mean of the t iterates played (theta_0 .. theta_{t-1})
            last[:, k] = bandit.suboptimality(bandit.policy(theta), cfg.beta2)
            avg[:, k] = bandit.suboptimality(bandit.policy(state.average), cfg.beta2)
            k += 1
    return Stage2Result(steps, last, avg, theta, np.asarray(state.average))


def run_stage2(
    bandit: LogLinearBandit,
    v_hat: np.ndarray,
    cfg: Stage2Config,
    seed: int = 0,
    weights: np.ndarray | None = None,
    theta0: np.ndarray | None = None,
) -> Stage2Result:
    r"""Stage 2 of Algorithm 1: T rounds of OGD on the regression loss, S seeds at once.

    Args:
        bandit: The instance.
        v_hat: Stage 1 values ``[S, X]`` (S = number of seeds).
        cfg: Step sizes, T, ``beta2``, mode.
        seed: Base seed of the on-policy sampling (seed s uses ``default_rng([seed, s])``).
        weights: Optional context weights ``[S, X]`` (0 drops a context: the filter).
        theta0: Initial parameters ``[S, d]`` (default 0, i.e. :math:`\pi_{ref}`).

    Returns:
        A :class:`Stage2Result` with suboptimality under :math:`J_{\beta_2}` of the last and the
        average iterate at log-spaced t.
    """
    v_hat = np.asarray(v_hat, dtype=np.float64)
    if v_hat.ndim != 2 or v_hat.shape[1] != bandit.n_contexts:
        raise ValueError(f"v_hat must have shape [S, X={bandit.n_contexts}], got {v_hat.shape}.")
    rngs = seed_generators(seed, v_hat.shape[0])

    def step(theta: np.ndarray) -> np.ndarray:
        u = None
        if cfg.mode == "stochastic":
            u = np.stack([g.random(bandit.n_contexts) for g in rngs])
        return regression_gradient(bandit, theta, v_hat, cfg.beta2, u, weights)[0]

    return _curves(bandit, cfg, v_hat.shape[0], step, theta0)


def policy_gradient_baseline(
    bandit: LogLinearBandit,
    cfg: Stage2Config,
    group_size: int,
    n_seeds: int,
    seed: int = 0,
) -> Stage2Result:
    r"""GRPO-like policy gradient on :math:`J_{\beta_2}` with a group-mean baseline.

    Each round draws G on-policy actions per context, scores
    :math:`f = r - \beta_2 \log(\pi_\theta/\pi_{ref})`, subtracts the group mean and steps
    along :math:`\frac1G\sum_g (f_g - \bar f)\nabla\log\pi_\theta(y_g|x)`. The gradient is
    multiplied by :math:`2\beta_2` so that, in expectation, it equals the A*-PO gradient up to
    the factor :math:`(G-1)/G`: same ``cfg`` step sizes, comparable speed. It spends G samples
    per context and round (A*-PO: N once, then 1 per round).

    Args:
        bandit: The instance.
        cfg: Step sizes and T (rounds of the baseline); ``mode`` is ignored.
        group_size: G >= 2.
        n_seeds: S.
        seed: Base seed.
    """
    if group_size < 2:
        raise ValueError(
            f"group_size (G) must be >= 2 for a group-mean baseline, got {group_size}."
        )
    arrays = bandit.torch_arrays()
    rngs = seed_generators(seed + 7919, n_seeds)

    def step(theta: np.ndarray) -> np.ndarray:
        th = torch.from_numpy(theta).clone().requires_grad_(True)
        logp = _log_policy_t(bandit, th)
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

    return _curves(bandit, cfg, n_seeds, step, None)
