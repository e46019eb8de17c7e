r"""The zero-pass study (``python -m experiments.zero_pass``): prompts the reference never solves.

Theorem 1 assumes the reference solves every prompt with probability :math:`v_{ref} > 0`.
:func:`run` trains where it does not: the scratchpad reference (the efficiency study's cache),
the hard set (:func:`build_hard_set`, ``hard_prompts.jsonl``: scratchpad problems with one more
operand digit than any SFT example that all ``k`` reference samples get wrong), the easy set
from the SFT distribution, Stage 1 (N = 8) once per training set outside the runs' clocks; then
every run name on hard, mixed and easy (:func:`~experiments.zero_pass.config.seeds_of`
seeds, equal Stage 2 budgets), and the report (``zero_pass.json/md/png``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm import (
    SCRATCHPAD_DIGITS,
    lookup_v_star,
    make_char_tokenizer,
    merge_shards,
    scratchpad_task,
)
from experiments.harness.measure import evaluate_sets, gold_logprobs, timed_stage1
from experiments.harness.output import open_output
from experiments.harness.protocol import Protocol, make_reference, splits
from experiments.harness.runner import Runner, entry
from experiments.zero_pass import report
from experiments.zero_pass.config import ARMS, SETS, ZeroPassConfig, seeds_of
from experiments.zero_pass.worker import pass_shard, run_one

__all__ = ["HARD_SEED", "OUTPUTS", "SHARD_DRAWS", "build_hard_set", "pass_bounds", "run"]

#: What the study writes besides ``runs/`` and ``zero_pass.json/md/png``.
OUTPUTS: tuple[str, ...] = ("reference", "hard_pass64.jsonl", "hard_prompts.jsonl")
OUTPUTS += tuple(f"values_{s}.jsonl" for s in SETS)
#: Seed of the hard problems' draw.
HARD_SEED = 20
#: The hard check runs in ``workers`` shards from this many draws on (below, a process's start
#: costs more than it saves: 110 s against 33 s for 1600 draws on a loaded 2-core machine).
SHARD_DRAWS = 8192


def pass_bounds(k: int, n_prompts: int, level: float = 0.95) -> dict[str, float]:
    r"""One-sided upper bounds after 0 successes in ``k`` draws of each of ``n_prompts``.

    Returns:
        ``per_prompt``: :math:`1 - (1 - level)^{1/k}` (Clopper-Pearson, one prompt);
        ``mean``: :math:`1 - (1 - level)^{1/(k M)}`, a bound on the mean solve rate of the M
        prompts (the chance of no success is at most :math:`(1 - \bar p)^{kM}`).
    """
    alpha = 1.0 - level
    return {"per_prompt": 1.0 - alpha ** (1.0 / k), "mean": 1.0 - alpha ** (1.0 / (k * n_prompts))}


def build_hard_set(
    ref: Any, cfg: ZeroPassConfig, out: Path, runner: Runner
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Draw the hard candidates, sample ``k`` reference responses each (the library's Stage 1
    with N = k, in ``workers`` shards of one process each from :data:`SHARD_DRAWS` draws on),
    keep the all-wrong ones.

    Returns:
        ``(train, held_out, info)``; ``info``: the candidates, those solved at least once (left
        out), the successes, :func:`pass_bounds`, the seconds, the kept prompts' exact gold
        probability under the reference (max, median log10).

    Raises:
        RuntimeError: fewer than ``hard_train + hard_eval`` candidates are all wrong.
    """
    tok = make_char_tokenizer()
    n = cfg.hard_train + cfg.hard_eval + cfg.margin
    rows = scratchpad_task(n, seed=HARD_SEED, digits=cfg.hard_digits)
    check = cfg.protocol.replace(n_samples=cfg.k, generation_batch_size=max(cfg.k, 1024))
    path = out / "hard_pass64.jsonl"
    if cfg.workers == 1 or n * cfg.k < SHARD_DRAWS:
        table, seconds = timed_stage1(ref, tok, rows, check, path, seed=HARD_SEED)
    else:  # shards of the library's Stage 1, one process each, merged
        t0 = time.perf_counter()
        path.unlink(missing_ok=True)
        spec: dict[str, Any] = {"entry": entry(pass_shard), "config": check.to_dict()}
        spec["seed"] = HARD_SEED
        spec.update(reference=str(out / "reference"), path=str(path), rows=rows)
        spec["paths"], parts = ["reference", "path"], range(cfg.workers)
        runner.run_all([(f"hard-check-{i}", {**spec, "shard": [i, cfg.workers]}) for i in parts])
        table, seconds = merge_shards(path, cfg.workers, rows), time.perf_counter() - t0
    rate = {r.prompt: r.pass_rate for r in table}
    kept = [r for r in rows if rate[r["prompt"]] == 0]
    need = cfg.hard_train + cfg.hard_eval
    if len(kept) < need:
        raise RuntimeError(
            f"only {len(kept)} of {n} hard candidates have pass@{cfg.k} = 0; {need} are needed. "
            "Raise margin or use longer operands."
        )
    kept = kept[:need]
    gold = gold_logprobs(ref, tok, kept) / math.log(10.0)
    info: dict[str, Any] = {"digits": cfg.hard_digits, "sft_digits": SCRATCHPAD_DIGITS}
    info["candidates"] = n
    info["solved_at_least_once"] = n - sum(rate[r["prompt"]] == 0 for r in rows)
    info["successes"] = int(sum(sum(x > 0 for x in r.rewards) for r in table))
    info.update(k=cfg.k, draws=n * cfg.k, seconds=seconds, upper95=pass_bounds(cfg.k, need))
    info.update(gold_log10_max=float(gold.max()), gold_log10_median=float(np.median(gold)))
    return kept[: cfg.hard_train], kept[cfg.hard_train :], info


