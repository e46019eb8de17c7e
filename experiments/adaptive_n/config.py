"""The adaptive-N study's settings: the ladder's (whose sets and samples it reads) plus the
rules compared: fixed N and the adaptive allocation of Stage 1 (``stage1``: its ``beta1``,
pilot, cap and prompts per call)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from astarpo import doc_field
from astarpo.llm import Stage1Config
from experiments.harness.config import check_integers, nested
from experiments.harness.ladder_sets import QUICK as LADDER_QUICK
from experiments.harness.ladder_sets import LadderConfig

__all__ = ["BINS", "AdaptiveNConfig", "presets"]

#: The bins of the ladder the study builds: the ladder's, with an easy bin first.
BINS = ("0:-1", "-1:-2", "-2:-3", "-3:-4", "-4:-6", "-30:-inf")


@dataclass(frozen=True)
class AdaptiveNConfig(LadderConfig):
    """Settings of :func:`~experiments.adaptive_n.run.run` (each field's help says what it
    does).

    The ladder's fields say which prompt sets and how many reference samples per prompt
    (``k``) the study reads when it builds the ladder itself (``ladder`` empty); an easy bin
    (log10 v_ref in (-1, 0]) is added to the ladder's bins, since an allocation can only move
    samples between prompts that differ. With ``ladder``, ``bins`` selects among the ladder's
    bins (the default: all of them).
    """

    bins: tuple[str, ...] = doc_field(
        BINS,
        "Bins of log10 v_ref, each 'HI:LO' (the ladder's, with an easy bin '0:-1' first); with "
        "--ladder, the ladder's bins to read (the default: all of them).",
    )
    ladder: str = doc_field(
        "",
        "A finished `python -m experiments.ladder` folder to read ladder_prompts.jsonl and "
        "ladder_samples.jsonl from; empty: build the ladder with this config's fields into "
        "OUT/ladder.",
    )
    fixed: tuple[int, ...] = doc_field(
        (2, 4, 8, 16, 32, 64), "Fixed N compared (the first N of each prompt's k samples)."
    )
    adaptive: tuple[int, ...] = doc_field(
        (4, 8, 16, 32),
        "Mean samples per prompt of the adaptive rule (its budgets; each also a fixed N "
        "gives a paired comparison).",
    )
    stage1: Stage1Config = nested(
        Stage1Config(pilot_samples=2, max_samples=64, prompts_per_call=256, progress=False),
        {
            "beta1": "beta1",
            "pilot": "pilot_samples",
            "cap": "max_samples",
            "prompts_per_call": "prompts_per_call",
        },
    )
    calls_seed: int = doc_field(0, "Seed of the calls' composition (the prompts' shuffle).")

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_integers(self, calls_seed=0)
        for name in ("fixed", "adaptive"):
            values = getattr(self, name)
            if (
                not isinstance(values, tuple)
                or not values
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
            ):
                raise ValueError(
                    f"{name} must be a non-empty tuple of integers >= 1, got {values!r}."
                )
        if max(self.fixed) > self.k:
            raise ValueError(
                f"fixed N up to {max(self.fixed)} needs k >= {max(self.fixed)} samples per "
                f"prompt, got k = {self.k}; raise k or drop the larger N."
            )
        pilot, cap = self.stage1.pilot_samples, self.stage1.max_samples
        if not pilot <= min(self.adaptive) <= max(self.adaptive) <= cap <= self.k:
            raise ValueError(
                "the adaptive rule needs pilot <= every budget <= cap <= k, got pilot "
                f"{pilot}, budgets {self.adaptive}, cap {cap}, k {self.k}."
            )

    def ladder_config(self) -> LadderConfig:
        """The ladder the study builds when no ``ladder`` folder is given: this config's
        ladder fields, its reference ``protocol`` included (the flat view of the fields leaves
        the protocol's SFT settings and cache out)."""
        flat = LadderConfig.from_dict(
            {k: v for k, v in self.to_dict().items() if k in LadderConfig().to_dict()}
        )
        return replace(flat, protocol=self.protocol)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """``--quick``: the ladder's quick sets (:data:`~experiments.harness.ladder_sets.QUICK`)."""
    return dict(LADDER_QUICK) if quick else {}
