"""Configuration of the baselines: GRPO (and Dr.GRPO), RLOO, PPO and REBEL.

Each config is a frozen dataclass extending :class:`~astarpo.llm.config.TrainConfig` (the loop
fields shared with A*-PO: batch size, optimizer, sampling, logging, checkpoints) with the fields
of its algorithm, validated on construction. ``batch_size`` always counts *prompts*: a GRPO step
with ``batch_size=64, group_size=8`` generates 512 responses, an A*-PO step 64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from astarpo.llm.config import TrainConfig

if TYPE_CHECKING:  # only for annotations: importing this module must not load torch
    from astarpo.llm.losses import Aggregation, KLKind

__all__ = ["GRPOConfig", "GroupConfig", "PPOConfig", "REBELConfig", "RLOOConfig"]

_AGGREGATIONS = ("token_mean", "seq_mean", "seq_sum_norm")
_AGG_HELP = (
    "How token losses are reduced: 'token_mean' (every token of the batch weighs the same; DAPO, "
    "TRL), 'seq_mean' (mean per response, then over responses; original GRPO) or 'seq_sum_norm' "
    "(sum per response / max_new_tokens; Dr.GRPO)."
)


def _doc(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


def _nonneg(cfg: Any, *names: str) -> None:
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}.")


def _positive(cfg: Any, *names: str) -> None:
    _nonneg(cfg, *names)
    for name in names:
        if getattr(cfg, name) == 0:
            raise ValueError(f"{name} must be > 0, got 0.")


def _choice(cfg: Any, name: str, allowed: tuple[str, ...]) -> None:
    v = getattr(cfg, name)
    if v not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {v!r}.")


@dataclass(frozen=True)
class GroupConfig(TrainConfig):
    """Fields shared by the group-sampling baselines (GRPO, RLOO): ``group_size`` responses per
    prompt, PPO's clipped surrogate and an optional KL penalty to the reference."""

    group_size: int = _doc(8, "Responses sampled per prompt (G >= 2); the baseline is the group.")
    clip_eps: float = _doc(0.2, "Clip range of the importance ratio, [1 - clip_eps, ...].")
    clip_eps_high: float = _doc(
        0.0, "Upper clip range (DAPO's clip-higher); 0 = the same as clip_eps."
    )
    kl_coef: float = _doc(
        0.0,
        "Weight of the KL(pi || pi_ref) penalty in the loss; 0 (default, as in Dr.GRPO and DAPO) "
        "skips the reference forward. DeepSeekMath's GRPO used 0.04.",
    )
    kl_kind: KLKind = field(
        default="k3",
        metadata={"help": "KL estimator of the penalty: 'k1', 'k2' or 'k3' (GRPO's)."},
    )
    loss_aggregation: Aggregation = field(default="token_mean", metadata={"help": _AGG_HELP})

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int):
            raise ValueError(f"group_size must be an integer >= 2, got {self.group_size!r}.")
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be >= 2 (the group mean is the baseline), got {self.group_size}."
            )
        _positive(self, "clip_eps")
        _nonneg(self, "clip_eps_high", "kl_coef")
        _choice(self, "kl_kind", ("k1", "k2", "k3"))
        _choice(self, "loss_aggregation", _AGGREGATIONS)


@dataclass(frozen=True)
class GRPOConfig(GroupConfig):
    """GRPO (Shao et al. 2024): group-normalized advantages; ``scale_rewards=False`` together
    with ``loss_aggregation="seq_sum_norm"`` is Dr.GRPO (Liu et al. 2025).

    Example:
        >>> from astarpo.llm.baseline_config import GRPOConfig
        >>> dr_grpo = GRPOConfig(scale_rewards=False, loss_aggregation="seq_sum_norm")
        >>> dr_grpo.group_size
        8
    """

    scale_rewards: bool = _doc(
        True, "Divide advantages by the group's reward std (GRPO); False = Dr.GRPO (no scaling)."
    )
    std_eps: float = _doc(1e-4, "Added to the group std before dividing (scale_rewards only).")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.scale_rewards, bool):
            raise ValueError(f"scale_rewards must be True or False, got {self.scale_rewards!r}.")
        _positive(self, "std_eps")


@dataclass(frozen=True)
class RLOOConfig(GroupConfig):
    """RLOO (Ahmadian et al. 2024): leave-one-out baseline over ``group_size`` samples, with the
    same clipped surrogate as GRPO."""


@dataclass(frozen=True)
class PPOConfig(TrainConfig):
    """PPO (Schulman et al. 2017) with a separate critic (a value head on a copy of the
    reference's transformer), GAE, clipped policy and value losses and an optional per-token KL
    penalty in the reward (as in InstructGPT). One response per prompt.

    The critic's parameters are optimized by the same AdamW (same learning rate) as the policy.
    """

    clip_eps: float = _doc(0.2, "Clip range of the policy ratio.")
    value_clip_eps: float = _doc(
        0.2, "Clip range of the value update around the rollout-time values; 0 disables it."
    )
    vf_coef: float = _doc(0.5, "Weight of the value loss added to the policy loss.")
    gamma: float = _doc(1.0, "Discount of GAE, in [0, 1].")
    lam: float = _doc(0.95, "Lambda of GAE, in [0, 1].")
    kl_coef: float = _doc(
        0.0,
        "Per-token KL penalty -kl_coef * (log pi_old - log pi_ref) added to the reward; 0 skips "
        "the reference forward.",
    )
    whiten_advantages: bool = _doc(
        True, "Normalize the GAE advantages to zero mean and unit std over the batch's tokens."
    )
    loss_aggregation: Aggregation = field(default="token_mean", metadata={"help": _AGG_HELP})

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "clip_eps")
        _nonneg(self, "value_clip_eps", "vf_coef", "kl_coef")
        for name in ("gamma", "lam"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}.")
        if not isinstance(self.whiten_advantages, bool):
            raise ValueError(
                f"whiten_advantages must be True or False, got {self.whiten_advantages!r}."
            )
        _choice(self, "loss_aggregation", _AGGREGATIONS)


@dataclass(frozen=True)
class REBELConfig(TrainConfig):
    """REBEL (Gao et al. 2024): regression of the difference of log-ratios of two responses per
    prompt onto their reward difference.

    ``micro_batch_size`` must be even (a micro-batch holds whole pairs).
    """

    eta: float = _doc(
        1e3,
        "Step size of REBEL's mirror-descent update (> 0); 1/eta scales the log-ratio like "
        "A*-PO's beta2, so the default 1e3 matches beta2 = 1e-3.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "eta")
        if self.micro_batch_size % 2:
            raise ValueError(
                f"micro_batch_size must be even for REBEL (pairs stay together), got "
                f"{self.micro_batch_size}."
            )