def _stage1(
    ref: Any, sets: dict[str, list[dict[str, Any]]], hard: list[str], cfg: Protocol, out: Path
) -> dict[str, Any]:
    """Stage 1 of each training set into ``values_SET.jsonl``: seconds, prompts, all wrong,
    V* on the hard prompts (exactly 0) and its mean."""
    info: dict[str, dict[str, Any]] = {}
    for kind, rows in sets.items():
        path = out / f"values_{kind}.jsonl"
        table, secs = timed_stage1(ref, make_char_tokenizer(), rows, cfg, path, 0)
        v = lookup_v_star(table, [p for p in hard if p in table])
        all_wrong = int(sum(r.pass_rate == 0 for r in table))
        info[kind] = {"seconds": secs, "prompts": len(table), "all_wrong": all_wrong}
        info[kind]["v_star_hard_max_abs"] = float(np.abs(v).max()) if len(v) else None
        info[kind]["v_star_mean"] = float(np.mean([r.v_star for r in table]))
    return info


def run(
    cfg: ZeroPassConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study (see the module doc) into ``out_dir`` (``overwrite``: delete exactly what
    an earlier run of it recorded there first; ``resume``: continue an interrupted run there,
    its finished runs read back); returns the content of ``zero_pass.json``."""
    output = open_output(out_dir, "zero_pass", OUTPUTS, cfg, overwrite, resume)
    say = print if progress else (lambda *a, **k: None)
    runner = Runner(output, cfg.threads, cfg.workers, cfg.rerun_slow, say, report.describe, resume)
    out, protocol = output.path.resolve(), cfg.protocol.resolved()
    for name in OUTPUTS:
        output.record(name)
    ref, sft_info = make_reference(protocol, out)
    say(f"[zero-pass] reference: {sft_info}")
    hard_train, hard_eval, hard_info = build_hard_set(ref, cfg, out, runner)
    say(f"[zero-pass] hard set: {json.dumps(hard_info)}")
    parts = (("train", hard_train), ("held_out", hard_eval))
    lines = [
        {"prompt": r["prompt"], "answer": r["answer"], "split": s} for s, p in parts for r in p
    ]
    (out / "hard_prompts.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    easy = splits(protocol)
    easy_train, easy_eval = easy["pool"], easy["held_out"]
    sets = {"hard": hard_train, "mixed": easy_train + hard_train, "easy": easy_train}
    hard = [r["prompt"] for r in hard_train]
    stage1 = _stage1(ref, sets, hard, protocol, out)
    say(f"[zero-pass] stage 1: {stage1}")
    held = {"hard": hard_eval, "easy": easy_eval}
    ref_eval = evaluate_sets(ref, make_char_tokenizer(), held)
    common: dict[str, Any] = {"entry": entry(run_one), "config": protocol.to_dict()}
    common["reference"] = str(out / "reference")
    lr, seconds = protocol.train.learning_rate, protocol.train.max_train_seconds
    common.update(lr=lr, seconds=seconds, held_out=held, hard_prompts=hard)
    common["reference_eval"] = ref_eval
    common["check"] = {"hard": hard_train[: cfg.check_rows], "easy": easy_train[: cfg.check_rows]}
    common["check_values"] = str(out / "values_mixed.jsonl")
    common["paths"] = ["reference", "values", "check_values"]
    specs = [
        (f"{s}_{arm}_s{seed}", {**common, "arm": arm, "set": s, "seed": seed, "train": sets[s]})
        for seed in range(max(cfg.seeds_main, cfg.seeds_other))  # seed-major: loads mix
        for s in SETS
        for arm in ARMS
        if seed < seeds_of(cfg, s, arm)
    ]
    for _, spec in specs:
        spec["values"] = str(out / f"values_{spec['set']}.jsonl")
    say(f"[zero-pass] {len(specs)} runs, {cfg.workers} at a time, {seconds:g} s each")
    sizes = {"hard_train": hard_train, "hard_eval": hard_eval}
    sizes.update(easy_train=easy_train, easy_eval=easy_eval)
    result: dict[str, Any] = {"config": cfg.to_dict(), "protocol": protocol.to_dict()}
    result["reference"] = {"sft": sft_info, "eval": ref_eval}
    result.update(hard_set=hard_info, sizes={k: len(v) for k, v in sizes.items()}, stage1=stage1)
    result["runs"] = runner.run_all(specs)
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
