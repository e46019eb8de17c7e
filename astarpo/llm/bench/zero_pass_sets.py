"""The zero-pass benchmark's settings and its two prompt sets (:mod:`astarpo.llm.bench.zero_pass`).

:class:`ZeroPassConfig` (and :data:`QUICK`); :func:`reference`, the scratchpad task's reference
as the efficiency benchmark makes it; :func:`build_hard_set`, the prompts with one more operand
digit than any SFT example whose k = 64 reference samples are all wrong, with
:func:`pass_bounds`, the one-sided 95% bounds that 0 successes in k draws give.
"""

from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.bench.config import DROP_ARM, BenchConfig
from astarpo.llm.bench.run import REF_SEED, REF_SFT_BATCH, splits
from astarpo.llm.bench.worker import check_spec_paths, config_from_dict, stage1
from astarpo.llm.bench.zero_pass_run import gold_logprobs
from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.shards import merge_shards
from astarpo.llm.toy.problems import scratchpad_task
from astarpo.llm.toy.sft import SFTConfig, cached_sft
from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task

__all__ = [
    "ARMS",
    "HARD_SEED",
    "QUICK",
    "SETS",
    "SHARD_DRAWS",
    "ZeroPassConfig",
    "build_hard_set",
    "pass_bounds",
    "pass_shard",
    "reference",
    "seeds_of",
]

#: The training sets.
SETS = ("hard", "mixed", "easy")
#: The runs of each set.
ARMS = ("astarpo", DROP_ARM, "grpo", "ppo", "rebel")
#: Seed of the hard problems' draw.
HARD_SEED = 20
#: The hard check runs in ``workers`` shards from this many draws on (below, a worker's start
#: costs more than it saves: 110 s against 33 s for 1600 draws on a loaded 2-core machine).
SHARD_DRAWS = 8192


