r"""Stage 2 of Algorithm 1: OGD on the regression loss, with the variants the paper's scripts use.

T rounds of ``astarpo.OnlineGradientDescent`` on the round-t loss (Eq. 4,
``astarpo.advantage_regression_loss`` with ``beta2``)

.. math::

    \ell_t(\theta) = E_{x\sim\rho} E_{y\sim\pi_t(\cdot|x)}
        \Big(\beta_2 \log\frac{\pi_\theta(y|x)}{\pi_{ref}(y|x)} - r(x,y) + \hat V^*(x)\Big)^2,

with one on-policy sample per context (``mode="stochastic"``) or the exact expectation over y
(``mode="deterministic"``). Its gradient at :math:`\theta_t` equals
:math:`-2\beta_2 \nabla J_{\beta_2}(\pi_{\theta_t})` in expectation, whatever :math:`\hat V^*` is,
because :math:`E_{y\sim\pi_\theta}\nabla\log\pi_\theta(y|x) = 0`.

The variants of the training scripts (:class:`Stage2Config`): ``minibatches`` optimizer steps per
sampled batch (the later steps are off-policy), gradient-norm clipping, an entropy bonus, samples
that are ``staleness`` steps old, a projection on an L2 ball, and normalized gradient steps. Seeds
are a batch axis: parameters ``[S, d]``; seed ``s`` draws from ``generators(STAGE2, seed)[s]``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from astarpo import OnlineGradientDescent, advantage_regression_loss
from astarpo.oracle import Schedule
from astarpo.theory.bandit import LogLinearBandit, sample_actions
from astarpo.theory.streams import STAGE2, generators
from astarpo.theory.tracking import Stage2Result, Tracker

__all__ = ["Stage2Config", "Stage2Result", "regression_gradient", "run_stage2"]

Mode = Literal["stochastic", "deterministic"]


@dataclass(frozen=True)
class Stage2Config:
    """Settings of Stage 2 (and of the PG baseline).

    Args:
        beta2: KL strength of the regression (and of the objective it optimizes), > 0.
        n_iterations: T, the number of optimizer steps, >= 1.
        learning_rate: The constant ``c`` of the step size, > 0.
        schedule: ``"constant"``, ``"inverse_sqrt"`` (``c/sqrt(t)``, default) or ``"inverse"``.
        radius: Optional L2 ball the iterates are projected on (``None``: no projection).
        mode: ``"stochastic"`` (one on-policy sample per context, default) or
            ``"deterministic"`` (exact expected gradient).
        per_decade: Evaluation points per decade of t (log-spaced, T included), default 8.
        minibatches: Optimizer steps per sampled batch (default 1); the contexts are split
            into this many interleaved minibatches, all sampled at the round's first iterate.
        clip_norm: Clip each seed's gradient to this L2 norm (``None``: no clipping).
        entropy: Coefficient of the entropy bonus (the loss minus ``entropy * H(pi_theta)``).
        staleness: Sample from the iterate this many steps back (default 0: on-policy).
        normalize: Step along ``grad / ||grad||`` (normalized gradient descent).
        track_fisher: Record the Fisher floor at the evaluation points (default True; costs
            O(d^3) per point, so large tabular instances turn it off and record NaN).
        extra_points: Evaluation points added to the log-spaced ones (default none), each in
            ``[1, n_iterations]``: e.g. ``T/4`` and ``T/2``, so that the parameter average over
            a window ``[T/4, T/2)`` follows from the recorded running averages.
    """

    beta2: float
    n_iterations: int
    learning_rate: float
    schedule: Schedule = "inverse_sqrt"
    radius: float | None = None
    mode: Mode = "stochastic"
    per_decade: int = 8
    minibatches: int = 1
    clip_norm: float | None = None
    entropy: float = 0.0
    staleness: int = 0
    normalize: bool = False
    track_fisher: bool = True
    extra_points: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.beta2 > 0:
            raise ValueError(f"beta2 must be > 0, got {self.beta2}.")
        if self.n_iterations < 1:
            raise ValueError(f"n_iterations (T) must be >= 1, got {self.n_iterations}.")
        if self.mode not in ("stochastic", "deterministic"):
            raise ValueError(f"mode must be 'stochastic' or 'deterministic', got {self.mode!r}.")
        if self.per_decade < 1 or self.minibatches < 1 or self.staleness < 0:
            raise ValueError("per_decade and minibatches must be >= 1 and staleness >= 0.")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be None or > 0, got {self.clip_norm}.")
        if self.entropy < 0:
            raise ValueError(f"entropy must be >= 0, got {self.entropy}.")
        bad = [t for t in self.extra_points if not 1 <= t <= self.n_iterations]
        if bad:
            raise ValueError(
                f"extra_points must lie in [1, n_iterations = {self.n_iterations}], got {bad}; "
                "drop them or raise n_iterations."
            )
        self.optimizer()  # validates learning_rate, schedule, radius

    def optimizer(self) -> OnlineGradientDescent:
        """The ``OnlineGradientDescent`` these settings describe."""
        return OnlineGradientDescent(self.learning_rate, self.schedule, self.radius)


def log_policy_torch(bandit: LogLinearBandit, theta: torch.Tensor) -> torch.Tensor:
    """``log pi_theta`` in torch for ``theta [S, d]``: ``[S, X, Y]`` (autograd-friendly)."""
    arrays = bandit.torch_arrays()
    x, y = bandit.n_contexts, bandit.n_actions
    logits = (arrays["phi_flat"] @ theta.T).T.reshape(-1, x, y) + arrays["log_ref"]
    return torch.log_softmax(logits, dim=-1)


def _sampling_probs(bandit: LogLinearBandit, theta: np.ndarray) -> torch.Tensor:
    return log_policy_torch(bandit, torch.from_numpy(np.asarray(theta, dtype=float))).exp()


def regression_gradient(
    bandit: LogLinearBandit,
    theta: np.ndarray,
    v_star: np.ndarray,
    beta2: float,
    uniforms: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    sampling_theta: np.ndarray | None = None,
    entropy: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient of the round loss at ``theta``, with samples from :math:`\pi_{sampling\_theta}`.

    Args:
        bandit: The instance.
        theta: Parameters ``[S, d]``.
        v_star: Stage 1 values ``[S, X]``.
        beta2: Regression strength.
        uniforms: ``[S, X]`` uniforms for one sample per context (stochastic), or ``None`` for
            the exact expectation over y (deterministic).
        weights: Context weights ``[S, X]`` (default: the context distribution); rows are
            normalized to sum to 1 (all-zero rows give a zero gradient).
        sampling_theta: Parameters of the policy the samples come from (default ``theta``:
            on-policy); another value makes the sample off-policy (stale or reused).
        entropy: Entropy-bonus coefficient: ``entropy * H(pi_theta(.|x))`` (exact) is
            subtracted from each context's loss.

    Returns:
        ``(grad [S, d], loss [S])``, the gradient of ``advantage_regression_loss`` averaged over
        contexts, by autograd. The loss runs with ``check=False``: a diverging run (its
        parameters overflowed) yields NaN here and is recorded as diverged by the caller,
        not stopped.

    Raises:
        ValueError: if ``beta2`` is not a finite number > 0.
    """
    if not (isinstance(beta2, (int, float)) and math.isfinite(beta2) and beta2 > 0):
        raise ValueError(f"beta2 must be a finite number > 0, got {beta2!r}.")
    arrays = bandit.torch_arrays()
    th = torch.from_numpy(np.asarray(theta, dtype=np.float64)).clone().requires_grad_(True)
    logp = log_policy_torch(bandit, th)  # [S, X, Y]
    probs = (
        logp.detach().exp() if sampling_theta is None else _sampling_probs(bandit, sampling_theta)
    )
    v = torch.from_numpy(np.asarray(v_star, dtype=np.float64))
    w = arrays["rho"].expand(th.shape[0], -1) if weights is None else torch.from_numpy(weights)
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-300)
    zero = torch.zeros((), dtype=logp.dtype)
    if uniforms is None:
        logp_s = torch.where(arrays["support"], logp, zero)
        loss = advantage_regression_loss(
            logp_s, arrays["log_ref_safe"], arrays["rewards"], v[..., None], beta2, check=False
        )
        per_x = (probs * loss).sum(-1)
    else:
        a = sample_actions(probs, torch.from_numpy(uniforms)[..., None])
        s = th.shape[0]
        logp_a = logp.gather(-1, a)[..., 0]
        ref_a = arrays["log_ref"].expand(s, -1, -1).gather(-1, a)[..., 0]
        r_a = arrays["rewards"].expand(s, -1, -1).gather(-1, a)[..., 0]
        per_x = advantage_regression_loss(logp_a, ref_a, r_a, v, beta2, check=False)
    if entropy > 0:
        # where() before the product: -inf * 0 off the support would make the gradient NaN
        logp_s = torch.where(arrays["support"], logp, zero)
        plogp = torch.where(arrays["support"], logp_s.exp() * logp_s, zero)
        per_x = per_x + entropy * plogp.sum(-1)  # minus entropy * H
    per_seed = (per_x * w).sum(-1)
    per_seed.sum().backward()
    assert th.grad is not None
    return th.grad.numpy(), per_seed.detach().numpy()


