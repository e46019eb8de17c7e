"""Sampling and scoring in one call: :func:`sample_and_score`, what Stage 1, the Stage 2 trainer
and evaluation all run on a batch of rows::

    prompts of the rows -> generate n each -> the rows' columns repeated per sample
                        -> compute_rewards -> ScoredRollout(rollout, rewards [P * n], metrics)

It lives in ``rollout/`` because it needs both generation and the rewards, and ``rewards/`` sits
below ``rollout/`` (a reward reads the rows' columns; generating never scores): ``rollout/`` is
the lowest layer that sees both, and everything that scores (``stage1/``, ``training/``,
``eval``) is above it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from astarpo.llm.data.prompts import repeat_columns
from astarpo.llm.rewards.scoring import compute_rewards
from astarpo.llm.rollout.base import Rollout, SamplingConfig

__all__ = ["GenerateFn", "PhaseFn", "ScoredRollout", "sample_and_score"]

GenerateFn = Callable[[list[str], int, SamplingConfig, int], Rollout]
"""``generate(prompts, n, sampling, seed) -> Rollout``: a generator's ``generate`` (or the
trainer's, which syncs the weights and generates this rank's block)."""

PhaseFn = Callable[[str], contextlib.AbstractContextManager[Any]]
"""``phase(name)``: a context entered around ``"generate"`` and around ``"reward"`` (the
trainer's timers and watchdog)."""


@dataclass
class ScoredRollout:
    """``n`` scored responses for each of ``P`` rows, prompt-major (row ``i * n + j`` is sample
    ``j`` of row ``i``).

    Attributes:
        rollout: The generated :class:`~astarpo.llm.rollout.base.Rollout`, ``B = P * n`` rows.
        rewards: The summed reward of each response, float64 ``[B]``.
        metrics: :func:`~astarpo.llm.rewards.scoring.compute_rewards`'s metrics of the batch.
    """

    rollout: Rollout
    rewards: np.ndarray
    metrics: dict[str, float]

    @property
    def by_prompt(self) -> np.ndarray:
        """``rewards`` as ``[P, n]``: one row per prompt."""
        return self.rewards.reshape(-1, self.rollout.n)

    @property
    def unscored(self) -> dict[str, float]:
        """The counts of unscored responses in the metrics: ``rewards/<name>/none`` and each
        reason a reward reported (``rewards/<name>/timeout``, ...); means and ``reward/*``
        left out."""
        return {
            k: v
            for k, v in self.metrics.items()
            if k.startswith("rewards/") and not k.endswith("/mean")
        }


def sample_and_score(
    generate: GenerateFn,
    rows: Sequence[Mapping[str, Any]],
    n: int,
    sampling: SamplingConfig,
    seed: int,
    reward_funcs: Sequence[Any],
    *,
    timeout: float = 0.0,
    phase: PhaseFn | None = None,
) -> ScoredRollout:
    """Generate ``n`` responses for each row's ``prompt`` and score them with the rows' columns.

    .. math:: r_{i n + j} = \\sum_f r_f(x_i, y_{ij}; \\text{columns of row } i)

    Args:
        generate: ``generate(prompts, n, sampling, seed)`` (:data:`GenerateFn`), e.g. a
            :class:`~astarpo.llm.rollout.base.Generator`'s ``generate``.
        rows: The rows ``[P]``: a ``prompt`` each and the columns the rewards read (``answer``,
            ...), repeated per sample by :func:`~astarpo.llm.data.prompts.repeat_columns`.
        n: Responses per row.
        sampling: The :class:`~astarpo.llm.rollout.base.SamplingConfig`.
        seed: The seed of this call (the caller derives it: ``derive_seed(...)``).
        reward_funcs: The reward functions (TRL signature), summed.
        timeout: Deadline in seconds of each reward function's call on the batch (0 = none).
        phase: Optional context factory entered as ``phase("generate")`` around the generation
            and ``phase("reward")`` around the scoring.

    Returns:
        The :class:`ScoredRollout`: rollout, rewards ``[P * n]`` and the reward metrics.

    Raises:
        ValueError: the generator returned another number of responses than ``P * n``; a
            reward's errors (:func:`~astarpo.llm.rewards.scoring.compute_rewards`).
        RewardTimeoutError: a reward function ran past ``timeout``.
    """
    enter = phase if phase is not None else (lambda name: contextlib.nullcontext())
    prompts = [r["prompt"] for r in rows]
    with enter("generate"):
        rollout = generate(prompts, n, sampling, seed)
    if len(rollout.completions) != len(rows) * n:
        raise ValueError(
            f"generator returned {len(rollout.completions)} responses for {len(rows)} prompts x "
            f"{n} samples."
        )
    with enter("reward"):
        rewards, metrics = compute_rewards(
            reward_funcs,
            rollout.prompts,
            rollout.completions,
            repeat_columns(rows, n),
            completion_ids=rollout.response_ids,
            truncated=rollout.truncated,
            timeout=timeout,
        )
    return ScoredRollout(rollout, rewards, metrics)
