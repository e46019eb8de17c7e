r"""PPO with a separate critic and GAE as an :class:`~astarpo.llm.algorithm.Algorithm`.

One sample per prompt; the per-token rewards (task reward on the last response token minus an
optional KL penalty) go through :func:`~astarpo.llm.value_losses.gae`, and the loss is the
clipped surrogate plus the clipped value loss of the critic
(:class:`~astarpo.llm.critic.ValueModel`).
"""

from __future__ import annotations

from typing import Any

import torch

from astarpo.llm.algorithm import RolloutBatch
from astarpo.llm.baseline_config import PPOConfig
from astarpo.llm.critic import ValueModel
from astarpo.llm.group_baselines import _clip_fraction, _old_token_logp, _single_update
from astarpo.llm.logprobs import SequenceLogprobs, masked_mean
from astarpo.llm.losses import clipped_policy_loss, gae, kl_penalty, value_loss

__all__ = ["PPO"]


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
