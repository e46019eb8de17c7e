"""The zero-pass study's settings, its training sets and runs, and ``--quick``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task
from experiments.harness.protocol import DROP_ARM, Protocol, RunOptions, option

__all__ = ["ARMS", "QUICK", "SETS", "ZeroPassConfig", "presets", "seeds_of"]

#: The training sets, and the runs of each.
SETS = ("hard", "mixed", "easy")
ARMS = ("astarpo", DROP_ARM, "grpo", "ppo", "rebel")


@dataclass(frozen=True)
class ZeroPassConfig(RunOptions):
    """Settings of :func:`~experiments.zero_pass.run.run` (see each field's ``help``)."""

    hard_train: int = option(200, "Hard training prompts (>= 200 in the full run).", 1)
    hard_eval: int = option(200, "Hard held-out prompts (>= 200 in the full run).", 1)
    easy_train: int = option(200, "Easy training prompts.", 1)
    easy_eval: int = option(128, "Easy held-out prompts.", 1)
    margin: int = option(8, "Extra hard candidates, in case the reference solves some.", 0)
    k: int = option(64, "Reference samples per hard candidate.", 1)
    seconds: float = option(30.0, "Stage 2 wall-clock budget of every run.", positive=True)
    eval_every_seconds: float = option(
        15.0, "Held-out evaluation every this many s of training time.", positive=True
    )
    seeds_main: int = option(5, "Seeds of A*-PO and GRPO on the sets with hard prompts.", 1)
    seeds_other: int = option(3, "Seeds of every other run.", 1)
    learning_rate: float = option(
        3e-5,
        "Learning rate of every run (no sweep): in a 25 s probe on the easy set, 1e-3 took the "
        "reference's accuracy from 0.41 to below 0.01 in a step; 3e-5 raised it steadily.",
        positive=True,
    )
    check_rows: int = option(64, "Training prompts per kind in the final log-ratio check.", 1)
    workers: int = option(2, "Runs at once (processes).", 1)

    @property
    def hard_digits(self) -> int:
        """Operand digits of the hard prompts: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1

    def protocol(self) -> Protocol:
        """The protocol of these runs: the scratchpad task (the efficiency study's reference,
        from the same cache), a budget for the hard prompts' gold responses (86 tokens), the
        easy rows as its pool and held-out split."""
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
QUICK: dict[str, Any] = dict(hard_train=12, hard_eval=12, easy_train=12, easy_eval=12, margin=1)
QUICK.update(seconds=6.0, eval_every_seconds=3.0, seeds_main=2, seeds_other=1, check_rows=12)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields ``--quick`` sets (:data:`QUICK`)."""
    return dict(QUICK) if quick else {}


def seeds_of(cfg: ZeroPassConfig, set_name: str, arm: str) -> int:
    """``seeds_main`` for A*-PO and GRPO on the sets holding hard prompts, else ``seeds_other``."""
    main = set_name in ("hard", "mixed") and arm in ("astarpo", "grpo")
    return cfg.seeds_main if main else cfg.seeds_other
