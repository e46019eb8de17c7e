"""The two-beta study's settings: the shared protocol (its ``train`` with the steps and
evaluation of every run) plus the beta1 values, rates and seeds."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import TrainConfig
from experiments.harness.config import check_integers, nested
from experiments.harness.protocol import TRAIN, TRAIN_FLAGS, Protocol

__all__ = ["PAIRED", "QUICK", "SCRATCHPAD", "TwoBetaConfig", "presets"]

#: The beta1 every other value is paired against (the paper's).
PAIRED = 0.5


@dataclass(frozen=True)
class TwoBetaConfig(Protocol):
    """Settings of :func:`~experiments.two_beta.run.run` (see each field's ``help``).

    Every run is A*-PO at ``beta2`` on the same Stage 1 samples; only the V* of its table
    differs (``optimal_value(rewards, beta1)`` of the same N rewards per prompt), so runs of one
    seed and rate form a paired comparison against ``beta1 = 0.5``.
    """

    beta1s: tuple[float, ...] = doc_field(
        (1e-3, 0.1, 0.5, 2.0, 1e3),
        "Stage 1 KL strengths compared (must include 0.5): 1e-3 is the theory's single beta "
        "(beta1 = beta2), 0.5 the paper's; 1e3 stands for the plain mean reward (beta1 -> inf: "
        "V* is within 1 / (8 beta1) = 1.25e-4 of the mean for rewards in [0, 1], by Hoeffding's "
        "lemma).",
    )
    learning_rates: tuple[float, ...] = doc_field(
        (3e-5, 1e-4),
        "Rates of every beta1: the first is the rate the efficiency study's sweep chose for "
        "A*-PO (beta1 = 0.5) on the scratchpad task (docs/figures/bench_scratchpad.json), the "
        "second a check.",
    )
    seeds: int = doc_field(5, "Seeds 0 .. seeds-1 per (rate, beta1) (95% t-intervals).")
    train: TrainConfig = nested(
        replace(TRAIN, max_steps=150, eval_steps=50), (*TRAIN_FLAGS, "max_steps", "eval_steps")
    )
    target_fractions: tuple[float, ...] = doc_field(
        (0.25, 0.5, 0.75),
        "Targets on the way from the reference's accuracy to the best final one, for steps to "
        "target.",
    )
    workers: int = doc_field(
        2,
        "Runs at once (processes): runs stop at a step count, so sharing the clock moves no "
        "result.",
    )

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_integers(self, seeds=1, workers=1)
        if PAIRED not in self.beta1s or len(set(self.beta1s)) != len(self.beta1s):
            raise ValueError(
                f"beta1s must hold {PAIRED} (the paired baseline) and no value twice, got "
                f"{self.beta1s}; e.g. --beta1s 1e-3,0.5,1e3."
            )
        for name in ("beta1s", "learning_rates"):
            values = getattr(self, name)
            if not values or any(not (math.isfinite(x) and x > 0) for x in values):
                raise ValueError(f"{name} must be non-empty, of numbers > 0, got {values}.")
        if not self.target_fractions or any(not 0 < f < 1 for f in self.target_fractions):
            raise ValueError(
                f"target_fractions must be non-empty, each in (0, 1), got {self.target_fractions}."
            )


#: The scratchpad task as the efficiency study runs it (70-token worked solutions with EOS).
SCRATCHPAD: dict[str, Any] = dict(
    task="scratchpad", max_new_tokens=78, sft_lr=3e-3, pool_size=256, eval_size=96
)
#: ``--quick``: every code path, two beta1 values, one rate, two seeds (a few minutes on CPU).
QUICK: dict[str, Any] = dict(
    beta1s=(1e-3, 0.5),
    learning_rates=(3e-5,),
    seeds=2,
    max_steps=4,
    eval_steps=2,
    pool_size=32,
    eval_size=16,
)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The scratchpad task (:data:`SCRATCHPAD`), and :data:`QUICK` with ``--quick``."""
    return {**SCRATCHPAD, **(QUICK if quick else {})}