def _post_process(grad: np.ndarray, cfg: Stage2Config, tracker: Tracker) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is recorded too
        norm = np.linalg.norm(grad, axis=-1, keepdims=True)
    if cfg.clip_norm is not None:
        clipped = norm > cfg.clip_norm
        tracker.count_clipped(clipped[:, 0])
        grad = np.where(clipped, grad * cfg.clip_norm / np.maximum(norm, 1e-300), grad)
        norm = np.minimum(norm, cfg.clip_norm)
    if cfg.normalize:
        grad = grad / np.maximum(norm, 1e-300)
    return grad


def run_loop(
    bandit: LogLinearBandit,
    cfg: Stage2Config,
    n_seeds: int,
    gradient: Callable[[np.ndarray, np.ndarray, int], np.ndarray],
    theta0: np.ndarray | None = None,
) -> Stage2Result:
    """The optimizer loop shared by Stage 2 and the baseline.

    ``gradient(theta, sampling_theta, t)`` returns the raw gradient of step ``t`` (1-based);
    ``sampling_theta`` is the iterate the round's samples come from (staleness, minibatches).
    """
    ogd = cfg.optimizer()
    theta = np.zeros((n_seeds, bandit.dim)) if theta0 is None else np.array(theta0, dtype=float)
    state = ogd.init(theta)
    tracker = Tracker(bandit, cfg, n_seeds)
    past: deque[np.ndarray] = deque([theta], maxlen=cfg.staleness + 1)
    sampling = theta
    for t in range(1, cfg.n_iterations + 1):
        if (t - 1) % cfg.minibatches == 0:
            sampling = past[0]
        tracker.played(theta)
        grad = _post_process(gradient(theta, sampling, t), cfg, tracker)
        theta, state = ogd.update(theta, grad, state)
        past.append(theta)
        tracker.after_step(t, theta, state.average)
    return tracker.result(theta, np.asarray(state.average))


