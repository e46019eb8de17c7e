"""A run of the library's trainer inside a study's worker process: :func:`load_run` (a run's
config, tokenizer, reference and policy), :func:`train_run` (the
:class:`~astarpo.llm.training.trainer.Trainer` of a run config, with the fields every run's
result has) and :func:`drop_all_wrong` (the V* table and pool of ``astarpo_drop``)."""

from __future__ import annotations

import copy
import typing
from typing import Any

import torch

from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.training.trainer import Trainer

__all__ = ["PHASES", "drop_all_wrong", "load_run", "train_run"]

#: The trainer's per-step phase timers, summed into a run's ``phases``.
PHASES = ("generate", "reward", "ref_logprobs", "update")


def load_run(spec: dict[str, Any], cls: type) -> tuple[Any, Any, Any, Any]:
    """``(config, tokenizer, reference, policy)`` of a run: the config dataclass ``cls`` of
    ``spec["config"]`` (its ``asdict`` through JSON: tuples restored; its torch threads set),
    the reference ``spec["reference"]`` on its device in eval mode, and a trainable copy."""
    hints = typing.get_type_hints(cls).items()
    tuples = {name for name, hint in hints if typing.get_origin(hint) is tuple}
    cfg = cls(**{k: tuple(v) if k in tuples else v for k, v in spec["config"].items()})
    torch.set_num_threads(cfg.threads)
    ref = load_pretrained_model(spec["reference"]).to(resolve_device(cfg.device)).eval()
    return cfg, make_char_tokenizer(), ref, copy.deepcopy(ref).train()


def drop_all_wrong(
    table: ValueTable, rows: list[dict[str, Any]]
) -> tuple[ValueTable, list[dict[str, Any]]]:
    """The prompts of ``table`` and ``rows`` with a Stage 1 pass rate above 0."""
    kept = ValueTable([r for r in table if r.pass_rate > 0])
    return kept, kept.select(rows)


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
    """Train ``policy`` under the registry config ``args`` (``stage1_s``: a Stage 1 inside the
    run's clock). Returns ``evals`` (``eval_fn``'s values, ``step``, ``stage2_time`` and
    ``time``: Stage 1 + Stage 2 training time), ``stage1_s``, ``train_s``, ``clock_s``,
    ``steps``, ``pool``, ``samples_per_prompt``, ``phases`` (``stage1`` and :data:`PHASES`
    seconds) and ``response_tokens_mean`` (the steps' mean response length, averaged)."""
    trainer = Trainer(
        policy,
        ref,
        rewards,
        args=args,
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tokenizer,
        eval_fn=eval_fn,
    )
    history = trainer.train()
    steps = [r for r in history if "loss" in r]
    evals = [r for r in history if "loss" not in r]
    phases = {k: sum(float(r.get(f"time/{k}", 0.0)) for r in steps) for k in PHASES}
    tokens = sum(float(r.get("response_length/mean", 0.0)) for r in steps)
    return {
        "evals": [
            {k[5:]: v for k, v in e.items() if k.startswith("eval/")}
            | {"step": e["step"], "stage2_time": e["time/train_total"]}
            | {"time": stage1_s + e["time/train_total"]}
            for e in evals
        ],
        "stage1_s": stage1_s,
        "train_s": trainer.train_time,
        "clock_s": stage1_s + trainer.train_time,
        "steps": len(steps),
        "pool": len(rows),
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "phases": {"stage1": stage1_s, **phases},
        "response_tokens_mean": tokens / max(len(steps), 1),
    }
