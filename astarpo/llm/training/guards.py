"""The trainer's checks of its inputs and of every update.

Finiteness: a step: a step whose loss or gradient is not finite stops the
run before the optimizer applies it, so no NaN ever reaches the weights or a checkpoint.

:func:`check_update` runs in :func:`~astarpo.llm.training.update.optimizer_step` between the
gradient clipping and ``optimizer.step()``; :class:`NonFiniteError` is re-raised by the trainer
with the step number and the likely causes (:func:`explain_non_finite`).

At construction: the reference must not be the policy object itself
(:func:`check_distinct_reference`), and a V* table must come from a Stage 1 run of the same
rewards and prompts (:func:`check_v_star_table`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.data.rows import check_duplicate_answers, check_reward_columns
from astarpo.llm.rewards.scoring import reward_path
from astarpo.llm.stage1.provenance import check_table_fits
from astarpo.llm.stage1.table import ValueTable, lookup_v_star
from astarpo.llm.training.checkpoint import latest_checkpoint

__all__ = [
    "NonFiniteError",
    "check_batch",
    "check_distinct_reference",
    "check_train_rows",
    "check_update",
    "check_v_star_table",
    "explain_non_finite",
    "train_v_star",
]

log = logging.getLogger(__name__)


class NonFiniteError(FloatingPointError):
    """The loss or the gradient norm of an update is NaN or infinite (nothing was applied)."""


def check_batch(batch: Any) -> None:
    """Raise :class:`NonFiniteError` unless the rollout batch's rewards and V* (as the loss
    sees them, float32) are finite: a reward of 1e300 is finite in float64, not in float32."""
    for name in ("rewards", "v_star"):
        x = getattr(batch, name, None)
        if x is not None and not bool(torch.isfinite(x).all()):
            raise NonFiniteError(f"{name} are not finite as {str(x.dtype)[6:]} (max |value| inf)")


def check_update(stats: Mapping[str, float]) -> None:
    """Raise :class:`NonFiniteError` unless ``loss`` and ``grad_norm`` of ``stats`` are finite.

    Args:
        stats: The minibatch metrics of one optimizer step (``loss``, ``grad_norm``, ...).
    """
    bad = {k: stats[k] for k in ("loss", "grad_norm") if k in stats and not math.isfinite(stats[k])}
    if bad:
        raise NonFiniteError(", ".join(f"{k} is {v}" for k, v in bad.items()))


@contextlib.contextmanager
def explain_non_finite(
    step: int, record: Mapping[str, Any], learning_rate: float, output_dir: str | Path
) -> Iterator[None]:
    """Re-raise a :class:`NonFiniteError` of the block with the step, what the step saw and the
    likely causes.

    Args:
        step: The step running the block.
        record: The step's metrics so far (rewards, V*).
        learning_rate: The config's learning rate.
        output_dir: Where the last good checkpoint is (left as it is).
    """
    try:
        yield
    except NonFiniteError as error:
        last = latest_checkpoint(output_dir)
        seen = [
            f"{k} {record[k]:.4g}"
            for k in ("reward/mean", "reward/std", "v_star/mean")
            if isinstance(record.get(k), float)
        ]
        raise NonFiniteError(
            f"step {step}: {error}; the update was not applied and nothing was saved "
            f"(last good checkpoint: {last or 'none'}). Step inputs: {', '.join(seen) or 'n/a'}. "
            "Likely causes: the reward scale (rewards far from O(1), e.g. 1e300, overflow the "
            "squared loss), V* values (check the Stage 1 table), or the learning rate "
            f"({learning_rate:g}; try a smaller one)."
        ) from error


def check_train_rows(rows: Sequence[Mapping[str, Any]], reward_funcs: Sequence[Any]) -> None:
    """Refuse no reward function, an empty dataset, rows without a non-empty ``prompt`` string
    (naming the row), duplicate prompts with different answers, and rows lacking a column a
    reward needs (:func:`~astarpo.llm.data.rows.check_reward_columns`)."""
    if not reward_funcs:
        raise ValueError("reward_funcs is empty; give a reward function (or a list).")
    if not rows:
        raise ValueError("train_dataset is empty.")
    for i, r in enumerate(rows):
        if not isinstance(r.get("prompt"), str) or not r["prompt"].strip():
            raise ValueError(f"train_dataset row {i} has no non-empty 'prompt' string: {r!r}.")
    check_duplicate_answers(rows, "train_dataset")
    check_reward_columns(reward_funcs, rows, "train_dataset")


def train_v_star(
    algorithm: Any, table: Any, rows: Sequence[Mapping[str, Any]], provider: str | None = None
) -> np.ndarray | None:
    """The Stage 1 value of every training row ``[N]`` (float64) when ``algorithm.needs_v_star``,
    else ``None``; every prompt is looked up now, so a missing one fails before training.
    ``provider`` (the extension that estimates V* during training, e.g. ``"StreamedStage1"``):
    ``NaN`` for every row, filled step by step.

    Raises:
        ValueError: the algorithm needs a V* table and none was given, or a table was given
            and ``provider`` estimates V* itself.
        MissingPromptError: a training prompt is not in the table (the prompt named).
    """
    if not algorithm.needs_v_star:
        return None
    if provider is not None and table is not None:
        raise ValueError(
            f"{provider} estimates V* during training, but a v_star_table was given too; pass "
            f"v_star_table=None, or train on the table without {provider}."
        )
    if provider is not None:
        return np.full(len(rows), np.nan)
    if table is None:
        raise ValueError(f"{algorithm.name} needs a V* table (run Stage 1: `astarpo value`).")
    return lookup_v_star(table, [r["prompt"] for r in rows])


def check_distinct_reference(model: Any, ref_model: Any) -> None:
    """Refuse ``ref_model is model`` (freezing the reference would freeze the policy)."""
    if ref_model is not None and ref_model is model:
        raise ValueError(
            "ref_model is the same object as model: freezing the reference would freeze the "
            "policy (no trainable parameters left). Pass ref_model=None (the trainer keeps a "
            "frozen copy of the policy as it starts) or a separate copy (copy.deepcopy(model))."
        )


def check_v_star_table(
    table: Any,
    rows: Sequence[Mapping[str, Any]],
    reward_funcs: Sequence[Callable[..., Any]],
    args: Any,
    model: str | None = None,
) -> None:
    """Refuse a :class:`~astarpo.llm.stage1.table.ValueTable` made with another reference
    model, other rewards or sampling settings, or other answers than training's, or missing a
    training prompt (:func:`~astarpo.llm.stage1.provenance.check_table_fits`; mismatches pass
    with ``args.allow_v_star_mismatch``); warn on what it does not record. A training set that
    is a subset of the table's prompts fits. Mappings carry no provenance and are not checked.

    Args:
        table: The V* table (a ``ValueTable``; anything else is not checked).
        rows: The training rows.
        reward_funcs: The training reward functions.
        args: The training config (its sampling fields and ``allow_v_star_mismatch``).
        model: The reference model's name (:func:`~astarpo.llm.stage1.provenance.model_name`);
            None skips that check.
    """
    if not isinstance(table, ValueTable):
        return
    sampling = {k: getattr(args, k) for k in ("max_new_tokens", "temperature", "top_p")}
    warnings = check_table_fits(
        table,
        reward_paths=[reward_path(f) for f in reward_funcs],
        rows=rows,
        model=model,
        sampling=sampling,
        allow_mismatch=bool(getattr(args, "allow_v_star_mismatch", False)),
    )
    for w in warnings:
        log.warning(w)
