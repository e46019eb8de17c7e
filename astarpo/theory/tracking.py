r"""What a Stage 2 run records: the gap of four policies along the run, norms and the Fisher floor.

A regret bound controls the *mean of the iterates' gaps* :math:`\frac1t\sum_{i<t} g(\theta_i)`,
or equivalently (J is concave in :math:`\pi`) bounds the gap of the *mixture policy*
:math:`\frac1t\sum_{i<t}\pi_{\theta_i}`; the OGD code also keeps the *parameter average*
:math:`\bar\theta_t`. All three are recorded, with the last iterate, at log-spaced t, over the
same iterates :math:`\theta_0 .. \theta_{t-1}` that OGD plays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.fisher import fisher_floor, identifiable_basis
from astarpo.theory.streams import log_checkpoints

__all__ = ["Stage2Result", "Tracker"]


@dataclass(frozen=True)
class Stage2Result:
    """Learning curves of a batch of S seeds, at the K evaluation points ``steps``.

    Attributes:
        steps: Evaluation points t, ``[K]`` (after t updates).
        last: Gap under ``J_beta2`` of the last iterate, ``[S, K]``.
        average: Gap of the parameter average (mean of ``theta_0 .. theta_{t-1}``), ``[S, K]``.
        mixture: Gap of the mixture policy (mean of ``pi_theta_0 .. pi_theta_{t-1}``).
        mean_gap: Mean of the gaps of ``theta_0 .. theta_{t-1}`` (what a regret bound bounds).
        context_last: Per-context gap of the last iterate, ``[S, K, X]``.
        path: The last iterate at each evaluation point, ``[S, K, d]``.
        average_path: The parameter average (mean of ``theta_0 .. theta_{t-1}``) at each
            evaluation point, ``[S, K, d]``; the average over a window ``[a, b)`` of two
            evaluation points is ``(b * average_path[:, j] - a * average_path[:, i]) / (b - a)``.
        fisher_min: Fisher floor (identifiable subspace) of the last iterate, ``[S, K]``.
        theta: Final parameters ``[S, d]``.
        theta_average: Final parameter average ``[S, d]``.
        norm_max: Largest ``||theta_t||`` along the run, ``[S]``.
        at_radius: Fraction of steps that ended on the projection sphere, ``[S]``.
        clipped: Fraction of steps whose gradient was clipped, ``[S]``.
    """

    steps: np.ndarray
    last: np.ndarray
    average: np.ndarray
    mixture: np.ndarray
    mean_gap: np.ndarray
    context_last: np.ndarray
    path: np.ndarray
    average_path: np.ndarray
    fisher_min: np.ndarray
    theta: np.ndarray
    theta_average: np.ndarray
    norm_max: np.ndarray
    at_radius: np.ndarray
    clipped: np.ndarray


class Tracker:
    """Accumulates a :class:`Stage2Result` step by step (used by the optimizer loop).

    Args:
        bandit: The instance.
        cfg: A :class:`~astarpo.theory.stage2.Stage2Config` (``beta2``, ``n_iterations``,
            ``per_decade``, ``extra_points``, ``radius``, ``track_fisher``).
        n_seeds: S.
    """

    def __init__(self, bandit: LogLinearBandit, cfg: Any, n_seeds: int) -> None:
        self.bandit, self.beta, self.radius = bandit, float(cfg.beta2), cfg.radius
        extra = np.asarray(cfg.extra_points, dtype=int)
        self.steps = np.union1d(log_checkpoints(cfg.n_iterations, cfg.per_decade), extra)
        k, s, x = len(self.steps), n_seeds, bandit.n_contexts
        self.curves = {n: np.empty((s, k)) for n in ("last", "average", "mixture", "mean_gap")}
        self.fisher = np.empty((s, k))
        self.context = np.empty((s, k, x))
        self.path = np.empty((s, k, bandit.dim))
        self.average_path = np.empty((s, k, bandit.dim))
        self.mix_sum = np.zeros((s, x, bandit.n_actions))
        self.gap_sum = np.zeros(s)
        self.n_played = 0
        self.norm_max = np.zeros(s)
        self.on_sphere = np.zeros(s)
        self.n_clipped = np.zeros(s)
        self.k = 0
        self.basis = identifiable_basis(bandit) if cfg.track_fisher else None

    def played(self, theta: np.ndarray) -> None:
        """Record an iterate that OGD plays (before its update)."""
        pol = self.bandit.policy(theta)
        self.mix_sum += pol
        self.gap_sum += self.bandit.suboptimality(pol, self.beta)
        self.n_played += 1

    def count_clipped(self, clipped: np.ndarray) -> None:
        """Record which seeds' gradients were clipped at this step."""
        self.n_clipped += clipped

    def after_step(self, t: int, theta: np.ndarray, average: np.ndarray) -> None:
        """Record the iterate after update ``t`` (and evaluate at the checkpoints)."""
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is recorded too
            norm = np.linalg.norm(theta, axis=-1)
        self.norm_max = np.maximum(self.norm_max, norm)
        if self.radius is not None:
            self.on_sphere += norm >= self.radius * (1 - 1e-9)
        if self.k >= len(self.steps) or t != self.steps[self.k]:
            return
        b, k = self.bandit, self.k
        per_x = b.context_suboptimality(b.policy(theta), self.beta)
        self.context[:, k] = per_x
        self.path[:, k] = theta
        self.average_path[:, k] = average
        self.curves["last"][:, k] = np.maximum(per_x @ b.context_probs, 0.0)
        self.curves["average"][:, k] = b.suboptimality(b.policy(average), self.beta)
        self.curves["mixture"][:, k] = b.suboptimality(self.mix_sum / self.n_played, self.beta)
        self.curves["mean_gap"][:, k] = self.gap_sum / self.n_played
        self.fisher[:, k] = np.nan if self.basis is None else fisher_floor(b, theta, self.basis)
        self.k += 1

    def result(self, theta: np.ndarray, theta_average: np.ndarray) -> Stage2Result:
        """The finished :class:`Stage2Result`."""
        t = max(self.n_played, 1)
        return Stage2Result(
            steps=self.steps,
            context_last=self.context,
            path=self.path,
            average_path=self.average_path,
            fisher_min=self.fisher,
            theta=theta,
            theta_average=theta_average,
            norm_max=self.norm_max,
            at_radius=self.on_sphere / t,
            clipped=self.n_clipped / t,
            **self.curves,
        )
