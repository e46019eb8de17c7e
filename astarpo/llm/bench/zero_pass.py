r"""The zero-pass benchmark: prompts the reference never solves (``benchmarks/zero_pass.py``).

Theorem 1 assumes the reference solves every prompt with probability at least
:math:`v_{ref} > 0`. :func:`run_zero_pass` trains on prompts where it does not, in one
invocation:

1. the reference (:mod:`~astarpo.llm.bench.zero_pass_sets`, as both sets): the scratchpad
   task's SFT'd reference (the efficiency benchmark's, from the same cache), saved with its
   tokenizer to ``out/reference``;
2. the hard set: scratchpad problems with one more operand digit than any SFT example (a rule
   the SFT data never shows). Every candidate gets ``k = 64`` reference samples (the
   benchmark's Stage 1 code with N = 64, table ``hard_pass64.jsonl``); the prompts whose 64
   samples are all wrong make the set, ``hard_train`` of them for training and ``hard_eval``
   held out (``hard_prompts.jsonl``, with the split). With 0 successes in k draws the one-sided
   95% upper bound of a prompt's solve rate is :math:`1 - 0.05^{1/k}` (0.0457 for k = 64), and of
   the mean solve rate over M prompts :math:`1 - 0.05^{1/(kM)}`;
3. the easy set: problems of the SFT distribution (training rows from the bench's pool, held-out
   rows from its held-out split);
4. Stage 1 (N = 8) on each training set, once, timed. It is not inside the runs' clocks (it is
   shared by every seed, as the paper's offline Stage 1): every run has the same Stage 2
   budget, and Stage 1's seconds are reported beside;
5. A*-PO, A*-PO with the all-wrong filter, GRPO, PPO and REBEL on three training sets -- hard
   only, easy + hard mixed, easy only -- with :func:`seeds_of` seeds, each run one
   :func:`~astarpo.llm.bench.zero_pass_run.run_one` in a pool of worker processes;
6. the summary and the figure (:mod:`astarpo.llm.bench.zero_pass_report`): ``zero_pass.json``,
   ``zero_pass.png``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm.bench.run import splits
from astarpo.llm.bench.worker import stage1
from astarpo.llm.bench.zero_pass_report import plot, summarize
from astarpo.llm.bench.zero_pass_run import evaluate_sets, run_one
from astarpo.llm.bench.zero_pass_sets import (
    ARMS,
    SETS,
    ZeroPassConfig,
    build_hard_set,
    reference,
    seeds_of,
)
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.stage1.table import lookup_v_star

__all__ = ["run_zero_pass"]


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _specs(
    cfg: ZeroPassConfig, out: Path, common: dict[str, Any], train: dict[str, Any]
) -> list[dict]:
    specs = []
    for set_name in SETS:
        for arm in ARMS:
            for seed in range(seeds_of(cfg, set_name, arm)):
                name = f"{set_name}_{arm}_s{seed}"
                specs.append(
                    {
                        **common,
                        **train[set_name],
                        "arm": arm,
                        "set": set_name,
                        "seed": seed,
                        "out": str(out / "runs" / name),
                    }
                )
    # seed-major order, so that the workers' loads mix the algorithms
    return sorted(specs, key=lambda s: (s["seed"], SETS.index(s["set"]), ARMS.index(s["arm"])))


def run_zero_pass(cfg: ZeroPassConfig, progress: bool = True) -> dict[str, Any]:
    """Run the benchmark (see the module doc); writes ``zero_pass.json`` and ``.png``.

    Returns:
        The content of ``zero_pass.json``.
    """
    t0, load0 = time.perf_counter(), _load()

    def say(msg: str) -> None:
        if progress:
            print(f"[{time.perf_counter() - t0:6.0f} s] {msg}", flush=True)

    out = Path(cfg.out_dir).resolve()  # the specs' paths: absolute, whatever a worker's cwd
    out.mkdir(parents=True, exist_ok=True)
    bench = cfg.bench().resolved()
    ref, sft_info = reference(bench, out)
    say(f"reference: {sft_info}")
    hard_train, hard_eval, hard_info = build_hard_set(ref, cfg, out)
    say(f"hard set: {json.dumps(hard_info)}")
    with open(out / "hard_prompts.jsonl", "w") as f:
        for split, rows in (("train", hard_train), ("held_out", hard_eval)):
            for r in rows:
                f.write(json.dumps({"prompt": r["prompt"], "answer": r["answer"], "split": split}))
                f.write("\n")
    parts = splits(bench)
    easy_train, easy_eval = parts["pool"][: cfg.easy_train], parts["held_out"][: cfg.easy_eval]
    tok = make_char_tokenizer()
    stage1_info = {}
    sets = {"hard": hard_train, "mixed": easy_train + hard_train, "easy": easy_train}
    for kind, train_rows in sets.items():
        table, secs = stage1(ref, tok, train_rows, bench, out / f"values_{kind}.jsonl", 0)
        v = lookup_v_star(table, [r["prompt"] for r in hard_train if r["prompt"] in table])
        stage1_info[kind] = {
            "seconds": secs,
            "prompts": len(table),
            "all_wrong": int(sum(r.pass_rate == 0 for r in table)),
            "v_star_hard_max_abs": float(np.abs(v).max()) if len(v) else None,
            "v_star_mean": float(np.mean([r.v_star for r in table])),
        }
    say(f"stage 1: {stage1_info}")
    held = {"hard": hard_eval, "easy": easy_eval}
    ref_eval = evaluate_sets(ref, tok, held)
    del ref
    hard_prompts = [r["prompt"] for r in hard_train]
    common = {
        "config": dataclasses.asdict(bench),
        "reference": str(out / "reference"),
        "lr": cfg.learning_rate,
        "seconds": cfg.seconds,
        "held_out": held,
        "reference_eval": ref_eval,
        "hard_prompts": hard_prompts,
        "check": {"hard": hard_train[: cfg.check_rows], "easy": easy_train[: cfg.check_rows]},
        "check_values": str(out / "values_mixed.jsonl"),
    }
    train = {
        "hard": {"train": hard_train, "values": str(out / "values_hard.jsonl")},
        "mixed": {"train": sets["mixed"], "values": str(out / "values_mixed.jsonl")},
        "easy": {"train": easy_train, "values": str(out / "values_easy.jsonl")},
    }
    specs = _specs(cfg, out, common, train)
    say(f"{len(specs)} runs, {cfg.workers} at a time, {cfg.seconds:g} s each")
    results = []
    with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn")) as pool:
        for spec, res in zip(specs, pool.map(run_one, specs), strict=True):
            results.append(res)
            say(f"  {spec['out'].rsplit('/', 1)[-1]}: {res.get('skipped') or res['steps']}")
    result: dict[str, Any] = {
        "config": dataclasses.asdict(cfg),
        "bench_config": dataclasses.asdict(bench),
        "reference": {"sft": sft_info, "eval": ref_eval},
        "hard_set": hard_info,
        "sizes": {
            "hard_train": len(hard_train),
            "hard_eval": len(hard_eval),
            "easy_train": len(easy_train),
            "easy_eval": len(easy_eval),
        },
        "stage1": stage1_info,
        "runs": results,
        "load_start": load0,
    }
    (out / "zero_pass_raw.json").write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    result["summary"] = summarize(result)
    result["wall_s"] = time.perf_counter() - t0
    result["load_end"] = _load()
    (out / "zero_pass.json").write_text(json.dumps(result, indent=1, allow_nan=False) + "\n")
    plot(result, out / "zero_pass.png")
    return result
