r"""The refresh study (``python -m experiments.refresh``): A*-PO with a fixed reference against
A*-PO whose reference is refreshed every K steps (:mod:`astarpo.llm.training.refresh`), on the
v_ref ladder's prompts near the reference's threshold.

:func:`run` takes the ladder (its ``ladder_prompts.jsonl`` and ``reference/``; built first into
``OUT/ladder`` on the study's ``bins`` unless ``ladder`` names a finished one, ``--ladder
DIR``), pools the training prompts of ``bins``, runs Stage 1 (N = ``n_samples``) once on the
pool outside every clock, then every rule of ``refresh_every`` for every seed, each run in a
fresh process for ``max_steps`` steps (:func:`run_one`). The held-out curves are exact: per bin,
the mean probability of the gold response (the expected accuracy of the exact-match reward) and
the exact :math:`\mathrm{pass@}k = 1 - (1 - \pi(a \mid x))^k` averaged over the bin's held-out
prompts, beside the original reference's; and KL(pi || the original reference), sampled.

What would change the conclusion: if a refreshed run's final pass@k on a bin exceeds the
original reference's (and the fixed-reference run's) with an interval above it, the refresh
moved the ceiling that a fixed pi_ref sets; if it does not, or only at a KL the fixed run
does not pay, the ceiling stands on this task.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm import ReferenceRefresh, ValueTable, get_task, read_metrics
from astarpo.llm import RefreshConfig as RefreshRule  # the library's; RefreshConfig: the study's
from experiments.harness.ladder_build import check_bins, ladder_for, read_ladder
from experiments.harness.ladder_sets import BINS, LadderConfig, bin_spec
from experiments.harness.measure import gold_logprobs, sample_scores, timed_stage1
from experiments.harness.protocol import algorithm_config
from experiments.harness.runner import Runner, entry, rotated
from experiments.harness.training import load_run, train_run
from experiments.refresh import report
from experiments.refresh.config import RefreshConfig

__all__ = ["EVAL_SEED", "OUTPUTS", "evaluate_bins", "exact_pass_at_k", "ladder_to_build", "run"]
__all__ += ["run_one"]

#: What the study writes besides ``runs/`` and ``refresh.json/md/png``.
OUTPUTS = ("ladder", "stage1.jsonl")
#: Seed of the held-out KL samples (the same for every run).
EVAL_SEED = 7919


def exact_pass_at_k(p: np.ndarray, k: int) -> np.ndarray:
    r"""The exact :math:`\mathrm{pass@}k = 1 - (1 - p)^k` of prompts solved with probability
    ``p`` ``[X]`` (float64, computed as ``-expm1(k log1p(-p))``: exact for tiny ``p``)."""
    return -np.expm1(k * np.log1p(-np.minimum(np.asarray(p, dtype=np.float64), 1.0 - 1e-16)))


def evaluate_bins(
    model: Any,
    ref0: Any,
    tokenizer: Any,
    held_out: dict[str, list[dict[str, Any]]],
    cfg: RefreshConfig,
) -> dict[str, float]:
    """Per bin ``b``: ``b/expected_accuracy`` (mean gold probability), ``b/pass_at_k`` (mean
    exact :math:`1 - (1 - p)^k`), ``b/log10_gold`` (mean log10 gold probability), and
    ``b/kl0`` (mean :math:`\\log\\pi - \\log\\pi_{ref,0}` of one sample on each of the first
    ``kl_rows`` prompts: KL to the original reference)."""
    was_training, res = model.training, {}
    model.eval()
    for b, rows in held_out.items():
        lp = gold_logprobs(model, tokenizer, rows)
        p = np.exp(lp)
        res[f"{b}/expected_accuracy"] = float(p.mean())
        res[f"{b}/pass_at_k"] = float(exact_pass_at_k(p, cfg.pass_k).mean())
        res[f"{b}/log10_gold"] = float(lp.mean() / math.log(10.0))
        s = sample_scores(model, ref0, tokenizer, rows[: cfg.kl_rows], cfg, EVAL_SEED)
        res[f"{b}/kl0"] = float(s["log_ratio"].mean())
    model.train(was_training)
    return res


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run, in its own process: A*-PO on the pool with ``spec["refresh_every"]``."""
    cfg, tokenizer, ref, policy = load_run(spec, RefreshConfig)
    ref0 = copy.deepcopy(ref)  # the refresh overwrites the trainer's reference in place
    out, seed, every = Path(spec["out"]), int(spec["seed"]), int(spec["refresh_every"])
    args: Any = algorithm_config("astarpo", cfg, seed, out, cfg.train.learning_rate, 0.0)
    args = dataclasses.replace(
        args,
        max_steps=cfg.train.max_steps,
        eval_steps=cfg.train.eval_steps,
        eval_every_seconds=0.0,
    )
    extensions = []  # K = 0: the fixed reference
    if every:
        n, beta1 = cfg.stage1.n_samples, cfg.stage1.beta1
        extensions.append(
            ReferenceRefresh(RefreshRule(every_steps=every, n_samples=n, beta1=beta1))
        )

    def eval_fn(model: Any) -> dict[str, float]:
        return evaluate_bins(model, ref0, tokenizer, spec["held_out"], cfg)

    table = ValueTable.load(spec["values"])
    rewards = [get_task(cfg.task).reward]
    fields = train_run(
        policy, ref, tokenizer, rewards, args, spec["train"], table, eval_fn, extensions=extensions
    )
    steps = [r for r in read_metrics(out / "metrics.jsonl") if "loss" in r]
    last = steps[-1] if steps else {}
    refresh = {k.split("/")[1]: float(v) for k, v in last.items() if k.startswith("refresh/")}
    return {"refresh_every": every, "seed": seed, **fields, "refresh": refresh}


