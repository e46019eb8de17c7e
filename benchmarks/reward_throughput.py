"""math-verify reward: throughput of the killable pool, cost of a hang, gold parsability.

Run from the repository root::

    python benchmarks/reward_throughput.py [--workers 1 2] [--timeout 5]

Prints, for the 500 MATH500 gold answers scored as completions (``\\boxed{gold}``):
items/s of in-process math-verify (no timeout protection, the baseline) and of
:class:`astarpo.llm.rewards.math_verify.MathVerifyReward` with 1..W workers, their ratio, and
the wall time of scoring the hanging completion ``\\boxed{9^{9^{9^{9^{9}}}}}`` (should be about the
timeout). Also counts gold answers of every packaged benchmark that math-verify cannot parse.
"""

from __future__ import annotations

import argparse
import logging
import time

from astarpo.llm.data.prompts import benchmark_path, load_prompts
from astarpo.llm.eval import BENCHMARKS
from astarpo.llm.rewards.builtin import RewardReport
from astarpo.llm.rewards.math_verify import MathVerifyReward


def in_process(completions: list[str], golds: list[str]) -> tuple[float, int]:
    from astarpo.llm.rewards import math_verify_worker as w

    t0 = time.perf_counter()
    ok = sum(
        w.score({"completion": c, "gold": g}).get("score", 0.0) == 1.0
        for c, g in zip(completions, golds, strict=True)
    )
    return time.perf_counter() - t0, ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args()
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    rows = load_prompts(benchmark_path("math500.jsonl"))
    golds = [r["answer"] for r in rows]
    completions = [f"The answer is $\\boxed{{{g}}}$." for g in golds]
    n = len(golds)
    in_process(completions[:5], golds[:5])  # warm imports
    base_t, base_ok = in_process(completions, golds)
    print(f"in-process math-verify: {n / base_t:8.1f} items/s  ({base_ok}/{n} correct)")
    for w in args.workers:
        reward = MathVerifyReward(timeout=args.timeout, n_workers=w)
        t0 = time.perf_counter()
        reward(["p"], ["\\boxed{1}"], ["1"])
        start = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = reward(["p"] * n, completions, golds)
        dt = time.perf_counter() - t0
        ok = sum(o == 1.0 for o in out)
        print(
            f"pool, {w} worker(s):    {n / dt:8.1f} items/s  ({ok}/{n} correct), "
            f"{base_t / dt:.2f}x in-process; worker start {start:.1f} s"
        )
        report = RewardReport()
        t0 = time.perf_counter()
        hang = reward(["p"], ["\\boxed{9^{9^{9^{9^{9}}}}}"], ["5"], report=report)
        print(
            f"  hanging completion: score {hang[0]}, {report.counts}, "
            f"{time.perf_counter() - t0:.2f} s wall (timeout {args.timeout} s)"
        )
        reward.close()
    reward = MathVerifyReward(timeout=args.timeout)
    for b in BENCHMARKS.values():
        report, golds = RewardReport(), [r["answer"] for r in load_prompts(benchmark_path(b.path))]
        out = reward(["p"] * len(golds), [f"\\boxed{{{g}}}" for g in golds], golds, report=report)
        ok = sum(o == 1.0 for o in out)
        print(f"{b.name:14s} gold as completion: {ok}/{len(golds)} verify, {report.counts}")
    reward.close()


if __name__ == "__main__":
    main()
