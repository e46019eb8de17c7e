"""Training and Stage 1 rows from what a TRL user passes: a ``datasets.Dataset`` or a list of
dicts, with standard (text) or conversational prompts.

A conversational ``prompt`` is a list of ``{"role", "content"}`` messages (TRL's format); it is
rendered once with the tokenizer's chat template (``add_generation_prompt=True``), and the
rendered text is the prompt from then on: what the model sees, the key of the V* table, and the
``prompts`` the reward functions receive. The messages are kept in ``prompt_messages``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["as_rows", "is_conversation"]


def is_conversation(value: Any) -> bool:
    """Whether ``value`` is a list of chat messages (dicts with ``role`` and ``content``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in value)
    )


def as_rows(dataset: Iterable[Mapping[str, Any]], tokenizer: Any = None) -> list[dict[str, Any]]:
    """Plain dict rows with a ``prompt`` string, from a ``datasets.Dataset`` or a list of dicts.

    Args:
        dataset: Rows with a ``prompt`` column (text or a list of chat messages); other
            columns are kept (they reach the reward functions as keyword arguments).
        tokenizer: Renders conversational prompts with its chat template.

    Returns:
        ``[dict(row)]`` in order, conversational prompts rendered (messages kept in
        ``prompt_messages``).

    Raises:
        ValueError: if a row has no ``prompt``, a prompt is neither text nor messages, or a
            conversational prompt comes without a tokenizer that has a chat template.
    """
    rows: list[dict[str, Any]] = []
    for i, row in enumerate(dataset):
        if not isinstance(row, Mapping):
            raise ValueError(f"train_dataset row {i} is a {type(row).__name__}, not a dict.")
        r = dict(row)
        prompt: Any = r.get("prompt")
        if is_conversation(prompt):
            if tokenizer is None or not getattr(tokenizer, "chat_template", None):
                raise ValueError(
                    f"row {i} has a conversational prompt but the tokenizer has no chat "
                    "template; set tokenizer.chat_template or pass text prompts."
                )
            messages = [dict(m) for m in prompt]
            r["prompt_messages"] = messages
            r["prompt"] = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        elif not isinstance(prompt, str):
            raise ValueError(
                f"train_dataset row {i} has no 'prompt' string or message list "
                f"(keys {sorted(r)}); load files with astarpo.llm.data.load_prompts."
            )
        rows.append(r)
    return rows
