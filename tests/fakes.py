"""A tiny deterministic Generator for tests of Stage 1 and evaluation (no model)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from astarpo.llm.rollout.base import Rollout, SamplingConfig


class FakeGenerator:
    """Answers a prompt correctly with probability ``p_correct`` (``answers[prompt]``), else
    ``"wrong"``; greedy decoding (temperature 0) is always correct. Deterministic in ``seed``.

    ``fail_after`` calls raise ``RuntimeError`` (to simulate a kill)."""

    def __init__(
        self, answers: dict[str, str], p_correct: float = 0.5, fail_after: int | None = None
    ):
        self.answers = answers
        self.p_correct = p_correct
        self.fail_after = fail_after
        self.calls: list[tuple[list[str], int, int]] = []

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig, seed: int
    ) -> Rollout:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise RuntimeError("simulated kill")
        self.calls.append((list(prompts), n, seed))
        rng = np.random.default_rng(seed)
        rows = [p for p in prompts for _ in range(n)]
        completions = [
            f"\\boxed{{{self.answers[p]}}}"
            if sampling.greedy or rng.random() < self.p_correct
            else "wrong"
            for p in rows
        ]
        return Rollout(
            prompts=rows,
            prompt_ids=[[1, 2] for _ in rows],
            response_ids=[[3] * len(c) for c in completions],
            completions=completions,
            truncated=[False] * len(rows),
            n=n,
        )

    def sync_weights(self, model: object) -> None:
        pass


def record_batches(trainer: Any) -> list[Any]:
    """Spy on ``trainer.algorithm.prepare``: the returned list receives every rollout batch the
    trainer prepares (so a test can inspect the last step's batch)."""
    seen: list[Any] = []
    prepare = trainer.algorithm.prepare

    def spy(batch: Any) -> Any:
        seen.append(batch)
        return prepare(batch)

    trainer.algorithm.prepare = spy
    return seen
