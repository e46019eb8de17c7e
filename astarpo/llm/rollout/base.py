"""What every generation backend shares: the sampling settings, the rollout, the protocol.

A :class:`Generator` turns prompts into a :class:`Rollout`: token ids and text of ``n`` sampled
responses per prompt. Stage 1, the Stage 2 trainer, the baselines and evaluation all sample
through it, so a backend (:mod:`astarpo.llm.rollout.hf`, :mod:`astarpo.llm.rollout.vllm`) is
swapped without touching them. Every backend stops at :func:`eos_token_ids` and seeds through
:mod:`astarpo.llm.rollout.seeds`. This subpackage imports :mod:`astarpo.llm.parallel` (rank
information of the vLLM engine and collectives) and nothing else of :mod:`astarpo.llm`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Generator", "Rollout", "SamplingConfig", "concat_rollouts", "eos_token_ids"]


@dataclass(frozen=True)
class SamplingConfig:
    """How responses are sampled (identical meaning in every backend).

    Args:
        max_new_tokens: Most tokens generated per response (EOS included). Default 256.
        temperature: Softmax temperature; ``0`` means greedy decoding. Default 1.0.
        top_p: Nucleus-sampling mass in (0, 1]; 1.0 disables it. Default 1.0.
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}.")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}.")
        if not (0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")

    @property
    def greedy(self) -> bool:
        """True when decoding is greedy (``temperature == 0``)."""
        return self.temperature == 0


@dataclass
class Rollout:
    """``n`` responses for each of ``P`` prompts, flattened prompt-major: row ``i * n + j`` is
    sample ``j`` of prompt ``i`` (``B = P * n`` rows).

    Attributes:
        prompts: Prompt text of each row, ``[B]``.
        prompt_ids: Prompt token ids of each row (no padding), ``[B][L_i]``.
        response_ids: Generated token ids (no padding; the EOS token included when generated),
            ``[B][T_i]``.
        completions: Decoded response text without special tokens, ``[B]``.
        truncated: Whether the response hit ``max_new_tokens`` without EOS, ``[B]``.
        n: Samples per prompt.
        logprobs: Sequence log-prob of each response under the sampling engine, ``[B]``, when
            the backend reports it (vLLM with ``return_logprobs=True``), else ``None``.
    """

    prompts: list[str]
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    completions: list[str]
    truncated: list[bool]
    n: int = 1
    logprobs: list[float] | None = None

    def __len__(self) -> int:
        return len(self.completions)


@runtime_checkable
class Generator(Protocol):
    """The generation interface every backend implements."""

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig, seed: int
    ) -> Rollout:
        """Sample ``n`` responses for each prompt; deterministic for a given ``seed``."""
        ...

    def sync_weights(self, model: Any) -> None:
        """Make the backend sample from ``model``'s current weights (no-op when shared)."""
        ...


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """The stop set of every backend: the tokenizer's EOS and the model's
    ``generation_config.eos_token_id`` (an int or a list).

    Raises:
        ValueError: neither names an EOS token (responses must end with one).
    """
    ids: set[int] = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for e in (gen_eos, tokenizer.eos_token_id):
        if isinstance(e, int):
            ids.add(e)
        elif e is not None:
            ids.update(int(i) for i in e)
    if not ids:
        raise ValueError(
            "The tokenizer has no eos_token_id and the model's generation_config none either; "
            "set tokenizer.eos_token (responses must end with an EOS token)."
        )
    return ids


def concat_rollouts(parts: Sequence[Rollout]) -> Rollout:
    """Rollouts of consecutive prompt blocks (same ``n``) as one rollout, in order.

    Raises:
        ValueError: ``parts`` is empty or the rollouts have different ``n``.
    """
    if not parts:
        raise ValueError("concat_rollouts needs at least one rollout.")
    n = parts[0].n
    if any(p.n != n for p in parts):
        raise ValueError(f"rollouts have different n: {[p.n for p in parts]}.")
    out = Rollout([], [], [], [], [], n=n)
    for p in parts:
        out.prompts += p.prompts
        out.prompt_ids += p.prompt_ids
        out.response_ids += p.response_ids
        out.completions += p.completions
        out.truncated += p.truncated
    return out
