"""A tiny deterministic Generator for tests of Stage 1 and evaluation (no model), the rows and
the reward that go with it, and the Stage 1 run by rank that the multi-process tests share."""

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


def doubling_rows(n: int = 10) -> list[dict[str, str]]:
    """``n`` rows ``{"prompt": "i+i=", "answer": "2i"}`` for ``i < n``."""
    return [{"prompt": f"{i}+{i}=", "answer": str(2 * i)} for i in range(n)]


def boxed_match(prompts: Any, completions: Any, answer: Any, **_: Any) -> list[float]:
    """1 where the completion is ``\\boxed{answer}`` (a correct answer of FakeGenerator)."""
    pairs = zip(completions, answer, strict=True)
    return [1.0 if c == f"\\boxed{{{a}}}" else 0.0 for c, a in pairs]


def by_rank_config() -> Any:
    """The Stage 1 config of :func:`stage1_by_rank`: 6 samples per prompt, seed 3, one prompt
    per generate call (a batch's seed comes from its prompts, so the samples do not depend on
    how the prompts are sharded over the ranks)."""
    from astarpo.llm.stage1.config import Stage1Config

    return Stage1Config(
        n_samples=6, beta1=0.5, max_new_tokens=8, seed=3, prompts_per_call=1, progress=False
    )


def stage1_by_rank(out: Any, **kw: Any) -> Any:
    """Stage 1 by rank (``estimate_values_by_rank``) of the 10 :func:`doubling_rows` on a
    FakeGenerator with :func:`by_rank_config`, into ``out`` (``kw``: its other arguments)."""
    from astarpo.llm.stage1.estimate import estimate_values_by_rank

    rows = doubling_rows()
    return estimate_values_by_rank(
        FakeGenerator({r["prompt"]: r["answer"] for r in rows}),
        rows,
        out_path=out,
        reward_funcs=[boxed_match],
        config=by_rank_config(),
        **kw,
    )


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
