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

__all__ = ["Generator", "HFGenerator", "Rollout", "SamplingConfig"]


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


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
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


class HFGenerator:
    """Hugging Face ``model.generate`` behind the :class:`Generator` interface (CPU or GPU).

    Prompts are tokenized without special tokens, repeated ``n`` times (prompt-major),
    left-padded and generated in chunks of ``batch_size`` rows with the KV cache. Sampling is
    pure ancestral sampling with ``temperature`` and ``top_p`` (``top_k`` disabled);
    ``temperature == 0`` is greedy.
    The response keeps its EOS token when one was generated, drops everything after it, and is
    marked ``truncated`` when ``max_new_tokens`` were reached without EOS.

    Randomness: ``generate`` seeds torch inside :func:`torch.random.fork_rng`, so the same
    ``seed`` gives the same rollout and the caller's global RNG state is left untouched.

    The model shares its weights with the trainer, so :meth:`sync_weights` is a no-op. It is put
    in eval mode during generation and back in its previous mode after.

    Args:
        model: A ``transformers`` causal LM (``PreTrainedModel`` with ``generate``).
        tokenizer: Its tokenizer; needs a pad token (``eos`` is used when it has none).
        batch_size: Most rows (prompt x sample) per ``generate`` call. Default 64.
    """

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.eos_ids = _eos_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else min(self.eos_ids))

    def sync_weights(self, model: Any) -> None:
        """Point the generator at ``model`` (weights are shared, nothing is copied)."""
        self.model = model

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig, seed: int
    ) -> Rollout:
        """Sample ``n`` responses per prompt (see the class docstring).

        Args:
            prompts: Prompt texts ``[P]`` (fed verbatim, no special tokens added).
            n: Samples per prompt, >= 1.
            sampling: Token budget, temperature and top-p.
            seed: Seed of the sampling (ignored for greedy decoding).

        Returns:
            A :class:`Rollout` of ``P * n`` rows, prompt-major.
        """
        import torch
        from transformers import GenerationConfig

        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}.")
        prompts = list(prompts)
        encoded = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        for text, ids in zip(prompts, encoded, strict=True):
            if len(ids) == 0:
                raise ValueError(f"Prompt {text!r} tokenizes to no tokens; cannot generate.")
        rows = [ids for ids in encoded for _ in range(n)]
        gen_cfg = GenerationConfig(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not sampling.greedy,
            temperature=sampling.temperature if not sampling.greedy else None,
            top_p=sampling.top_p if not sampling.greedy else None,
            top_k=0 if not sampling.greedy else None,
            pad_token_id=self.pad_token_id,
            eos_token_id=sorted(self.eos_ids),
            use_cache=True,
        )
        model = self.model
        was_training = model.training
        device = next(model.parameters()).device
        responses: list[list[int]] = []
        truncated: list[bool] = []
        model.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed)
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start : start + self.batch_size]
                    width = max(len(r) for r in chunk)
                    ids = torch.full((len(chunk), width), self.pad_token_id, dtype=torch.long)
                    mask = torch.zeros((len(chunk), width), dtype=torch.long)
                    for i, r in enumerate(chunk):
                        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
                        mask[i, width - len(r) :] = 1
                    with torch.no_grad():
                        out = model.generate(
                            input_ids=ids.to(device),
                            attention_mask=mask.to(device),
                            generation_config=gen_cfg,
                        )
                    for row in out[:, width:].tolist():
                        cut = next((k for k, t in enumerate(row) if t in self.eos_ids), None)
                        if cut is None:
                            # No EOS: generate pads only after EOS, so every token is real.
                            responses.append(row[: sampling.max_new_tokens])
                            truncated.append(True)
                        else:
                            responses.append(row[: cut + 1])
                            truncated.append(False)
        finally:
            model.train(was_training)
        completions = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        return Rollout(
            prompts=[p for p in prompts for _ in range(n)],
            prompt_ids=rows,
            response_ids=responses,
            completions=list(completions),
            truncated=truncated,
            n=n,
        )
