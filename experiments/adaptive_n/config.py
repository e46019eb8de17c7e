"""The adaptive-N study's settings: the ladder's (whose sets and samples it reads) plus the
rules compared."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.harness.protocol import option
from experiments.ladder.config import QUICK as LADDER_QUICK
from experiments.ladder.config import LadderConfig

__all__ = ["AdaptiveNConfig", "presets"]


@dataclass(frozen=True)
class AdaptiveNConfig(LadderConfig):
    """Settings of :func:`~experiments.adaptive_n.run.run` (see each field's ``help``).

    The ladder's fields say which prompt sets and how many reference samples per prompt
    (``k``) the study reads when it runs the ladder itself (``ladder`` empty); an easy bin
    (log10 v_ref in (-1, 0]) is added to the ladder's bins, since an allocation can only move
    samples between prompts that differ.
    """

    bins: tuple[str, ...] = option(
        ("0:-1", "-1:-2", "-2:-3", "-3:-4", "-4:-6", "-30:-inf"),
        "Bins of log10 v_ref, each 'HI:LO' (the ladder's, with an easy bin '0:-1' first).",
    )
    ladder: str = option(
        "",
        "A finished `python -m experiments.ladder` folder to read ladder_prompts.jsonl and "
        "ladder_samples.jsonl from; empty: run the ladder with this config's fields into "
        "OUT/ladder.",
    )
    beta1: float = option(
        0.5, "Stage 1 KL strength of every estimate (the paper: 0.5).", positive=True
    )
    fixed: tuple[int, ...] = option(
        (2, 4, 8, 16, 32, 64), "Fixed N compared (the first N of each prompt's k samples)."
    )
    adaptive: tuple[int, ...] = option(
        (4, 8, 16, 32),
        "Mean samples per prompt of the adaptive rule (its budgets; each also a fixed N "
        "gives a paired comparison).",
    )
    pilot: int = option(2, "The adaptive rule's pilot samples per prompt.", 1)
    cap: int = option(64, "The adaptive rule's most samples of one prompt (<= k).", 1)
    prompts_per_call: int = option(
        256, "Prompts sharing one budget (Stage1Config.prompts_per_call; the calls mix bins).", 1
    )
    calls_seed: int = option(0, "Seed of the calls' composition (the prompts' shuffle).", 0)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("fixed", "adaptive"):
            values = getattr(self, name)
            if not isinstance(values, tuple) or not values or min(values) < 1:
                raise ValueError(
                    f"{name} must be a non-empty tuple of integers >= 1, got {values!r}."
                )
        if max(self.fixed) > self.k:
            raise ValueError(
                f"fixed N up to {max(self.fixed)} needs k >= {max(self.fixed)} samples per "
                f"prompt, got k = {self.k}; raise k or drop the larger N."
            )
        if not self.pilot <= min(self.adaptive) <= max(self.adaptive) <= self.cap <= self.k:
            raise ValueError(
                "the adaptive rule needs pilot <= every budget <= cap <= k, got pilot "
                f"{self.pilot}, budgets {self.adaptive}, cap {self.cap}, k {self.k}."
            )


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """``--quick``: the ladder's quick sets (:data:`~experiments.ladder.config.QUICK`)."""
    return dict(LADDER_QUICK) if quick else {}
