"""Iterations per second of Algorithm 1 on a large log-linear bandit (X=1000, Y=64, d=32).

Run: ``python -m experiments.benchmarks.theory_bandit [--contexts 1000 --actions 64 --dim 32]``.
Prints
rounds per second of Stage 2 (one on-policy sample per context, and the exact expected
gradient), of the PG baseline (G = 4), of the exact evaluation, and the ratio of batched seeds
(S at once, parameters ``[S, d]``) to S separate runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from astarpo.theory import LogLinearBandit, Stage2Config, policy_gradient_baseline, run_stage2
from experiments.benchmarks.common import parser, seconds


def rate(fn: Callable[[int], object], rounds: int) -> float:
    """Rounds per second of ``fn(rounds)`` (one warm-up call of 2 rounds first)."""
    fn(2)
    return rounds / seconds(fn, rounds)[0]


def main() -> None:
    sizes = dict(contexts=1000, actions=64, dim=32, seeds=8, rounds=200)
    args = parser(__doc__, **sizes, threads=(1, "torch threads (default 1)")).parse_args()
    torch.set_num_threads(args.threads)
    bandit = LogLinearBandit.random(args.contexts, args.actions, args.dim, v_ref=0.05, seed=0)
    x, s, beta = args.contexts, args.seeds, 0.1
    print(
        f"X={x} Y={args.actions} d={args.dim} S={s} rounds={args.rounds} "
        f"torch threads={torch.get_num_threads()}"
    )

    def stage2(t: int, n_seeds: int = 1, mode: str = "stochastic") -> object:
        cfg = Stage2Config(beta, t, 1.0, "inverse_sqrt", mode=mode, per_decade=1)  # type: ignore[arg-type]
        return run_stage2(bandit, np.zeros((n_seeds, x)), cfg)

    one = rate(stage2, args.rounds)
    batched = rate(partial(stage2, n_seeds=s), args.rounds)
    print(f"stage 2, stochastic, 1 seed : {one:8.1f} it/s")
    print(f"stage 2, stochastic, {s} seeds: {batched:8.1f} it/s  ({batched * s:.1f} seed-it/s)")
    print(f"  batched seeds vs separate runs: {batched * s / one:.2f}x")
    det = rate(partial(stage2, mode="deterministic"), args.rounds)
    print(f"stage 2, exact gradient, 1 seed: {det:8.1f} it/s  (vs stochastic {det / one:.2f}x)")
    pg = rate(
        lambda t: policy_gradient_baseline(bandit, Stage2Config(beta, t, 1.0, per_decade=1), 4, 1),
        args.rounds,
    )
    print(f"PG baseline G=4, 1 seed       : {pg:8.1f} it/s  (A*-PO / PG {one / pg:.2f}x)")
    theta = np.random.default_rng(0).normal(size=(s, args.dim))
    ev = rate(lambda t: [bandit.suboptimality(bandit.policy(theta), beta) for _ in range(t)], 20)
    print(f"exact suboptimality of {s} policies: {ev:8.1f} evals/s")


if __name__ == "__main__":
    main()
