r"""GRPO (and Dr.GRPO), RLOO and REBEL as :class:`~astarpo.llm.algorithm.Algorithm` objects.

These baselines sample several responses per prompt (a group of ``group_size`` for GRPO and
RLOO, a pair for REBEL) and need no critic. The math is in :mod:`astarpo.llm.losses`. PPO is in
:mod:`astarpo.llm.ppo`, the trainers in :mod:`astarpo.llm.baseline_trainers`.

With one optimizer step per rollout (``update_epochs * minibatches == 1``) the sampling policy
equals the current one, so the "old" log-probs are the detached current ones and the loop skips
their extra forward pass (as TRL's GRPO does).
"""

from __future__ import annotations

import torch

from astarpo.llm.algorithm import RolloutBatch
from astarpo.llm.baseline_config import GroupConfig, GRPOConfig, REBELConfig
from astarpo.llm.config import TrainConfig
from astarpo.llm.logprobs import SequenceLogprobs, masked_mean
from astarpo.llm.losses import (
    aggregate,
    clipped_policy_loss,
    group_advantages,
    kl_penalty,
    rebel_loss,
    rloo_advantages,
)

__all__ = ["GRPO", "REBEL", "RLOO"]


def _single_update(cfg: TrainConfig) -> bool:
    return cfg.update_epochs * cfg.minibatches == 1


def _old_token_logp(out: SequenceLogprobs, mb: RolloutBatch) -> torch.Tensor:
    return mb.token_logp_old if mb.token_logp_old is not None else out.token_logp.detach()


def _clip_fraction(
    token_logp: torch.Tensor, old: torch.Tensor, mask: torch.Tensor, low: float, high: float
) -> float:
    ratio = torch.exp(torch.where(mask, token_logp.detach() - old, 0.0))
    outside = (ratio < 1 - low) | (ratio > 1 + high)
    return float(masked_mean(outside.float(), mask))


class GRPO:
    """GRPO / Dr.GRPO: ``group_size`` samples per prompt, advantages normalized in the group.

    Args:
        config: A :class:`~astarpo.llm.baseline_config.GRPOConfig`.
    """

    name = "grpo"

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.samples_per_prompt = config.group_size
        self.needs_reference = config.kl_coef > 0
        self.needs_v_star = False
        self.needs_old_logprobs = not _single_update(config)
        self.clip_high = config.clip_eps_high or config.clip_eps

    @classmethod
    def from_config(cls, config: GroupConfig) -> GRPO:
        """The algorithm of a config (the factory used by ``astarpo train``)."""
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
        old = _old_token_logp(out, minibatch)
        loss = clipped_policy_loss(
            out.token_logp,
            old,
            minibatch.extra["advantage"],
            out.mask,
            cfg.clip_eps,
            self.clip_high,
            cfg.loss_aggregation,
            cfg.max_new_tokens,
        )
        metrics = {
            "clip_fraction": _clip_fraction(
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
        config: A :class:`~astarpo.llm.baseline_config.RLOOConfig`.
    """

    name = "rloo"

    def advantages(self, rewards: torch.Tensor) -> torch.Tensor:
        """Leave-one-out advantages ``[P, G]``."""
        return rloo_advantages(rewards)


class REBEL:
    """REBEL: two samples per prompt, regression onto their reward difference.

    Args:
        config: A :class:`~astarpo.llm.baseline_config.REBELConfig`.
    """

    name = "rebel"
    samples_per_prompt = 2
    needs_reference = False
    needs_v_star = False

    def __init__(self, config: REBELConfig) -> None:
        self.config = config
        self.needs_old_logprobs = not _single_update(config)

    @classmethod
    def from_config(cls, config: REBELConfig) -> REBEL:
        """The algorithm of a config (the factory used by ``astarpo train``)."""
        return cls(config)

    def modules(self) -> list[torch.nn.Module]:
        """No trainable module besides the policy."""
        return []

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Nothing to precompute; logs the mean absolute reward difference of the pairs."""
        r = batch.rewards.view(-1, 2)
        return {"reward_diff/abs_mean": float((r[:, 0] - r[:, 1]).abs().mean())}

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean REBEL loss over the pairs (rows ``2i`` and ``2i + 1``) of the minibatch."""
        if len(minibatch) % 2 or not torch.equal(minibatch.group[0::2], minibatch.group[1::2]):
            raise ValueError(
                "REBEL needs each (micro)batch to hold whole pairs of responses to one prompt; "
                "use an even micro_batch_size."
            )
        old = minibatch.logp_old if minibatch.logp_old is not None else out.logp.detach()
        r = minibatch.rewards
        loss = rebel_loss(
            out.logp[0::2],
            out.logp[1::2],
            old[0::2],
            old[1::2],
            r[0::2],
            r[1::2],
            self.config.eta,
        )
        return loss, {}
