"""V* as a column of TRL's training dataset: from a V* table, checked as astarpo's trainer
checks it, or from the dataset's own ``v_star`` column; the paper's all-wrong filter.

:class:`~astarpo.integrations.trl.trainer.AStarPOGRPOTrainer` calls :func:`with_v_star` once, before
TRL sees the dataset; each generation batch then carries its rows' ``v_star`` to the loss.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from astarpo.llm.rewards.scoring import reward_path
from astarpo.llm.stage1.provenance import check_table_fits, model_name
from astarpo.llm.stage1.table import ValueTable, lookup_v_star

__all__ = ["V_STAR", "table_prompt", "with_v_star"]

log = logging.getLogger(__name__)

V_STAR = "v_star"
"""The dataset column of each prompt's V*."""


def table_prompt(prompt: Any, processing_class: Any, chat_template_kwargs: Any = None) -> str:
    """The text a V* table keys ``prompt`` by: a text prompt as it is; a conversational one (a
    list of messages) rendered with the chat template and the generation prompt, as TRL renders
    it for generation and ``astarpo value --chat-template`` for Stage 1.

    Raises:
        ValueError: a conversational prompt without a ``processing_class``.
    """
    if isinstance(prompt, str):
        return prompt
    if processing_class is None:
        raise ValueError(
            "conversational prompts need processing_class= to be looked up in the V* table (it "
            "is keyed by the chat-formatted text); pass the tokenizer, or a v_star column."
        )
    text = processing_class.apply_chat_template(
        prompt, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
    )
    return str(text)


def _check_column(dataset: Any, name: str) -> None:
    bad = [(i, v) for i, v in enumerate(dataset[name]) if not _finite_number(v)]
    if bad:
        i, v = bad[0]
        raise ValueError(
            f"train_dataset column {name!r}: row {i} holds {v!r}; every row needs a finite number "
            f"({len(bad)} rows do not)."
        )


def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def with_v_star(
    dataset: Any,
    table: Any,
    *,
    reward_funcs: Sequence[Callable[..., Any] | str],
    args: Any,
    model: Any,
    processing_class: Any = None,
    filter_all_wrong: bool | None = None,
) -> Any:
    """``dataset`` with a ``v_star`` column (and the paper's filter applied when asked).

    Args:
        dataset: TRL's ``train_dataset`` (a ``datasets.Dataset``; an ``IterableDataset`` only
            with its own ``v_star`` column and no filter).
        table: A :class:`~astarpo.llm.stage1.table.ValueTable`, a ``{prompt: v_star}`` mapping,
            or None (the dataset's ``v_star`` column is used).
        reward_funcs: The training rewards (their dotted paths are checked against the table's;
            a reward model named by a string skips that check).
        args: The :class:`~astarpo.integrations.trl.config.AStarPOGRPOConfig` (sampling fields,
            ``filter_all_wrong``, ``allow_v_star_mismatch``).
        model: The policy or its path (the reference, whose name the table must record).
        processing_class: The tokenizer (renders conversational prompts, :func:`table_prompt`).
        filter_all_wrong: Apply the paper's filter (default: ``args.filter_all_wrong``; the
            trainer passes False for evaluation sets).

    Returns:
        The dataset with ``v_star`` (float) on every row.

    Raises:
        ValueError: no V* at all, V* twice (a table and a column), a non-finite V*, the filter
            without pass rates, a table made for another run (reference, rewards, sampling,
            answers; unless ``allow_v_star_mismatch``) or no row left by the filter.
        MissingPromptError: a training prompt is not in the table (named).
    """
    columns = list(getattr(dataset, "column_names", None) or [])
    drop = args.filter_all_wrong if filter_all_wrong is None else filter_all_wrong
    if table is None:
        if V_STAR not in columns:
            raise ValueError(
                "A*-PO needs V* of every prompt: pass v_star_table= (a ValueTable from "
                "`astarpo value`) or a train_dataset column 'v_star'."
            )
        if drop:
            if "pass_rate" not in columns:
                raise ValueError("filter_all_wrong needs a ValueTable or a 'pass_rate' column.")
            dataset = dataset.filter(lambda r: r["pass_rate"] > 0)
        if hasattr(dataset, "__len__"):
            _check_column(dataset, V_STAR)
        return dataset
    if V_STAR in columns:
        raise ValueError(
            "train_dataset has a 'v_star' column and v_star_table= was given; give one of them."
        )
    if not hasattr(dataset, "__len__"):
        raise ValueError("v_star_table= needs a map-style train_dataset (datasets.Dataset).")
    keys = [table_prompt(p, processing_class, args.chat_template_kwargs) for p in dataset["prompt"]]
    if isinstance(table, ValueTable):
        answers = dataset["answer"] if "answer" in columns else [None] * len(keys)
        callable_rewards = [f for f in reward_funcs if callable(f)]
        paths = [reward_path(f) for f in callable_rewards]
        warnings = check_table_fits(
            table,
            reward_paths=paths if len(paths) == len(reward_funcs) else None,
            rows=[{"prompt": k, "answer": a} for k, a in zip(keys, answers, strict=True)],
            model=model_name(model),
            sampling={
                "max_new_tokens": args.max_completion_length,
                "temperature": args.temperature,
                "top_p": args.top_p,
            },
            allow_mismatch=args.allow_v_star_mismatch,
        )
        for w in warnings:
            log.warning(w)
    elif drop:
        raise ValueError("filter_all_wrong needs a ValueTable (a mapping holds no pass rates).")
    values = lookup_v_star(table, keys).tolist()
    dataset = dataset.add_column(V_STAR, values)
    if drop:
        keep = [i for i, k in enumerate(keys) if table.get(k).pass_rate > 0]
        if not keep:
            raise ValueError(
                "filter_all_wrong leaves no prompt (every prompt has pass rate 0 in the V* table)."
            )
        dataset = dataset.select(keep)
    return dataset