def run_stage2(
    bandit: LogLinearBandit,
    v_star: np.ndarray,
    cfg: Stage2Config,
    seed: int = 0,
    weights: np.ndarray | None = None,
    theta0: np.ndarray | None = None,
) -> Stage2Result:
    r"""Stage 2 of Algorithm 1: T steps of OGD on the regression loss, S seeds at once.

    Args:
        bandit: The instance.
        v_star: Stage 1 values ``[S, X]`` (S = number of seeds).
        cfg: Step sizes, T, ``beta2``, mode and the update variants.
        seed: Base seed of the on-policy sampling (``generators(STAGE2, seed, S)``).
        weights: Optional context weights ``[S, X]`` (0 drops a context: the filter).
        theta0: Initial parameters ``[S, d]`` (default 0, i.e. :math:`\pi_{ref}`).

    Returns:
        A :class:`~astarpo.theory.tracking.Stage2Result`.
    """
    v_star = np.asarray(v_star, dtype=np.float64)
    if v_star.ndim != 2 or v_star.shape[1] != bandit.n_contexts:
        raise ValueError(f"v_star must have shape [S, X={bandit.n_contexts}], got {v_star.shape}.")
    n_seeds = v_star.shape[0]
    rngs = generators(STAGE2, seed, n_seeds)
    base = np.ones((n_seeds, bandit.n_contexts)) if weights is None else np.asarray(weights)
    base = base * bandit.context_probs
    groups = np.arange(bandit.n_contexts) % cfg.minibatches
    u = np.zeros((n_seeds, bandit.n_contexts))

    def gradient(theta: np.ndarray, sampling: np.ndarray, t: int) -> np.ndarray:
        nonlocal u
        m = (t - 1) % cfg.minibatches
        if cfg.mode == "stochastic" and m == 0:
            u = np.stack([g.random(bandit.n_contexts) for g in rngs])
        w = base * (groups == m) if cfg.minibatches > 1 else base
        off = None if sampling is theta else sampling
        uni = u if cfg.mode == "stochastic" else None
        return regression_gradient(bandit, theta, v_star, cfg.beta2, uni, w, off, cfg.entropy)[0]

    return run_loop(bandit, cfg, n_seeds, gradient, theta0)
