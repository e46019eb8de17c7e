"""The zero-pass study's settings: :class:`ZeroPassConfig`, its sets and runs, ``--quick``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from astarpo.llm.algorithms.config import doc_field
from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task
from astarpo.studies.harness.protocol import (
    DROP_ARM,
    Protocol,
    RunOptions,
    check_ints,
    check_positive,
)

__all__ = ["ARMS", "QUICK", "SETS", "ZeroPassConfig", "presets", "seeds_of"]

#: The training sets.
SETS = ("hard", "mixed", "easy")
#: The runs of each set.
ARMS = ("astarpo", DROP_ARM, "grpo", "ppo", "rebel")


@dataclass(frozen=True)
class ZeroPassConfig(RunOptions):
    """Settings of :func:`~astarpo.studies.zero_pass.run.run` (see each field's ``help``)."""

    hard_train: int = doc_field(200, "Hard training prompts (>= 200 in the full run).")
    hard_eval: int = doc_field(200, "Hard held-out prompts (>= 200 in the full run).")
    easy_train: int = doc_field(200, "Easy training prompts.")
    easy_eval: int = doc_field(128, "Easy held-out prompts.")
    margin: int = doc_field(8, "Extra hard candidates, in case the reference solves some.")
    k: int = doc_field(64, "Reference samples per hard candidate.")
    seconds: float = doc_field(30.0, "Stage 2 wall-clock budget of every run.")
    eval_every_seconds: float = doc_field(
        15.0, "Held-out evaluation every this many seconds of training time."
    )
    seeds_main: int = doc_field(5, "Seeds of A*-PO and GRPO on the two sets with hard prompts.")
    seeds_other: int = doc_field(3, "Seeds of every other run.")
    learning_rate: float = doc_field(
        3e-5,
        "Learning rate of every run (no sweep): in a 25 s probe on the easy set (A*-PO and GRPO, "
        "seed 0), 1e-3 took the reference's easy accuracy from 0.41 to below 0.01 in one step, "
        "1e-4 and 3e-5 raised it, 3e-5 steadily.",
    )
    check_rows: int = doc_field(64, "Training prompts per kind in the final log-ratio check.")
    workers: int = doc_field(2, "Runs at once (processes).")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ints(self, "hard_train", "hard_eval", "easy_train", "easy_eval", "k", "seeds_main")
        check_ints(self, "seeds_other", "check_rows", "workers")
        check_ints(self, "margin", low=0)
        check_positive(self, "seconds", "eval_every_seconds", "learning_rate")

    @property
    def hard_digits(self) -> int:
        """Operand digits of the hard prompts: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1

    def protocol(self) -> Protocol:
        """The protocol of these runs: the scratchpad task (its reference is the efficiency
        study's, from the same cache) with a token budget that holds the hard prompts' gold
        responses (86 tokens) and the easy rows from its pool and held-out split."""
        return Protocol(
            threads=self.threads,
            rerun_slow=self.rerun_slow,
            task="scratchpad",
            max_new_tokens=16 * self.hard_digits + 6 + 8,
            sft_lr=get_task("scratchpad").sft_lr,
            eval_every_seconds=self.eval_every_seconds,
            pool_size=self.easy_train,
            eval_size=self.easy_eval,
        )


#: ``--quick``: every code path, small sets, 1-2 seeds (<= 5 minutes on 2 shared cores).
QUICK: dict[str, Any] = dict(
    hard_train=12,
    hard_eval=12,
    easy_train=12,
    easy_eval=12,
    margin=1,
    seconds=6.0,
    eval_every_seconds=3.0,
    seeds_main=2,
    seeds_other=1,
    check_rows=12,
)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields ``--quick`` sets (:data:`QUICK`), under the given ones."""
    return dict(QUICK) if quick else {}


def seeds_of(cfg: ZeroPassConfig, set_name: str, arm: str) -> int:
    """``seeds_main`` for A*-PO and GRPO on the sets holding hard prompts, else ``seeds_other``."""
    main = set_name in ("hard", "mixed") and arm in ("astarpo", "grpo")
    return cfg.seeds_main if main else cfg.seeds_other
