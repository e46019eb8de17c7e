"""Prompts the reference never solves: does A*-PO, or an exploring baseline, learn them?

Run from the repository root::

    python benchmarks/zero_pass.py --out DIR [--quick] [--workers 2] [--seconds S]

Builds the scratchpad task's reference (the efficiency benchmark's, from the SFT cache), a hard
set of problems with one more operand digit than any SFT example whose 64 reference samples are
all wrong (>= 200 training and >= 200 held-out prompts; ``--quick``: 12 and 12), an easy set from
the SFT distribution, and trains A*-PO, A*-PO with the all-wrong filter, GRPO, PPO and REBEL on
hard only, easy + hard mixed and easy only, with equal Stage 2 wall-clock budgets
(:mod:`astarpo.llm.bench.zero_pass`). Writes ``DIR/zero_pass.json``, ``DIR/zero_pass.png``,
``DIR/hard_prompts.jsonl`` (prompt, answer, split), ``DIR/hard_pass64.jsonl`` (the 64 rewards
of every hard candidate) and ``DIR/reference/`` (model and tokenizer), so that pass@64 = 0 can be
re-checked independently::

    astarpo value --model DIR/reference --data DIR/hard_prompts.jsonl --reward scratchpad \\
        --n-samples 64 --max-new-tokens 94 --template none --out recheck.jsonl

Prints the review's 2x2 per training set and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print the answer."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--quick", action="store_true", help="small sets, 1-2 seeds (<= 5 minutes)")
    p.add_argument("--workers", type=int, default=2, help="runs at once (default 2)")
    p.add_argument("--seconds", type=float, default=None, help="Stage 2 budget of every run")
    p.add_argument("--eval-every", type=float, default=None, help="evaluation period (s)")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per run, inherited by workers
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from astarpo.llm.bench.zero_pass import run_zero_pass
    from astarpo.llm.bench.zero_pass_sets import QUICK, ZeroPassConfig

    fields = dict(QUICK) if args.quick else {}
    if args.seconds is not None:
        fields["seconds"] = args.seconds
    if args.eval_every is not None:
        fields["eval_every_seconds"] = args.eval_every
    cfg = ZeroPassConfig(out_dir=args.out, workers=args.workers, **fields)
    t0 = time.perf_counter()
    res = run_zero_pass(cfg)
    print(json.dumps(res["summary"]["answer"], indent=1))
    print(f"wall {time.perf_counter() - t0:.0f} s; load {res['load_start']} -> {res['load_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
