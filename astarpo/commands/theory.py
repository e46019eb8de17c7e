"""``astarpo theory {NAME,all} --out DIR [--seeds K] [--quick]``; NAME is one of :data:`NAMES`.

One experiment writes ``DIR/results.json`` (every number, the config, the seeds, the package
version and the runtime) and ``DIR/<name>.png``. ``all`` writes each experiment into
``DIR/<name>/`` (``DIR/horizon/results.json``, ``DIR/horizon/horizon.png``, ...) and a summary
``DIR/results.json`` (runtimes, the fitted slopes and where each result lies).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from astarpo.commands.paths import check_output
from astarpo.theory.experiments import EXPERIMENTS

#: The experiments' names, in the order ``all`` runs them (those of the registry).
NAMES = tuple(EXPERIMENTS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``astarpo theory``."""
    parser.add_argument("name", choices=[*NAMES, "all"], help="the experiment to run")
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--seeds", type=int, default=None, help="number of seeds K (default 8, or 4 with --quick)"
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument(
        "--quick", action="store_true", help="small version (under a minute on 2 cores)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: the tensors are small and extra threads only add "
        "synchronisation overhead, 10x slower on a loaded 2-core machine)",
    )


def run_one(
    name: str, out: Path, seeds: int, quick: bool, seed: int = 0, progress: bool = False
) -> dict[str, Any]:
    """Run experiment ``name`` and write ``out/results.json`` and ``out/<name>.png``."""
    start = time.perf_counter()
    res = EXPERIMENTS[name].run(seeds=seeds, quick=quick, seed=seed, progress_bar=progress)
    res["runtime_s"] = round(time.perf_counter() - start, 2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, allow_nan=False) + "\n")
    EXPERIMENTS[name].plot(res, out / f"{name}.png")
    return res


def _summary(res: dict[str, Any]) -> dict[str, Any]:
    return {"runtime_s": res["runtime_s"], "headline": res.get("headline", {})}


def run(args: argparse.Namespace) -> int:
    """Run the experiment(s); returns the exit code."""
    seeds = args.seeds if args.seeds is not None else (4 if args.quick else 8)
    if seeds < 2:
        print("--seeds must be >= 2 (the 95% intervals need two seeds).", file=sys.stderr)
        return 2
    if args.threads < 1:
        print("--threads must be >= 1.", file=sys.stderr)
        return 2
    check_output(args.out, "--out", folder=True)  # before the experiments
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(
            "astarpo theory draws its figures with matplotlib, which is not installed; "
            "install it with: pip install 'astarpo[theory]'",
            file=sys.stderr,
        )
        return 2
    import torch

    torch.set_num_threads(args.threads)
    progress = sys.stderr.isatty()
    out: Path = args.out
    if args.name != "all":
        res = run_one(args.name, out, seeds, args.quick, args.seed, progress)
        print(
            f"{args.name}: {res['runtime_s']} s -> {out / 'results.json'}, "
            f"{out / (args.name + '.png')}"
        )
        return 0
    from astarpo import __version__

    start = time.perf_counter()
    summary: dict[str, Any] = {
        "experiment": "all",
        "version": __version__,
        "quick": args.quick,
        "n_seeds": seeds,
        "base_seed": args.seed,
        "results": {},
    }
    for name in NAMES:
        res = run_one(name, out / name, seeds, args.quick, args.seed, progress)
        summary["results"][name] = {"dir": name, **_summary(res)}
        print(f"{name}: {res['runtime_s']} s -> {out / name}")
    summary["runtime_s"] = round(time.perf_counter() - start, 2)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(summary, indent=1, allow_nan=False) + "\n")
    print(f"all: {summary['runtime_s']} s -> {out / 'results.json'}")
    return 0
