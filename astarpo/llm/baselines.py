r"""The baselines as :class:`~astarpo.llm.algorithm.Algorithm` objects, and their trainers.

Every baseline runs in the same :class:`~astarpo.llm.trainer.Trainer` loop as A*-PO (same
generator, rewards, optimizer, logging and checkpoints); only the number of samples per prompt
and the loss differ. The math is in :mod:`astarpo.llm.losses`:

==========  ===================  =============================================================
algorithm   samples per prompt   loss
==========  ===================  =============================================================
GRPO        ``group_size`` (8)   clipped surrogate, :func:`~astarpo.llm.losses.group_advantages`
RLOO        ``group_size`` (8)   clipped surrogate, :func:`~astarpo.llm.losses.rloo_advantages`
PPO         1                    clipped surrogate on GAE advantages + clipped value loss
REBEL       2                    :func:`~astarpo.llm.losses.rebel_loss` on the pair
==========  ===================  =============================================================

With one optimizer step per rollout (``update_epochs * minibatches == 1``) the sampling policy
equals the current one, so the "old" log-probs are the detached current ones and the loop skips
their extra forward pass (as TRL's GRPO does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from astarpo.llm.algorithm import RolloutBatch
from astarpo.llm.baseline_config import GroupConfig, GRPOConfig, PPOConfig, REBELConfig, RLOOConfig
from astarpo.llm.config import TrainConfig
from astarpo.llm.critic import ValueModel
from astarpo.llm.generation import Generator
from astarpo.llm.logprobs import SequenceLogprobs, masked_mean
from astarpo.llm.losses import (
    aggregate,
    clipped_policy_loss,
    gae,
    group_advantages,
    kl_penalty,
    rebel_loss,
    rloo_advantages,
    value_loss,
)
from astarpo.llm.trainer import EvalFn, Trainer

__all__ = [
    "GRPO",
    "PPO",
    "REBEL",
    "RLOO",
    "GRPOTrainer",
    "PPOTrainer",
    "REBELTrainer",
    "RLOOTrainer",
]


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


class PPO:
    """PPO with a separate critic and GAE; one sample per prompt.

    Args:
        config: A :class:`~astarpo.llm.baseline_config.PPOConfig`.
        critic: The value model (e.g. ``ValueModel.from_causal_lm(ref_model)``); when ``None``,
            call :meth:`attach_critic` before training.
    """

    name = "ppo"
    samples_per_prompt = 1
    needs_v_star = False

    def __init__(self, config: PPOConfig, critic: torch.nn.Module | None = None) -> None:
        self.config = config
        self._critic = critic
        self.needs_reference = config.kl_coef > 0
        self.needs_old_logprobs = config.kl_coef > 0 or not _single_update(config)

    @classmethod
    def from_config(cls, config: PPOConfig) -> PPO:
        """PPO without a critic yet (the factory used by ``astarpo train``, which then calls
        :meth:`attach_critic` with the loaded reference)."""
        return cls(config)

    def attach_critic(self, model: Any) -> None:
        """Use ``ValueModel.from_causal_lm(model)`` (a trainable copy of ``model``'s
        transformer with a zero value head) as the critic."""
        self._critic = ValueModel.from_causal_lm(model)

    @property
    def critic(self) -> torch.nn.Module:
        """The value model."""
        if self._critic is None:
            raise ValueError(
                "PPO has no critic: pass PPO(config, critic) or call attach_critic(model) (e.g. "
                "with the reference model) before training."
            )
        return self._critic

    def modules(self) -> list[torch.nn.Module]:
        """The critic (optimized with the policy)."""
        return [self.critic]

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Per-token rewards (task reward on the last response token, minus the KL penalty),
        critic values and GAE: stores ``advantages``, ``returns``, ``old_values`` ``[B, T]``."""
        cfg = self.config
        mask = batch.response_mask
        values = self.critic(batch.packed).float()
        t = mask.shape[1]
        last = t - 1 - torch.flip(mask, dims=[1]).float().argmax(dim=1)
        token_rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        token_rewards[torch.arange(len(batch), device=mask.device), last] = batch.rewards.float()
        metrics: dict[str, float] = {}
        if cfg.kl_coef > 0:
            assert batch.token_logp_old is not None and batch.token_logp_ref is not None
            kl = kl_penalty(batch.token_logp_old, batch.token_logp_ref, mask, "k1")
            token_rewards = token_rewards - cfg.kl_coef * kl
            metrics["kl_penalty"] = float(kl.sum(-1).mean())
        adv, returns = gae(token_rewards, values, mask, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            mean = masked_mean(adv, mask)
            var = masked_mean((adv - mean) ** 2, mask)
            adv = torch.where(mask, (adv - mean) / torch.sqrt(var + 1e-8), 0.0)
        batch.extra.update(advantages=adv, returns=returns, old_values=values)
        metrics["value/mean"] = float(masked_mean(values, mask))
        return metrics

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Clipped policy loss on the token advantages plus ``vf_coef`` times the value loss."""
        cfg = self.config
        agg = cfg.loss_aggregation
        old = _old_token_logp(out, minibatch)
        ex = minibatch.extra
        pg = clipped_policy_loss(
            out.token_logp,
            old,
            ex["advantages"],
            out.mask,
            cfg.clip_eps,
            None,
            agg,
            cfg.max_new_tokens,
        )
        values = self.critic(minibatch.packed)
        vl = value_loss(
            values,
            ex["old_values"],
            ex["returns"],
            out.mask,
            cfg.value_clip_eps or None,
            agg,
            cfg.max_new_tokens,
        )
        metrics = {
            "policy_loss": float(pg.detach()),
            "value_loss": float(vl.detach()),
            "clip_fraction": _clip_fraction(
                out.token_logp, old, out.mask, cfg.clip_eps, cfg.clip_eps
            ),
        }
        return pg + cfg.vf_coef * vl, metrics


def _checked(args: Any, config_type: type[TrainConfig]) -> Any:
    if args is None:
        return config_type()
    if not isinstance(args, config_type):
        raise TypeError(f"args must be a {config_type.__name__}, got {type(args).__name__}.")
    return args


class GRPOTrainer(Trainer):
    """The :class:`~astarpo.llm.trainer.Trainer` with :class:`GRPO` (or Dr.GRPO).

    Example:
        >>> trainer = GRPOTrainer(model, None, [exact_match_reward],  # doctest: +SKIP
        ...     args=GRPOConfig(group_size=8), train_dataset=rows, tokenizer=tokenizer)
        >>> trainer.train()  # doctest: +SKIP

    Args:
        model: The policy, trained in place.
        ref_model: The frozen reference; may be ``None`` when ``kl_coef == 0``.
        reward_funcs: Reward functions (TRL's signature).
        args: A :class:`~astarpo.llm.baseline_config.GRPOConfig`.
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: GRPOConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        cfg = _checked(args, GRPOConfig)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            GRPO(cfg),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )


class RLOOTrainer(Trainer):
    """The :class:`~astarpo.llm.trainer.Trainer` with :class:`RLOO`.

    Args:
        model: The policy, trained in place.
        ref_model: The frozen reference; may be ``None`` when ``kl_coef == 0``.
        reward_funcs: Reward functions (TRL's signature).
        args: A :class:`~astarpo.llm.baseline_config.RLOOConfig`.
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: RLOOConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        cfg = _checked(args, RLOOConfig)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            RLOO(cfg),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )


class REBELTrainer(Trainer):
    """The :class:`~astarpo.llm.trainer.Trainer` with :class:`REBEL`.

    Args:
        model: The policy, trained in place.
        ref_model: Unused by REBEL (may be ``None``).
        reward_funcs: Reward functions (TRL's signature).
        args: A :class:`~astarpo.llm.baseline_config.REBELConfig`.
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: REBELConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        cfg = _checked(args, REBELConfig)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            REBEL(cfg),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )


class PPOTrainer(Trainer):
    """The :class:`~astarpo.llm.trainer.Trainer` with :class:`PPO`.

    Args:
        model: The policy, trained in place.
        ref_model: The frozen reference (the critic's initialization); may be ``None`` when
            ``kl_coef == 0`` (the critic then copies ``model``).
        reward_funcs: Reward functions (TRL's signature).
        args: A :class:`~astarpo.llm.baseline_config.PPOConfig`.
        train_dataset: Rows with a ``prompt`` key (other keys go to the rewards).
        tokenizer: The policy's tokenizer.
        generator: Optional generator (default: Hugging Face ``generate``).
        eval_fn: Optional evaluation, see :class:`~astarpo.llm.trainer.Trainer`.
        eval_steps: Steps between evaluations.
        critic: The value model; default ``ValueModel.from_causal_lm(ref_model or model)`` (a
            trainable copy of the reference's transformer with a zero-initialized value head).
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: PPOConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
        critic: torch.nn.Module | None = None,
    ) -> None:
        cfg = _checked(args, PPOConfig)
        if critic is None:
            critic = ValueModel.from_causal_lm(ref_model if ref_model is not None else model)
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            PPO(cfg, critic),
            cfg,
            train_dataset,
            None,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )
