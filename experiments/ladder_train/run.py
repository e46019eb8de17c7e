r"""The ladder-train study (``python -m experiments.ladder_train``): who learns, per bin of log10
v_ref.

:func:`run` takes the ladder (its ``ladder_prompts.jsonl`` and ``reference/``; built first
into ``OUT/ladder`` on :data:`~experiments.ladder_train.config.LADDER_BINS` unless ``ladder``
names a finished one, ``--ladder DIR``), runs Stage 1 (N = ``n_samples``) once on the union of
the bins' training prompts outside every run (so that a prompt's :math:`\hat V^*` is the same
in every run that trains on it, alone or mixed), optionally sweeps each algorithm's rate on
seeds disjoint from the measured ones, then every run of
:func:`~experiments.ladder_train.config.plan`, each in a fresh process for ``steps`` steps in
the paper protocol's shape (:func:`run_one`).

A run measures, at step 0, every ``eval_steps`` steps and at its end, exactly (from the gold
response's log-probability, :func:`~experiments.harness.measure.evaluate_sets`): the
expected accuracy and mean log10 gold probability on the bin's held-out prompts (``bin_``), on
the easy bin's (``easy_``) and on the first ``train_eval_rows`` of the bin's training prompts
(``train_``); and while it trains, the samples and successes on the bin's training prompts
and the step and seconds of the first success (:class:`FirstSuccess`).

Cost of the defaults (98 runs, of which the all-wrong filter's runs without a pool start no
process): about 1.7 to 2.1 hours on one core of a 2-core CPU machine, from measured per-step CPU
times at 16 prompts per step (A*-PO about 0.2-0.3 s, GRPO 1.0-1.2 s, PPO 0.26-0.35 s, REBEL
0.3-0.4 s; GRPO is two thirds of the total) and about 9 s per run of process start and
evaluations; ``workers`` runs spread it over more cores (each run is seeded in its own process:
the results do not depend on the number).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis import curve_area
from astarpo.llm import ValueTable, get_task
from experiments.harness.ladder_build import check_bins, ladder_for, read_ladder
from experiments.harness.measure import SuccessCounter, evaluate_sets, timed_stage1
from experiments.harness.protocol import DROP_ARM, PAPER_SHAPE, algorithm_config, arm_algorithm
from experiments.harness.runner import Runner, entry
from experiments.harness.sweep import sweep_all
from experiments.harness.training import drop_all_wrong, load_run, train_run
from experiments.ladder_train import report
from experiments.ladder_train.config import (
    ALONE,
    LadderTrainConfig,
    plan,
    rates,
    run_name,
)

__all__ = ["OUTPUTS", "SKIPPED", "FirstSuccess", "bin_sets", "run", "run_one"]

#: What the study writes besides ``runs/`` and ``ladder_train.json/md/png``.
OUTPUTS = ("ladder", "stage1.jsonl")
#: Why an ``astarpo_drop`` run has no pool.
SKIPPED = "every training prompt is all wrong in Stage 1"


class FirstSuccess(SuccessCounter):
    """A :class:`~experiments.harness.measure.SuccessCounter` (``"hard"``: the bin's
    training prompts) that also records its first success on one of them: ``first`` is None
    until then, then ``{"sample": samples scored before it (every kind), "seconds": since the
    counter was made}``."""

    def __init__(self, reward: Any, hard: Sequence[str]) -> None:
        super().__init__(reward, hard)
        self.t0 = time.perf_counter()
        self.first: dict[str, float] | None = None

    def __call__(self, prompts: Sequence[str], *args: Any, **kwargs: Any) -> list[float | None]:
        """Score and count like the base class; note the first success on a bin prompt."""
        before = sum(self.samples.values())
        scores = super().__call__(prompts, *args, **kwargs)
        if self.first is None:
            for i, (p, s) in enumerate(zip(prompts, scores, strict=True)):
                if p in self.hard and (s or 0.0) > 0:
                    self.first = {"sample": before + i, "seconds": time.perf_counter() - self.t0}
                    break
        return scores


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec`` (``arm``, ``bin``, ``set``, ``seed``, ``lr``, ``config``,
    ``reference``, ``values``, ``train``, ``bin_prompts``: the bin's training prompts,
    ``held_out``, ``reference_eval``, ``out``).

    Returns:
        ``arm``, ``algo``, ``bin``, ``set``, ``seed``, ``lr``, the fields of
        :func:`~experiments.harness.training.train_run`, ``samples`` and ``successes``
        (``bin``: the bin's training prompts, ``easy``: the others), ``first_success``
        (``step``, 1-based, ``sample`` and ``seconds``; None without one); or ``skipped``.
    """
    arm, seed = spec["arm"], int(spec["seed"])
    head = {"arm": arm, "algo": arm_algorithm(arm), "bin": spec["bin"], "set": spec["set"]}
    head.update(seed=seed, lr=float(spec["lr"]))
    table, rows = ValueTable.load(spec["values"]), spec["train"]
    if arm == DROP_ARM:
        table, rows = drop_all_wrong(table, rows)
        if not rows:
            return {**head, "skipped": SKIPPED}
    cfg, tokenizer, ref, policy = load_run(spec, LadderTrainConfig)
    counter = FirstSuccess(get_task(cfg.task).reward, spec["bin_prompts"])
    first = iter([dict(spec["reference_eval"])])  # before the first step: the reference

    def eval_fn(model: Any) -> dict[str, float]:
        return next(first, None) or evaluate_sets(model, tokenizer, spec["held_out"])

    args: Any = algorithm_config(arm, cfg, seed, Path(spec["out"]), head["lr"], 0.0)
    steps = int(spec.get("steps", cfg.train.max_steps))
    args = replace(args, max_steps=steps, eval_steps=cfg.train.eval_steps)
    shape = {**PAPER_SHAPE, "entropy_coef": cfg.train.entropy_coef}
    args = replace(args, eval_every_seconds=0.0, **shape)
    v_star = table if arm_algorithm(arm) == "astarpo" else None
    fields = train_run(policy, ref, tokenizer, [counter], args, rows, v_star, eval_fn)
    found = None
    if counter.first is not None:
        per_step = cfg.train.batch_size * fields["samples_per_prompt"]
        found = {**counter.first, "step": counter.first["sample"] // per_step + 1}
    counts = {"samples": dict(counter.samples), "successes": dict(counter.successes)}
    counts = {k: {"bin": v["hard"], "easy": v["easy"]} for k, v in counts.items()}
    return {**head, **fields, **counts, "first_success": found}


def bin_sets(
    rows: list[dict[str, Any]], cfg: LadderTrainConfig
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], list[dict[str, Any]]]:
    """``({bin: {"train", "test"}}, easy test rows)`` of the ladder's rows (``prompt`` and
    ``answer``; ``ValueError`` naming a bin the ladder lacks)."""
    found = sorted({r["bin"] for r in rows})
    need = {*cfg.bins, cfg.easy}
    missing = sorted(b for b in need if b not in found)
    if missing:
        raise ValueError(f"the ladder holds no bin {missing}; its bins are {found}.")
    sets: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for b in dict.fromkeys([*cfg.bins, cfg.easy]):
        for split in ("train", "test"):
            part = [r for r in rows if r["bin"] == b and r["split"] == split]
            sets.setdefault(b, {})[split] = [
                {"prompt": r["prompt"], "answer": r["answer"]} for r in part
            ]
    return sets, sets.get(cfg.easy, {}).get("test", [])


