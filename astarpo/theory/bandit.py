r"""An exact log-linear contextual bandit: the smallest world in which Theorem 1 can be checked.

X contexts (prompts), Y actions (responses), features :math:`\phi(x, y) \in \mathbb{R}^d`,
rewards :math:`r(x, y)`, a reference policy :math:`\pi_{\mathrm{ref}}` and a context
distribution :math:`\rho`. The policy class is

.. math::

    \pi_\theta(y|x) = \frac{\pi_{\mathrm{ref}}(y|x) \exp(\theta^\top \phi(x, y))}
                           {\sum_{y'} \pi_{\mathrm{ref}}(y'|x) \exp(\theta^\top \phi(x, y'))}.

Everything is computed exactly (sums over the Y actions, no sampling) and in log-space, so that
``beta = 1e-3`` (log-ratios of order 1000) neither overflows nor loses the gap. Actions with
:math:`\pi_{\mathrm{ref}}(y|x) = 0` are allowed (they model answers the reference never gives);
every policy of the class gives them zero mass too.

Parameters may be batched: ``theta`` of shape ``[..., d]`` gives policies ``[..., X, Y]`` and
objectives ``[...]``, so many seeds run at once.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import logsumexp

from astarpo import optimal_policy as _optimal_log_policy

__all__ = ["LogLinearBandit"]


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


class LogLinearBandit:
    r"""A contextual bandit with a log-linear policy class, solved exactly.

    Args:
        features: :math:`\phi`, shape ``[X, Y, d]``, finite.
        rewards: :math:`r`, shape ``[X, Y]``, finite.
        ref_probs: :math:`\pi_{\mathrm{ref}}(y|x)`, shape ``[X, Y]``, non-negative, each row
            summing to 1 (zeros allowed, but not a whole row).
        context_probs: :math:`\rho(x)`, shape ``[X]``; uniform when ``None`` (default).

    Raises:
        ValueError: on wrong shapes, non-finite values, negative probabilities or rows that do
            not sum to 1.
    """

    def __init__(
        self,
        features: np.ndarray,
        rewards: np.ndarray,
        ref_probs: np.ndarray,
        context_probs: np.ndarray | None = None,
    ) -> None:
        phi = np.asarray(features, dtype=np.float64)
        r = np.asarray(rewards, dtype=np.float64)
        p = np.asarray(ref_probs, dtype=np.float64)
        if phi.ndim != 3:
            raise ValueError(f"features must have shape [X, Y, d], got {phi.shape}.")
        n_x, n_y, _ = phi.shape
        if r.shape != (n_x, n_y) or p.shape != (n_x, n_y):
            raise ValueError(
                f"rewards {r.shape} and ref_probs {p.shape} must both have shape [X, Y] = "
                f"{(n_x, n_y)} to match features {phi.shape}."
            )
        if not (np.isfinite(phi).all() and np.isfinite(r).all() and np.isfinite(p).all()):
            raise ValueError("features, rewards and ref_probs must be finite (no NaN or inf).")
        if (p < 0).any() or not np.allclose(p.sum(-1), 1.0, atol=1e-9):
            raise ValueError("ref_probs must be non-negative with every row [x, :] summing to 1.")
        if context_probs is None:
            rho = np.full(n_x, 1.0 / n_x)
        else:
            rho = np.asarray(context_probs, dtype=np.float64)
            if rho.shape != (n_x,) or (rho < 0).any() or not math.isclose(rho.sum(), 1.0):
                raise ValueError(
                    f"context_probs must be a probability vector of shape [X] = ({n_x},)."
                )
        self.features = phi
        self.rewards = r
        self.ref_probs = p
        self.context_probs = rho
        self.support = p > 0
        with np.errstate(divide="ignore"):
            self.log_ref = np.log(p)  # -inf off the support
        self._torch: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------ sizes
    @property
    def n_contexts(self) -> int:
        """X, the number of contexts."""
        return int(self.features.shape[0])

    @property
    def n_actions(self) -> int:
        """Y, the number of actions per context."""
        return int(self.features.shape[1])

    @property
    def dim(self) -> int:
        """d, the feature dimension."""
        return int(self.features.shape[2])

    def torch_arrays(self) -> dict[str, torch.Tensor]:
        """float64 torch views of the arrays (cached): ``phi``, ``log_ref``, ``rewards``, ..."""
        if self._torch is None:
            self._torch = {
                "phi": torch.from_numpy(self.features),
                "phi_flat": torch.from_numpy(self.features.reshape(-1, self.dim)),
                "log_ref": torch.from_numpy(self.log_ref),
                "log_ref_safe": torch.from_numpy(np.where(self.support, self.log_ref, 0.0)),
                "rewards": torch.from_numpy(self.rewards),
                "support": torch.from_numpy(self.support),
                "rho": torch.from_numpy(self.context_probs),
            }
        return self._torch

    # ------------------------------------------------------------------ policies
    def log_policy(self, theta: np.ndarray) -> np.ndarray:
        """``log pi_theta(y|x)`` for ``theta`` of shape ``[..., d]``; returns ``[..., X, Y]``."""
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape[-1:] != (self.dim,):
            raise ValueError(
                f"theta must have shape [..., d] with d = {self.dim}, got {theta.shape}."
            )
        flat = theta.reshape(-1, self.dim)  # one matmul for all leading axes
        # torch's matmul (torch.set_num_threads applies); numpy's BLAS may start many threads,
        # 5x slower on a loaded 2-core machine
        phi = self.torch_arrays()["phi_flat"]
        scores = (phi @ torch.from_numpy(np.ascontiguousarray(flat)).T).T.numpy()
        logits = self.log_ref + scores.reshape(*theta.shape[:-1], *self.log_ref.shape)
        return logits - logsumexp(logits, axis=-1, keepdims=True)

    def policy(self, theta: np.ndarray) -> np.ndarray:
        """``pi_theta(y|x)``, shape ``[..., X, Y]`` for ``theta`` ``[..., d]``."""
        return np.exp(self.log_policy(theta))

    def log_optimal_policy(self, beta: float) -> np.ndarray:
        """``log pi*_beta = log pi_ref + r/beta - log Z(x)`` via ``astarpo.optimal_policy``."""
        return np.asarray(_optimal_log_policy(self.log_ref, self.rewards, beta))

    def optimal_policy(self, beta: float) -> np.ndarray:
        """The KL-regularized optimal policy ``pi*_beta``, shape ``[X, Y]``."""
        return np.exp(self.log_optimal_policy(beta))

    def optimal_value(self, beta: float) -> np.ndarray:
        r"""Exact :math:`V^*_\beta(x) = \beta \log \sum_y \pi_{\mathrm{ref}}(y|x) e^{r(x,y)/\beta}`.

        The population version of Eq. 3 (the sample mean replaced by the expectation under
        :math:`\pi_{\mathrm{ref}}`), evaluated with log-sum-exp. Shape ``[X]``.
        """
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta}.")
        return beta * logsumexp(self.log_ref + self.rewards / beta, axis=-1)

    def optimal_theta(self, beta: float) -> tuple[np.ndarray, float]:
        r"""The parameter :math:`\theta^*_\beta` with :math:`\pi_{\theta^*} = \pi^*_\beta`, if any.

        Least squares of the within-context centred features onto :math:`r/\beta` over the
        support of the reference.

        Returns:
            ``(theta_star [d], residual)``; ``residual`` is the RMS misfit of the log-ratio,
            about 0 exactly when the instance is realizable.
        """
        rows, targets = [], []
        for x in range(self.n_contexts):
            s = self.support[x]
            f = self.features[x, s]
            t = self.rewards[x, s] / beta
            rows.append(f - f.mean(0))
            targets.append(t - t.mean())
        a, b = np.concatenate(rows), np.concatenate(targets)
        theta, *_ = np.linalg.lstsq(a, b, rcond=None)
        return theta, float(np.sqrt(np.mean((a @ theta - b) ** 2)))

    # ------------------------------------------------------------------ objective
    def _kl(self, policy: np.ndarray, log_q: np.ndarray) -> np.ndarray:
        """``KL(policy || q)`` per context, ``[..., X]``; zero-mass actions contribute 0."""
        p = np.asarray(policy, dtype=np.float64)
        if p.shape[-2:] != (self.n_contexts, self.n_actions):
            raise ValueError(
                f"policy must have shape [..., X, Y] = [..., {self.n_contexts}, "
                f"{self.n_actions}], got {p.shape}."
            )
        pos = p > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(pos, p * (np.log(np.where(pos, p, 1.0)) - log_q), 0.0)
        return terms.sum(-1)

    def objective(self, policy: np.ndarray, beta: float) -> np.ndarray:
        r""":math:`J_\beta(\pi) = E_{x\sim\rho}[E_{y\sim\pi} r(x,y) - \beta\,KL(\pi\|\pi_{ref})]`.

        Args:
            policy: Probabilities ``[..., X, Y]``.
            beta: KL strength > 0.

        Returns:
            ``[...]`` (a 0-d array for a single policy). ``-inf`` if the policy puts mass where
            the reference has none.
        """
        p = np.asarray(policy, dtype=np.float64)
        per_x = (p * self.rewards).sum(-1) - beta * self._kl(p, self.log_ref)
        return per_x @ self.context_probs

    def suboptimality(self, policy: np.ndarray, beta: float) -> np.ndarray:
        r"""The gap :math:`J_\beta(\pi^*_\beta) - J_\beta(\pi) = \beta E_{x} KL(\pi\|\pi^*_\beta)`.

        Computed from the right-hand side (exact identity), so it is >= 0, exactly 0 at
        :math:`\pi^*` up to rounding, and keeps its relative precision when it is tiny.

        Args:
            policy: Probabilities ``[..., X, Y]``.
            beta: KL strength > 0.

        Returns:
            ``[...]``, clipped at 0 from below (rounding).
        """
        per_x = self.context_suboptimality(policy, beta)
        return np.maximum(per_x @ self.context_probs, 0.0)

    def context_suboptimality(self, policy: np.ndarray, beta: float) -> np.ndarray:
        r"""Per-context gap :math:`V^*_\beta(x) - J_\beta(\pi; x) = \beta KL(\pi\|\pi^*_\beta)(x)`.

        Args:
            policy: Probabilities ``[..., X, Y]``.
            beta: KL strength > 0.

        Returns:
            ``[..., X]``.
        """
        return beta * self._kl(policy, self.log_optimal_policy(beta))

    def solve_rate(self) -> np.ndarray:
        """``p(x) = P_{y ~ pi_ref}(r(x, y) = 1)``, shape ``[X]``; needs rewards in {0, 1}."""
        if not np.isin(self.rewards, (0.0, 1.0)).all():
            raise ValueError("solve_rate needs binary rewards (every r(x, y) in {0, 1}).")
        return (self.ref_probs * self.rewards).sum(-1)

    # ------------------------------------------------------------------ sampling
    def sample(self, policy: np.ndarray, rng: np.random.Generator, n: int = 1) -> np.ndarray:
        """Draw ``n`` actions per context from ``policy`` (inverse CDF, one uniform per draw).

        Args:
            policy: Probabilities ``[..., X, Y]``.
            rng: The source of randomness.
            n: Draws per context.

        Returns:
            Integer actions ``[..., X, n]``.
        """
        p = torch.from_numpy(np.ascontiguousarray(policy, dtype=np.float64))
        u = torch.from_numpy(rng.random((*p.shape[:-1], n)))
        return sample_actions(p, u).numpy()

    # ------------------------------------------------------------------ instances
    @classmethod
    def random(
        cls,
        n_contexts: int = 32,
        n_actions: int = 16,
        dim: int = 8,
        v_ref: float = 0.1,
        *,
        p_max: float = 0.9,
        n_hard: int | None = None,
        correct_fraction: float = 0.25,
        realizable: bool = True,
        feature_scale: float = 1.0,
        seed: int | np.random.Generator | None = 0,
    ) -> LogLinearBandit:
        r"""A random instance with 0/1 rewards and a controlled :math:`v_{ref} = \min_x p(x)`.

        Each context has ``max(1, round(correct_fraction * Y))`` correct actions (reward 1).
        Solve rates ``p(x)`` are exactly ``v_ref`` on the first ``n_hard`` contexts and uniform
        on ``[v_ref, max(p_max, v_ref)]`` elsewhere; the reference spreads each of the masses
        ``p(x)`` and ``1 - p(x)`` over the correct and wrong actions with random weights. With
        ``v_ref = 0`` the hard contexts' correct answers have zero reference mass.

        Features are Gaussian with standard deviation ``feature_scale``. If ``realizable``, the
        first coordinate is replaced by the reward before a random rotation, so
        :math:`r/\beta` lies in the feature span and :math:`\pi^*_\beta` is in the class for
        every ``beta`` (with :math:`\|\theta^*_\beta\| = 1/\beta`); otherwise the reward is
        not in the span (generically) and the class misses :math:`\pi^*`.

        Args:
            n_contexts: X. n_actions: Y (>= 2). dim: d (>= 2).
            v_ref: Smallest solve rate, in ``[0, 1]``.
            p_max: Largest solve rate of the other contexts.
            n_hard: Contexts with ``p(x) = v_ref`` exactly; default ``max(1, X // 8)``.
            correct_fraction: Fraction of correct actions per context.
            realizable: Whether :math:`\pi^*` is in the class.
            feature_scale: Standard deviation of the random feature coordinates.
            seed: An int or a ``numpy.random.Generator``.
        """
        if not 0.0 <= v_ref <= 1.0:
            raise ValueError(f"v_ref must lie in [0, 1], got {v_ref}.")
        if n_actions < 2 or dim < 2 or n_contexts < 1:
            raise ValueError("need n_contexts >= 1, n_actions >= 2 and dim >= 2.")
        rng = _rng(seed)
        n_hard = max(1, n_contexts // 8) if n_hard is None else n_hard
        if not 0 <= n_hard <= n_contexts:
            raise ValueError(f"n_hard must be in [0, n_contexts], got {n_hard}.")
        n_correct = min(n_actions - 1, max(1, round(correct_fraction * n_actions)))
        rates = rng.uniform(v_ref, max(p_max, v_ref), size=n_contexts)
        rates[:n_hard] = v_ref
        rewards = np.zeros((n_contexts, n_actions))
        ref = np.zeros((n_contexts, n_actions))
        for x in range(n_contexts):
            good = rng.permutation(n_actions)[:n_correct]
            rewards[x, good] = 1.0
            w = rng.gamma(2.0, size=n_actions)
            g = rewards[x] == 1.0
            ref[x, g] = rates[x] * w[g] / w[g].sum()
            ref[x, ~g] = (1.0 - rates[x]) * w[~g] / w[~g].sum()
        feats = feature_scale * rng.standard_normal((n_contexts, n_actions, dim))
        if realizable:
            feats[..., 0] = rewards
            q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
            feats = feats @ q
        return cls(feats, rewards, ref)


def sample_actions(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling: ``probs [..., Y]`` and uniforms ``u [..., n]`` -> actions ``[..., n]``.

    Zero-probability actions are never returned.
    """
    cdf = probs.cumsum(-1)
    u = u * cdf[..., -1:]
    idx = torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True)
    return idx.clamp_max(probs.shape[-1] - 1)
