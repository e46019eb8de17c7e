"""One run of the efficiency study in its own process (:func:`run_one`), so that its peak
memory is that run's alone: the library's trainer, or a peer's
(:func:`~experiments.efficiency.peers.run_peer`), on the study's clock, evaluations outside
it; an A*-PO run with ``stage1_inside`` runs Stage 1 first, timed, inside its budget, and one
with ``stream_stage1`` estimates V* of each prompt when first drawn, inside its training time."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from astarpo.llm import StreamConfig, StreamedStage1, ValueTable, get_task, peak_memory
from experiments.efficiency.config import PEER_ARMS, EfficiencyConfig, stage2_seconds
from experiments.efficiency.peers import import_peer, run_peer
from experiments.harness.measure import PeakRSS, evaluate_policy, timed_stage1
from experiments.harness.protocol import DROP_ARM, PAPER_SHAPE, algorithm_config, arm_algorithm
from experiments.harness.training import drop_all_wrong, load_run, train_run

__all__ = ["run_one"]


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run.

    Args:
        spec: ``arm`` (an algorithm, ``astarpo_drop``, a run of
            :data:`~experiments.harness.protocol.STAGE1_ARMS` or a peer run), ``seed``, ``lr``,
            ``seconds`` (its budget; on the paper protocol ``steps``), ``stage1_inside`` (else
            the table ``values``), optionally ``stream_stage1`` (A*-PO: Stage 1 streamed, no
            table; ignored by the other algorithms), ``config`` (an :class:`EfficiencyConfig`
            as a dict), ``reference`` (model folder), ``train`` and ``eval`` (rows), ``hard``
            (per eval row) and ``out`` (the run's folder).

    Returns:
        ``arm``, ``algo``, ``seed``, ``lr``, ``backend``, the fields of
        :func:`~experiments.harness.training.train_run` (evaluations with ``cpu_time``),
        ``pool_all_wrong``, ``stage1_samples`` (responses its own Stage 1 drew, 0 without;
        not for a peer run), ``prompts`` (seen), ``memory``, and the run's two clocks of Stage 1
        and training (evaluation excluded): ``wall_seconds`` (its ``clock_s``) and
        ``cpu_seconds`` (the process CPU time, the last evaluation's ``cpu_time``).
    """
    cfg, tokenizer, ref, policy = load_run(spec, EfficiencyConfig)
    arm, device = spec["arm"], ref.device
    if peer := any(arm in names for names in PEER_ARMS.values()):
        import_peer(arm)
    # the peak's start (models loaded, no training state yet) is its floor: peak >= start
    rss, cpu0, eval_cpu = PeakRSS(), time.process_time(), [0.0]

    def eval_fn(model: Any) -> dict[str, float]:
        c0 = time.process_time()
        rss.paused = True  # evaluation is the same for every run: not in the peak
        res = evaluate_policy(model, ref, tokenizer, spec["eval"], cfg, 7919, spec["hard"])
        rss.paused = False
        eval_cpu[0] += time.process_time() - c0
        return {**res, "cpu_time": time.process_time() - cpu0 - eval_cpu[0]}

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with rss:
        if peer:
            fields = {**run_peer(spec, cfg, policy, tokenizer, eval_fn), "pool_all_wrong": None}
        else:
            fields = _own_run(spec, cfg, policy, ref, tokenizer, eval_fn)
    memory = {"rss_before_train_mb": rss.start_mb, "rss_peak_mb": rss.peak_mb}
    memory["ru_maxrss_mb"] = peak_memory(device)["memory/rss_peak_mb"]
    if device.type == "cuda":
        memory["cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return {
        "arm": arm,
        "algo": arm_algorithm(arm),
        "seed": int(spec["seed"]),
        "lr": float(spec["lr"]),
        "backend": cfg.train.backend,
        **fields,
        "prompts": fields["steps"] * cfg.train.batch_size,
        "memory": memory,
        "wall_seconds": fields["clock_s"],
        "cpu_seconds": fields["evals"][-1]["cpu_time"],
    }


def _own_run(
    spec: dict[str, Any], cfg: EfficiencyConfig, policy: Any, ref: Any, tokenizer: Any, eval_fn: Any
) -> dict[str, Any]:
    """A run of the library's trainer (A*-PO with its Stage 1, a baseline)."""
    arm, seed, out = spec["arm"], int(spec["seed"]), Path(spec["out"])
    rows, table, stage1_s, all_wrong, drawn = spec["train"], None, 0.0, None, 0
    stream = bool(spec.get("stream_stage1")) and arm_algorithm(arm) == "astarpo"
    if stream and arm != "astarpo":
        raise ValueError(f"stream_stage1 is for the plain A*-PO run, not {arm}.")
    if arm_algorithm(arm) == "astarpo" and not stream:
        if spec["stage1_inside"]:
            path = out / "values.jsonl"
            table, stage1_s = timed_stage1(ref, tokenizer, rows, cfg, path, seed, arm=arm)
        else:
            table = ValueTable.load(spec["values"])
        all_wrong = sum(r.pass_rate == 0 for r in table)
        drawn = sum(len(r.rewards) for r in table) if spec["stage1_inside"] else 0
        if arm == DROP_ARM:
            table, rows = drop_all_wrong(table, rows)
            if not rows:
                raise RuntimeError(f"{DROP_ARM}: every prompt is all wrong in Stage 1; no pool.")
    if cfg.protocol == "paper":  # equal steps, no time limit, the paper's shape
        args = algorithm_config(arm, cfg, seed, out, float(spec["lr"]), 0.0)
        steps, every = int(spec["steps"]), cfg.train.eval_steps
        args = replace(args, max_steps=steps, eval_steps=every, eval_every_seconds=0.0)
        args = replace(args, **PAPER_SHAPE)
    else:
        seconds = stage2_seconds(arm, float(spec["seconds"]), stage1_s)
        args = algorithm_config(arm, cfg, seed, out, float(spec["lr"]), seconds)
    extensions = []
    if stream:  # Stage 1 of each prompt when first drawn, in the training clock
        stream = StreamConfig(n_samples=cfg.stage1.n_samples, beta1=cfg.stage1.beta1)
        extensions.append(StreamedStage1(stream))
    rewards = [get_task(cfg.task).reward]
    fields = train_run(
        policy, ref, tokenizer, rewards, args, rows, table, eval_fn, stage1_s, extensions
    )
    if stream:
        drawn = fields["stage1_streamed"]["samples"]
    return {**fields, "pool_all_wrong": all_wrong, "stage1_samples": drawn}
