"""One generation interface for every backend (Hugging Face ``generate``, vLLM).

A :class:`Generator` turns prompts into a :class:`Rollout`: token ids and text of ``n`` sampled
responses per prompt. Stage 1, the Stage 2 trainer, the baselines and evaluation all sample
through it, so a backend is swapped without touching them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Generator", "Rollout", "SamplingConfig"]


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
    """

    prompts: list[str]
    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    completions: list[str]
    truncated: list[bool]
    n: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

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
