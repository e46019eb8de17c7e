"""The zero-pass study's settings, its training sets and runs, and ``--quick``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import SCRATCHPAD_DIGITS, get_task
from experiments.harness.config import StudyConfig, check_integers, nested
from experiments.harness.protocol import DROP_ARM, Protocol

__all__ = ["ARMS", "PROTOCOL", "QUICK", "SETS", "ZeroPassConfig", "presets", "seeds_of"]

#: The training sets, and the runs of each.
SETS = ("hard", "mixed", "easy")
ARMS = ("astarpo", DROP_ARM, "grpo", "ppo", "rebel")

#: The protocol of these runs: the scratchpad task (the efficiency study's reference, from the
#: same cache) with a budget for the hard prompts' gold responses (``16 d + 6`` tokens with
#: EOS for ``d = 5`` digits, plus 8); the easy rows are its pool and held-out split. The
#: learning rate of every run is 3e-5 (no sweep): in a 25 s probe on the easy set, 1e-3 took the
#: reference's accuracy from 0.41 to below 0.01 in a step; 3e-5 raised it steadily.
_PROTOCOL = Protocol.from_dict(
    dict(
        task="scratchpad",
        max_new_tokens=16 * (SCRATCHPAD_DIGITS + 1) + 6 + 8,
        sft_lr=get_task("scratchpad").sft_lr,
        eval_every_seconds=15.0,
        pool_size=200,
        eval_size=128,
    )
)
PROTOCOL = replace(
    _PROTOCOL, train=replace(_PROTOCOL.train, max_train_seconds=30.0, learning_rate=3e-5)
)


@dataclass(frozen=True)
class ZeroPassConfig(StudyConfig):
    """Settings of :func:`~experiments.zero_pass.run.run` (each field's help says what it does);
    ``protocol`` is the protocol of its runs (:data:`PROTOCOL`), with the easy set as its pool
    and held-out split, and every run's Stage 2 budget, evaluation interval and rate."""

    hard_train: int = doc_field(200, "Hard training prompts (>= 200 in the full run).")
    hard_eval: int = doc_field(200, "Hard held-out prompts (>= 200 in the full run).")
    margin: int = doc_field(8, "Extra hard candidates, in case the reference solves some.")
    k: int = doc_field(64, "Reference samples per hard candidate.")
    protocol: Protocol = nested(
        PROTOCOL,
        {
            "easy_train": "pool_size",
            "easy_eval": "eval_size",
            "seconds": "train.max_train_seconds",
            "eval_every_seconds": "train.eval_every_seconds",
            "learning_rate": "train.learning_rate",
            "threads": "threads",
            "rerun_slow": "rerun_slow",
        },
    )
    seeds_main: int = doc_field(5, "Seeds of A*-PO and GRPO on the sets with hard prompts.")
    seeds_other: int = doc_field(3, "Seeds of every other run.")
    check_rows: int = doc_field(64, "Training prompts per kind in the final log-ratio check.")
    workers: int = doc_field(2, "Runs at once (processes).")

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_integers(self, hard_train=1, hard_eval=1, margin=0, k=1, seeds_main=1)
        check_integers(self, seeds_other=1, check_rows=1, workers=1)
        if not self.protocol.train.max_train_seconds > 0:  # 0 would be no budget at all
            seconds = self.protocol.train.max_train_seconds
            raise ValueError(f"seconds must be a finite number > 0, got {seconds!r}.")

    @property
    def hard_digits(self) -> int:
        """Operand digits of the hard prompts: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1


#: ``--quick``: every code path, small sets, 1-2 seeds (<= 5 minutes on 2 shared cores).
QUICK: dict[str, Any] = dict(hard_train=12, hard_eval=12, easy_train=12, easy_eval=12, margin=1)
QUICK.update(seconds=6.0, eval_every_seconds=3.0, seeds_main=2, seeds_other=1, check_rows=12)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields ``--quick`` sets (:data:`QUICK`)."""
    return dict(QUICK) if quick else {}


def seeds_of(cfg: ZeroPassConfig, set_name: str, arm: str) -> int:
    """``seeds_main`` for A*-PO and GRPO on the sets holding hard prompts, else ``seeds_other``."""
    main = set_name in ("hard", "mixed") and arm in ("astarpo", "grpo")
    return cfg.seeds_main if main else cfg.seeds_other
