"""The trainer's arguments as a TRL user passes them, resolved to what the loop needs.

* ``model`` / ``ref_model``: a model object, a local directory (read with
  ``local_files_only=True``) or a hub id (downloaded only because the user named it), through
  :func:`~astarpo.llm.rollout.models.load_causal_lm`.
* ``processing_class`` (TRL's name) or ``tokenizer``: the tokenizer; when neither is given it is
  loaded from the model's directory.
* ``reward_funcs``: one callable, a ``"module:function"`` / built-in name, or a list of them
  (:func:`~astarpo.llm.data.scoring.as_reward_funcs`).
* ``train_dataset``: a ``datasets.Dataset`` or a list of dicts, text or conversational prompts
  (:func:`~astarpo.llm.data.rows.as_rows`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from astarpo.llm.data.rows import as_rows
from astarpo.llm.rollout.models import (
    check_model_fits,
    is_model_name,
    load_causal_lm,
    load_tokenizer,
)

__all__ = ["resolve_inputs", "resolve_model", "resolve_tokenizer"]


def resolve_model(model: Any, role: str = "model") -> tuple[Any, Any]:
    """``(model, tokenizer or None)``: a name is loaded (with its tokenizer); an object is
    returned as is.

    Raises:
        TypeError: if ``model`` is neither a name nor a ``torch.nn.Module``-like object.
    """
    if model is None:
        return None, None
    if is_model_name(model):
        return load_causal_lm(model)
    if not hasattr(model, "parameters"):
        raise TypeError(
            f"{role} must be a model object, a local directory or a hub id; got "
            f"{type(model).__name__}. (astarpo's trainers take (model, ref_model, reward_funcs) "
            "positionally; pass rewards as reward_funcs=...)"
        )
    return model, None


def resolve_tokenizer(model: Any, tokenizer: Any, processing_class: Any, loaded: Any) -> Any:
    """The tokenizer from ``processing_class`` (TRL's name) or ``tokenizer`` (not both), else
    the one loaded with the model, else the model's local directory.

    Raises:
        ValueError: if both are given and differ, or no tokenizer can be found locally.
    """
    if tokenizer is not None and processing_class is not None and tokenizer is not processing_class:
        raise ValueError("give the tokenizer once: processing_class=... (TRL) or tokenizer=...")
    tok = processing_class if processing_class is not None else tokenizer
    if tok is not None:
        return tok
    if loaded is not None:
        return loaded
    name = getattr(getattr(model, "config", None), "_name_or_path", "")
    if name and Path(name).is_dir():
        return load_tokenizer(name)
    raise ValueError(
        f"no tokenizer: pass processing_class=tokenizer (the model's config names {name!r}, "
        "which is not a local directory; nothing is downloaded)."
    )


def resolve_inputs(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    processing_class: Any,
    train_dataset: Any,
    args: Any,
) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """``(model, ref_model, tokenizer, rows)`` of the trainer: models loaded when named, the
    tokenizer found, the dataset as rows (conversational prompts rendered), and the rows
    checked against the model (:func:`~astarpo.llm.rollout.models.check_model_fits`).

    Raises:
        ValueError: on an empty dataset or rows the model cannot read.
    """
    model, loaded = resolve_model(model)
    ref_model, _ = resolve_model(ref_model, "ref_model")
    tokenizer = resolve_tokenizer(model, tokenizer, processing_class, loaded)
    rows = as_rows(train_dataset, tokenizer)
    if not rows:
        raise ValueError("train_dataset is empty.")
    check_model_fits(rows, tokenizer, model, args.sampling.max_new_tokens)
    return model, ref_model, tokenizer, rows
