"""The runs of a benchmark (:func:`~astarpo.llm.bench.run.run_bench`): each in a fresh process.

* :class:`Runner`: starts one run (:mod:`astarpo.llm.bench.worker`) in its own process and
  collects its result;
* :func:`sweep`: the learning-rate sweep, extended beyond an edge of the grid when the choice
  is that edge;
* :func:`seed_runs`: every run of every seed at its chosen rate, the order rotated per seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import astarpo
from astarpo.llm.bench.config import BenchConfig, peer_arms
from astarpo.llm.bench.manifest import record
from astarpo.llm.bench.stats import curve_area, extend_grid, select_lr
from astarpo.llm.bench.worker import SPEC_PATHS

__all__ = ["Runner", "seed_runs", "sweep", "sweep_score"]


class Runner:
    """Starts runs of one benchmark, each in a fresh process, and collects their results.

    Every path a run's spec holds (the protocol's ``out_dir`` and ``cache_dir``, the
    reference, the run directory, a V* table) is written absolute: the worker starts in its run
    directory, where a relative path would name nothing.

    Args:
        cfg: The protocol.
        reference: Directory of the reference model.
        train: The training pool (rows).
        say: Progress printer.
    """

    def __init__(self, cfg: BenchConfig, reference: Path, train: list[dict[str, Any]], say: Any):
        self.cfg, self.reference, self.train, self.say = cfg.resolved(), reference, train, say
        src = str(Path(astarpo.__file__).resolve().parents[1])  # the same astarpo in workers
        self.env = {
            **os.environ,
            "OMP_NUM_THREADS": str(cfg.threads),
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
        }

    def run(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Run ``spec`` (see :func:`~astarpo.llm.bench.worker.run_one`; ``config``,
        ``reference``, ``train`` and ``out`` are filled in) under ``out_dir/runs/name``."""
        run_dir = Path(self.cfg.out_dir) / "runs" / name
        record(Path(self.cfg.out_dir), f"runs/{name}")
        run_dir.mkdir(parents=True, exist_ok=True)
        full = {
            "config": asdict(self.cfg),
            "reference": str(self.reference),
            "train": self.train,
            "out": str(run_dir),
            **spec,
        }
        for key in SPEC_PATHS:  # the worker runs in run_dir: a relative path would not resolve
            if full.get(key) is not None:
                full[key] = str(Path(full[key]).resolve())
        (run_dir / "spec.json").write_text(json.dumps(full))
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "astarpo.llm.bench.worker", "spec.json", "result.json"]
        done = subprocess.run(cmd, env=self.env, cwd=run_dir)
        if done.returncode != 0:
            raise RuntimeError(
                f"bench run {name} failed (exit code {done.returncode}); its traceback is "
                f"above and its spec and files are in {run_dir}."
            )
        res: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
        last = res["evals"][-1]
        self.say(
            f"[bench] {name}: lr {res['lr']:g}, {res['steps']} steps, clock {res['clock_s']:.1f}s "
            f"(Stage 1 {res['stage1_s']:.1f}s), expected acc {last['expected_accuracy']:.3f}, "
            f"greedy {last['accuracy']:.3f}, kl {last['kl']:.3f} "
            f"({time.perf_counter() - t0:.0f}s with evals and start-up)"
        )
        return res


def sweep_score(
    runner: Runner, algo: str, lr: float, val: list[dict[str, Any]], values: Path
) -> float:
    """One sweep run of ``algo`` at ``lr`` (Stage 1 reused, the validation split): its score
    (:func:`~astarpo.llm.bench.stats.curve_area` of the expected accuracy)."""
    cfg = runner.cfg
    spec = {
        "arm": algo,
        "seed": cfg.sweep_seed,
        "lr": lr,
        "seconds": cfg.sweep_seconds,
        "stage1_inside": False,
        "values": str(values),
        "eval": val,
        "hard": None,
    }
    ev = runner.run(f"sweep-{algo}-lr{lr:g}", spec)["evals"]
    curve = ([e["time"] for e in ev], [e["expected_accuracy"] for e in ev])
    return curve_area(*curve, cfg.sweep_seconds)


def sweep(runner: Runner, val: list[dict[str, Any]], values: Path) -> dict[str, Any]:
    """The learning-rate sweep (step 4 of :func:`~astarpo.llm.bench.run.run_bench`):
    ``{algo: {"scores": {lr: score}, "chosen": lr, "extended": [lr added]}}``; with one
    learning rate in the grid, that one, unscored. A choice at an edge of the rates tried
    adds the next rate beyond it (:func:`~astarpo.llm.bench.stats.extend_grid`), up to
    ``grid_extensions`` times. The peer runs (:func:`~astarpo.llm.bench.config.peer_arms`)
    are swept like the algorithms."""
    cfg = runner.cfg
    result: dict[str, Any] = {}
    for algo in (*cfg.algos, *peer_arms(cfg)):
        scores: dict[float, float] = {}
        added: list[float] = []
        if cfg.sweep:
            for lr in cfg.lr_grid:
                scores[lr] = sweep_score(runner, algo, lr, val, values)
            while len(added) < cfg.grid_extensions:
                more = extend_grid(scores)
                if more is None or more in scores:
                    break
                runner.say(
                    f"[bench] {algo}: the chosen rate is an edge of the grid; trying {more:g}"
                )
                scores[more] = sweep_score(runner, algo, more, val, values)
                added.append(more)
        chosen = select_lr(scores) if scores else cfg.lr_grid[0]
        result[algo] = {
            "scores": {str(k): v for k, v in sorted(scores.items())},
            "chosen": chosen,
            "extended": added,
        }
    return result


def seed_runs(
    runner: Runner,
    names: tuple[str, ...],
    lrs: dict[str, Any],
    held_out: list[dict[str, str]],
    hard: list[bool],
    prefix: str = "",
) -> list[dict[str, Any]]:
    """Every run of ``names`` for every seed (step 5 of
    :func:`~astarpo.llm.bench.run.run_bench`), each at its chosen learning rate with Stage 1
    inside the budget; the order rotates per seed so that slow phases of a shared machine hit
    every run."""
    cfg, out = runner.cfg, []
    for seed in range(cfg.seeds):
        for arm in names[seed % len(names) :] + names[: seed % len(names)]:
            spec = {
                "arm": arm,
                "seed": seed,
                "lr": lrs[arm]["chosen"],
                "seconds": cfg.max_train_seconds,
                "stage1_inside": True,
                "eval": held_out,
                "hard": hard,
            }
            out.append(runner.run(f"{prefix}{arm}-seed{seed}", spec))
    return out
