"""What the LLM tests share instead of rebuilding it by hand: the tiny model's shape and builder,
and a quick trainer config (plain functions; the fixtures of ``tests/conftest.py`` wrap them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The smallest Qwen2 shape the LLM tests use (overrides of ``make_toy_model``).
TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}

# What every test run of the trainer turns off: the progress bar and the trackers.
QUIET = {"progress": False, "report_to": "none"}


def make_tiny_model(tokenizer: Any, seed: int = 0, **overrides: Any) -> Any:
    """A fresh toy model of the :data:`TINY` shape (``overrides`` change any field)."""
    from astarpo.llm.models.toy import make_toy_model

    return make_toy_model(tokenizer, seed=seed, **{**TINY, **overrides})


def quick_config(output_dir: str | Path, cls: Any = None, /, **fields: Any) -> Any:
    """``cls`` (default ``AStarPOConfig``) writing to ``output_dir``, :data:`QUIET`, and
    ``fields`` (which may override any of them, ``output_dir`` included)."""
    if cls is None:
        from astarpo.llm.algorithms.astarpo import AStarPOConfig

        cls = AStarPOConfig
    return cls(**{"output_dir": str(output_dir), **QUIET, **fields})
