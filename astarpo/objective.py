r"""The A*-PO objective: optimal value, optimal advantage and the regression loss.

Every part of astarpo (the bandit simulator, the LLM trainer, the baselines) calls these
functions; nothing re-derives :math:`V^*` or the loss inline.

Each function accepts numpy arrays or torch tensors (and Python floats), returns the same kind,
keeps float32/float64, and lets torch gradients flow.

Notation (Brantley et al. 2025, arXiv 2505.20686):

* Stage 1 (Eq. 3): :math:`\hat V^*(x) = \beta_1 \log \frac{1}{N} \sum_{i=1}^N e^{r(x, y_i)/\beta_1}`
  with :math:`y_i \sim \pi_{\mathrm{ref}}(\cdot\mid x)`.
* Stage 2 (Eq. 4): :math:`\ell(\pi) = \big(\beta_2 \log\frac{\pi(y|x)}{\pi_{\mathrm{ref}}(y|x)}
  - (r(x, y) - \hat V^*(x))\big)^2` with one on-policy :math:`y \sim \pi(\cdot\mid x)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeVar, Union

import numpy as np
import torch
from scipy.special import logsumexp

ArrayLike = Union[np.ndarray, torch.Tensor, float]
T = TypeVar("T", np.ndarray, torch.Tensor)

Reduction = Literal["none", "mean", "sum"]

__all__ = [
    "AdvantageRegression",
    "advantage_regression_loss",
    "check_beta",
    "optimal_advantage",
    "optimal_policy",
    "optimal_value",
    "reduce_loss",
]


def check_beta(beta: float, name: str = "beta") -> float:
    """``beta`` as a float, checked: a KL-regularization strength is a finite number > 0.

    The one check of ``beta1`` and ``beta2``: the functions below call it (unless
    ``check=False``), and so do the configs that hold them (``AStarPOConfig``,
    ``Stage1Config``) and ``AStarPO(beta2=...)``.

    Args:
        beta: The value (a Python or numpy number; ``bool`` is refused).
        name: Its name in the error (``"beta1"``, ``"beta2"``).

    Raises:
        ValueError: ``"NAME must be a finite number > 0, got VALUE ..."``.
    """
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.floating, np.integer)):
        raise ValueError(
            f"{name} must be a finite number > 0, got {beta!r} ({type(beta).__name__})."
        )
    value = float(beta)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"{name} must be a finite number > 0, got {value!r} (it is a KL-regularization "
            "strength)."
        )
    return value


def _all_finite(x: np.ndarray | torch.Tensor) -> bool:
    if isinstance(x, torch.Tensor):
        return bool(torch.isfinite(x.detach()).all())
    return bool(np.isfinite(x).all())


def _as_array(x: ArrayLike, name: str) -> np.ndarray | torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x if x.is_floating_point() else x.to(torch.get_default_dtype())
    arr = np.asarray(x)
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float64)
    if arr.dtype.kind != "f":
        raise ValueError(f"{name} must be a numeric array or tensor, got dtype {arr.dtype}.")
    return arr


def _check_same_shape(ref_name: str, ref: ArrayLike, **others: ArrayLike) -> None:
    """Refuse inputs whose broadcast changes the shape of ``ref`` (e.g. ``[3]`` with ``[3, 1]``
    silently becoming ``[3, 3]``); scalars and shapes that broadcast *to* ``ref``'s are fine."""
    shapes = {ref_name: tuple(np.shape(ref))}
    shapes.update({k: tuple(np.shape(v)) for k, v in others.items()})
    try:
        full = tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        full = None
    if full != shapes[ref_name]:
        got = ", ".join(f"{k} {list(v)}" for k, v in shapes.items())
        raise ValueError(
            f"{', '.join(shapes)} must share one shape [B] (one value per response); got {got}"
            + ("" if full is None else f", which would broadcast to {list(full)}")
            + ". Flatten them (e.g. .reshape(-1)) to [B]."
        )


