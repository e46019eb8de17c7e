"""``astarpo bench``: A*-PO against GRPO, RLOO, PPO and REBEL on one wall-clock protocol.

Same reference, pool, held-out set, data order and wall-clock budget for every run (A*-PO's
Stage 1 inside it), each run in its own process, each algorithm at the learning rate a small
sweep chose. Writes ``OUT/bench.json``, ``OUT/bench.md`` (ratios to A*-PO with intervals) and
``OUT/bench.png`` (accuracy against the run clock, with bands). ``--peers trl`` adds TRL's
``GRPOTrainer`` and ``A2POTrainer`` under the same protocol (the ``bench-trl`` extra).
"""

from __future__ import annotations

import argparse

from astarpo.commands.fields import CommaList
from astarpo.commands.paths import check_output

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

#: ``--task scratchpad``: the task's budget and SFT rate, and a protocol sized for responses
#: of 70 tokens on a loaded 2-core machine (docs/baselines.md gives the measured step times):
#: every algorithm and the drop arm, 5 seeds, 60 s per run, a grid that brackets the rates
#: (extended at an edge), then A*-PO and GRPO again in the one-pass setting.
_SCRATCHPAD: dict[str, object] = dict(
    seeds=5,
    sft_lr=3e-3,
    pool_size=256,
    eval_size=96,
    val_size=64,
    max_train_seconds=60.0,
    eval_every_seconds=20.0,
    lr_grid=(3e-5, 1e-4, 3e-4, 1e-3),
    sweep_seconds=30.0,
)

#: Per task, the protocol's fields that differ from :class:`BenchConfig`'s defaults.
#: ``scratchpad2`` (38-token responses) runs A*-PO and GRPO only: its time-to-target ratio is
#: the third length of the mechanism curve (benchmarks/length_sweep.py).
TASK_DEFAULTS: dict[str, dict[str, object]] = {
    "addition": {},
    "scratchpad": dict(_SCRATCHPAD, max_new_tokens=78, one_pass=True),
    "scratchpad2": dict(
        _SCRATCHPAD, max_new_tokens=46, algos=("astarpo", "grpo"), drop_all_wrong=False
    ),
}

_QUICK_SCRATCHPAD: dict[str, object] = dict(
    algos=("astarpo", "grpo"),
    drop_all_wrong=False,
    one_pass=False,
    seeds=2,
    max_train_seconds=20.0,
    eval_every_seconds=10.0,
    lr_grid=(1e-4,),
    pool_size=64,
    eval_size=32,
    val_size=32,
)

#: ``--quick`` on a scratchpad task: A*-PO and GRPO, two seeds, long enough to leave the
#: reference (about 3-5 minutes on a loaded 2-core machine).
QUICK_TASK: dict[str, dict[str, object]] = {
    "addition": {},
    "scratchpad": _QUICK_SCRATCHPAD,
    "scratchpad2": _QUICK_SCRATCHPAD,
}


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers (e.g. 1e-4,3e-4), got {text!r}"
        ) from None


def _add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep's grid extension and the one-pass setting."""
    parser.add_argument(
        "--grid-extensions",
        type=int,
        default=None,
        help="times the sweep may add a rate beyond the grid's edge when the chosen rate is "
        "that edge (default 2; 0: never)",
    )
    parser.add_argument(
        "--one-pass",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run A*-PO and GRPO on a pool that no run goes through twice, sized from "
        "the main runs (default: on for --task scratchpad without --quick, else off)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``astarpo bench`` (unset flags keep the :class:`BenchConfig` defaults)."""
    parser.add_argument("--out", default="runs/bench", help="output directory")
    parser.add_argument(
        "--task",
        default="addition",
        choices=("addition", "scratchpad", "scratchpad2"),
        help="embedded task: addition (answers of 4-5 tokens; default), scratchpad (a "
        "worked solution of 70 tokens before the answer) or scratchpad2 (the same with "
        "2-digit operands: 38 tokens)",
    )
    parser.add_argument(
        "--backend",
        default="hf",
        choices=("hf", "vllm"),
        help="generation backend of every run, Stage 1 and the training loop (default hf; "
        "vllm needs the vllm extra)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="token budget per response"
    )
    parser.add_argument(
        "--micro-batch-size",
        type=int,
        default=None,
        help="sequences per forward/backward pass for every algorithm (default: the whole "
        "batch at once); the matched-memory setting",
    )
    parser.add_argument(
        "--algos",
        type=CommaList(),
        default=None,
        help=f"comma-separated algorithms, must include astarpo (default {','.join(ALGOS)}; "
        "astarpo,grpo with --task scratchpad2 and with --quick on a scratchpad task)",
    )
    parser.add_argument("--seeds", type=int, default=None, help="seeds per run (default 3)")
    parser.add_argument(
        "--max-train-seconds", type=float, default=None, help="wall-clock budget per run"
    )
    parser.add_argument(
        "--eval-every-seconds", type=float, default=None, help="evaluation period (training s)"
    )
    parser.add_argument(
        "--lr-grid", type=CommaList(_floats), default=None, help="sweep, e.g. 1e-4,3e-4"
    )
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
        type=CommaList(),
        default="",
        help="comma-separated other libraries run under the same protocol: trl (TRL's "
        "GRPOTrainer and experimental A2POTrainer; needs the bench-trl extra: torch==2.13.0 "
        'first, then pip install -e ".[bench-trl]")',
    )
    _add_protocol_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print the Markdown report."""
    from pathlib import Path

    from astarpo.llm.bench.config import BenchConfig
    from astarpo.llm.bench.run import run_bench

    check_output(args.out, "--out", folder=True)  # before the reference's SFT
    check_output(args.cache_dir, "--cache-dir", folder=True)
    fields: dict[str, object] = dict(TASK_DEFAULTS[args.task])
    if args.quick:
        fields.update(QUICK_TASK[args.task] if QUICK_TASK[args.task] else QUICK)
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
        "max_new_tokens": args.max_new_tokens,
        "micro_batch_size": args.micro_batch_size,
        "grid_extensions": args.grid_extensions,
        "one_pass": args.one_pass,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    if args.algos is not None:
        fields["algos"] = tuple(a.strip() for a in args.algos.split(",") if a.strip())
    fields.setdefault("algos", ALGOS)
    drop = bool(fields.pop("drop_all_wrong", True)) and not args.no_drop
    cfg = BenchConfig(
        out_dir=args.out,
        task=args.task,
        backend=args.backend,
        drop_all_wrong=drop,
        device=args.device,
        threads=args.threads,
        cache_dir=args.cache_dir,
        peers=tuple(p.strip() for p in args.peers.split(",") if p.strip()),
        **fields,  # type: ignore[arg-type]
    )
    run_bench(cfg, overwrite=args.overwrite)
    print((Path(args.out) / "bench.md").read_text())
    return 0
