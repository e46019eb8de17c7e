r"""GRPO (and Dr.GRPO) and RLOO: group sampling with a clipped surrogate, and their configs.

``group_size`` responses per prompt; the baseline of a response is its group (the mean, std-
normalised for GRPO; leave-one-out for RLOO). No critic, no Stage 1 table. ``batch_size`` counts
*prompts*: a GRPO step with ``batch_size=64, group_size=8`` generates 512 responses.

With one optimizer step per rollout (``update_epochs * minibatches == 1``) the sampling policy
equals the current one, so the "old" log-probs are the detached current ones and the loop skips
their extra forward pass (as TRL's GRPO does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from astarpo.config import doc_field
from astarpo.llm.algorithms.base import RolloutBatch, old_token_logp, single_update
from astarpo.llm.algorithms.config import check_choice, check_nonneg, check_positive_fields
from astarpo.llm.algorithms.losses import (
    Aggregation,
    KLKind,
    aggregate,
    clip_fraction,
    clipped_policy_loss,
    group_advantages,
    kl_penalty,
    rloo_advantages,
)
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import SequenceLogprobs

__all__ = [
    "AGGREGATIONS",
    "AGGREGATION_HELP",
    "GRPO",
    "RLOO",
    "GRPOConfig",
    "GroupConfig",
    "RLOOConfig",
]

AGGREGATIONS = ("token_mean", "seq_mean", "seq_sum_norm")
AGGREGATION_HELP = (
    "How token losses are reduced: 'token_mean' (every token of the batch weighs the same; DAPO, "
    "TRL), 'seq_mean' (mean per response, then over responses; original GRPO) or 'seq_sum_norm' "
    "(sum per response / max_new_tokens; Dr.GRPO)."
)


@dataclass(frozen=True)
class GroupConfig(TrainConfig):
    """Fields shared by the group-sampling baselines (GRPO, RLOO): ``group_size`` responses per
    prompt, PPO's clipped surrogate and an optional KL penalty to the reference."""

    group_size: int = doc_field(
        8, "Responses sampled per prompt (G >= 2); the baseline is the group."
    )
    generation_batch_size: int = doc_field(
        512,
        "Rows per generate call of the HF generator; 512 = a 64-prompt step of G = 8 in one "
        "call (TrainConfig's 64 took 8 calls per step).",
    )
    clip_eps: float = doc_field(0.2, "Clip range of the importance ratio, [1 - clip_eps, ...].")
    clip_eps_high: float = doc_field(
        0.0, "Upper clip range (DAPO's clip-higher); 0 = the same as clip_eps."
    )
    kl_coef: float = doc_field(
        0.0,
        "Weight of the KL(pi || pi_ref) penalty in the loss; 0 (default, as in Dr.GRPO and DAPO) "
        "skips the reference forward. DeepSeekMath's GRPO used 0.04.",
    )
    kl_kind: KLKind = doc_field("k3", "KL estimator of the penalty: 'k1', 'k2' or 'k3' (GRPO's).")
    loss_aggregation: Aggregation = doc_field("token_mean", AGGREGATION_HELP)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int):
            raise ValueError(f"group_size must be an integer >= 2, got {self.group_size!r}.")
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be >= 2 (the group mean is the baseline), got {self.group_size}."
            )
        check_positive_fields(self, "clip_eps")
        check_nonneg(self, "clip_eps_high", "kl_coef")
        check_choice(self, "kl_kind", ("k1", "k2", "k3"))
        check_choice(self, "loss_aggregation", AGGREGATIONS)


@dataclass(frozen=True)
class GRPOConfig(GroupConfig):
    """GRPO (Shao et al. 2024): group-normalized advantages; ``scale_rewards=False`` together
    with ``loss_aggregation="seq_sum_norm"`` is Dr.GRPO (Liu et al. 2025).

    Example:
        >>> from astarpo.llm.algorithms.grpo import GRPOConfig
        >>> dr_grpo = GRPOConfig(scale_rewards=False, loss_aggregation="seq_sum_norm")
        >>> dr_grpo.group_size
        8
    """

    scale_rewards: bool = doc_field(
        True, "Divide advantages by the group's reward std (GRPO); False = Dr.GRPO (no scaling)."
    )
    std_eps: float = doc_field(1e-4, "Added to the group std before dividing (scale_rewards only).")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.scale_rewards, bool):
            raise ValueError(f"scale_rewards must be True or False, got {self.scale_rewards!r}.")
        check_positive_fields(self, "std_eps")