def optimal_value(rewards: T, beta: float) -> T:
    r"""Stage 1 estimate of the optimal value from N reference samples (paper Eq. 3).

    .. math::

        \hat V^*(x) = \beta \log \frac{1}{N} \sum_{i=1}^{N} \exp\!\big(r_i / \beta\big)
                    = \beta \big(\operatorname{logsumexp}(r / \beta) - \log N\big)

    Computed with log-sum-exp, so it is exact (no overflow) for ``beta`` from 1e-6 to 1e3 and
    rewards up to +-100. Half-precision inputs (float16, bfloat16) are computed in float32 and
    the result is rounded back to the input dtype (so it is within one rounding of the float64
    value). It lies between the mean of the rewards (``beta -> inf``) and their
    maximum (``beta -> 0``); constant rewards give that constant.

    Args:
        rewards: Rewards of N reference samples, shape ``[..., N]`` (numpy or torch).
        beta: The KL strength used for V* (the paper's ``beta1``, 0.5 in its experiments).

    Returns:
        ``v_star`` of shape ``[...]``, of the same kind and float dtype as ``rewards``.

    Raises:
        ValueError: if ``beta <= 0`` or not finite, if ``N == 0`` or the input is 0-d, or if any
            reward is NaN or infinite.
    """
    beta = check_beta(beta)
    r = _as_array(rewards, "rewards")
    if r.ndim == 0:
        raise ValueError(
            "rewards must have a last axis of N samples, shape [..., N]; got a scalar."
        )
    n = r.shape[-1]
    if n == 0:
        raise ValueError(
            "rewards has N = 0 samples on its last axis; V* needs at least one sample."
        )
    if not _all_finite(r):
        raise ValueError("rewards contain NaN or infinite values; V* is undefined for them.")
    if isinstance(r, torch.Tensor):
        # float16/bfloat16 overflow in r / beta (1e5 at beta 1e-3): compute in float32.
        wide = r.float() if r.dtype in (torch.float16, torch.bfloat16) else r
        out = beta * (torch.logsumexp(wide / beta, dim=-1) - math.log(n))
        return out.to(r.dtype)  # type: ignore[return-value]
    wide_np = r.astype(np.float32) if r.dtype.itemsize < 4 else r
    lse = logsumexp(wide_np / beta, axis=-1)
    return np.asarray(beta * (lse - math.log(n)), dtype=r.dtype)  # type: ignore[return-value]


def optimal_advantage(reward: T, v_star: T) -> T:
    r"""The optimal advantage :math:`A^*(x, y) = r(x, y) - V^*(x)`, the regression target.

    Args:
        reward: Reward of the on-policy sample, shape ``[B]``.
        v_star: Optimal-value estimate of each prompt, shape ``[B]``.

    Returns:
        ``reward - v_star``, shape ``[B]``.

    Raises:
        ValueError: if ``v_star`` would broadcast ``reward`` to another shape.
    """
    _check_same_shape("reward", reward, v_star=v_star)
    return reward - v_star


def reduce_loss(x: T, reduction: Reduction) -> T:
    """Reduce per-example losses ``[B]``: ``"none"`` (as is), ``"mean"`` or ``"sum"``.

    The one reduction switch of the per-example losses (A*-PO's and REBEL's).

    Raises:
        ValueError: for any other ``reduction``.
    """
    if reduction == "none":
        return x
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}.")


def advantage_regression_loss(
    logp: T,
    logp_ref: T,
    reward: T,
    v_star: T,
    beta: float,
    reduction: Reduction = "none",
    check: bool = True,
) -> T:
    r"""Stage 2 least-squares loss of A*-PO (paper Eq. 4).

    .. math::

        \ell = \Big(\beta \big(\log \pi(y|x) - \log \pi_{\mathrm{ref}}(y|x)\big)
               - \big(r(x, y) - \hat V^*(x)\big)\Big)^2

    Its gradient with respect to ``logp`` is
    ``2 * beta * (beta * (logp - logp_ref) - (reward - v_star))``. The loss is zero for every
    ``y`` exactly when ``pi = pi_ref * exp(r / beta) / Z`` and ``v_star = beta log Z``.

    Args:
        logp: Sequence log-probability of each response under the policy, shape ``[B]``.
        logp_ref: The same under the frozen reference, shape ``[B]`` (no gradient needed).
        reward: Reward of each response, shape ``[B]``.
        v_star: Stage 1 value of each response's prompt, shape ``[B]``.
        beta: Regression strength (the paper's ``beta2``, 1e-3 in its experiments).
        reduction: ``"none"`` (default, per example ``[B]``), ``"mean"`` or ``"sum"``.
        check: Validate ``beta`` and refuse NaN or infinite inputs (default). Each check of a
            tensor on an accelerator waits for the device (a host sync); a caller whose ``beta``
            was validated once, in its config, and that checks the reduced loss itself, once per
            step, passes ``False``: nothing is checked per call (A*-PO's trainer does this).

    Returns:
        The per-example loss ``[B]``, or a scalar when reduced.

    Raises:
        ValueError: if ``logp_ref``, ``reward`` or ``v_star`` would broadcast ``logp`` to
            another shape (e.g. ``[3]`` and ``[3, 1]``), or (with ``check``) if ``beta`` is not
            a finite number > 0 or any input is NaN or infinite.
    """
    if check:
        beta = check_beta(beta)
    _check_same_shape("logp", logp, logp_ref=logp_ref, reward=reward, v_star=v_star)
    inputs = (("logp", logp), ("logp_ref", logp_ref), ("reward", reward), ("v_star", v_star))
    for name, x in inputs if check else ():
        if isinstance(x, (np.ndarray, torch.Tensor)) and not _all_finite(x):
            raise ValueError(f"{name} contains NaN or infinite values; the loss is undefined.")
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"{name} is {x}; the loss is undefined.")
    residual = beta * (logp - logp_ref) - (reward - v_star)
    return reduce_loss(residual * residual, reduction)


