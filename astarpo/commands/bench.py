"""``astarpo bench``: A*-PO against GRPO, RLOO, PPO and REBEL on one wall-clock protocol.

Same reference, pool, held-out set, data order and wall-clock budget for every run (A*-PO's
Stage 1 inside it), each run in its own process, each algorithm at the learning rate a small
sweep chose. Writes ``OUT/bench.json``, ``OUT/bench.md`` (ratios to A*-PO with intervals) and
``OUT/bench.png`` (accuracy against the run clock, with bands). ``--peers trl`` adds TRL's
``GRPOTrainer`` and ``A2POTrainer`` under the same protocol (the ``bench-trl`` extra).
"""

from __future__ import annotations

import argparse

ALGOS = ("astarpo", "grpo", "rloo", "ppo", "rebel")

#: ``--quick``: a smoke run of every code path but the sweep (well under 3 minutes on CPU).
QUICK = dict(
    seeds=2,
    max_train_seconds=4.0,
    eval_every_seconds=2.0,
    lr_grid=(3e-4,),
    pool_size=128,
    eval_size=64,
    val_size=32,
)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``astarpo bench`` (unset flags keep the :class:`BenchConfig` defaults)."""
    parser.add_argument("--out", default="runs/bench", help="output directory")
    parser.add_argument(
        "--algos",
        default=",".join(ALGOS),
        help=f"comma-separated algorithms, must include astarpo (default {','.join(ALGOS)})",
    )
    parser.add_argument("--seeds", type=int, default=None, help="seeds per run (default 3)")
    parser.add_argument(
        "--max-train-seconds", type=float, default=None, help="wall-clock budget per run"
    )
    parser.add_argument(
        "--eval-every-seconds", type=float, default=None, help="evaluation period (training s)"
    )
    parser.add_argument("--lr-grid", type=_floats, default=None, help="sweep, e.g. 1e-4,3e-4")
    parser.add_argument("--sweep-seconds", type=float, default=None, help="budget of a sweep run")
    parser.add_argument("--batch-size", type=int, default=None, help="prompts per step")
    parser.add_argument("--pool-size", type=int, default=None, help="training prompts")
    parser.add_argument("--eval-size", type=int, default=None, help="held-out prompts")
    parser.add_argument(
        "--sft-steps", type=int, default=None, help="most SFT steps of the reference (default 2000)"
    )
    parser.add_argument(
        "--reference-target",
        type=float,
        default=None,
        help="SFT stops when the reference's expected sampled accuracy on 200 validation "
        "problems reaches this (default 0.35)",
    )
    parser.add_argument(
        "--no-drop", action="store_true", help="skip astarpo_drop (A*-PO without all-wrong prompts)"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 seeds x 4 s, no sweep (< 3 minutes)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="delete an earlier benchmark in --out first"
    )
    parser.add_argument("--cache-dir", default=None, help="SFT cache (default ~/.cache/astarpo)")
    parser.add_argument(
        "--peers",
        default="",
        help="comma-separated other libraries run under the same protocol: trl (TRL's "
        "GRPOTrainer and experimental A2POTrainer; needs the bench-trl extra: torch==2.13.0 "
        'first, then pip install -e ".[bench-trl]")',
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the Markdown report."""
    from pathlib import Path

    from astarpo.llm.bench.config import BenchConfig
    from astarpo.llm.bench.run import run_bench

    fields: dict[str, object] = dict(QUICK) if args.quick else {}
    given = {
        "seeds": args.seeds,
        "max_train_seconds": args.max_train_seconds,
        "eval_every_seconds": args.eval_every_seconds,
        "lr_grid": args.lr_grid,
        "sweep_seconds": args.sweep_seconds,
        "batch_size": args.batch_size,
        "pool_size": args.pool_size,
        "eval_size": args.eval_size,
        "sft_steps": args.sft_steps,
        "reference_target": args.reference_target,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    cfg = BenchConfig(
        out_dir=args.out,
        algos=tuple(a.strip() for a in args.algos.split(",") if a.strip()),
        drop_all_wrong=not args.no_drop,
        device=args.device,
        threads=args.threads,
        cache_dir=args.cache_dir,
        peers=tuple(p.strip() for p in args.peers.split(",") if p.strip()),
        **fields,  # type: ignore[arg-type]
    )
    run_bench(cfg, overwrite=args.overwrite)
    print((Path(args.out) / "bench.md").read_text())
    return 0
