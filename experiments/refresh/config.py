"""The refresh study's settings: the shared protocol (its ``train`` with the rate, steps and
evaluation of every run), the ladder it reads or builds, the refresh rules and seeds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import TrainConfig
from experiments.harness.config import check_integers, nested
from experiments.harness.ladder_sets import QUICK as LADDER_QUICK
from experiments.harness.ladder_sets import LadderConfig, bin_labels
from experiments.harness.protocol import TRAIN, TRAIN_FLAGS, Protocol

__all__ = ["LADDER_BINS", "QUICK", "SCRATCHPAD", "RefreshConfig", "presets"]

#: The ladder bins the study trains on, as ``python -m experiments.ladder --bins`` takes them.
LADDER_BINS = ("0:-1", "-1:-2", "-2:-3")
#: The ladder the study builds when no ``ladder`` is given (its bins are the study's).
LADDER = LadderConfig(bins=LADDER_BINS, top_ups=LADDER_QUICK["top_ups"])


@dataclass(frozen=True)
class RefreshConfig(Protocol):
    """Settings of :func:`~experiments.refresh.run.run` (see each field's ``help``).

    Every run is A*-PO on the same pool (the training prompts of ``bins``) and Stage 1 table,
    for ``max_steps`` steps; runs differ only in ``refresh_every_steps`` (0: the paper's fixed
    reference), so a seed's runs form a paired comparison against the fixed reference.
    """

    ladder: str = doc_field(
        "",
        "A finished `python -m experiments.ladder` folder holding the bins below (e.g. an "
        "adaptive-n run's OUT/ladder); empty: build the ladder on those bins into OUT/ladder.",
    )
    ladder_build: LadderConfig = nested(
        LADDER,
        {
            "ladder_prompts": ("train", "test"),
            "ladder_candidates": "candidates",
            "ladder_long_candidates": "long_candidates",
            "ladder_k": "k",
        },
    )
    bins: tuple[str, ...] = doc_field(
        ("[0,-1)", "[-1,-2)", "[-2,-3)"),
        "Ladder bins whose training prompts form the pool; each bin's held-out prompts are "
        "evaluated apart. Each a label ('[-2,-3)') or 'HI:LO' as "
        "`python -m experiments.ladder --bins` takes it (on the command line: "
        "--bins=0:-1,-2:-3, as labels hold commas).",
    )
    refresh_every: tuple[int, ...] = doc_field(
        (0, 25), "Refresh rules compared (refresh_every_steps; 0: the fixed reference, first)."
    )
    train: TrainConfig = nested(
        replace(TRAIN, learning_rate=3e-5, max_steps=200, eval_steps=25),
        (*TRAIN_FLAGS, "learning_rate", "max_steps", "eval_steps"),
    )
    seeds: int = doc_field(3, "Seeds 0 .. seeds-1 per rule (95% t-intervals, paired by seed).")
    pass_k: int = doc_field(64, "k of the exact pass@k = 1 - (1 - pi(gold))^k per prompt.")
    kl_rows: int = doc_field(
        64, "Held-out prompts per bin sampled for KL(pi || the original reference)."
    )

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong): a refresh rule
        past the run's steps never refreshes, and is refused."""
        super().__post_init__()
        check_integers(self, seeds=1, pass_k=1, kl_rows=1)
        every = self.refresh_every
        if not every or every[0] != 0 or any(isinstance(k, bool) or k < 0 for k in every):
            raise ValueError(
                f"refresh_every must start with 0 (the fixed reference every rule is paired "
                f"against) and hold integers >= 0, got {every!r}; e.g. --refresh-every 0,25."
            )
        if len(set(every)) != len(every):
            raise ValueError(f"refresh_every must not repeat a rule, got {every!r}.")
        if not isinstance(self.bins, tuple):
            raise ValueError(f"bins must be a tuple of ladder bins, got {self.bins!r}.")
        object.__setattr__(self, "bins", bin_labels(self.bins))  # one spelling: the labels
        if not self.bins or len(set(self.bins)) != len(self.bins):
            raise ValueError(f"bins must be distinct ladder labels, got {self.bins!r}.")
        late = [k for k in every if k >= self.train.max_steps]
        if late:
            raise ValueError(
                f"refresh_every {', '.join(map(str, late))} would never refresh in runs of "
                f"max_steps={self.train.max_steps} steps (the refresh after step K happens at "
                f"the start of step K + 1): their runs would repeat the fixed reference's; use "
                f"rules below {self.train.max_steps}, or raise max_steps."
            )


#: The scratchpad task as the other studies run it (70-token worked solutions with EOS).
SCRATCHPAD: dict[str, Any] = dict(task="scratchpad", max_new_tokens=78, sft_lr=3e-3)
#: ``--quick``: every code path in a few minutes (a ladder of 12 + 12 prompts per bin sampled
#: 16 times each, 2 seeds of 4 steps of 8 prompts, one refresh per refreshing run, N = 4).
QUICK: dict[str, Any] = dict(seeds=2, max_steps=4, eval_steps=2, refresh_every=(0, 2), kl_rows=4)
QUICK.update(batch_size=8, n_samples=4)
QUICK.update(ladder_prompts=12, ladder_candidates=4000, ladder_long_candidates=1, ladder_k=16)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The scratchpad task (:data:`SCRATCHPAD`), and :data:`QUICK` with ``--quick``."""
    return {**SCRATCHPAD, **(QUICK if quick else {})}
