"""One run of the efficiency study, in its own process (the harness worker calls
:func:`run_one`), so that its peak memory is that run's alone.

A run is the library's own loop (:func:`~astarpo.studies.harness.training.train_run`; a peer
run, e.g. ``trl_grpo``, is another library's trainer under the same clock,
:func:`~astarpo.studies.efficiency.peers.run_peer`) with the wall-clock budget
``max_train_seconds`` and evaluations every ``eval_every_seconds`` of training time (not counted
in the clock). For A*-PO with ``stage1_inside``, Stage 1 (N reference samples per training
prompt) runs first, timed, and the trainer gets what is left of the budget: the run's clock is
Stage 1 plus Stage 2.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.metrics import peak_memory
from astarpo.studies.efficiency.config import EfficiencyConfig, is_peer_arm
from astarpo.studies.efficiency.peers import import_peer, run_peer
from astarpo.studies.harness.measure import PeakRSS, evaluate_policy, timed_stage1
from astarpo.studies.harness.protocol import (
    DROP_ARM,
    algorithm_config,
    arm_algorithm,
    config_from_dict,
)
from astarpo.studies.harness.training import drop_all_wrong, train_run

__all__ = ["run_one"]


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run (see the module doc).

    Args:
        spec: ``arm`` (an algorithm, ``astarpo_drop`` or a peer run), ``seed``, ``lr``,
            ``seconds`` (the run's budget), ``stage1_inside`` (A*-PO: run Stage 1 inside the
            budget; else read ``values``), ``config`` (an :class:`EfficiencyConfig` as a dict),
            ``reference`` (model folder), ``train`` and ``eval`` (rows), ``hard`` (one bool per
            eval row: the reference's pass@N is 0) and ``out`` (the run's folder).

    Returns:
        ``arm``, ``algo``, ``seed``, ``lr``, ``backend``, the fields of
        :func:`~astarpo.studies.harness.training.train_run` (each evaluation also with
        ``cpu_time`` and the metrics of :func:`~astarpo.studies.harness.measure.evaluate_policy`),
        ``pool_all_wrong``, ``prompts`` (seen) and ``memory``.
    """
    cfg: EfficiencyConfig = config_from_dict(EfficiencyConfig, spec["config"])
    torch.set_num_threads(cfg.threads)
    arm, device = spec["arm"], resolve_device(cfg.device)
    tokenizer = make_char_tokenizer()
    ref: Any = load_pretrained_model(spec["reference"]).to(device).eval()
    policy = copy.deepcopy(ref).train()
    if is_peer_arm(arm):
        import_peer(arm)
    rss_before = PeakRSS.current_mb()  # models loaded, no training state yet
    rss, cpu0, eval_cpu = PeakRSS(), time.process_time(), [0.0]

    def eval_fn(model: Any) -> dict[str, float]:
        c0 = time.process_time()
        rss.paused = True  # evaluation is the same for every run: not in the peak
        res = evaluate_policy(model, ref, tokenizer, spec["eval"], cfg, 7919, spec["hard"])
        rss.paused = False
        eval_cpu[0] += time.process_time() - c0
        res["cpu_time"] = time.process_time() - cpu0 - eval_cpu[0]
        return res

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with rss:
        if is_peer_arm(arm):
            fields = {**run_peer(spec, cfg, policy, tokenizer, eval_fn), "pool_all_wrong": None}
        else:
            fields = _own_run(spec, cfg, policy, ref, tokenizer, eval_fn)
    memory = {
        "rss_before_train_mb": rss_before,
        "rss_peak_mb": rss.peak_mb,
        "ru_maxrss_mb": peak_memory(device)["memory/rss_peak_mb"],
    }
    if device.type == "cuda":
        memory["cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return {
        "arm": arm,
        "algo": arm_algorithm(arm),
        "seed": int(spec["seed"]),
        "lr": float(spec["lr"]),
        "backend": cfg.backend,
        **fields,
        "prompts": fields["steps"] * cfg.batch_size,
        "memory": memory,
    }


def _own_run(
    spec: dict[str, Any], cfg: EfficiencyConfig, policy: Any, ref: Any, tokenizer: Any, eval_fn: Any
) -> dict[str, Any]:
    """A run of the library's trainer (A*-PO with its Stage 1, a baseline)."""
    arm, seed = spec["arm"], int(spec["seed"])
    rows: list[dict[str, Any]] = spec["train"]
    stage1_s, table, all_wrong = 0.0, None, None
    if arm_algorithm(arm) == "astarpo":
        if spec["stage1_inside"]:
            path = Path(spec["out"]) / "values.jsonl"
            table, stage1_s = timed_stage1(ref, tokenizer, rows, cfg, path, seed)
        else:
            table = ValueTable.load(spec["values"])
        all_wrong = sum(r.pass_rate == 0 for r in table)
        if arm == DROP_ARM:
            table, rows = drop_all_wrong(table, rows)
            if not rows:
                raise RuntimeError(f"{DROP_ARM}: every prompt is all wrong in Stage 1; no pool.")
    seconds = float(spec["seconds"]) - stage1_s
    if seconds <= 0:
        raise RuntimeError(
            f"{arm}: Stage 1 took {stage1_s:.1f} s of a {spec['seconds']} s budget; raise "
            "max_train_seconds or lower pool_size."
        )
    args = algorithm_config(arm, cfg, seed, Path(spec["out"]), float(spec["lr"]), seconds)
    rewards = [get_task(cfg.task).reward]
    fields = train_run(policy, ref, tokenizer, rewards, args, rows, table, eval_fn, stage1_s)
    return {**fields, "pool_all_wrong": all_wrong}
