"""What Stage 1 samples from: a generator, or a reference model (object, local directory or hub
id) wrapped in the HF backend, and the rows rendered and checked against it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from astarpo.llm.data.rows import as_rows
from astarpo.llm.rollout.backend import build_generator
from astarpo.llm.rollout.models import (
    check_model_fits,
    is_model_name,
    load_causal_lm,
    load_tokenizer,
)

__all__ = ["reference_sampler"]


def reference_sampler(
    generator: Any, model: Any, tokenizer: Any, rows: Iterable[Mapping[str, Any]], sampling: Any
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """``(generator, rows, provenance)``: the generator (built from ``model`` when given), the
    rows (conversations rendered, checked against the model) and the model's name.

    Raises:
        ValueError: unless exactly one of ``generator`` and ``model`` is given, or when a model
            object comes without a tokenizer.
    """
    if (generator is None) == (model is None):
        raise ValueError("give exactly one of generator=... or model=... (the reference).")
    if generator is not None:
        return generator, as_rows(rows, tokenizer, "rows"), {}
    name = str(model) if is_model_name(model) else ""
    if is_model_name(model):
        model, loaded = load_causal_lm(model)
        tokenizer = tokenizer if tokenizer is not None else loaded
    if tokenizer is None:
        path = getattr(getattr(model, "config", None), "_name_or_path", "")
        if not (path and Path(path).is_dir()):
            raise ValueError("estimate_values(model=<object>) needs tokenizer=... as well.")
        tokenizer = load_tokenizer(path)
    table_rows = as_rows(rows, tokenizer, "rows")
    check_model_fits(table_rows, tokenizer, model, sampling.max_new_tokens, "rows")
    model.eval()
    gen = build_generator("hf", model, tokenizer)
    return gen, table_rows, ({"model": name} if name else {})