@dataclass(frozen=True)
class ZeroPassConfig:
    """Settings of :func:`run_zero_pass`.

    Args:
        out_dir: Output directory.
        hard_train: Hard training prompts (>= 200 in the full run).
        hard_eval: Hard held-out prompts (>= 200 in the full run).
        easy_train: Easy training prompts.
        easy_eval: Easy held-out prompts.
        margin: Extra hard candidates, in case the reference solves some.
        k: Reference samples per hard candidate (64).
        seconds: Stage 2 wall-clock budget of every run.
        eval_every_seconds: Held-out evaluation every this many seconds of training time.
        seeds_main: Seeds of A*-PO and GRPO on the two sets that hold hard prompts.
        seeds_other: Seeds of every other run.
        learning_rate: Learning rate of every run (no sweep). Default 3e-5: in a 25 s probe
            on the easy set (A*-PO and GRPO, seed 0), 1e-3 took the reference's easy accuracy
            from 0.41 to below 0.01 in one step, 1e-4 and 3e-5 raised it, 3e-5 steadily.
        check_rows: Training prompts per kind in the final log-ratio check.
        workers: Runs at once (processes).
    """

    out_dir: str = "runs/zero_pass"
    hard_train: int = 200
    hard_eval: int = 200
    easy_train: int = 200
    easy_eval: int = 128
    margin: int = 8
    k: int = 64
    seconds: float = 30.0
    eval_every_seconds: float = 15.0
    seeds_main: int = 5
    seeds_other: int = 3
    learning_rate: float = 3e-5
    check_rows: int = 64
    workers: int = 2

    def __post_init__(self) -> None:
        for name in ("hard_train", "hard_eval", "easy_train", "easy_eval", "k", "seeds_main"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        for name in ("seeds_other", "check_rows", "workers"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        if self.margin < 0:
            raise ValueError(f"margin must be >= 0, got {self.margin}.")
        for name in ("seconds", "eval_every_seconds", "learning_rate"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}.")

    @property
    def hard_digits(self) -> int:
        """Operand digits of the hard prompts: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1

    def bench(self) -> BenchConfig:
        """The efficiency benchmark's protocol for these runs (scratchpad task, one learning
        rate, a token budget that holds the hard prompts' gold responses, 86 tokens)."""
        return BenchConfig(
            out_dir=self.out_dir,
            task="scratchpad",
            max_new_tokens=16 * self.hard_digits + 6 + 8,
            sft_lr=get_task("scratchpad").sft_lr,
            max_train_seconds=self.seconds,
            eval_every_seconds=self.eval_every_seconds,
            lr_grid=(self.learning_rate,),
            seeds=max(self.seeds_main, self.seeds_other),
            pool_size=max(self.easy_train, 1),
            eval_size=self.easy_eval,
        )


#: ``--quick``: every code path, small sets, 1-2 seeds (<= 5 minutes on 2 shared cores).
QUICK: dict[str, Any] = dict(
    hard_train=12,
    hard_eval=12,
    easy_train=12,
    easy_eval=12,
    margin=1,
    seconds=6.0,
    eval_every_seconds=3.0,
    seeds_main=2,
    seeds_other=1,
    check_rows=12,
)


def seeds_of(cfg: ZeroPassConfig, set_name: str, arm: str) -> int:
    """``seeds_main`` for A*-PO and GRPO on the sets holding hard prompts, else
    ``seeds_other``."""
    main = set_name in ("hard", "mixed") and arm in ("astarpo", "grpo")
    return cfg.seeds_main if main else cfg.seeds_other


def pass_bounds(k: int, n_prompts: int, level: float = 0.95) -> dict[str, float]:
    """One-sided upper bounds after 0 successes in ``k`` draws of each of ``n_prompts``.

    Returns:
        ``per_prompt``: :math:`1 - (1 - level)^{1/k}` (Clopper-Pearson, one prompt);
        ``mean``: :math:`1 - (1 - level)^{1/(k M)}`, a bound on the mean solve rate of the M
        prompts (the chance of no success is at most :math:`(1 - \\bar p)^{kM}`).
    """
    alpha = 1.0 - level
    return {
        "per_prompt": 1.0 - alpha ** (1.0 / k),
        "mean": 1.0 - alpha ** (1.0 / (k * n_prompts)),
    }


def reference(bench: BenchConfig, out: Path) -> tuple[Any, dict[str, Any]]:
    """The scratchpad task's reference, as the efficiency benchmark makes it (same cache key),
    saved with its tokenizer to ``out/reference``. Returns ``(model, sft info)``."""
    tokenizer = make_char_tokenizer()
    rows = splits(bench)
    model = make_toy_model(
        tokenizer, seed=REF_SEED, **{**get_task(bench.task).model, **bench.model_overrides}
    )
    sft_cfg = SFTConfig(
        bench.sft_steps, REF_SFT_BATCH, bench.sft_lr, target_accuracy=bench.reference_target
    )
    model, info = cached_sft(
        model, tokenizer, rows["sft"], sft_cfg, bench.cache_dir, False, check_rows=rows["check"]
    )
    model.save_pretrained(out / "reference")
    tokenizer.save_pretrained(out / "reference")
    return model.eval(), info


def build_hard_set(
    ref: Any, cfg: ZeroPassConfig, out: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Draw the hard candidates, sample k reference responses each, keep the all-wrong ones.

    Returns:
        ``(train, held_out, info)``; ``info`` has the candidates, the prompts solved at least
        once (left out), the successes, :func:`pass_bounds`, the seconds and the exact gold
        probability under the reference (max, median log10) of the kept prompts.

    Raises:
        RuntimeError: fewer than ``hard_train + hard_eval`` candidates are all wrong.
    """
    tok = make_char_tokenizer()
    n = cfg.hard_train + cfg.hard_eval + cfg.margin
    rows = scratchpad_task(n, seed=HARD_SEED, digits=cfg.hard_digits)
    check = dataclasses.replace(
        cfg.bench(), n_samples=cfg.k, generation_batch_size=max(cfg.k, 1024)
    )
    path = out / "hard_pass64.jsonl"
    if cfg.workers == 1 or n * cfg.k < SHARD_DRAWS:
        table, seconds = stage1(ref, tok, rows, check, path, seed=HARD_SEED)
    else:  # shards of the library's Stage 1, one per worker, merged
        t0 = time.perf_counter()
        path.unlink(missing_ok=True)
        spec = {"reference": str(out / "reference"), "config": dataclasses.asdict(check)}
        specs = [{**spec, "rows": rows, "path": str(path), "shard": [i, cfg.workers]}
                 for i in range(cfg.workers)]  # fmt: skip
        with ProcessPoolExecutor(cfg.workers, mp_context=get_context("spawn")) as pool:
            list(pool.map(pass_shard, specs))
        table = merge_shards(path, cfg.workers, rows)
        seconds = time.perf_counter() - t0
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
    info = {
        "digits": cfg.hard_digits,
        "sft_digits": SCRATCHPAD_DIGITS,
        "candidates": n,
        "solved_at_least_once": n - sum(rate[r["prompt"]] == 0 for r in rows),
        "successes": int(sum(sum(x > 0 for x in r.rewards) for r in table)),
        "k": cfg.k,
        "draws": n * cfg.k,
        "seconds": seconds,
        "upper95": pass_bounds(cfg.k, need),
        "gold_log10_max": float(gold.max()),
        "gold_log10_median": float(np.median(gold)),
    }
    return kept[: cfg.hard_train], kept[cfg.hard_train :], info


def pass_shard(spec: dict[str, Any]) -> None:
    """Shard ``spec["shard"] = [i, k]`` of the hard candidates' k-sample check, in a worker
    process: the library's Stage 1 (:func:`~astarpo.llm.stage1.estimate.estimate_values`) with
    the reference of ``spec["reference"]`` and the settings of ``spec["config"]``.

    Raises:
        ValueError: ``spec["reference"]`` or ``spec["path"]`` is relative.
    """
    check_spec_paths(spec, ("reference", "path"))
    cfg = config_from_dict(spec["config"])
    torch.set_num_threads(cfg.threads)
    ref = load_pretrained_model(spec["reference"]).eval()
    estimate_values(
        HFGenerator(ref, make_char_tokenizer(), cfg.generation_batch_size),
        spec["rows"],
        [get_task(cfg.task).reward],
        cfg.stage1_config(HARD_SEED),
        out_path=spec["path"],
        shard=(int(spec["shard"][0]), int(spec["shard"][1])),
    )
