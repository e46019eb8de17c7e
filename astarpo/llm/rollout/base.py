"""What every generation backend shares: the sampling settings, the rollout, the protocol.

A :class:`Generator` turns prompts into a :class:`Rollout`: token ids and text of ``n`` sampled
responses per prompt. Stage 1, the Stage 2 trainer, the baselines and evaluation all sample
through it, so a backend (:mod:`astarpo.llm.rollout.hf`, :mod:`astarpo.llm.rollout.vllm`) is
swapped without touching them. Every backend stops at :func:`eos_token_ids` and seeds through
:func:`derive_seed`, the one seed derivation of astarpo: every sampling seed is a hash of named
parts. Stage 1 seeds each batch from its prompts' keys (so a resumed table is byte-identical),
the Stage 2 trainer seeds step ``t`` from ``(seed, t)``, the data order of epoch ``e`` from
``(seed, "epoch", e)`` and the minibatch shuffle of update epoch ``e`` from
``(seed, "minibatch", t, e)``, evaluation seeds batch ``b`` from ``("eval", seed, b)``, and the vLLM
backend and data-parallel generation seed each prompt from ``(seed, global index)``
(:func:`prompt_seeds`), so a prompt's samples do not depend on the rank that draws them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Generator",
    "Rollout",
    "SamplingConfig",
    "concat_rollouts",
    "derive_seed",
    "eos_token_ids",
    "prompt_seeds",
]


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


def derive_seed(*parts: int | str) -> int:
    """A 31-bit seed determined by ``parts`` (integers and strings, in order).

    The parts are joined with a separator that cannot occur in their ``repr`` and hashed with
    SHA-256, so different part lists give independent seeds and the same list the same seed on
    every machine and Python version. 31 bits fit every backend's seed argument (torch, numpy,
    vLLM).

    Args:
        *parts: Integers or strings (at least one).

    Returns:
        An integer in ``[0, 2**31)``.

    Raises:
        TypeError: a part is neither ``int`` nor ``str`` (``bool`` is refused too).
    """
    if not parts:
        raise TypeError("derive_seed needs at least one part.")
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (int, str)):
            raise TypeError(f"seed parts must be int or str, got {p!r} ({type(p).__name__}).")
    text = "\x1f".join(repr(p) for p in parts)
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def prompt_seeds(seed: int, indices: Sequence[int]) -> list[int]:
    """One seed per prompt, from the call's ``seed`` and each prompt's *global* index.

    Seeding per prompt (not per rank or per batch) makes a prompt's samples the same whichever
    rank generates it and whatever else is in its batch.

    Args:
        seed: The call's seed.
        indices: Global index of each prompt (e.g. its position in the step's global batch).

    Returns:
        ``[derive_seed(seed, i) for i in indices]``, each in ``[0, 2**31)``.
    """
    return [derive_seed(int(seed), int(i)) for i in indices]
