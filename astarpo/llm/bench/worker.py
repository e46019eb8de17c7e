"""One run of the efficiency benchmark, in its own process (``python -m astarpo.llm.bench.worker
SPEC OUT``), so that its peak memory is that run's alone.

A run is the library's own loop (a peer run, e.g. ``trl_grpo``, is another library's trainer
under the same clock, :func:`~astarpo.llm.bench.peers.run_peer`):
:class:`~astarpo.llm.training.trainer.Trainer` with the wall-clock budget
``max_train_seconds``, evaluation every ``eval_every_seconds`` of training time (not counted in
the clock) and a :class:`Recorder` callback. For A*-PO with
``stage1_inside``, Stage 1 (N reference samples per training prompt) runs first, timed, and the
trainer gets what is left of the budget: the run's clock is Stage 1 plus Stage 2.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.bench.config import (
    DROP_ARM,
    BenchConfig,
    algorithm_config,
    arm_algorithm,
    is_peer_arm,
)
from astarpo.llm.bench.measure import PeakRSS, evaluate_policy
from astarpo.llm.bench.peers import import_peer, run_peer
from astarpo.llm.models.loading import load_pretrained_model
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.parallel.dist import resolve_device
from astarpo.llm.rollout.backend import build_generator
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.toy.tasks import get_task
from astarpo.llm.training.metrics import peak_memory
from astarpo.llm.training.trainer import Trainer

__all__ = [
    "PHASES",
    "SPEC_PATHS",
    "Recorder",
    "check_spec_paths",
    "config_from_dict",
    "run_one",
    "stage1",
]

#: Per-step phase timers of the trainer summed into a run's ``phases``.
PHASES = ("generate", "reward", "ref_logprobs", "update")

#: The entries of a run spec that are paths: absolute, since a worker runs in its run directory.
SPEC_PATHS = ("reference", "out", "values")


def check_spec_paths(spec: dict[str, Any], keys: tuple[str, ...] = SPEC_PATHS) -> None:
    """Refuse a run spec whose path entries (``keys``, where present) are relative.

    A worker starts in its run directory, where a relative path no longer names the file the
    parent meant, and a reference model path that names no directory would be taken for a hub
    id (``transformers`` would contact the hub and fail there, after the run's set-up).

    Raises:
        ValueError: naming each relative entry and the fix.
    """
    relative = [
        f"{key}={spec[key]!r}"
        for key in keys
        if spec.get(key) is not None and not Path(spec[key]).is_absolute()
    ]
    if relative:
        raise ValueError(
            f"run spec: relative paths {', '.join(relative)}; a worker runs in its own run "
            "directory, where they do not resolve. Write absolute paths into the spec "
            "(BenchConfig.resolved() and Path.resolve() give them)."
        )


def config_from_dict(d: dict[str, Any]) -> BenchConfig:
    """A :class:`BenchConfig` back from ``dataclasses.asdict`` / JSON (tuples restored)."""
    tuples = ("algos", "lr_grid", "target_fractions", "peers")
    values: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in d.items()}
    return BenchConfig(**values)


def stage1(
    ref: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    cfg: BenchConfig,
    path: Path,
    seed: int,
    drop: bool = False,
) -> tuple[ValueTable, float]:
    """Stage 1 of A*-PO on ``rows`` from scratch (``path`` is overwritten), timed, on the
    generation backend ``cfg.backend`` (a vLLM engine is started from ``ref`` under
    ``path.parent``; its start-up is inside the time, as a run pays it).

    Returns:
        ``(table, seconds)``; with ``drop`` the table leaves out the all-wrong prompts.
    """
    path.unlink(missing_ok=True)
    device = next(ref.parameters()).device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    generator = build_generator(
        cfg.backend,
        ref,
        tokenizer,
        batch_size=cfg.generation_batch_size,
        seed=seed,
        workdir=path.parent / f"vllm_{path.stem}",
    )
    table = estimate_values(
        generator,
        rows,
        [get_task(cfg.task).reward],
        cfg.stage1_config(seed, filter_all_wrong=drop),
        out_path=path,
    )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return table, time.perf_counter() - t0


class Recorder:
    """Trainer callback: keeps the evaluations and sums the per-step phase times and steps."""

    def __init__(self) -> None:
        self.evals: list[dict[str, Any]] = []
        self.phases = dict.fromkeys(PHASES, 0.0)
        self.steps = 0
        self.response_tokens = 0.0  # sum over steps of the mean response length

    def on_step_end(self, record: dict[str, Any]) -> bool:
        """Add the step's phase times; never stops (the budget does)."""
        self.steps += 1
        self.response_tokens += float(record.get("response_length/mean", 0.0))
        for k in PHASES:
            self.phases[k] += float(record.get(f"time/{k}", 0.0))
        return False

    def on_evaluate(self, record: dict[str, Any]) -> None:
        """Keep the evaluation (``eval/`` keys without the prefix, ``stage2_time``)."""
        rec = {k[5:]: v for k, v in record.items() if k.startswith("eval/")}
        rec["step"] = record["step"]
        rec["stage2_time"] = record["time/train_total"]
        self.evals.append(rec)


def _values(
    spec: dict[str, Any], cfg: BenchConfig, ref: Any, tokenizer: Any
) -> tuple[ValueTable, float, int]:
    """A*-PO's V* table: Stage 1 run here (timed) or read; ``astarpo_drop`` keeps the prompts
    with a pass rate above 0. Returns ``(table, stage1 seconds, all-wrong prompts)``."""
    stage1_s = 0.0
    if spec["stage1_inside"]:
        path = Path(spec["out"]) / "values.jsonl"
        table, stage1_s = stage1(ref, tokenizer, spec["train"], cfg, path, int(spec["seed"]))
    else:
        table = ValueTable.load(spec["values"])
    all_wrong = sum(r.pass_rate == 0 for r in table)
    if spec["arm"] == DROP_ARM:
        table = ValueTable([r for r in table if r.pass_rate > 0])
        if not len(table):
            raise RuntimeError(f"{DROP_ARM}: every prompt is all wrong in Stage 1; no pool left.")
    return table, stage1_s, all_wrong


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One run (see the module doc).

    Args:
        spec: ``arm`` (an algorithm, ``astarpo_drop`` or a peer run), ``seed``, ``lr``,
            ``seconds`` (the run's budget), ``stage1_inside`` (A*-PO: run Stage 1 inside the
            budget; else read ``values``), ``config`` (a :class:`BenchConfig` as a dict),
            ``reference`` (model directory), ``train`` and ``eval`` (rows), ``hard`` (one bool
            per eval row: the reference's pass@N is 0) and ``out`` (run directory); the
            paths (:data:`SPEC_PATHS`) absolute.

    Returns:
        ``arm``, ``seed``, ``lr``, ``evals`` (each with ``time`` = the run's clock: Stage 1 +
        Stage 2 training time, ``stage2_time``, ``cpu_time``, the metrics of
        :func:`~astarpo.llm.bench.measure.evaluate_policy`), ``stage1_s``, ``train_s``
        (Stage 2), ``clock_s``, ``steps``, ``prompts`` (seen), ``pool``, ``pool_all_wrong``,
        ``samples_per_prompt``, ``phases``, ``response_tokens_mean`` (mean over steps of
        the training responses' mean length), ``backend`` and ``memory``.

    Raises:
        ValueError: a path of the spec is relative (:func:`check_spec_paths`), before any
            model is loaded.
    """
    check_spec_paths(spec)
    cfg = config_from_dict(spec["config"])
    torch.set_num_threads(cfg.threads)
    arm, seed = spec["arm"], int(spec["seed"])
    device = resolve_device(cfg.device)
    tokenizer = make_char_tokenizer()
    ref: Any = load_pretrained_model(spec["reference"])
    ref = ref.to(device).eval()
    policy = copy.deepcopy(ref).train()
    if is_peer_arm(arm):
        import_peer(arm)
    rss_before = PeakRSS.current_mb()  # models loaded, no training state yet
    rss, cpu0 = PeakRSS(), time.process_time()
    eval_cpu = [0.0]

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
            fields = run_peer(spec, cfg, policy, tokenizer, eval_fn)
            fields["pool_all_wrong"] = None
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
        "seed": seed,
        "lr": float(spec["lr"]),
        "backend": cfg.backend,
        **fields,
        "prompts": fields["steps"] * cfg.batch_size,
        "memory": memory,
    }


def _own_run(
    spec: dict[str, Any], cfg: BenchConfig, policy: Any, ref: Any, tokenizer: Any, eval_fn: Any
) -> dict[str, Any]:
    """A run of the library's trainer (A*-PO with its Stage 1, a baseline): the fields of
    :func:`run_one`'s result that depend on the trainer."""
    arm, seed, out = spec["arm"], int(spec["seed"]), Path(spec["out"])
    rows: list[dict[str, Any]] = spec["train"]
    stage1_s, table, pool_all_wrong = 0.0, None, None
    if arm_algorithm(arm) == "astarpo":
        table, stage1_s, pool_all_wrong = _values(spec, cfg, ref, tokenizer)
        keys = {r.prompt for r in table}
        rows = [r for r in rows if r["prompt"] in keys]
    seconds = float(spec["seconds"]) - stage1_s
    if seconds <= 0:
        raise RuntimeError(
            f"{arm}: Stage 1 took {stage1_s:.1f} s of a {spec['seconds']} s budget; raise "
            "max_train_seconds or lower pool_size."
        )
    args = algorithm_config(arm, cfg, seed, out, float(spec["lr"]), seconds)
    recorder = Recorder()
    trainer = Trainer(
        policy,
        ref,
        [get_task(cfg.task).reward],
        args=args,
        train_dataset=rows,
        v_star_table=table,
        tokenizer=tokenizer,
        eval_fn=eval_fn,
        callbacks=[recorder],
    )
    trainer.train()
    for e in recorder.evals:
        e["time"] = stage1_s + e["stage2_time"]
    return {
        "evals": recorder.evals,
        "stage1_s": stage1_s,
        "train_s": trainer.train_time,
        "clock_s": stage1_s + trainer.train_time,
        "steps": recorder.steps,
        "pool": len(rows),
        "pool_all_wrong": pool_all_wrong,
        "samples_per_prompt": trainer.algorithm.samples_per_prompt,
        "phases": {"stage1": stage1_s, **recorder.phases},
        "response_tokens_mean": recorder.response_tokens / max(recorder.steps, 1),
    }


def _main(argv: list[str]) -> int:
    spec_path, out_path = argv
    result = run_one(json.loads(Path(spec_path).read_text()))
    Path(out_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
