r"""Losses of the baselines (GRPO, Dr.GRPO, RLOO, PPO with GAE, REBEL) as pure functions.

Each function takes flat torch tensors and returns a tensor; none holds state or touches a model.
The A*-PO loss is not here: the trainer calls :func:`astarpo.advantage_regression_loss`.

Shapes: ``P`` prompts, ``G`` samples per prompt (``group_size``), ``B`` sequences, ``T`` response
tokens (right-padded; ``mask [B, T]`` is 1 on response tokens, 0 on padding).

Token-level losses are reduced by :func:`aggregate` with one of three documented modes:

* ``"token_mean"`` (default): sum over every response token of the batch divided by the number
  of response tokens (DAPO; TRL's default). Every token weighs the same.
* ``"seq_mean"``: mean over each sequence's tokens, then mean over sequences (the original
  GRPO of DeepSeekMath). Tokens of short responses weigh more.
* ``"seq_sum_norm"``: sum over each sequence's tokens divided by a constant ``norm_len`` (the
  generation budget), then mean over sequences (Dr.GRPO, Liu et al. 2025). No length bias.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = [
    "Aggregation",
    "KLKind",
    "aggregate",
    "clipped_policy_loss",
    "gae",
    "group_advantages",
    "kl_penalty",
    "rebel_loss",
    "rloo_advantages",
    "value_loss",
]

Aggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]
KLKind = Literal["k1", "k2", "k3"]


def _check_2d(name: str, x: torch.Tensor, shape: torch.Size | None = None) -> None:
    if x.ndim != 2:
        raise ValueError(f"{name} must have shape [B, T], got {tuple(x.shape)}.")
    if shape is not None and x.shape != shape:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)} but must match the other inputs' {tuple(shape)}."
        )


def _check_eps(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}.")


def aggregate(
    token_values: torch.Tensor,
    mask: torch.Tensor,
    mode: Aggregation = "token_mean",
    norm_len: int | None = None,
) -> torch.Tensor:
    r"""Reduce per-token values ``[B, T]`` to a scalar over the response tokens.

    .. math::

        \text{token\_mean} = \frac{\sum_{b,t} m_{bt} x_{bt}}{\sum_{b,t} m_{bt}},\quad
        \text{seq\_mean} = \frac1B \sum_b \frac{\sum_t m_{bt} x_{bt}}{\sum_t m_{bt}},\quad
        \text{seq\_sum\_norm} = \frac1B \sum_b \frac{\sum_t m_{bt} x_{bt}}{L}

    Args:
        token_values: Per-token values ``[B, T]``.
        mask: 1 on response tokens, 0 on padding, ``[B, T]`` (bool or float).
        mode: ``"token_mean"`` (default), ``"seq_mean"`` or ``"seq_sum_norm"`` (see the module).
        norm_len: The constant ``L`` of ``"seq_sum_norm"`` (e.g. ``max_new_tokens``); required
            there, ignored otherwise.

    Returns:
        A scalar tensor. Padding values are ignored even when NaN or infinite; sequences
        without any response token count as zero.

    Raises:
        ValueError: on mismatched shapes, an unknown mode or a missing ``norm_len``.
    """
    _check_2d("token_values", token_values)
    _check_2d("mask", mask, token_values.shape)
    m = mask.to(token_values.dtype)
    masked = torch.where(mask.bool(), token_values, 0.0)
    if mode == "token_mean":
        return masked.sum() / m.sum().clamp(min=1.0)
    if mode == "seq_mean":
        return (masked.sum(dim=1) / m.sum(dim=1).clamp(min=1.0)).mean()
    if mode == "seq_sum_norm":
        if norm_len is None or norm_len < 1:
            raise ValueError(
                "mode='seq_sum_norm' needs norm_len >= 1 (Dr.GRPO divides by the generation "
                f"budget, e.g. max_new_tokens); got {norm_len!r}."
            )
        return (masked.sum(dim=1) / float(norm_len)).mean()
    raise ValueError(f"mode must be 'token_mean', 'seq_mean' or 'seq_sum_norm', got {mode!r}.")


def group_advantages(
    rewards: torch.Tensor, scale_std: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    r"""GRPO's group-normalized advantages (Shao et al. 2024), Dr.GRPO with ``scale_std=False``.

    .. math::

        A_{ij} = \frac{r_{ij} - \bar r_i}{\operatorname{std}_k r_{ik} + \epsilon}
        \quad\text{or, Dr.GRPO,}\quad A_{ij} = r_{ij} - \bar r_i,
        \qquad \bar r_i = \tfrac1G \textstyle\sum_k r_{ik}

    ``std`` is the Bessel-corrected sample standard deviation of the group (as in TRL). Each
    group's advantages sum to zero; a group of equal rewards gets all-zero advantages.

    Args:
        rewards: Rewards ``[P, G]``: row ``i`` holds the ``G`` samples of prompt ``i``.
        scale_std: Divide by the group's standard deviation (GRPO, default) or not (Dr.GRPO).
        eps: Added to the standard deviation, > 0. Default 1e-4.

    Returns:
        Advantages ``[P, G]``, same dtype as ``rewards``.

    Raises:
        ValueError: if ``rewards`` is not 2-D, ``G < 2`` or ``eps <= 0``.
    """
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(
            f"rewards must have shape [P, G] with group_size G >= 2, got {tuple(rewards.shape)}."
        )
    _check_eps("eps", eps)
    centered = rewards - rewards.mean(dim=1, keepdim=True)
    if not scale_std:
        return centered
    return centered / (rewards.std(dim=1, keepdim=True) + eps)


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    r"""REINFORCE leave-one-out advantages (Kool et al. 2019; Ahmadian et al. 2024).

    .. math::

        A_{ij} = r_{ij} - \frac{1}{G-1} \sum_{k \ne j} r_{ik}
               = \frac{G}{G-1}\Big(r_{ij} - \frac1G \sum_k r_{ik}\Big)

    Args:
        rewards: Rewards ``[P, G]`` with ``G >= 2``.

    Returns:
        Advantages ``[P, G]`` (each row sums to zero).

    Raises:
        ValueError: if ``rewards`` is not 2-D or ``G < 2``.
    """
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(
            f"rewards must have shape [P, G] with group_size G >= 2, got {tuple(rewards.shape)}."
        )
    g = rewards.shape[1]
    baseline = (rewards.sum(dim=1, keepdim=True) - rewards) / (g - 1)
    return rewards - baseline


def clipped_policy_loss(
    token_logp: torch.Tensor,
    old_token_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    aggregation: Aggregation = "token_mean",
    norm_len: int | None = None,
) -> torch.Tensor:
    r"""PPO's clipped surrogate at the token level (PPO, GRPO, Dr.GRPO, RLOO).

    .. math::

        \rho_{bt} = e^{\log\pi(y_t) - \log\pi_{old}(y_t)},\qquad
        \ell_{bt} = -\min\big(\rho_{bt} A_{bt},\;
            \operatorname{clip}(\rho_{bt}, 1-\epsilon, 1+\epsilon_{high}) A_{bt}\big)

    reduced with :func:`aggregate`. With one update per rollout (``old == current``) the
    gradient is the plain policy gradient ``-A grad log pi``.

    Args:
        token_logp: Per-token log-probs of the responses under the current policy ``[B, T]``
            (with gradient).
        old_token_logp: The same under the policy that sampled them ``[B, T]`` (no gradient).
        advantages: Per-sequence ``[B]`` (broadcast to every token; GRPO, RLOO) or per-token
            ``[B, T]`` (PPO with GAE).
        mask: Response-token mask ``[B, T]``.
        clip_eps: Lower clip range ``epsilon`` > 0. Default 0.2.
        clip_eps_high: Upper clip range (DAPO's clip-higher); ``None`` uses ``clip_eps``.
        aggregation: How tokens are reduced (see :func:`aggregate`). Default ``"token_mean"``.
        norm_len: Constant length of ``"seq_sum_norm"`` (Dr.GRPO).

    Returns:
        The scalar loss.

    Raises:
        ValueError: on mismatched shapes or non-positive clip ranges.
    """
    _check_2d("token_logp", token_logp)
    _check_2d("old_token_logp", old_token_logp, token_logp.shape)
    _check_2d("mask", mask, token_logp.shape)
    _check_eps("clip_eps", clip_eps)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    _check_eps("clip_eps_high", high)
    if advantages.ndim == 1 and advantages.shape[0] == token_logp.shape[0]:
        adv = advantages[:, None]
    elif advantages.shape == token_logp.shape:
        adv = advantages
    else:
        raise ValueError(
            f"advantages must have shape [B] or [B, T] = {tuple(token_logp.shape)}, "
            f"got {tuple(advantages.shape)}."
        )
    # Masked positions get ratio 1 so padding never produces inf * 0 = NaN.
    log_ratio = torch.where(mask.bool(), token_logp - old_token_logp, 0.0)
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + high) * adv
    return aggregate(-torch.minimum(unclipped, clipped), mask, aggregation, norm_len)


def kl_penalty(
    token_logp: torch.Tensor,
    token_logp_ref: torch.Tensor,
    mask: torch.Tensor | None = None,
    kind: KLKind = "k3",
) -> torch.Tensor:
    r"""Per-token estimators of :math:`\mathrm{KL}(\pi\,\|\,\pi_{ref})` on samples from ``pi``.

    With :math:`\delta = \log\pi_{ref}(y_t) - \log\pi(y_t)` (Schulman's estimators):

    * ``"k1"``: :math:`-\delta` (unbiased, can be negative),
    * ``"k2"``: :math:`\delta^2 / 2` (biased, >= 0),
    * ``"k3"``: :math:`e^{\delta} - 1 - \delta` (unbiased, >= 0; GRPO's default).

    Args:
        token_logp: Per-token log-probs under the policy ``[B, T]``.
        token_logp_ref: Per-token log-probs under the reference ``[B, T]``.
        mask: Optional response-token mask ``[B, T]``; padding positions are set to 0.
        kind: ``"k1"``, ``"k2"`` or ``"k3"`` (default).

    Returns:
        Per-token KL estimates ``[B, T]`` (reduce them with :func:`aggregate`; summing over a
        sequence's tokens estimates the sequence-level KL).

    Raises:
        ValueError: on mismatched shapes or an unknown ``kind``.
    """
    _check_2d("token_logp", token_logp)
    _check_2d("token_logp_ref", token_logp_ref, token_logp.shape)
    delta = token_logp_ref - token_logp
    if mask is not None:
        _check_2d("mask", mask, token_logp.shape)
        delta = torch.where(mask.bool(), delta, 0.0)
    if kind == "k1":
        return -delta
    if kind == "k2":
        return 0.5 * delta * delta
    if kind == "k3":
        return torch.expm1(delta) - delta
    raise ValueError(f"kind must be 'k1', 'k2' or 'k3', got {kind!r}.")


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
    _check_2d("rewards", rewards)
    _check_2d("values", values, rewards.shape)
    _check_2d("mask", mask, rewards.shape)
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
) -> torch.Tensor:
    r"""PPO's (clipped) value loss.

    .. math::

        \ell_t = \tfrac12 \max\Big((V_t - \hat R_t)^2,\;
            \big(V^{old}_t + \operatorname{clip}(V_t - V^{old}_t, -\epsilon, \epsilon)
            - \hat R_t\big)^2\Big)

    and :math:`\tfrac12 (V_t - \hat R_t)^2` when ``clip_eps is None``; reduced with
    :func:`aggregate`.

    Args:
        values: Current value predictions ``[B, T]`` (with gradient).
        old_values: Predictions at rollout time ``[B, T]``.
        returns: Targets ``[B, T]`` (e.g. from :func:`gae`).
        mask: Response-token mask ``[B, T]``.
        clip_eps: Value clip range > 0, or ``None`` for no clipping. Default 0.2.
        aggregation: See :func:`aggregate`. Default ``"token_mean"``.
        norm_len: Constant length of ``"seq_sum_norm"``.

    Returns:
        The scalar loss.
    """
    _check_2d("values", values)
    for name, x in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        _check_2d(name, x, values.shape)
    err = (values - returns) ** 2
    if clip_eps is not None:
        _check_eps("clip_eps", clip_eps)
        clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
        err = torch.maximum(err, (clipped - returns) ** 2)
    return aggregate(0.5 * err, mask, aggregation, norm_len)


def rebel_loss(
    logp_a: torch.Tensor,
    logp_b: torch.Tensor,
    old_logp_a: torch.Tensor,
    old_logp_b: torch.Tensor,
    reward_a: torch.Tensor,
    reward_b: torch.Tensor,
    eta: float,
    reduction: Literal["none", "mean", "sum"] = "mean",
) -> torch.Tensor:
    r"""REBEL: regression of relative rewards (Gao et al. 2024) over pairs of samples.

    For two responses ``a``, ``b`` to the same prompt, sampled from :math:`\pi_{old}`:

    .. math::

        \ell = \Big(\frac{1}{\eta}\Big(\log\frac{\pi(a)}{\pi_{old}(a)}
               - \log\frac{\pi(b)}{\pi_{old}(b)}\Big) - \big(r(a) - r(b)\big)\Big)^2

    Its gradient with respect to ``logp_a`` is ``(2 / eta) * residual``.

    Args:
        logp_a, logp_b: Sequence log-probs of the pair under the current policy ``[P]``.
        old_logp_a, old_logp_b: The same under the sampling policy ``[P]`` (no gradient).
        reward_a, reward_b: Their rewards ``[P]``.
        eta: Step size of the mirror-descent update, > 0 (larger moves further).
        reduction: ``"none"`` (``[P]``), ``"mean"`` (default) or ``"sum"``.

    Returns:
        The loss, ``[P]`` or a scalar.

    Raises:
        ValueError: on mismatched shapes, ``eta <= 0`` or an unknown reduction.
    """
    shape = logp_a.shape
    if logp_a.ndim != 1:
        raise ValueError(f"logp_a must have shape [P], got {tuple(shape)}.")
    others = (logp_b, old_logp_a, old_logp_b, reward_a, reward_b)
    if any(x.shape != shape for x in others):
        raise ValueError(
            "logp_a, logp_b, old_logp_a, old_logp_b, reward_a and reward_b must share shape "
            f"[P]; got {[tuple(x.shape) for x in (logp_a, *others)]}."
        )
    _check_eps("eta", eta)
    log_ratio_diff = (logp_a - old_logp_a) - (logp_b - old_logp_b)
    residual = log_ratio_diff / eta - (reward_a - reward_b)
    loss = residual * residual
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}.")