@dataclass(frozen=True)
class RLOOConfig(GroupConfig):
    """RLOO (Ahmadian et al. 2024): leave-one-out baseline over ``group_size`` samples, with the
    same clipped surrogate as GRPO."""


class GRPO:
    """GRPO / Dr.GRPO: ``group_size`` samples per prompt, advantages normalized in the group.

    Args:
        config: A :class:`GRPOConfig`.
    """

    name: ClassVar[str] = "grpo"
    needs_v_star: ClassVar[bool] = False

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.clip_high = config.clip_eps_high or config.clip_eps

    @property
    def samples_per_prompt(self) -> int:
        """``group_size``."""
        return self.config.group_size

    @property
    def needs_reference(self) -> bool:
        """Only with a KL penalty (``kl_coef > 0``)."""
        return self.config.kl_coef > 0

    @property
    def needs_old_logprobs(self) -> bool:
        """When a rollout gets more than one optimizer step."""
        return not single_update(self.config)

    @classmethod
    def from_config(cls, config: GroupConfig, model: Any = None, ref_model: Any = None) -> GRPO:
        """The algorithm of a config (the models are unused)."""
        return cls(config)

    def modules(self) -> list[torch.nn.Module]:
        """No trainable module besides the policy."""
        return []

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """Group-normalized advantages ``[P, G]`` of rewards ``[P, G]``."""
        cfg = self.config
        scale = cfg.scale_rewards if isinstance(cfg, GRPOConfig) else True
        eps = cfg.std_eps if isinstance(cfg, GRPOConfig) else 1e-4
        return group_advantages(rewards, scale_std=scale, eps=eps)

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Store ``extra["advantage"] [B]`` from the rewards of each prompt's group."""
        g = self.samples_per_prompt
        rewards = batch.rewards.float().view(-1, g)
        adv = self.advantages(rewards).flatten()
        batch.extra["advantage"] = adv
        return {
            "advantage/abs_mean": float(adv.abs().mean()),
            "groups/all_equal": float((rewards.std(dim=1) == 0).float().mean()),
        }

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Clipped surrogate (plus ``kl_coef`` times the KL estimate) over the minibatch."""
        cfg = self.config
        old = old_token_logp(out, minibatch)
        loss = clipped_policy_loss(
            out.token_logp,
            old,
            minibatch.extra["advantage"],
            out.mask,
            cfg.clip_eps,
            self.clip_high,
            cfg.loss_aggregation,
            cfg.max_new_tokens,
            check=False,  # clip_eps validated once, by the config
        )
        metrics = {
            "clip_fraction": clip_fraction(
                out.token_logp, old, out.mask, cfg.clip_eps, self.clip_high
            )
        }
        if cfg.kl_coef > 0:
            if minibatch.token_logp_ref is None:
                raise ValueError(f"{self.name} with kl_coef > 0 needs the reference log-probs.")
            kl_tok = kl_penalty(out.token_logp, minibatch.token_logp_ref, out.mask, cfg.kl_kind)
            kl = aggregate(kl_tok, out.mask, cfg.loss_aggregation, cfg.max_new_tokens)
            loss = loss + cfg.kl_coef * kl
            metrics["kl_penalty"] = float(kl.detach())
        return loss, metrics


class RLOO(GRPO):
    """RLOO: GRPO's loop and surrogate with the leave-one-out baseline (no std scaling).

    Args:
        config: A :class:`RLOOConfig`.
    """

    name: ClassVar[str] = "rloo"

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """Leave-one-out advantages ``[P, G]``."""
        return rloo_advantages(rewards)
