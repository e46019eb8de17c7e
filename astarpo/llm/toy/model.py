"""The embedded default: a character tokenizer, a tiny Qwen2-style model and an addition task.

Everything here is built in code (no download), so the CPU demo and the tests run offline:

* :func:`make_char_tokenizer`: a ``transformers.PreTrainedTokenizerFast`` with one token per
  character (digits, arithmetic signs, lower-case letters, space) plus ``<pad>``, ``<eos>`` and
  ``<unk>``.
* :func:`make_toy_model`: a randomly initialized ``Qwen2ForCausalLM`` from a ``Qwen2Config``
  (about 1M parameters by default; every config field can be overridden).
* :func:`addition_task`: distinct 2-digit addition problems ``"12+34="`` with answers ``"46"``.
* :func:`scratchpad_task`: the same problems with longer operands whose answer is a worked
  solution, a step per digit (:mod:`astarpo.llm.data.scratchpad`): long responses.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from astarpo.llm.data.scratchpad import scratchpad_solution

__all__ = [
    "SCRATCHPAD_POSITIONS",
    "TOY_CHARS",
    "addition_task",
    "make_char_tokenizer",
    "make_toy_model",
    "scratchpad_task",
]

#: ``max_position_embeddings`` of a toy model for :func:`scratchpad_task`: prompt
#: (``2 d + 2`` tokens) plus worked solution and EOS (``16 d + 6``) fit for operands of up to
#: 13 digits.
SCRATCHPAD_POSITIONS: int = 256

#: The characters of the toy vocabulary, one token each (after the special tokens).
TOY_CHARS: str = string.digits + "+-*/=()., :?" + string.ascii_lowercase

_SPECIALS = ("<pad>", "<eos>", "<unk>")


def make_char_tokenizer() -> Any:
    """A character-level ``PreTrainedTokenizerFast`` made in code.

    Token ids: ``<pad>`` = 0, ``<eos>`` = 1, ``<unk>`` = 2, then one id per character of
    :data:`TOY_CHARS`. Encoding adds no special tokens; decoding joins characters without
    separators, so ``decode(encode(s)) == s`` for any string over :data:`TOY_CHARS`.

    Returns:
        A ``transformers.PreTrainedTokenizerFast`` with ``pad_token``, ``eos_token`` and
        ``unk_token`` set and ``padding_side="left"`` (the layout generation needs).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for ch in TOY_CHARS:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def make_toy_model(tokenizer: Any, seed: int = 0, **overrides: Any) -> Any:
    """A randomly initialized tiny ``Qwen2ForCausalLM`` for ``tokenizer``.

    Defaults: hidden size 128, 5 layers, 4 attention heads (2 key-value heads), MLP width 384,
    tied embeddings, 64 positions: about 1.0M parameters. Dropout is zero, so training is
    deterministic given the seed.

    Args:
        tokenizer: The tokenizer (its vocabulary size and pad/eos ids are used).
        seed: Seed of the weight initialization (the global torch RNG is left untouched).
        **overrides: Any ``Qwen2Config`` field, e.g. ``hidden_size=32, num_hidden_layers=1``.

    Returns:
        A ``Qwen2ForCausalLM`` in float32, in train mode.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 128,
        "intermediate_size": 384,
        "num_hidden_layers": 5,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
        "tie_word_embeddings": True,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.eos_token_id,
        "attention_dropout": 0.0,
    }
    cfg.update(overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(Qwen2Config(**cfg))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.train()
    return model


def addition_task(
    n: int, seed: int = 0, digits: int = 2, zero_pad: bool = False
) -> list[dict[str, str]]:
    """``n`` distinct addition problems with operands below ``10**digits``.

    Problems are drawn without replacement, so slicing one call (``rows[:k]``, ``rows[k:]``)
    gives disjoint train and held-out sets.

    With ``zero_pad=True`` operands have exactly ``digits`` digits and the answer
    ``digits + 1`` (``"07+34="`` -> ``"041"``): every digit sits at a fixed position, which a
    tiny model learns several times faster (the demo uses it; in a pilot, 600 SFT steps gave
    0.54 sampled accuracy padded against 0.05 unpadded).

    Args:
        n: Number of problems, at most ``100**digits``.
        seed: Seed of the draw.
        digits: Digits of each operand (2: operands 0..99).
        zero_pad: Fixed-width operands and answer.

    Returns:
        Rows ``{"problem": "12+34=", "answer": "46", "prompt": "12+34="}`` (``prompt`` is the
        text fed to the model, equal to ``problem``).

    Raises:
        ValueError: if ``n`` is negative or exceeds the number of distinct problems.
    """
    hi = 10**digits
    if not 0 <= n <= hi * hi:
        raise ValueError(f"n must be in [0, {hi * hi}] for {digits}-digit operands, got {n}.")
    rng = np.random.default_rng(seed)
    codes = rng.choice(hi * hi, size=n, replace=False)
    rows = []
    for c in codes.tolist():
        a, b = divmod(int(c), hi)
        if zero_pad:
            problem, answer = f"{a:0{digits}d}+{b:0{digits}d}=", f"{a + b:0{digits + 1}d}"
        else:
            problem, answer = f"{a}+{b}=", str(a + b)
        rows.append({"problem": problem, "answer": answer, "prompt": problem})
    return rows


def scratchpad_task(n: int, seed: int = 0, digits: int = 4) -> list[dict[str, str]]:
    """``n`` distinct zero-padded addition problems whose answer is the worked solution.

    The prompt is ``"0123+4567="``; the answer is
    :func:`~astarpo.llm.data.scratchpad.scratchpad_solution` (a step per digit with its carry,
    then ``ans=04690``): ``16 * digits + 5`` characters, 69 for 4 digits. Score it with
    :func:`~astarpo.llm.data.scratchpad.scratchpad_reward` (built-in reward ``scratchpad``),
    which also requires EOS. A model for it needs :data:`SCRATCHPAD_POSITIONS` positions
    (``make_toy_model(tok, max_position_embeddings=SCRATCHPAD_POSITIONS)``).

    Problems are drawn without replacement, as in :func:`addition_task` (slices of one call
    are disjoint), so rows with more ``digits`` than a model was fine-tuned on are a set it
    has never seen solved.

    Args:
        n: Number of problems, at most ``100**digits``.
        seed: Seed of the draw.
        digits: Digits of each operand (4: ``"0000+0000="`` .. ``"9999+9999="``).

    Returns:
        Rows ``{"problem", "prompt", "answer", "sum"}``: ``prompt == problem``, ``answer`` the
        worked solution, ``sum`` the bare zero-padded sum (``"04690"``).

    Raises:
        ValueError: ``digits < 1``, or ``n`` negative or above the number of problems.
    """
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}.")
    hi = 10**digits
    if not 0 <= n <= hi * hi:
        raise ValueError(f"n must be in [0, {hi * hi}] for {digits}-digit operands, got {n}.")
    rng = np.random.default_rng(seed)
    codes = rng.choice(hi * hi, size=n, replace=False) if hi * hi <= 10**6 else _codes(rng, n, hi)
    rows = []
    for c in codes.tolist():
        a, b = divmod(int(c), hi)
        problem = f"{a:0{digits}d}+{b:0{digits}d}="
        rows.append({"problem": problem, "prompt": problem,
                     "answer": scratchpad_solution(a, b, digits),
                     "sum": f"{a + b:0{digits + 1}d}"})  # fmt: skip
    return rows


def _codes(rng: np.random.Generator, n: int, hi: int) -> np.ndarray:
    """``n`` distinct integers below ``hi * hi`` (beyond what ``choice`` can permute)."""
    seen: dict[int, None] = {}
    while len(seen) < n:
        for c in rng.integers(0, hi * hi, size=n, dtype=np.int64).tolist():
            seen.setdefault(int(c), None)
    return np.array(list(seen)[:n], dtype=np.int64)