def optimal_policy(ref_logprobs: T, rewards: T, beta: float) -> T:
    r"""Log-probabilities of the KL-regularized optimal policy over a finite action set.

    .. math::

        \log \pi^*(y|x) = \log \pi_{\mathrm{ref}}(y|x) + r(x, y)/\beta
                          - \log \sum_{y'} \pi_{\mathrm{ref}}(y'|x) e^{r(x, y')/\beta}

    Args:
        ref_logprobs: Reference log-probabilities, shape ``[..., Y]`` (``-inf`` allowed for
            actions the reference never takes).
        rewards: Rewards of each action, shape ``[..., Y]``, finite.
        beta: KL strength, > 0.

    Returns:
        Normalized log-probabilities ``[..., Y]`` (exponentiate for probabilities).

    Raises:
        ValueError: if ``beta`` is invalid, a reward is not finite, or ``ref_logprobs`` is
            ``-inf`` on every action of some context (numpy and torch alike).
    """
    beta = check_beta(beta)
    if not _all_finite(rewards):
        raise ValueError("rewards contain NaN or infinite values.")
    z = ref_logprobs + rewards / beta
    if isinstance(z, torch.Tensor):
        if not bool(torch.isfinite(z.detach().amax(dim=-1)).all()):
            raise ValueError("ref_logprobs put zero mass on every action of some context.")
        return z - torch.logsumexp(z, dim=-1, keepdim=True)
    z = np.asarray(z)
    if not np.isfinite(z.max(axis=-1)).all():
        raise ValueError("ref_logprobs put zero mass on every action of some context.")
    return z - logsumexp(z, axis=-1, keepdims=True)


@dataclass(frozen=True)
class AdvantageRegression:
    r"""The A*-PO objective with its two KL strengths, as one small object.

    ``beta1`` sets the Stage 1 value :math:`V^* = \beta_1 \log E_{\pi_{ref}} e^{r/\beta_1}`: small
    ``beta1`` pushes V* towards the best of the N reference rewards, large ``beta1`` towards their
    mean. ``beta2`` scales the log-ratio in the Stage 2 regression: the smaller it is, the further
    the policy may move from the reference to fit the advantage.

    The defaults are the paper's experimental settings (``beta1=0.5``, ``beta2=1e-3``). The
    paper's theory (Theorem 1) assumes a single ``beta1 == beta2``; with different values the
    regression target is not the optimal advantage of either KL-regularized problem
    (see the theory docs, "two-beta").

    Args:
        beta1: KL strength of the Stage 1 value estimate, > 0. Default 0.5.
        beta2: KL strength of the Stage 2 regression, > 0. Default 1e-3.

    Example:
        >>> import torch
        >>> from astarpo import AdvantageRegression
        >>> obj = AdvantageRegression()
        >>> v_star = obj.value(torch.tensor([[0.0, 1.0, 0.0, 0.0]]))
        >>> loss = obj.loss(torch.tensor([-3.0]), torch.tensor([-3.1]), torch.tensor([1.0]), v_star)
    """

    beta1: float = 0.5
    beta2: float = 1e-3

    def __post_init__(self) -> None:
        check_beta(self.beta1, "beta1")
        check_beta(self.beta2, "beta2")

    def value(self, rewards: T) -> T:
        """``optimal_value(rewards, beta1)``: rewards ``[..., N]`` -> ``v_star`` ``[...]``."""
        return optimal_value(rewards, self.beta1)

    def advantage(self, reward: T, v_star: T) -> T:
        """``optimal_advantage(reward, v_star)`` = ``reward - v_star``, shape ``[B]``."""
        return optimal_advantage(reward, v_star)

    def loss(
        self,
        logp: T,
        logp_ref: T,
        reward: T,
        v_star: T,
        reduction: Reduction = "none",
        check: bool = True,
    ) -> T:
        """``advantage_regression_loss(logp, logp_ref, reward, v_star, beta2, reduction,
        check)``."""
        beta2 = self.beta2
        return advantage_regression_loss(logp, logp_ref, reward, v_star, beta2, reduction, check)
