"""The efficiency study's settings (the shared protocol plus what it varies), its runs of a seed
(:func:`arms`) and the presets of ``--task`` and ``--quick`` (:func:`presets`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import ALGORITHMS, TrainConfig
from experiments.harness.config import check_choices, check_integers, check_positive, nested
from experiments.harness.protocol import DROP_ARM, STAGE1_ARMS, TRAIN, TRAIN_FLAGS, Protocol

__all__ = [
    "ARM_LABELS",
    "FAIR_TUNING",
    "PAPER_QUICK",
    "PEER_ARMS",
    "PROTOCOLS",
    "QUICK",
    "TASK_PRESETS",
    "EfficiencyConfig",
    "arms",
    "peer_arms",
    "presets",
    "stage2_seconds",
]

#: The two protocols (``protocol``): equal wall-clock budgets, or the paper's equal steps.
PROTOCOLS = ("clock", "paper")

#: Runs of another library per ``peers`` entry (:mod:`experiments.efficiency.peers`), and
#: their names in the report.
PEER_ARMS: dict[str, tuple[str, ...]] = {"trl": ("trl_grpo", "trl_a2po")}
ARM_LABELS: dict[str, str] = {"trl_grpo": "TRL GRPO", "trl_a2po": "TRL A2PO"}


@dataclass(frozen=True)
class EfficiencyConfig(Protocol):
    """Settings of :func:`~experiments.efficiency.run.run` (each field's help says what it
    does); ``train`` holds the clock protocol's budget of every run (``max_train_seconds``) and
    the paper protocol's steps and evaluation interval (``steps``, ``eval_every_steps``)."""

    algos: tuple[str, ...] = doc_field(
        ("astarpo", "grpo", "rloo", "ppo", "rebel"),
        "Algorithms to compare; must include astarpo (the baseline of the ratios).",
    )
    drop_all_wrong: bool = doc_field(
        True, "Also run astarpo_drop: A*-PO without the prompts whose N Stage 1 samples all fail."
    )
    adaptive_n: bool = doc_field(
        False,
        "Also run A*-PO with another Stage 1 (at A*-PO's rate, Stage 1 inside each run): "
        "astarpo_adaptive (the adaptive rule, n_samples per prompt on average), "
        "astarpo_adaptive_half (adaptive, half the samples) and astarpo_half (fixed, n_samples/2).",
    )
    seeds: int = doc_field(3, "Seeds 0 .. seeds-1 per run (95% t-intervals over them).")
    train: TrainConfig = nested(
        replace(TRAIN, max_train_seconds=60.0, max_steps=200, eval_steps=20),
        {
            **{name: name for name in TRAIN_FLAGS},
            "max_train_seconds": "max_train_seconds",
            "steps": "max_steps",
            "eval_every_steps": "eval_steps",
        },
    )
    lr_grid: tuple[float, ...] = doc_field(
        (1e-4, 3e-4, 1e-3), "Learning rates of the sweep (one: no sweep), by validation curve."
    )
    learning_rates: dict[str, float] = doc_field(
        {},
        "A fixed learning rate per algorithm (JSON, e.g. '{\"astarpo\": 3.33e-5}'): those "
        "algorithms skip the sweep and train at it (e.g. the rates an earlier run's sweep "
        "chose); the others are swept over lr_grid.",
    )
    batch_grid: tuple[int, ...] = doc_field(
        (),
        "Prompts per step swept per algorithm on the clock protocol, after the rate, at the "
        "rate it chose (empty: every run takes batch_size). A choice on an edge extends the "
        "grid as the rate's does (grid_extensions).",
    )
    batch_sizes: dict[str, int] = doc_field(
        {},
        "Fixed prompts per step per algorithm on the clock protocol (JSON, e.g. "
        "'{\"astarpo\": 64}'): those algorithms skip the batch sweep (e.g. the sizes an "
        "earlier run's sweep chose); the others are swept over batch_grid.",
    )
    workers: int = doc_field(
        1,
        "Measured runs at once, each on `threads` cores. Above 1 the wall time falls, but runs "
        "side by side share the memory bandwidth: their times are not those of runs alone.",
    )
    sweep_workers: int = doc_field(
        1,
        "Sweep runs at once, each on `threads` cores (every algorithm's grid, then each round "
        "of extensions, side by side); the measured runs stay `workers` at a time. Above 1 the "
        "sweep's wall time falls; its runs share the memory bandwidth.",
    )
    grid_extensions: int = doc_field(
        2, "Times the sweep may add a rate beyond the grid's edge the choice sits on."
    )
    sweep_seconds: float = doc_field(20.0, "Budget of a sweep run (Stage 1 reused).")
    sweep_seed: int = doc_field(1000, "Seed of the sweep runs (not a main seed).")
    target_fractions: tuple[float, ...] = doc_field(
        (0.25, 0.5, 0.75), "Targets: fractions of the way from the reference to the best final."
    )
    peers: tuple[str, ...] = doc_field(
        (),
        "Other libraries on the same protocol: trl (TRL's GRPO and A2PO trainers; the "
        'bench-trl extra: torch==2.13.0 first, then pip install -e ".[bench-trl]").',
    )
    one_pass: bool = doc_field(
        False,
        "Then A*-PO and GRPO again on a pool no run goes through twice (sized from the "
        "main runs): Stage 1 paid for every prompt.",
    )
    protocol: str = doc_field(
        "clock",
        "clock: every run on one wall-clock budget (max_train_seconds), A*-PO's Stage 1 inside "
        "it. paper: every run for `steps` steps over the same prompt order in the paper's shape "
        "(2 minibatches per batch, entropy 0.001, gradient clip 1.0), its total time with and "
        "without Stage 1 measured.",
        choices=PROTOCOLS,
    )
    sweep_seeds: int = doc_field(
        1, "Seeds of each sweep score, from sweep_seed on (the score is their mean)."
    )

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_choices(self)
        check_integers(self, seeds=1, workers=1, sweep_workers=1, grid_extensions=0)
        check_integers(self, sweep_seeds=1, sweep_seed=0)
        check_positive(self, "sweep_seconds")
        if not self.train.max_train_seconds > 0:  # 0 would be no budget at all
            seconds = self.train.max_train_seconds
            raise ValueError(f"max_train_seconds must be a finite number > 0, got {seconds}.")
        if self.train.eval_steps < 1:
            raise ValueError(
                f"eval_every_steps must be an integer >= 1, got {self.train.eval_steps}."
            )
        peers = self.peers
        if not isinstance(peers, tuple) or any(p not in PEER_ARMS for p in peers):
            raise ValueError(f"peers must be a tuple drawn from {tuple(PEER_ARMS)}, got {peers!r}")
        if len(set(peers)) != len(peers):
            raise ValueError(f"peers lists a library twice: {peers}.")
        if self.batch_grid and (
            self.protocol == "paper"
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in self.batch_grid)
        ):
            raise ValueError(
                f"batch_grid must hold integers >= 1 and is for protocol='clock' only (on the "
                f"paper's protocol every algorithm takes batch_size, as the paper's do), got "
                f"{self.batch_grid} with protocol={self.protocol!r}."
            )
        sizes = self.batch_sizes
        if not isinstance(sizes, dict) or any(
            k not in (*self.algos, *peer_arms(self))
            or isinstance(v, bool)
            or not isinstance(v, int)
            or v < 1
            for k, v in sizes.items()
        ):
            raise ValueError(
                f"batch_sizes must map runs of algos/peers {(*self.algos, *peer_arms(self))} "
                f"to integers >= 1, got {sizes!r}."
            )
        if sizes and self.protocol == "paper":
            raise ValueError(
                "batch_sizes is for protocol='clock' only (on the paper's protocol every "
                "algorithm takes batch_size, as the paper's do)."
            )
        if self.protocol == "paper" and (peers or self.one_pass):
            raise ValueError(
                "protocol='paper' (the same number of updates for every algorithm) cannot run "
                "peers or one_pass (wall-clock settings): drop them, or use protocol='clock'."
            )
        if peers and self.task != "addition":
            raise ValueError(
                f"peers run on the addition task only (their reward scores exact answers "
                f"without EOS), got task={self.task!r}."
            )
        if any(a not in ALGORITHMS for a in self.algos) or "astarpo" not in self.algos:
            raise ValueError(
                f"algos must be drawn from {tuple(ALGORITHMS)} and include 'astarpo' (the "
                f"baseline of the ratios), got {self.algos}."
            )
        if not self.lr_grid or any(not (math.isfinite(x) and x > 0) for x in self.lr_grid):
            raise ValueError(f"lr_grid must be non-empty, of numbers > 0, got {self.lr_grid}.")
        given = self.learning_rates
        if not isinstance(given, dict) or any(
            k not in (*self.algos, *peer_arms(self)) for k in given
        ):
            raise ValueError(
                f"learning_rates must map runs of algos/peers {(*self.algos, *peer_arms(self))} "
                f"to rates, got {given!r}."
            )
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in given.values()) or (
            any(not (math.isfinite(v) and v > 0) for v in given.values())
        ):
            raise ValueError(f"learning_rates must be numbers > 0, got {given!r}.")
        if not self.target_fractions or any(not 0 < f < 1 for f in self.target_fractions):
            raise ValueError(
                f"target_fractions must be non-empty, in (0, 1): {self.target_fractions}"
            )
        if self.sweep_seed < self.seeds:
            raise ValueError(
                f"sweep_seed ({self.sweep_seed}) must not be a main seed 0..{self.seeds - 1}."
            )


