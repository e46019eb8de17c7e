"""Small helpers of the Stage 2 trainer: device resolution, the V* lookup and seed derivation."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["EvalFn", "lookup_v_star", "resolve_device"]

EvalFn = Callable[[Any], Mapping[str, float]]


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; other strings as given."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def lookup_v_star(table: Any, prompts: Sequence[str]) -> np.ndarray:
    """V* of each prompt ``[B]`` from a table with ``v_star(prompts)`` or a ``{prompt: v}`` map.

    Raises:
        KeyError: naming the first prompt missing from the table (the ``MissingPromptError`` of
            :mod:`astarpo.llm.value` for a ``ValueTable``).
    """
    if hasattr(table, "v_star"):
        return np.asarray(table.v_star(list(prompts)), dtype=np.float64)
    if isinstance(table, Mapping):
        for p in prompts:
            if p not in table:
                raise KeyError(
                    f"prompt {p!r} is missing from the V* table; run Stage 1 (astarpo value) on "
                    "the same prompts (same template) as training."
                )
        return np.array([float(table[p]) for p in prompts], dtype=np.float64)
    raise TypeError(
        f"v_star_table must have a v_star(prompts) method or be a mapping, got {type(table)}."
    )


def _seed(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])
