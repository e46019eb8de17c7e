r"""Value-side losses of PPO as pure functions: GAE advantages and the clipped value loss.

Shapes: ``B`` sequences, ``T`` response tokens (right-padded; ``mask [B, T]`` is 1 on response
tokens, 0 on padding). Token-level losses are reduced by
:func:`~astarpo.llm.algorithms.losses.aggregate`.
"""

from __future__ import annotations

import torch

from astarpo.llm.algorithms.losses import Aggregation, aggregate, check_2d, check_positive

__all__ = ["gae", "value_loss"]


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Generalized advantage estimation (Schulman et al. 2016) over response tokens.

    Over the response tokens of each row, in order (positions with ``mask == 0`` are skipped,
    and get advantage and return 0), with :math:`V_{T} = 0` after the last token:

    .. math::

        \delta_t = r_t + \gamma V_{t+1} - V_t,\qquad
        \hat A_t = \delta_t + \gamma\lambda \hat A_{t+1},\qquad \hat R_t = \hat A_t + V_t

    Computed by one backward scan over ``T`` vectorized across the batch. No gradient flows
    (advantages and returns are targets).

    Args:
        rewards: Per-token rewards ``[B, T]`` (typically the task reward on the last response
            token plus a per-token KL penalty).
        values: Value estimates of each token's state ``[B, T]``.
        mask: Response-token mask ``[B, T]``.
        gamma: Discount in [0, 1]. Default 1.0 (as in RLHF practice).
        lam: GAE lambda in [0, 1]. Default 0.95.

    Returns:
        ``(advantages, returns)``, each ``[B, T]``, zero on padding.

    Raises:
        ValueError: on mismatched shapes or ``gamma``/``lam`` outside [0, 1].
    """
    check_2d("rewards", rewards)
    check_2d("values", values, rewards.shape)
    check_2d("mask", mask, rewards.shape)
    for name, coef in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= coef <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {coef}.")
    with torch.no_grad():
        valid = mask.bool()
        r = rewards.detach()
        v = values.detach().to(r.dtype)
        adv = torch.zeros_like(r)
        next_value = torch.zeros_like(r[:, 0])
        next_adv = torch.zeros_like(r[:, 0])
        for t in range(r.shape[1] - 1, -1, -1):
            delta = r[:, t] + gamma * next_value - v[:, t]
            a_t = delta + gamma * lam * next_adv
            on = valid[:, t]
            adv[:, t] = torch.where(on, a_t, 0.0)
            next_adv = torch.where(on, a_t, next_adv)
            next_value = torch.where(on, v[:, t], next_value)
        returns = torch.where(valid, adv + v, 0.0)
    return adv, returns


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float | None = 0.2,
    aggregation: Aggregation = "token_mean",
    norm_len: int | None = None,
    check: bool = True,
) -> torch.Tensor:
    r"""PPO's (clipped) value loss.

    .. math::

        \ell_t = \tfrac12 \max\Big((V_t - \hat R_t)^2,\;
            \big(V^{old}_t + \operatorname{clip}(V_t - V^{old}_t, -\epsilon, \epsilon)
            - \hat R_t\big)^2\Big)

    and :math:`\tfrac12 (V_t - \hat R_t)^2` when ``clip_eps is None``; reduced with
    :func:`~astarpo.llm.algorithms.losses.aggregate`.

    Args:
        values: Current value predictions ``[B, T]`` (with gradient).
        old_values: Predictions at rollout time ``[B, T]``.
        returns: Targets ``[B, T]`` (e.g. from :func:`gae`).
        mask: Response-token mask ``[B, T]``.
        clip_eps: Value clip range > 0, or ``None`` for no clipping. Default 0.2.
        aggregation: See :func:`~astarpo.llm.algorithms.losses.aggregate`. Default ``"token_mean"``.
        norm_len: Constant length of ``"seq_sum_norm"``.
        check: Validate the ``clip_eps`` (default). The algorithms, whose config validated it once,
            pass ``False``: no check per micro-batch.

    Returns:
        The scalar loss.

    Raises:
        ValueError: on mismatched shapes or (with ``check``) ``clip_eps <= 0``.
    """
    check_2d("values", values)
    for name, x in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        check_2d(name, x, values.shape)
    err = (values - returns) ** 2
    if clip_eps is not None:
        if check:
            check_positive("clip_eps", clip_eps)
        clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
        err = torch.maximum(err, (clipped - returns) ** 2)
    return aggregate(0.5 * err, mask, aggregation, norm_len)