def stage2_seconds(arm: str, seconds: float, stage1_s: float) -> float:
    """What a run's budget ``seconds`` leaves Stage 2 after its Stage 1; ``RuntimeError`` when
    Stage 1 took all of it."""
    if seconds - stage1_s <= 0:
        raise RuntimeError(
            f"{arm}: Stage 1 took {stage1_s:.1f} s of a {seconds} s budget; raise "
            "max_train_seconds or lower pool_size."
        )
    return seconds - stage1_s


def peer_arms(cfg: EfficiencyConfig) -> tuple[str, ...]:
    """The runs of the other libraries of ``cfg.peers`` (:data:`PEER_ARMS`)."""
    return tuple(arm for p in cfg.peers for arm in PEER_ARMS[p])


def arms(cfg: EfficiencyConfig) -> tuple[str, ...]:
    """The runs of one seed: ``cfg.algos``, ``astarpo_drop`` with ``drop_all_wrong``, the
    :data:`~experiments.harness.protocol.STAGE1_ARMS` with ``adaptive_n``, the peers."""
    own = (*cfg.algos, DROP_ARM) if cfg.drop_all_wrong else cfg.algos
    return (*own, *(STAGE1_ARMS if cfg.adaptive_n else ()), *peer_arms(cfg))


#: The clock protocol's tuning on every task (issue 30's fair tuning): each algorithm's rate,
#: then its prompts per step at that rate, scored on 3 seeds disjoint from the measured ones by
#: runs as long as the measured ones (60 s), a choice on an edge extended.
FAIR_TUNING: dict[str, Any] = dict(
    lr_grid=(3e-5, 1e-4, 3e-4), batch_grid=(16, 32, 64), sweep_seeds=3, sweep_seconds=60.0
)
#: ``--quick``: a smoke run of every code path but the sweep (well under 3 minutes on CPU).
QUICK: dict[str, Any] = dict(
    batch_grid=(),
    seeds=2,
    max_train_seconds=4.0,
    eval_every_seconds=2.0,
    lr_grid=(3e-4,),
    pool_size=128,
    eval_size=64,
    val_size=32,
)
#: ``--task scratchpad``: its budget and SFT rate; a protocol sized for responses of 70 tokens
#: on a loaded 2-core machine (docs/baselines.md): 5 seeds, 60 s per run, :data:`FAIR_TUNING`,
#: then the one-pass setting. ``scratchpad2`` (38 tokens) runs A*-PO and GRPO only:
#: the third length of the mechanism curve (experiments/benchmarks/length_sweep.py).
_SCRATCHPAD: dict[str, Any] = dict(
    seeds=5,
    sft_lr=3e-3,
    pool_size=256,
    eval_size=96,
    val_size=64,
    max_train_seconds=60.0,
    eval_every_seconds=20.0,
)
_PAIR = dict(algos=("astarpo", "grpo"), drop_all_wrong=False)
#: ``--quick`` on a scratchpad task: A*-PO and GRPO, two seeds, long enough to leave the
#: reference (about 3-5 minutes on a loaded 2-core machine).
_QUICK_SCRATCHPAD: dict[str, Any] = dict(
    QUICK,
    **_PAIR,
    one_pass=False,
    max_train_seconds=20.0,
    eval_every_seconds=10.0,
    lr_grid=(1e-4,),
    pool_size=64,
    eval_size=32,
)
#: Per task: the fields that differ from the defaults, and those ``--quick`` sets.
TASK_PRESETS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "addition": (FAIR_TUNING, QUICK),
    "scratchpad": (
        dict(_SCRATCHPAD, **FAIR_TUNING, max_new_tokens=78, one_pass=True),
        _QUICK_SCRATCHPAD,
    ),
    "scratchpad2": (
        dict(_SCRATCHPAD, **FAIR_TUNING, max_new_tokens=46, **_PAIR),
        _QUICK_SCRATCHPAD,
    ),
}


#: ``--quick`` on the paper protocol, over the task's ``--quick``: a few steps per run.
PAPER_QUICK: dict[str, Any] = dict(steps=6, eval_every_steps=2, batch_size=16)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields the given ``task``, ``protocol`` and ``--quick`` set (:data:`TASK_PRESETS`;
    the paper protocol without the one-pass setting and the batch sweep, and
    :data:`PAPER_QUICK` with ``--quick``)."""
    task, fast = TASK_PRESETS.get(given.get("task", "addition"), TASK_PRESETS["addition"])
    out = {**task, **(fast if quick else {})}
    if given.get("protocol") == "paper":
        out.update(one_pass=False, batch_grid=(), **(PAPER_QUICK if quick else {}))
    return out