def _bin_info(rows: list[dict[str, Any]], table: ValueTable, label: str) -> dict[str, Any]:
    """A bin's log10 v_ref (median, mean; of its held-out and training prompts) and its
    training prompts' Stage 1 ``v_star`` (mean, fraction exactly 0)."""
    out: dict[str, Any] = {}
    for split in ("train", "test"):
        log10 = [math.log10(r["v_ref"]) for r in rows if r["bin"] == label and r["split"] == split]
        out[f"{split}_log10_v_ref"] = {"median": float(np.median(log10))}
        out[f"{split}_log10_v_ref"]["mean"] = float(np.mean(log10))
    v = table.v_star([r["prompt"] for r in rows if r["bin"] == label and r["split"] == "train"])
    out["v_star"] = {"mean": float(np.mean(v)), "fraction_zero": float(np.mean(v == 0.0))}
    return out


def run(
    cfg: LadderTrainConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study (see the module doc) into ``out_dir`` (``overwrite``: delete exactly what
    an earlier run of it recorded there first; ``resume``: continue an interrupted run there,
    its finished runs read back); returns the content of ``ladder_train.json``."""
    needs = ("ladder_prompts.jsonl", "reference")
    if cfg.ladder:  # before any work: a folder that is no ladder is refused
        read_ladder(cfg.ladder, needs=needs)
    build = cfg.ladder_config()  # before any work: a bin no ladder can hold is refused
    runner = Runner.start(
        out_dir, "ladder_train", OUTPUTS, cfg, overwrite, progress, cfg.workers, resume
    )
    output, say = runner.output, runner.say
    runner.describe = report.describe
    folder, _ = ladder_for(
        cfg.ladder,
        build,
        runner,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
        needs=needs,
    )
    cfg = cfg.resolved()
    rows = check_bins((*cfg.bins, cfg.easy), folder)
    sets, easy_test = bin_sets(rows, cfg)
    pool = list({r["prompt"]: r for b in sets.values() for r in b["train"]}.values())
    spec0 = {"config": cfg.to_dict(), "reference": str(folder / "reference")}
    _, tok, ref, _ = load_run(spec0, LadderTrainConfig)
    say(f"[ladder-train] Stage 1: N = {cfg.stage1.n_samples} on {len(pool)} training prompts, once")
    values = output.record("stage1.jsonl").resolve()
    table, stage1_s = timed_stage1(ref, tok, pool, cfg, values, seed=0)
    bins = {b: _bin_info(rows, table, b) for b in sets}

    def held(b: str) -> dict[str, list[dict[str, Any]]]:
        train = sets[b]["train"][: cfg.train_eval_rows]
        return {"bin": sets[b]["test"], "easy": easy_test, **({"train": train} if train else {})}

    reference = {b: evaluate_sets(ref, tok, held(b)) for b in sets}
    base = {"entry": entry(run_one), "config": cfg.to_dict(), "reference": spec0["reference"]}
    base.update(values=str(values), paths=["reference", "values"])

    def spec(arm: str, b: str, set_name: str, seed: int, lr: float) -> dict[str, Any]:
        train = sets[b]["train"] + (sets[cfg.easy]["train"] if set_name != ALONE else [])
        one = {**base, "arm": arm, "bin": b, "set": set_name, "seed": seed, "lr": lr}
        one.update(train=train, bin_prompts=[r["prompt"] for r in sets[b]["train"]])
        return {**one, "held_out": held(b), "reference_eval": reference[b]}

    swept = _sweep(runner, cfg, spec) if len(cfg.lr_grid) > 1 else {}
    lrs = rates(cfg, {k: v["chosen"] for k, v in swept.items()})
    specs = [(run_name(a, b, s, seed), spec(a, b, s, seed, lrs[a])) for a, b, s, seed in plan(cfg)]
    say(f"[ladder-train] {len(specs)} runs of {cfg.train.max_steps} steps, {cfg.workers} at a time")
    result: dict[str, Any] = {"config": cfg.to_dict(), "ladder": str(folder), "bins": bins}
    result["sizes"] = {b: {k: len(v) for k, v in part.items()} for b, part in sets.items()}
    result.update(stage1={"seconds": stage1_s, "prompts": len(pool)}, reference=reference)
    result.update(rates=lrs, sweep=swept, runs=_run_all(runner, specs, table))
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result


def _run_all(
    runner: Runner, specs: list[tuple[str, dict[str, Any]]], table: ValueTable
) -> list[dict[str, Any]]:
    """The results of ``specs`` in order (:meth:`Runner.run_all`), without a process for an
    ``astarpo_drop`` run whose filter leaves no prompt (its result says so, as
    :func:`run_one`'s would)."""
    solved = {r.prompt for r in table if r.pass_rate > 0}

    def empty(sp: dict[str, Any]) -> bool:
        return sp["arm"] == DROP_ARM and not any(r["prompt"] in solved for r in sp["train"])

    todo = [(n, sp) for n, sp in specs if not empty(sp)]
    done = dict(zip([n for n, _ in todo], runner.run_all(todo), strict=True))
    skipped = {"algo": "astarpo", "skipped": SKIPPED}
    return [
        done.get(n) or {**{k: sp[k] for k in ("arm", "bin", "set", "seed", "lr")}, **skipped}
        for n, sp in specs
    ]


def _sweep(runner: Runner, cfg: LadderTrainConfig, spec: Any) -> dict[str, Any]:
    """Per algorithm of the study's runs, the harness's bracketed
    :func:`~experiments.harness.sweep.sweep_all` over ``lr_grid``: each rate scored by the
    step-average expected accuracy on ``sweep_bin``'s training prompts, alone, over
    ``sweep_seeds`` seeds from ``sweep_seed``. The runs go ``workers`` at a time in two rounds:
    every algorithm's grid, then every edge choice's extension."""
    algos = list(dict.fromkeys(arm_algorithm(a) for a in cfg.arms()))
    seeds = range(cfg.sweep_seed, cfg.sweep_seed + cfg.sweep_seeds)

    def score_all(points: list[tuple[str, float]]) -> list[float]:
        runs = [
            (
                f"sweep-{run_name(a, cfg.sweep_bin, ALONE, s)}-lr{lr:g}",
                spec(a, cfg.sweep_bin, ALONE, s, lr),
            )
            for a, lr in points
            for s in seeds
        ]
        done = iter(runner.run_all(runs))
        scores = []
        for _ in points:
            got = [next(done) for _ in seeds]
            areas = [
                curve_area(
                    [e["step"] for e in r["evals"]],
                    [e["train_expected_accuracy"] for e in r["evals"]],
                    cfg.train.max_steps,
                )
                for r in got
                if "skipped" not in r
            ]
            scores.append(float(np.mean(areas)) if len(areas) == len(got) else math.nan)
        return scores

    return sweep_all(score_all, algos, cfg.lr_grid, 1, say=runner.say)
