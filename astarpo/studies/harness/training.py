"""A run of the library's trainer inside a study's worker process.

:func:`train_run` is :class:`~astarpo.llm.training.trainer.Trainer` with a wall-clock budget
(the run config's ``max_train_seconds``), held-out evaluations every ``eval_every_seconds`` of
training time (not counted in the clock) and a :class:`Recorder`; it returns the fields every
run's result has. :func:`drop_all_wrong` is the V* table (and pool) of
:data:`~astarpo.studies.harness.protocol.DROP_ARM`.
"""

from __future__ import annotations

from typing import Any

from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.training.trainer import Trainer

__all__ = ["PHASES", "Recorder", "drop_all_wrong", "train_run"]

#: The trainer's per-step phase timers, summed into a run's ``phases``.
PHASES = ("generate", "reward", "ref_logprobs", "update")


class Recorder:
    """Trainer callback: keeps the evaluations, counts steps, sums phase times and lengths."""

    def __init__(self) -> None:
        self.evals: list[dict[str, Any]] = []
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.steps = 0
        self.response_tokens = 0.0  # sum over steps of the mean response length

    def on_step_end(self, record: dict[str, Any]) -> bool:
        """Add the step's phase times; never stops (the budget does)."""
        self.steps += 1
        self.response_tokens += float(record.get("response_length/mean", 0.0))
        for k in PHASES:
            self.phases[k] += float(record.get(f"time/{k}", 0.0))
        return False

    def on_evaluate(self, record: dict[str, Any]) -> None:
        """Keep the evaluation (``eval/`` keys without the prefix, ``step``, ``stage2_time``)."""
        rec = {k[5:]: v for k, v in record.items() if k.startswith("eval/")}
        rec.update(step=record["step"], stage2_time=record["time/train_total"])
        self.evals.append(rec)


def drop_all_wrong(
    table: ValueTable, rows: list[dict[str, Any]]
) -> tuple[ValueTable, list[dict[str, Any]]]:
    """The table and rows of ``astarpo_drop``: the prompts with a Stage 1 pass rate above 0."""
    kept = ValueTable([r for r in table if r.pass_rate > 0])
    return kept, [r for r in rows if r["prompt"] in kept]


def train_run(
    policy: Any,
    ref: Any,
    tokenizer: Any,
    rewards: list[Any],
    args: Any,
    rows: list[dict[str, Any]],
    table: ValueTable | None,
    eval_fn: Any,
    stage1_s: float = 0.0,
) -> dict[str, Any]:
    """Train ``policy`` with the registry config ``args`` (its budget already net of
    ``stage1_s``, the seconds of a Stage 1 run inside the run's clock).

    Returns:
        ``evals`` (each with ``time``: Stage 1 + Stage 2 training time, ``stage2_time``,
        ``step`` and what ``eval_fn`` returned), ``stage1_s``, ``train_s``, ``clock_s``,
        ``steps``, ``pool``, ``samples_per_prompt``, ``phases`` (seconds: ``stage1`` and
        :data:`PHASES`) and ``response_tokens_mean`` (mean over steps of the training
        responses' mean length).
    """
    recorder = Recorder()
    trainer = Trainer(
        policy,
        ref,
        rewards,
        args=args,
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tokenizer,
        eval_fn=eval_fn,
        callbacks=[recorder],
    )
    trainer.train()
    for e in recorder.evals:
        e["time"] = stage1_s + e["stage2_time"]
    return {
        "evals": recorder.evals,
        "stage1_s": stage1_s,
        "train_s": trainer.train_time,
        "clock_s": stage1_s + trainer.train_time,
        "steps": recorder.steps,
        "pool": len(rows),
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "phases": {"stage1": stage1_s, **recorder.phases},
        "response_tokens_mean": recorder.response_tokens / max(recorder.steps, 1),
    }
