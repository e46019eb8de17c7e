"""Training and Stage 1 rows from what a TRL user passes: a ``datasets.Dataset`` or a list of
dicts, with standard (text) or conversational prompts.

A conversational ``prompt`` is a list of ``{"role", "content"}`` messages (TRL's format); it is
rendered once with the tokenizer's chat template (``add_generation_prompt=True``), and the
rendered text is the prompt from then on: what the model sees, the key of the V* table, and the
``prompts`` the reward functions receive. The messages are kept in ``prompt_messages``.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["as_rows", "check_duplicate_answers", "check_reward_columns", "is_conversation"]

# What compute_rewards passes itself; every other required parameter of a reward is a column.
_GIVEN = {"prompts", "completions", "completion_ids", "truncated", "report"}


def is_conversation(value: Any) -> bool:
    """Whether ``value`` is a list of chat messages (dicts with ``role`` and ``content``)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in value)
    )


def as_rows(
    dataset: Iterable[Mapping[str, Any]], tokenizer: Any = None, what: str = "train_dataset"
) -> list[dict[str, Any]]:
    """Plain dict rows with a ``prompt`` string, from a ``datasets.Dataset`` or a list of dicts.

    Args:
        dataset: Rows with a ``prompt`` column (text or a list of chat messages); other
            columns are kept (they reach the reward functions as keyword arguments).
        tokenizer: Renders conversational prompts with its chat template.
        what: The argument's name in errors (``train_dataset``, ``rows``).

    Returns:
        ``[dict(row)]`` in order, conversational prompts rendered (messages kept in
        ``prompt_messages``).

    Raises:
        ValueError: if ``dataset`` is a path or a single mapping (a dict of columns, a
            ``DatasetDict``) rather than rows, a row has no ``prompt``, a prompt is neither text
            nor messages, or a conversational prompt comes without a tokenizer that has a chat
            template.
    """
    if isinstance(dataset, (str, bytes, os.PathLike)):
        raise ValueError(
            f"{what} is the path {os.fsdecode(dataset)!r}, not rows; load the file first: "
            "rows = astarpo.llm.data.load_prompts(path) (or datasets.load_dataset)."
        )
    if isinstance(dataset, Mapping):
        keys = sorted(map(str, dataset))[:6]
        raise ValueError(
            f"{what} is one mapping (keys {keys}), not rows; pass a list of row dicts or a "
            "datasets.Dataset (a dict of columns: datasets.Dataset.from_dict(d); a "
            "DatasetDict: one split, d['train'])."
        )
    rows: list[dict[str, Any]] = []
    for i, row in enumerate(dataset):
        if not isinstance(row, Mapping):
            raise ValueError(f"{what} row {i} is a {type(row).__name__}, not a dict.")
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
                f"{what} row {i} has no 'prompt' string or message list "
                f"(keys {sorted(r)}); load files with astarpo.llm.data.load_prompts."
            )
        rows.append(r)
    return rows


def check_duplicate_answers(rows: Sequence[Mapping[str, Any]], what: str = "rows") -> None:
    """Refuse two rows with the same prompt and different ``answer`` values: one prompt has one
    V*, estimated against one answer, and Stage 2 would score the other against it. Identical
    duplicates are allowed.

    Raises:
        ValueError: naming the prompt, both rows and both answers.
    """
    first: dict[str, tuple[int, Any]] = {}
    for i, r in enumerate(rows):
        prompt = r.get("prompt")
        if not isinstance(prompt, str):
            continue
        j, answer = first.setdefault(prompt, (i, r.get("answer")))
        if r.get("answer") != answer:
            short = prompt if len(prompt) <= 60 else prompt[:57] + "..."
            raise ValueError(
                f"{what}[{j}] and {what}[{i}] have the same prompt {short!r} but different answers "
                f"({answer!r} and {r.get('answer')!r}); a prompt has one V*, estimated against "
                "one answer. Fix the wrong row or drop one of them."
            )


def check_reward_columns(
    reward_funcs: Sequence[Any], rows: Sequence[Mapping[str, Any]], what: str = "rows"
) -> None:
    """Refuse, before any generation, rows that lack a column a reward function requires: a
    parameter of its signature without a default (other than ``prompts``, ``completions``,
    ``completion_ids``, ``truncated``, ``report``). Columns a reward reads from ``**kwargs`` are
    not seen, so not checked.

    Raises:
        ValueError: naming the reward, the column and the first row without it.
    """
    for fn in reward_funcs:
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            continue
        needed = [
            p.name
            for p in params
            if p.default is inspect.Parameter.empty
            and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
            and p.name not in _GIVEN
        ]
        for col in needed:
            for i, r in enumerate(rows):
                if col not in r:
                    name = getattr(fn, "__name__", type(fn).__name__)
                    raise ValueError(
                        f"{what}[{i}] has no {col!r} column, which the reward {name!r} needs "
                        f"(the row has {sorted(r)}); give every row the {col!r} column (e.g. "
                        "the gold answer), or use a reward that does not read it."
                    )
