"""Hugging Face ``model.generate`` behind the :class:`~astarpo.llm.rollout.base.Generator`
interface (CPU or GPU), sharing its weights with the trainer."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

import torch

from astarpo.llm.rollout.base import Rollout, SamplingConfig, eos_token_ids

__all__ = ["HFGenerator"]

_CACHE_SIZE = 100_000  # prompts whose token ids an HFGenerator keeps


def _no_grad_mode(model: Any) -> contextlib.AbstractContextManager[Any]:
    """``torch.inference_mode`` (about 6% cheaper than ``no_grad`` on the toy's generation),
    or ``no_grad`` when a wrapper writes into the model's tensors during the forward: FSDP2
    all-gathers parameters into buffers that training reuses, accelerate's hooks load offloaded
    weights; an inference tensor left there would fail the next training forward."""
    wrapped: tuple[type, ...] = ()
    if "torch.distributed.fsdp" in sys.modules:  # an FSDP2 model has imported it
        from torch.distributed.fsdp import FSDPModule

        wrapped = (FSDPModule,)
    for m in model.modules():
        if isinstance(m, wrapped) or hasattr(m, "_hf_hook"):
            return torch.no_grad()
    return torch.inference_mode()


class HFGenerator:
    """Hugging Face ``model.generate`` behind the Generator interface (CPU or GPU).

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
        self.eos_ids = eos_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_token_id: int = int(pad if pad is not None else min(self.eos_ids))
        self._cache: dict[str, list[int]] = {}
        self._cache_tokenizer: Any = tokenizer

    def _encode(self, prompts: list[str]) -> list[list[int]]:
        """Token ids of each prompt; those of prompts seen before (each epoch sees them again)
        are kept, up to ``_CACHE_SIZE`` prompts, for the tokenizer they were made with."""
        if self._cache_tokenizer is not self.tokenizer or len(self._cache) > _CACHE_SIZE:
            self._cache, self._cache_tokenizer = {}, self.tokenizer
        new = [p for p in dict.fromkeys(prompts) if p not in self._cache]
        if new:
            ids = self.tokenizer(new, add_special_tokens=False)["input_ids"]
            self._cache.update((p, list(i)) for p, i in zip(new, ids, strict=True))
        return [self._cache[p] for p in prompts]

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
        from transformers import GenerationConfig  # the llm extra

        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}.")
        prompts = list(prompts)
        encoded = self._encode(prompts)
        for text, prompt_ids in zip(prompts, encoded, strict=True):
            if len(prompt_ids) == 0:
                raise ValueError(f"Prompt {text!r} tokenizes to no tokens; cannot generate.")
        rows = [list(ids) for ids in encoded for _ in range(n)]
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
        no_grad = _no_grad_mode(model)
        model.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                if device.type == "cpu":  # the CPU generator only (torch.manual_seed: all)
                    torch.default_generator.manual_seed(seed)
                else:
                    torch.manual_seed(seed)
                for start in range(0, len(rows), self.batch_size):
                    chunk = rows[start : start + self.batch_size]
                    width = max(len(r) for r in chunk)
                    pads = [width - len(r) for r in chunk]  # left padding
                    ids = torch.tensor(
                        [[self.pad_token_id] * k + r for k, r in zip(pads, chunk, strict=True)]
                    )
                    mask = torch.tensor([[0] * k + [1] * (width - k) for k in pads])
                    with no_grad:
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
