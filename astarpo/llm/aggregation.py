r"""Reduction of per-token loss values to a scalar, shared by every loss of the baselines.

Token-level losses are reduced by :func:`aggregate` with one of three documented modes:

* ``"token_mean"`` (default): sum over every response token of the batch divided by the number
  of response tokens (DAPO; TRL's default). Every token weighs the same.
* ``"seq_mean"``: mean over each sequence's tokens, then mean over sequences (the original
  GRPO of DeepSeekMath). Tokens of short responses weigh more.
* ``"seq_sum_norm"``: sum over each sequence's tokens divided by a constant ``norm_len`` (the
  generation budget), then mean over sequences (Dr.GRPO, Liu et al. 2025). No length bias.

Shapes: ``B`` sequences, ``T`` response tokens (right-padded; ``mask [B, T]`` is 1 on response
tokens, 0 on padding).
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["Aggregation", "aggregate"]

Aggregation = Literal["token_mean", "seq_mean", "seq_sum_norm"]


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
