"""The two-beta study: A*-PO at ``beta2`` with V* estimated at each ``beta1``, equal steps.

Stage 1 runs once (N reference samples per pool prompt); each ``beta1`` gets its own V* table
made from those same rewards by :func:`~astarpo.objective.optimal_value`, so a seed's runs differ
only in V* (the data order, the sampling seeds and the initial weights are shared). Every run
trains ``max_steps`` steps (the paper's equal-steps protocol) in a fresh process and keeps its
per-step gradient norms and KL from ``metrics.jsonl``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from astarpo import optimal_value
from astarpo.llm import ValueTable, get_task, make_char_tokenizer, read_metrics
from experiments.harness.measure import evaluate_policy, timed_stage1
from experiments.harness.output import open_output
from experiments.harness.protocol import algorithm_config, make_reference, splits
from experiments.harness.runner import Runner, entry, rotated
from experiments.harness.training import load_run, train_run
from experiments.two_beta import report
from experiments.two_beta.config import TwoBetaConfig

__all__ = ["run", "run_one", "table_at"]

#: Seed of the held-out evaluations (the same for every run).
EVAL_SEED = 7919


def table_at(table: ValueTable, beta1: float) -> ValueTable:
    """``table`` with V* of every prompt made again at ``beta1`` from its N rewards
    (``optimal_value(rewards, beta1)``, paper Eq. 3), its provenance saying so."""
    return ValueTable(
        dataclasses.replace(
            row,
            v_star=float(optimal_value(np.asarray(row.rewards, np.float64), beta1)),
            provenance={**row.provenance, "beta1": float(beta1)},
        )
        for row in table
    )


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run, in its own process: A*-PO at ``spec["lr"]`` on the table of ``spec["beta1"]``."""
    cfg, tokenizer, ref, policy = load_run(spec, TwoBetaConfig)
    out, seed = Path(spec["out"]), spec["seed"]
    args = algorithm_config("astarpo", cfg, seed, out, spec["lr"], 0.0)
    args = dataclasses.replace(
        args, max_steps=cfg.train.max_steps, eval_steps=cfg.train.eval_steps, eval_every_seconds=0.0
    )

    def eval_fn(model: Any) -> dict[str, float]:
        return evaluate_policy(model, ref, tokenizer, spec["eval"], cfg, EVAL_SEED)

    table = ValueTable.load(spec["values"])
    rewards = [get_task(cfg.task).reward]
    fields = train_run(policy, ref, tokenizer, rewards, args, spec["train"], table, eval_fn)
    steps = [r for r in read_metrics(out / "metrics.jsonl") if "grad_norm" in r]
    return {
        "beta1": spec["beta1"],
        "lr": spec["lr"],
        "seed": seed,
        **fields,
        "grad_norm": [float(r["grad_norm"]) for r in steps],
        "train_kl": [float(r["kl"]) for r in steps],
    }


def run(
    cfg: TwoBetaConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study into ``out_dir`` (``resume``: continue an interrupted run there, its
    finished runs read back); returns the content of ``two_beta.json``.

    Raises:
        FileExistsError: ``out_dir`` holds another run and ``overwrite`` is not set.
    """
    say = print if progress else lambda *a: None
    output = open_output(out_dir, "two_beta", ("reference", "values"), cfg, overwrite, resume)
    runner = Runner(output, cfg.threads, cfg.workers, cfg.rerun_slow, say, report.describe, resume)
    cfg, rows = cfg.resolved(), splits(cfg)
    for name in ("reference", "values"):
        output.record(name)
    say(f"[two-beta] reference ({cfg.task}, SFT to {cfg.sft.target_accuracy:g}, cached)")
    ref, sft = make_reference(cfg, output.path)
    folder = output.path / "values"
    folder.mkdir(exist_ok=True)
    say(f"[two-beta] Stage 1: N = {cfg.stage1.n_samples} on {len(rows['pool'])} prompts, once")
    table, stage1_s = timed_stage1(
        ref, make_char_tokenizer(), rows["pool"], cfg, folder / "stage1.jsonl", seed=0
    )
    tables = {b1: table_at(table, b1) for b1 in cfg.beta1s}
    for b1, t in tables.items():
        t.save(folder / f"beta1-{b1:g}.jsonl")
    base = {
        "entry": entry(run_one),
        "config": cfg.to_dict(),
        "reference": str(output.path / "reference"),
        "paths": ["reference", "values"],
        "train": rows["pool"],
        "eval": rows["held_out"],
    }
    specs = [
        (
            f"lr{lr:g}-beta1-{b1:g}-seed{seed}",
            {
                **base,
                "lr": lr,
                "beta1": b1,
                "seed": seed,
                "values": str(folder / f"beta1-{b1:g}.jsonl"),
            },
        )
        for lr in cfg.learning_rates
        for seed, b1 in rotated(cfg.beta1s, cfg.seeds)
    ]
    say(f"[two-beta] {len(specs)} runs of {cfg.train.max_steps} steps, {cfg.workers} at a time")
    result: dict[str, Any] = {"config": cfg.to_dict(), "reference": sft, "stage1_s": stage1_s}
    prompts = [r.prompt for r in table]
    v_star = {f"{b:g}": float(t.v_star(prompts).mean()) for b, t in tables.items()}
    result["stage1"] = {
        "pass_rate": float(np.mean([r.pass_rate for r in table])),
        "v_star_mean": v_star,
    }
    result["runs"] = runner.run_all(specs)
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
