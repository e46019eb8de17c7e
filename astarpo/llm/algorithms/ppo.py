r"""PPO with a separate critic and GAE as an :class:`~astarpo.llm.algorithms.base.Algorithm`.

One sample per prompt; the per-token rewards (task reward on the last response token minus an
optional KL penalty) go through :func:`~astarpo.llm.algorithms.gae.gae`, and the loss is the
clipped surrogate plus the clipped value loss of the critic (:class:`ValueModel`).

The critic is a scalar value head on a causal LM's transformer, one value per token. The value of
the state before response token :math:`y_t` (prompt and :math:`y_{<t}`) is read from the hidden
state at the position that predicts :math:`y_t`, so ``values[:, t]`` lines up with
``token_logp[:, t]`` of :func:`~astarpo.llm.models.logprobs.sequence_logprobs`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from astarpo.config import doc_field
from astarpo.llm.algorithms.base import RolloutBatch, old_token_logp, single_update
from astarpo.llm.algorithms.config import check_choice, check_nonneg, check_positive_fields
from astarpo.llm.algorithms.gae import gae, value_loss
from astarpo.llm.algorithms.grpo import AGGREGATION_HELP, AGGREGATIONS
from astarpo.llm.algorithms.losses import (
    Aggregation,
    clip_fraction,
    clipped_policy_loss,
    kl_penalty,
)
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import PackedSequences, SequenceLogprobs, masked_mean

__all__ = ["PPO", "PPOConfig", "ValueModel"]


class ValueModel(torch.nn.Module):
    """A transformer body (no LM head) with a linear head ``hidden -> 1``.

    Args:
        backbone: A ``transformers`` base model (e.g. ``Qwen2Model``) returning
            ``last_hidden_state [B, L, H]``.
        hidden_size: ``H``.

    The head starts at zero (every value 0), so the first GAE advantages equal the discounted
    returns.
    """

    def __init__(self, backbone: torch.nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_causal_lm(cls, model: Any) -> ValueModel:
        """A critic whose body is a trainable copy of ``model``'s transformer (its LM head is
        dropped); ``model`` itself is not modified."""
        base = getattr(model, "base_model", None)
        if base is None or base is model:
            raise ValueError(
                f"{type(model).__name__} has no separate base_model to copy; pass a critic built "
                "with ValueModel(backbone, hidden_size)."
            )
        body = copy.deepcopy(base).requires_grad_(True).train()
        return cls(body, int(model.config.hidden_size))

    def forward(self, packed: PackedSequences) -> torch.Tensor:
        """Values ``[B, L]`` in float32 aligned with the token log-probs; 0 off the response.

        Args:
            packed: The prompt + response batch (as in the log-prob computation).
        """
        device = self.head.weight.device
        packed = packed.to(device)
        attn = packed.attention_mask
        position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
        hidden = self.backbone(
            input_ids=packed.input_ids, attention_mask=attn, position_ids=position_ids
        ).last_hidden_state
        v = self.head(hidden).squeeze(-1).float()  # v[:, l]: state after token l
        shifted = torch.cat([torch.zeros_like(v[:, :1]), v[:, :-1]], dim=1)
        return torch.where(packed.response_mask, shifted, torch.zeros_like(shifted))


@dataclass(frozen=True)
class PPOConfig(TrainConfig):
    """PPO (Schulman et al. 2017) with a separate critic (a value head on a copy of the
    reference's transformer), GAE, clipped policy and value losses and an optional per-token KL
    penalty in the reward (as in InstructGPT). One response per prompt.

    The critic's parameters are optimized by the same AdamW (same learning rate) as the policy.
    """

    clip_eps: float = doc_field(0.2, "Clip range of the policy ratio.")
    value_clip_eps: float = doc_field(
        0.2, "Clip range of the value update around the rollout-time values; 0 disables it."
    )
    vf_coef: float = doc_field(0.5, "Weight of the value loss added to the policy loss.")
    gamma: float = doc_field(1.0, "Discount of GAE, in [0, 1].")
    lam: float = doc_field(0.95, "Lambda of GAE, in [0, 1].")
    kl_coef: float = doc_field(
        0.0,
        "Per-token KL penalty -kl_coef * (log pi_old - log pi_ref) added to the reward; 0 skips "
        "the reference forward.",
    )
    whiten_advantages: bool = doc_field(
        True, "Normalize the GAE advantages to zero mean and unit std over the batch's tokens."
    )
    loss_aggregation: Aggregation = doc_field("token_mean", AGGREGATION_HELP)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_fields(self, "clip_eps")
        check_nonneg(self, "value_clip_eps", "vf_coef", "kl_coef")
        for name in ("gamma", "lam"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}.")
        if not isinstance(self.whiten_advantages, bool):
            raise ValueError(
                f"whiten_advantages must be True or False, got {self.whiten_advantages!r}."
            )
        check_choice(self, "loss_aggregation", AGGREGATIONS)


class PPO:
    """PPO with a separate critic and GAE; one sample per prompt.

    Args:
        config: A :class:`~astarpo.llm.algorithms.grpo.PPOConfig`.
        critic: The value model (e.g. ``ValueModel.from_causal_lm(ref_model)``); when ``None``,
            call :meth:`attach_critic` before training.
    """

    name: ClassVar[str] = "ppo"
    samples_per_prompt: ClassVar[int] = 1
    needs_v_star: ClassVar[bool] = False

    def __init__(self, config: PPOConfig, critic: torch.nn.Module) -> None:
        self.config = config
        self.critic = critic

    @property
    def needs_reference(self) -> bool:
        """Only with the KL penalty (``kl_coef > 0``)."""
        return self.config.kl_coef > 0

    @property
    def needs_old_logprobs(self) -> bool:
        """For the KL penalty, or when a rollout gets more than one optimizer step."""
        return self.config.kl_coef > 0 or not single_update(self.config)

    @classmethod
    def from_config(cls, config: PPOConfig, model: Any = None, ref_model: Any = None) -> PPO:
        """PPO whose critic is ``ValueModel.from_causal_lm(ref_model or model)``: a trainable
        copy of the reference's (else the policy's) transformer with a zero value head.

        Raises:
            ValueError: neither model is given.
        """
        source = ref_model if ref_model is not None else model
        if source is None:
            raise ValueError(
                "PPO needs a model to copy its critic from: pass model= or ref_model= to "
                "from_config, or build PPO(config, critic) yourself."
            )
        return cls(config, ValueModel.from_causal_lm(source))

    def modules(self) -> list[torch.nn.Module]:
        """The critic (optimized with the policy)."""
        return [self.critic]

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Per-token rewards (task reward on the last response token, minus the KL penalty),
        critic values and GAE: stores ``advantage``, ``returns``, ``old_values`` ``[B, T]``."""
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
        batch.extra.update(advantage=adv, returns=returns, old_values=values)
        metrics["value/mean"] = float(masked_mean(values, mask))
        return metrics

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Clipped policy loss on the token advantages plus ``vf_coef`` times the value loss."""
        cfg = self.config
        agg = cfg.loss_aggregation
        old = old_token_logp(out, minibatch)
        ex = minibatch.extra
        pg = clipped_policy_loss(
            out.token_logp,
            old,
            ex["advantage"],
            out.mask,
            cfg.clip_eps,
            None,
            agg,
            cfg.max_new_tokens,
            check=False,  # clip_eps validated once, by the config
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
            check=False,
        )
        metrics = {
            "policy_loss": float(pg.detach()),
            "value_loss": float(vl.detach()),
            "clip_fraction": clip_fraction(
                out.token_logp, old, out.mask, cfg.clip_eps, cfg.clip_eps
            ),
        }
        return pg + cfg.vf_coef * vl, metrics
