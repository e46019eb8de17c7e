"""The refresh study's settings: the shared protocol plus the ladder bins, refresh rules and
steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.harness.protocol import Protocol, option
from experiments.ladder.config import bin_label

__all__ = ["LADDER_BINS", "QUICK", "SCRATCHPAD", "RefreshConfig", "presets"]

#: The ladder bins the study trains on, as ``python -m experiments.ladder --bins`` takes them.
LADDER_BINS = ("0:-1", "-1:-2", "-2:-3")


@dataclass(frozen=True)
class RefreshConfig(Protocol):
    """Settings of :func:`~experiments.refresh.run.run` (see each field's ``help``).

    Every run is A*-PO on the same pool (the training prompts of ``bins``) and Stage 1 table,
    for ``max_steps`` steps; runs differ only in ``refresh_every_steps`` (0: the paper's fixed
    reference), so a seed's runs form a paired comparison against the fixed reference.
    """

    ladder: str = option(
        "",
        "A finished `python -m experiments.ladder` folder holding the bins below (e.g. an "
        "adaptive-n run's OUT/ladder); empty: run the ladder on those bins into OUT/ladder.",
    )
    ladder_prompts: int = option(
        200, "Training and held-out prompts per bin when the study runs the ladder.", 1
    )
    ladder_candidates: int = option(
        120000, "Zero-rich candidates the ladder draws when the study runs it (see the ladder).", 1
    )
    ladder_long_candidates: int = option(
        1000, "5-digit candidates the ladder draws when the study runs it (none in its bins).", 1
    )
    ladder_k: int = option(
        64, "Reference samples per prompt of the ladder's pass@k check when the study runs it.", 8
    )
    bins: tuple[str, ...] = option(
        ("[0,-1)", "[-1,-2)", "[-2,-3)"),
        "Ladder bins whose training prompts form the pool; each bin's held-out prompts are "
        "evaluated apart. Each a label ('[-2,-3)') or 'HI:LO' as "
        "`python -m experiments.ladder --bins` takes it (on the command line: "
        "--bins=0:-1,-2:-3, as labels hold commas).",
    )
    refresh_every: tuple[int, ...] = option(
        (0, 25), "Refresh rules compared (refresh_every_steps; 0: the fixed reference, first)."
    )
    learning_rate: float = option(3e-5, "A*-PO's learning rate of every run.", positive=True)
    seeds: int = option(3, "Seeds 0 .. seeds-1 per rule (95% t-intervals, paired by seed).", 1)
    max_steps: int = option(200, "Steps of every run (equal steps).", 1)
    eval_steps: int = option(25, "Held-out evaluation every this many steps (and at 0).", 1)
    pass_k: int = option(64, "k of the exact pass@k = 1 - (1 - pi(gold))^k per prompt.", 1)
    kl_rows: int = option(
        64, "Held-out prompts per bin sampled for KL(pi || the original reference).", 1
    )

    def __post_init__(self) -> None:
        super().__post_init__()
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
        labels = tuple(bin_label(b) if ":" in b else b for b in self.bins)
        object.__setattr__(self, "bins", labels)  # one spelling: the ladder's labels
        if not self.bins or len(set(self.bins)) != len(self.bins):
            raise ValueError(f"bins must be distinct ladder labels, got {self.bins!r}.")


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
