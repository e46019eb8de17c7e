"""``astarpo demo``: the CPU demo end to end (SFT reference, Stage 1, A*-PO, held-out report).

``astarpo demo --quick --out runs/demo`` takes about 3 minutes on 2 cores the first time (the SFT
reference is then cached in ``--cache-dir``, default ``$ASTARPO_CACHE`` or ``~/.cache/astarpo``).
"""

from __future__ import annotations

import argparse

from astarpo.commands.paths import check_output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``astarpo demo``."""
    parser.add_argument("--out", default="runs/demo", help="output directory (runs/demo)")
    parser.add_argument("--quick", action="store_true", help="smaller run (about 3 min, 2 cores)")
    parser.add_argument(
        "--task",
        default="addition",
        choices=("addition", "scratchpad", "scratchpad2"),
        help="embedded task: addition (3 digits and EOS: 4 tokens; default), scratchpad (a worked "
        "solution of 70 tokens before the answer) or scratchpad2 (2-digit operands: 38 tokens)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of everything (0)")
    parser.add_argument(
        "--cache-dir", help="where the SFT reference is cached ($ASTARPO_CACHE or ~/.cache/astarpo)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: fastest for the tiny model)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an --out the demo did not write (its files and train/ run are "
        "replaced, others left alone); a rerun over the demo's own output needs no flag",
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo; print the report table and where the files are."""
    from pathlib import Path

    from astarpo.llm.toy.demo import run_demo

    check_output(args.out, "--out", folder=True)  # before the SFT
    check_output(args.cache_dir, "--cache-dir", folder=True)
    run_demo(
        args.out,
        args.quick,
        args.cache_dir,
        args.seed,
        not args.no_progress,
        threads=args.threads,
        task=args.task,
        overwrite=args.overwrite,
    )
    out = Path(args.out)
    print((out / "report.md").read_text())
    print(f"wrote {out / 'report.json'}, {out / 'accuracy_vs_time.png'}, {out / 'report.md'}")
    return 0
