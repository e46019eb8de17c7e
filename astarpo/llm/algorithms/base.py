r"""The ``Algorithm`` protocol of the Stage 2 loop and its batch type.

The loop (:class:`astarpo.llm.training.trainer.Trainer`) is the same for every algorithm::

    prompts  --generate samples_per_prompt each-->  rollout  --reward funcs-->  rewards [B]
    V* table --> v_star [B]          (if needs_v_star)
    reference forward, no grad --> logp_ref [B], token_logp_ref [B, T]   (if needs_reference)
    policy forward, no grad    --> logp_old [B], token_logp_old [B, T]   (if needs_old_logprobs)
    algorithm.prepare(batch)          once per rollout: advantages, critic values, ... in extra
    for epoch in update_epochs:
        for minibatch (whole prompt groups, shuffled):
            out = sequence_logprobs(policy, minibatch, entropy=True)    (with gradient)
            loss, metrics = algorithm.loss(out, minibatch)
            (loss - entropy_coef * entropy).backward(); clip; AdamW step

An algorithm is any object with these members (a :class:`typing.Protocol`, no base class),
registered with its config class in :data:`astarpo.llm.algorithms.registry.ALGORITHMS`:

``name: str``
    The registry name, used in logs.
``samples_per_prompt: int``
    Responses generated per prompt (1 for A*-PO, ``G`` for GRPO, 2 for REBEL). Rows of a
    :class:`RolloutBatch` are prompt-major; ``batch.group`` holds the prompt index of each row.
``needs_reference: bool`` / ``needs_v_star: bool`` / ``needs_old_logprobs: bool``
    Which optional fields of the batch the loop must fill before :meth:`Algorithm.prepare`.
``from_config(config, model, ref_model)`` (classmethod)
    Build the algorithm from its config; ``model`` and ``ref_model`` are the trainer's policy
    and reference (PPO copies its critic from them).
``modules() -> list[torch.nn.Module]``
    Extra trainable modules (a PPO critic). The loop moves them to the device, adds their
    parameters to the optimizer and the gradient clipping, and saves them in checkpoints.
    Return ``[]`` when there are none.
``prepare(batch: RolloutBatch) -> dict[str, float]``
    Called once per rollout batch (no gradient): compute per-row quantities such as
    advantages and store them in ``batch.extra`` (tensors with first dimension ``B``; they are
    sliced into minibatches with the rest). Returns metrics to log (e.g. ``advantage/mean``).
``loss(out: SequenceLogprobs, minibatch: RolloutBatch) -> tuple[torch.Tensor, dict[str, float]]``
    The scalar loss of a minibatch (its mean over rows) from the policy's log-probs ``out``
    (``out.logp [b]``, ``out.token_logp [b, T]``, ``out.mask [b, T]``, ``out.entropy``) and the
    minibatch's fields, plus metrics to log (averaged over minibatches). The entropy bonus is
    added by the loop, not here.

A*-PO (:mod:`astarpo.llm.algorithms.astarpo`) and the baselines (GRPO/RLOO, REBEL, PPO)
implement these members; the math of each loss lives in a pure function
(:func:`astarpo.advantage_regression_loss` for A*-PO, :mod:`astarpo.llm.algorithms.losses`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from astarpo.llm.models.logprobs import PackedSequences, SequenceLogprobs, pack

__all__ = ["Algorithm", "RolloutBatch", "old_token_logp", "single_update"]


@dataclass
class RolloutBatch:
    """A scored rollout as tensors: ``B = P * n`` rows, prompt-major, packed left-padded.

    Attributes:
        prompts: Prompt text per row, ``[B]``.
        completions: Response text per row, ``[B]``.
        input_ids: Prompt + response ids ``[B, T]``.
        attention_mask: 1 on real tokens ``[B, T]``.
        response_mask: True on response tokens ``[B, T]``.
        rewards: Reward of each response ``[B]`` (float32).
        group: Prompt index of each row ``[B]`` (rows of one prompt share it).
        truncated: Whether the response hit the token budget ``[B]``.
        v_star: Stage 1 value of each row's prompt ``[B]``, when the algorithm needs it.
        logp_ref: Reference sequence log-probs ``[B]``, when needed.
        token_logp_ref: Reference token log-probs ``[B, T]`` (0 off the response).
        logp_old: Policy sequence log-probs before the update ``[B]``, when needed.
        token_logp_old: Policy token log-probs before the update ``[B, T]``.
        extra: Algorithm-specific row tensors (first dimension ``B``), e.g. ``advantage``.
    """

    prompts: list[str]
    completions: list[str]
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    rewards: torch.Tensor
    group: torch.Tensor
    truncated: torch.Tensor
    v_star: torch.Tensor | None = None
    logp_ref: torch.Tensor | None = None
    token_logp_ref: torch.Tensor | None = None
    logp_old: torch.Tensor | None = None
    token_logp_old: torch.Tensor | None = None
    extra: dict[str, torch.Tensor] = field(default_factory=dict)

    @classmethod
    def from_rollout(
        cls,
        rollout: Any,
        rewards: Any,
        pad_token_id: int,
        device: torch.device | str = "cpu",
        v_star: Any = None,
    ) -> RolloutBatch:
        """Pack a :class:`~astarpo.llm.rollout.hf.Rollout` with its rewards ``[B]`` (and
        ``v_star [B]``) onto ``device``."""
        packed = pack(rollout.prompt_ids, rollout.response_ids, pad_token_id, "left")
        b = len(rollout)
        return cls(
            prompts=list(rollout.prompts),
            completions=list(rollout.completions),
            input_ids=packed.input_ids.to(device),
            attention_mask=packed.attention_mask.to(device),
            response_mask=packed.response_mask.to(device),
            rewards=torch.as_tensor(rewards, dtype=torch.float32).to(device),
            group=torch.arange(b // rollout.n).repeat_interleave(rollout.n).to(device),
            truncated=torch.as_tensor(rollout.truncated, dtype=torch.bool).to(device),
            v_star=None
            if v_star is None
            else torch.as_tensor(v_star, dtype=torch.float32).to(device),
        )

    def __len__(self) -> int:
        return len(self.prompts)

    @property
    def packed(self) -> PackedSequences:
        """The token tensors as a :class:`~astarpo.llm.models.logprobs.PackedSequences`."""
        return PackedSequences(self.input_ids, self.attention_mask, self.response_mask)

    @property
    def response_lengths(self) -> torch.Tensor:
        """Response tokens per row ``[B]`` (EOS included)."""
        return self.response_mask.sum(-1)

    def select(self, index: torch.Tensor) -> RolloutBatch:
        """The rows ``index`` (a 1-D long tensor) of every field.

        When ``index`` is every row in order (one minibatch, no micro-batches) the result
        shares this batch's tensors instead of copying them.
        """
        idx = index.to(self.input_ids.device)
        rows = idx.tolist()
        if rows == list(range(len(self))):
            return dataclasses.replace(
                self,
                prompts=list(self.prompts),
                completions=list(self.completions),
                extra=dict(self.extra),
            )
        values: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                values[f.name] = v[idx]
            elif isinstance(v, list):
                values[f.name] = [v[i] for i in rows]
            elif isinstance(v, dict):
                values[f.name] = {k: t[idx] for k, t in v.items()}
            else:
                values[f.name] = v
        return RolloutBatch(**values)


@runtime_checkable
class Algorithm(Protocol):
    """What the Stage 2 loop needs from an algorithm (see the module docstring).

    ``name``, ``samples_per_prompt`` and the ``needs_*`` flags are facts of the algorithm: class
    constants, or read-only properties derived from its config (GRPO's ``samples_per_prompt``
    is ``group_size``), never constructor arguments.
    """

    @property
    def name(self) -> str:
        """The registry name (``"astarpo"``, ``"grpo"``, ...), used in logs."""
        ...

    @property
    def samples_per_prompt(self) -> int:
        """Responses generated per prompt."""
        ...

    @property
    def needs_reference(self) -> bool:
        """Whether the loop fills ``logp_ref`` / ``token_logp_ref``."""
        ...

    @property
    def needs_v_star(self) -> bool:
        """Whether the loop fills ``v_star`` from the Stage 1 table."""
        ...

    @property
    def needs_old_logprobs(self) -> bool:
        """Whether the loop fills ``logp_old`` / ``token_logp_old`` before the updates."""
        ...

    def modules(self) -> list[torch.nn.Module]:
        """Extra trainable modules (optimized, clipped and checkpointed with the policy)."""
        ...

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Once per rollout batch: fill ``batch.extra``; return metrics."""
        ...

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Scalar loss of a minibatch and metrics, from the policy's log-probs ``out``."""
        ...


def single_update(config: Any) -> bool:
    """True when a rollout gets one optimizer step (``update_epochs * minibatches == 1``): the
    sampling policy then equals the current one and the "old" log-probs need no extra pass."""
    return bool(config.update_epochs * config.minibatches == 1)


def old_token_logp(out: SequenceLogprobs, minibatch: RolloutBatch) -> torch.Tensor:
    """The sampling policy's token log-probs ``[b, T]``: the stored ones, or the detached
    current ones when there was a single update (:func:`single_update`)."""
    if minibatch.token_logp_old is not None:
        return minibatch.token_logp_old
    return out.token_logp.detach()