def ladder_to_build(cfg: RefreshConfig) -> LadderConfig:
    """The ladder the study builds when no ``ladder`` is given: ``ladder_build`` on the
    study's ``bins``, its reference the study's (``sft``, ``cache_dir``: ``--sft-steps``,
    ``--sft-lr``, ``--reference-target`` and ``--cache-dir`` reach the ladder the runs train
    from) (``ValueError`` naming the bins no ladder can hold, before any work)."""
    specs = tuple(bin_spec(b) for b in cfg.bins)
    other = [b for b, spec in zip(cfg.bins, specs, strict=True) if spec not in BINS]
    if not cfg.ladder and other:
        raise ValueError(
            f"--bins {', '.join(other)}: the ladder the study builds holds the bins "
            f"{', '.join(BINS)} only; choose among them, or build a ladder with "
            "`python -m experiments.ladder --bins=...` and pass --ladder DIR."
        )
    protocol = replace(cfg.ladder_build.protocol, sft=cfg.sft, cache_dir=cfg.cache_dir)
    return replace(cfg.ladder_build, bins=specs, protocol=protocol)


def run(
    cfg: RefreshConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study (see the module doc) into ``out_dir`` (``overwrite``: delete exactly what
    an earlier run of it recorded there first; ``resume``: continue an interrupted run there,
    its finished runs read back); returns the content of ``refresh.json``."""
    needs = ("ladder_prompts.jsonl", "reference")
    if cfg.ladder:  # before any work: a folder that is no ladder is refused
        read_ladder(cfg.ladder, needs=needs)
    build = ladder_to_build(cfg)  # before any work: a bin no ladder can hold is refused
    runner = Runner.start(out_dir, "refresh", OUTPUTS, cfg, overwrite, progress, resume=resume)
    output, say = runner.output, runner.say
    folder, _ = ladder_for(
        cfg.ladder,
        build,
        runner,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
        needs=needs,
    )
    rows = check_bins(cfg.bins, folder)
    pool = [
        {"prompt": r["prompt"], "answer": r["answer"]}
        for r in rows
        if r["bin"] in cfg.bins and r["split"] == "train"
    ]
    held = {
        b: [
            {"prompt": r["prompt"], "answer": r["answer"]}
            for r in rows
            if r["bin"] == b and r["split"] == "test"
        ]
        for b in cfg.bins
    }
    _, tok, ref, _ = load_run(
        {"config": cfg.to_dict(), "reference": str(folder / "reference")}, RefreshConfig
    )
    say(f"[refresh] Stage 1: N = {cfg.stage1.n_samples} on {len(pool)} pool prompts, once")
    table, stage1_s = timed_stage1(ref, tok, pool, cfg, output.record("stage1.jsonl"), seed=0)
    reference = evaluate_bins(ref, ref, tok, held, cfg)
    base = {
        "entry": entry(run_one),
        "config": cfg.to_dict(),
        "reference": str(folder / "reference"),
        "values": str(output.path.resolve() / "stage1.jsonl"),
        "paths": ["reference", "values"],
        "train": pool,
        "held_out": held,
    }
    specs = [
        (f"refresh{every}-seed{seed}", {**base, "refresh_every": every, "seed": seed})
        for seed, every in rotated(cfg.refresh_every, cfg.seeds)
    ]
    say(f"[refresh] {len(specs)} runs of {cfg.train.max_steps} steps")
    result: dict[str, Any] = {"config": cfg.to_dict(), "ladder": str(folder)}
    result.update(stage1={"seconds": stage1_s, "prompts": len(pool)}, reference=reference)
    result["stage1"]["pass_rate"] = float(np.mean([r.pass_rate for r in table]))
    result["runs"] = runner.run_all(specs)
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
