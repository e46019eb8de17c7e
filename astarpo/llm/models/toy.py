"""The embedded toy model: a character tokenizer and a tiny Qwen2-style model.

Everything here is built in code (no download), so the CPU demo and the tests run offline:

* :func:`make_char_tokenizer`: a ``transformers.PreTrainedTokenizerFast`` with one token per
  character (digits, arithmetic signs, lower-case letters, space) plus ``<pad>``, ``<eos>`` and
  ``<unk>``; :func:`make_word_tokenizer` the same over any list of words.
* :func:`make_toy_model`: a randomly initialized ``Qwen2ForCausalLM`` from a ``Qwen2Config``
  (about 1M parameters by default; every config field can be overridden).

The tasks it is trained on (rows, rewards, model shapes) are in :mod:`astarpo.llm.toy`.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

__all__ = [
    "TOY_CHARS",
    "make_char_tokenizer",
    "make_toy_model",
    "make_word_tokenizer",
]

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
    return make_word_tokenizer(TOY_CHARS)


def make_word_tokenizer(words: Sequence[str], split: str = ".") -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over ``words``, made in code.

    Token ids: ``<pad>`` = 0, ``<eos>`` = 1, ``<unk>`` = 2, then one id per word, in order
    (``len(words) + 3`` ids). Text is cut into the matches of the regular expression ``split``
    (default: single characters), each looked up as a word; decoding joins the words without
    separators.

    Args:
        words: The vocabulary after the three special tokens (distinct strings).
        split: A regular expression matching one word of a text.

    Returns:
        The tokenizer, with ``pad_token``, ``eos_token`` and ``unk_token`` set and
        ``padding_side="left"``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for word in words:
        vocab[word] = len(vocab)
    if len(vocab) != len(words) + len(_SPECIALS):
        raise ValueError("words must be distinct and must not repeat a special token.")
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(split), behavior="isolated")
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
