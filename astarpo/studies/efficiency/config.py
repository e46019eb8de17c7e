"""The efficiency study's settings: :class:`EfficiencyConfig`, its runs, its presets.

:class:`EfficiencyConfig` is the shared :class:`~astarpo.studies.harness.protocol.Protocol`
plus what this study varies and reads (algorithms, seeds, budget, sweep, targets, peers, the
one-pass setting). :func:`arms` lists the runs of one seed (the algorithms, ``astarpo_drop``,
the peers); :func:`presets` the settings of ``--task`` and ``--quick``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from astarpo.llm.algorithms.config import doc_field
from astarpo.llm.algorithms.registry import ALGORITHMS
from astarpo.studies.harness.protocol import DROP_ARM, Protocol, check_ints, check_positive

__all__ = [
    "ARM_LABELS",
    "PEER_ARMS",
    "QUICK",
    "QUICK_TASK",
    "TASK_DEFAULTS",
    "EfficiencyConfig",
    "arms",
    "is_peer_arm",
    "peer_arms",
    "presets",
]

#: Runs of another library per ``peers`` entry (:mod:`astarpo.studies.efficiency.peers`).
PEER_ARMS: dict[str, tuple[str, ...]] = {"trl": ("trl_grpo", "trl_a2po")}

#: Names of the peer runs in the report.
ARM_LABELS: dict[str, str] = {"trl_grpo": "TRL GRPO", "trl_a2po": "TRL A2PO"}


@dataclass(frozen=True)
class EfficiencyConfig(Protocol):
    """Settings of :func:`~astarpo.studies.efficiency.run.run` (see each field's ``help``)."""

    algos: tuple[str, ...] = doc_field(
        ("astarpo", "grpo", "rloo", "ppo", "rebel"),
        "Algorithms to compare, comma-separated; must include astarpo (the ratios' baseline).",
    )
    drop_all_wrong: bool = doc_field(
        True, "Also run astarpo_drop: A*-PO without the prompts whose N Stage 1 samples all fail."
    )
    seeds: int = doc_field(3, "Seeds 0 .. seeds-1 per run (95% t-intervals over them).")
    max_train_seconds: float = doc_field(
        60.0, "Wall-clock budget of every run; A*-PO's Stage 1 is inside it."
    )
    lr_grid: tuple[float, ...] = doc_field(
        (1e-4, 3e-4, 1e-3),
        "Learning rates of the sweep (one value: no sweep); each run name gets the one with "
        "the best time-average of its validation curve.",
    )
    grid_extensions: int = doc_field(
        2, "Times the sweep may add a rate beyond the grid's edge when the choice is that edge."
    )
    sweep_seconds: float = doc_field(20.0, "Budget of each sweep run (Stage 1 reused there).")
    sweep_seed: int = doc_field(1000, "Seed of the sweep runs (not one of the main seeds).")
    target_fractions: tuple[float, ...] = doc_field(
        (0.25, 0.5, 0.75),
        "Targets, as fractions of the way from the reference's accuracy to the best final one.",
    )
    peers: tuple[str, ...] = doc_field(
        (),
        "Other libraries run under the same protocol: trl (TRL's GRPOTrainer and experimental "
        "A2POTrainer; the bench-trl extra: torch==2.13.0 first, then "
        'pip install -e ".[bench-trl]").',
    )
    one_pass: bool = doc_field(
        False,
        "Then run A*-PO and GRPO again, same seeds and rates, on a pool no run goes through "
        "twice (sized from the main runs), so that Stage 1 is paid for every prompt.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ints(self, "seeds")
        check_ints(self, "grid_extensions", low=0)
        check_positive(self, "max_train_seconds", "sweep_seconds")
        if not isinstance(self.peers, tuple) or any(p not in PEER_ARMS for p in self.peers):
            raise ValueError(
                f"peers must be a tuple drawn from {tuple(PEER_ARMS)}, got {self.peers!r}; e.g. "
                "peers=('trl',) (`--peers trl`)."
            )
        if len(set(self.peers)) != len(self.peers):
            raise ValueError(f"peers lists a library twice: {self.peers}.")
        if self.peers and self.task != "addition":
            raise ValueError(
                f"peers run on the addition task only (their reward wrapper scores exact "
                f"answers without EOS); got peers={self.peers!r} with task={self.task!r}."
            )
        if any(a not in ALGORITHMS for a in self.algos) or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {tuple(ALGORITHMS)} and include 'astarpo' (the "
                f"baseline of the ratios); got {self.algos}."
            )
        if not self.lr_grid or any(not (math.isfinite(x) and x > 0) for x in self.lr_grid):
            raise ValueError(f"lr_grid must be non-empty, of numbers > 0, got {self.lr_grid}.")
        if not self.target_fractions or any(not 0 < f < 1 for f in self.target_fractions):
            raise ValueError(
                f"target_fractions must be non-empty, each in (0, 1), got {self.target_fractions}."
            )
        if self.sweep_seed < self.seeds:
            raise ValueError(
                f"sweep_seed ({self.sweep_seed}) must not be one of the main seeds "
                f"0..{self.seeds - 1}."
            )


def peer_arms(cfg: EfficiencyConfig) -> tuple[str, ...]:
    """The runs of the other libraries of ``cfg.peers`` (:data:`PEER_ARMS`)."""
    return tuple(arm for p in cfg.peers for arm in PEER_ARMS[p])


def is_peer_arm(arm: str) -> bool:
    """True for a run of another library (:data:`PEER_ARMS`)."""
    return any(arm in names for names in PEER_ARMS.values())


def arms(cfg: EfficiencyConfig) -> tuple[str, ...]:
    """The runs of one seed: ``cfg.algos``, ``astarpo_drop`` with ``drop_all_wrong``, the peers."""
    own = (*cfg.algos, DROP_ARM) if cfg.drop_all_wrong else tuple(cfg.algos)
    return (*own, *peer_arms(cfg))


#: ``--quick``: a smoke run of every code path but the sweep (well under 3 minutes on CPU).
QUICK: dict[str, Any] = dict(
    seeds=2,
    max_train_seconds=4.0,
    eval_every_seconds=2.0,
    lr_grid=(3e-4,),
    pool_size=128,
    eval_size=64,
    val_size=32,
)

#: ``--task scratchpad``: the task's budget and SFT rate, and a protocol sized for responses of
#: 70 tokens on a loaded 2-core machine (docs/baselines.md gives the measured step times):
#: every algorithm and the drop arm, 5 seeds, 60 s per run, a grid that brackets the rates
#: (extended at an edge), then A*-PO and GRPO again in the one-pass setting.
_SCRATCHPAD: dict[str, Any] = dict(
    seeds=5,
    sft_lr=3e-3,
    pool_size=256,
    eval_size=96,
    val_size=64,
    max_train_seconds=60.0,
    eval_every_seconds=20.0,
    lr_grid=(3e-5, 1e-4, 3e-4, 1e-3),
    sweep_seconds=30.0,
)

#: Per task, the fields that differ from :class:`EfficiencyConfig`'s defaults. ``scratchpad2``
#: (38-token responses) runs A*-PO and GRPO only: its time-to-target ratio is the third length
#: of the mechanism curve (benchmarks/length_sweep.py).
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "addition": {},
    "scratchpad": dict(_SCRATCHPAD, max_new_tokens=78, one_pass=True),
    "scratchpad2": dict(
        _SCRATCHPAD, max_new_tokens=46, algos=("astarpo", "grpo"), drop_all_wrong=False
    ),
}

_QUICK_SCRATCHPAD: dict[str, Any] = dict(
    algos=("astarpo", "grpo"),
    drop_all_wrong=False,
    one_pass=False,
    seeds=2,
    max_train_seconds=20.0,
    eval_every_seconds=10.0,
    lr_grid=(1e-4,),
    pool_size=64,
    eval_size=32,
    val_size=32,
)

#: ``--quick`` on a scratchpad task: A*-PO and GRPO, two seeds, long enough to leave the
#: reference (about 3-5 minutes on a loaded 2-core machine); :data:`QUICK` on ``addition``.
QUICK_TASK: dict[str, dict[str, Any]] = {
    "addition": QUICK,
    "scratchpad": _QUICK_SCRATCHPAD,
    "scratchpad2": _QUICK_SCRATCHPAD,
}


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields that ``--task`` (in ``given``) and ``--quick`` set, under the given ones."""
    task = given.get("task", "addition")
    return {**TASK_DEFAULTS.get(task, {}), **(QUICK_TASK.get(task, QUICK) if quick else {})}
