"""math-verify reward: throughput of the killable pool, cost of a hang, gold parsability.

Run from the repository root::

    python -m experiments.benchmarks.reward_throughput [--workers 1 2] [--timeout 5]

Prints, for the 500 MATH500 gold answers scored as completions (``\\boxed{gold}``):
items/s of in-process math-verify (no timeout protection, the baseline) and of
:class:`astarpo.llm.rewards.math_verify.MathVerifyReward` with 1..W workers, their ratio, and
the wall time of scoring the hanging completion ``\\boxed{9^{9^{9^{9^{9}}}}}`` (should be about the
timeout). Also counts gold answers of every packaged benchmark that math-verify cannot parse.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

from astarpo.llm import BENCHMARKS, MathVerifyReward, RewardReport, benchmark_path, load_prompts
from experiments.benchmarks.common import seconds


def in_process(prompts: list[str], completions: list[str], golds: list[str]) -> list[float]:
    """math-verify's scores in this process (no timeout protection), as a reward's call: each
    completion's answer (``\\boxed{}`` first) against its gold read as LaTeX math, the
    extraction :class:`astarpo.llm.MathVerifyReward` uses."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    pred_config = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
    out = []
    for c, g in zip(completions, golds, strict=True):
        gold = parse(f"${g}$", extraction_config=(LatexExtractionConfig(), ExprExtractionConfig()))
        pred = parse(c, extraction_config=pred_config)
        out.append(float(bool(gold and pred and verify(gold, pred))))
    return out


def verified(
    reward: Callable[..., Sequence[float | None]],
    completions: list[str],
    golds: list[str],
    **kw: object,
) -> tuple[float, int, list[float | None]]:
    """``(seconds, how many score 1, scores)`` of ``reward`` on ``completions`` against ``golds``
    (``kw``: the reward's keywords)."""
    dt, scores = seconds(reward, ["p"] * len(golds), completions, golds, **kw)
    return dt, sum(s == 1.0 for s in scores), scores


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
    verified(in_process, completions[:5], golds[:5])  # warm imports
    base_t, base_ok, _ = verified(in_process, completions, golds)
    print(f"in-process math-verify: {n / base_t:8.1f} items/s  ({base_ok}/{n} correct)")
    for w in args.workers:
        reward = MathVerifyReward(timeout=args.timeout, n_workers=w)
        start = verified(reward, ["\\boxed{1}"], ["1"])[0]
        dt, ok, _ = verified(reward, completions, golds)
        print(
            f"pool, {w} worker(s):    {n / dt:8.1f} items/s  ({ok}/{n} correct), "
            f"{base_t / dt:.2f}x in-process; worker start {start:.1f} s"
        )
        report = RewardReport()
        dt, _, hang = verified(reward, ["\\boxed{9^{9^{9^{9^{9}}}}}"], ["5"], report=report)
        print(
            f"  hanging completion: score {hang[0]}, {report.counts}, "
            f"{dt:.2f} s wall (timeout {args.timeout} s)"
        )
        reward.close()
    reward = MathVerifyReward(timeout=args.timeout)
    for b in BENCHMARKS.values():
        report, golds = RewardReport(), [r["answer"] for r in load_prompts(benchmark_path(b.path))]
        _, ok, _ = verified(reward, [f"\\boxed{{{g}}}" for g in golds], golds, report=report)
        print(f"{b.name:14s} gold as completion: {ok}/{len(golds)} verify, {report.counts}")
    reward.close()


if __name__ == "__main__":
    main()
