r"""The baselines' losses (GRPO, Dr.GRPO, RLOO, PPO's policy side, REBEL) as pure functions.

Each function takes flat torch tensors and returns a tensor; none holds state or touches a model.
The A*-PO loss is not here: it is :func:`astarpo.advantage_regression_loss`. PPO's value side
(GAE and the clipped value loss) is in :mod:`astarpo.llm.algorithms.gae`.

Shapes: ``P`` prompts, ``G`` samples per prompt (``group_size``), ``B`` sequences, ``T`` response
tokens (right-padded; ``mask [B, T]`` is 1 on response tokens, 0 on padding).

Token-level losses are reduced to a scalar by :func:`aggregate`, the one reduction switch:

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

from astarpo.objective import Reduction, reduce_loss

__all__ = [
    "Aggregation",
    "KLKind",
    "aggregate",
    "check_2d",
    "check_positive",
    "clip_fraction",
    "clipped_policy_loss",
    "group_advantages",
    "kl_penalty",
    "rebel_loss",
    "rloo_advantages",
]


Aggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]


def check_2d(name: str, x: torch.Tensor, shape: torch.Size | None = None) -> None:
    """Raise unless ``x`` is 2-D ``[B, T]`` (and of ``shape`` when given), naming ``name``."""
    if x.ndim != 2:
        raise ValueError(f"{name} must have shape [B, T], got {tuple(x.shape)}.")
    if shape is not None and x.shape != shape:
        raise ValueError(
            f"{name} has shape {tuple(x.shape)} but must match the other inputs' {tuple(shape)}."
        )


def check_positive(name: str, value: float) -> None:
    """Raise unless ``value > 0``, naming ``name``."""
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
    check_2d("token_values", token_values)
    check_2d("mask", mask, token_values.shape)
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


KLKind = Literal["k1", "k2", "k3"]


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
    check_positive("eps", eps)
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
    check: bool = True,
) -> torch.Tensor:
    r"""PPO's clipped surrogate at the token level (PPO, GRPO, Dr.GRPO, RLOO).

    .. math::

        \rho_{bt} = e^{\log\pi(y_t) - \log\pi_{old}(y_t)},\qquad
        \ell_{bt} = -\min\big(\rho_{bt} A_{bt},\;
            \operatorname{clip}(\rho_{bt}, 1-\epsilon, 1+\epsilon_{high}) A_{bt}\big)

    reduced with :func:`~astarpo.llm.algorithms.losses.aggregate`. With one update per rollout
    (``old == current``) the gradient is the plain policy gradient ``-A grad log pi``.

    Args:
        token_logp: Per-token log-probs of the responses under the current policy ``[B, T]``
            (with gradient).
        old_token_logp: The same under the policy that sampled them ``[B, T]`` (no gradient).
        advantages: Per-sequence ``[B]`` (broadcast to every token; GRPO, RLOO) or per-token
            ``[B, T]`` (PPO with GAE).
        mask: Response-token mask ``[B, T]``.
        clip_eps: Lower clip range ``epsilon`` > 0. Default 0.2.
        clip_eps_high: Upper clip range (DAPO's clip-higher); ``None`` uses ``clip_eps``.
        aggregation: How tokens are reduced (see :func:`~astarpo.llm.algorithms.losses.aggregate`).
            Default ``"token_mean"``.
        norm_len: Constant length of ``"seq_sum_norm"`` (Dr.GRPO).
        check: Validate the clip ranges (default). The algorithms, whose config validated it once,
            pass ``False``: no check per micro-batch.

    Returns:
        The scalar loss.

    Raises:
        ValueError: on mismatched shapes or (with ``check``) non-positive clip ranges.
    """
    check_2d("token_logp", token_logp)
    check_2d("old_token_logp", old_token_logp, token_logp.shape)
    check_2d("mask", mask, token_logp.shape)
    high = clip_eps if clip_eps_high is None else clip_eps_high
    if check:
        check_positive("clip_eps", clip_eps)
        check_positive("clip_eps_high", high)
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
        Per-token KL estimates ``[B, T]`` (reduce them with
        :func:`~astarpo.llm.algorithms.losses.aggregate`; summing over a sequence's tokens estimates
        the sequence-level KL).

    Raises:
        ValueError: on mismatched shapes or an unknown ``kind``.
    """
    check_2d("token_logp", token_logp)
    check_2d("token_logp_ref", token_logp_ref, token_logp.shape)
    delta = token_logp_ref - token_logp
    if mask is not None:
        check_2d("mask", mask, token_logp.shape)
        delta = torch.where(mask.bool(), delta, 0.0)
    if kind == "k1":
        return -delta
    if kind == "k2":
        return 0.5 * delta * delta
    if kind == "k3":
        return torch.expm1(delta) - delta
    raise ValueError(f"kind must be 'k1', 'k2' or 'k3', got {kind!r}.")


def rebel_loss(
    logp_a: torch.Tensor,
    logp_b: torch.Tensor,
    old_logp_a: torch.Tensor,
    old_logp_b: torch.Tensor,
    reward_a: torch.Tensor,
    reward_b: torch.Tensor,
    eta: float,
    reduction: Reduction = "mean",
    check: bool = True,
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
        check: Validate the ``eta`` (default). The algorithms, whose config validated it once,
            pass ``False``: no check per micro-batch.

    Returns:
        The loss, ``[P]`` or a scalar.

    Raises:
        ValueError: on mismatched shapes, (with ``check``) ``eta <= 0``, or an unknown
            reduction.
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
    if check:
        check_positive("eta", eta)
    log_ratio_diff = (logp_a - old_logp_a) - (logp_b - old_logp_b)
    residual = log_ratio_diff / eta - (reward_a - reward_b)
    return reduce_loss(residual * residual, reduction)


def clip_fraction(
    token_logp: torch.Tensor, old: torch.Tensor, mask: torch.Tensor, low: float, high: float
) -> float:
    """Share of response tokens whose importance ratio lies outside ``[1 - low, 1 + high]``.

    Args:
        token_logp: Current token log-probs ``[B, T]``.
        old: Token log-probs of the sampling policy ``[B, T]``.
        mask: Response tokens ``[B, T]``.
        low: Lower clip range.
        high: Upper clip range.
    """
    ratio = torch.exp(torch.where(mask, token_logp.detach() - old, 0.0))
    outside = (ratio < 1 - low) | (ratio > 1 + high)
    m = mask.float()
    return float((outside.float() * m).sum() / m.sum().clamp(min=1.0))
