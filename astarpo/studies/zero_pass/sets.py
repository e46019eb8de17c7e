r"""The zero-pass study's hard set: scratchpad problems with one more operand digit than any
SFT example, kept when all ``k`` reference samples (the library's Stage 1 with N = k, in shards
of one fresh process each from :data:`SHARD_DRAWS` draws on) are wrong; the one-sided 95% upper
bound of such a prompt's solve rate is :math:`1 - 0.05^{1/k}` (:func:`pass_bounds`).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.shards import merge_shards
from astarpo.llm.toy.problems import scratchpad_task
from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task
from astarpo.studies.harness.measure import gold_logprobs, timed_stage1
from astarpo.studies.harness.protocol import Protocol, config_from_dict
from astarpo.studies.harness.runner import Runner
from astarpo.studies.zero_pass.config import ZeroPassConfig

__all__ = ["HARD_SEED", "SHARD_DRAWS", "build_hard_set", "pass_bounds", "pass_shard"]

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
    """Draw the hard candidates, sample ``k`` reference responses each, keep the all-wrong ones.

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
    check = replace(cfg.protocol(), n_samples=cfg.k, generation_batch_size=max(cfg.k, 1024))
    path = out / "hard_pass64.jsonl"
    if cfg.workers == 1 or n * cfg.k < SHARD_DRAWS:
        table, seconds = timed_stage1(ref, tok, rows, check, path, seed=HARD_SEED)
    else:  # shards of the library's Stage 1, one process each, merged
        t0 = time.perf_counter()
        path.unlink(missing_ok=True)
        entry = "astarpo.studies.zero_pass.sets:pass_shard"
        spec: dict[str, Any] = {"entry": entry, "config": asdict(check)}
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
    info: dict[str, Any] = {
        "digits": cfg.hard_digits,
        "sft_digits": SCRATCHPAD_DIGITS,
        "candidates": n,
    }
    info["solved_at_least_once"] = n - sum(rate[r["prompt"]] == 0 for r in rows)
    info["successes"] = int(sum(sum(x > 0 for x in r.rewards) for r in table))
    info.update(k=cfg.k, draws=n * cfg.k, seconds=seconds, upper95=pass_bounds(cfg.k, need))
    info.update(gold_log10_max=float(gold.max()), gold_log10_median=float(np.median(gold)))
    return kept[: cfg.hard_train], kept[cfg.hard_train :], info


def pass_shard(spec: dict[str, Any]) -> dict[str, Any]:
    """Shard ``spec["shard"] = [i, k]`` of the hard check in a run's process: Stage 1 of
    ``spec["reference"]`` under ``spec["config"]`` into ``spec["path"]``'s part file.
    Returns ``{"rows": the shard's prompt count}``."""
    cfg: Protocol = config_from_dict(Protocol, spec["config"])
    torch.set_num_threads(cfg.threads)
    ref = load_pretrained_model(spec["reference"]).eval()
    gen = HFGenerator(ref, make_char_tokenizer(), cfg.generation_batch_size)
    shard = (int(spec["shard"][0]), int(spec["shard"][1]))
    reward, stage1 = [get_task(cfg.task).reward], cfg.stage1_config(HARD_SEED)
    table = estimate_values(gen, spec["rows"], reward, stage1, out_path=spec["path"], shard=shard)
    return {"rows": len(table)}
