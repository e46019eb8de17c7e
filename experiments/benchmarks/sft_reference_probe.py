"""The SFT curve of the benchmark's reference, and where its stopping rule ends it.

Run from the repository root::

    python -m experiments.benchmarks.sft_reference_probe [--steps 1000] [--every 25]

One SFT run of the toy model as ``python -m experiments.efficiency`` makes its reference (batch 64,
learning rate
2e-3, warm-up over 5% of ``sft_steps`` = 2000, the 8000 SFT problems) without the early stop:
every ``--every`` steps, the expected sampled accuracy on the rule's check rows (200 validation
problems) and on the 500 held-out ones. The first check (every 5 steps) at or above
``reference_target`` (0.35), where the reference stops, is marked: the curve rises steeply
through the target range, so a fixed step count would be a poor rule.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace

import torch

from astarpo.llm import check_accuracy, make_char_tokenizer, make_toy_model, sft
from experiments.harness.protocol import REF_SEED, Protocol, splits


def main(argv: list[str] | None = None) -> int:
    """Print the curve; returns the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000, help="SFT steps to run")
    ap.add_argument("--every", type=int, default=25, help="print every this many steps")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg, tok = Protocol(), make_char_tokenizer()
    rows, model = splits(cfg), make_toy_model(tok, seed=REF_SEED)
    # The bench's schedule (warm-up from sft_steps) with the stop disabled.
    config = replace(cfg.sft, target_accuracy=None)
    stopped: list[int] = []

    def at_step(step: int, loss: float) -> None:
        if step % 5 == 0 and not stopped:
            if check_accuracy(model, tok, rows["check"]) >= (cfg.sft.target_accuracy or 0.0):
                stopped.append(step)
        if step % args.every == 0 or (stopped and stopped[-1] == step):
            val = check_accuracy(model, tok, rows["check"])
            held = check_accuracy(model, tok, rows["held_out"])
            mark = " <- the rule stops here" if stopped and stopped[-1] == step else ""
            print(f"step {step:5d}: loss {loss:.3f}, check {val:.3f}, held-out {held:.3f}{mark}")
        if step >= args.steps:
            raise StopIteration

    with contextlib.suppress(StopIteration):
        sft(model, tok, rows["sft"], config, at_step)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
