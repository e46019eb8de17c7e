"""What the lab's tests share: the tiny model's shape (overrides of the library's
``make_toy_model``), so that a test study runs in seconds."""

from __future__ import annotations

from typing import Any

#: The smallest Qwen2 shape the lab's tests train.
TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}


def make_tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    """A fresh toy model of the :data:`TINY` shape."""
    from astarpo.llm import make_toy_model

    return make_toy_model(tokenizer, seed=seed, **TINY)


def run_cli(argv: list[str]) -> int:
    """``python -m experiments.NAME ARGS`` in process, ``argv`` being ``[NAME, *ARGS]``
    (``NAME`` as the registry spells it: ``zero-pass``); returns the exit code."""
    from experiments.harness.cli import main

    return main(argv[0], argv[1:])
