"""``astarpo bench``: A*-PO against GRPO, RLOO, PPO and REBEL side by side.

Same reference model, data, seeds and prompt budget for every algorithm; each run in its own
process (per-algorithm peak memory). Writes ``OUT/bench.json``, ``OUT/bench.md`` (ratios to
A*-PO) and ``OUT/bench.png`` (accuracy against training wall time).
"""

from __future__ import annotations

import argparse

ALGOS = ("astarpo", "grpo", "rloo", "ppo", "rebel")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``astarpo bench``."""
    parser.add_argument("--out", default="runs/bench", help="output directory")
    parser.add_argument(
        "--algos",
        default=",".join(ALGOS),
        help=f"comma-separated algorithms, must include astarpo (default {','.join(ALGOS)})",
    )
    parser.add_argument("--seeds", type=int, default=2, help="seeds per algorithm (default 2)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run")
    parser.add_argument("--batch-size", type=int, default=None, help="prompts per step")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between evals")
    parser.add_argument("--eval-size", type=int, default=None, help="held-out prompts")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (all algorithms)")
    parser.add_argument("--group-size", type=int, default=None, help="GRPO/RLOO group size G")
    parser.add_argument("--beta2", type=float, default=None, help="A*-PO beta2")
    parser.add_argument(
        "--target", type=float, default=0.0, help="target held-out accuracy (0 = automatic)"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small smoke run (fewer steps, prompts and SFT steps; about 3 minutes on CPU)",
    )
    parser.add_argument("--cache-dir", default=None, help="SFT cache (default ~/.cache/astarpo)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the Markdown table."""
    from pathlib import Path

    from astarpo.llm.bench.run import BenchConfig, run_bench

    fields: dict[str, object] = {}
    if args.quick:
        fields.update(steps=4, batch_size=8, eval_every=2, eval_size=64, sft_steps=200)
    given = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "eval_every": args.eval_every,
        "eval_size": args.eval_size,
        "learning_rate": args.lr,
        "group_size": args.group_size,
        "beta2": args.beta2,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    cfg = BenchConfig(
        out_dir=args.out,
        algos=tuple(a.strip() for a in args.algos.split(",") if a.strip()),
        seeds=args.seeds,
        target_accuracy=args.target,
        device=args.device,
        threads=args.threads,
        cache_dir=args.cache_dir,
        **fields,  # type: ignore[arg-type]
    )
    run_bench(cfg)
    print((Path(args.out) / "bench.md").read_text())
    return 0
