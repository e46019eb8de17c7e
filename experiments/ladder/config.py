"""The ladder study's settings (:class:`LadderConfig`), its bins and ``--quick``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from astarpo.llm.toy.tasks import SCRATCHPAD_DIGITS, get_task
from experiments.harness.protocol import Protocol, RunOptions, option

__all__ = ["QUICK", "LadderConfig", "bin_label", "parse_bin", "presets"]


def parse_bin(text: str) -> tuple[float, float]:
    """``(hi, lo)`` of a bin written ``"HI:LO"`` (log10 v_ref, ``hi > lo``; ``LO`` may be
    ``-inf``): the bin holds ``lo < log10 v_ref <= hi``. ``ValueError`` for another text."""
    parts = text.split(":")
    try:
        hi, lo = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"a bin is 'HI:LO' (log10 v_ref, e.g. '-1:-2'), got {text!r}.") from None
    if not (math.isfinite(hi) and hi <= 0 and lo < hi and not math.isnan(lo)):
        raise ValueError(f"a bin 'HI:LO' needs 0 >= HI > LO (LO may be -inf), got {text!r}.")
    return hi, lo


def bin_label(text: str) -> str:
    """The label of bin ``"HI:LO"``: ``"[-1,-2)"`` (``hi`` included), ``"<=-30"`` for
    ``LO = -inf``."""
    hi, lo = parse_bin(text)
    return f"<={hi:g}" if lo == -math.inf else f"[{hi:g},{lo:g})"


@dataclass(frozen=True)
class LadderConfig(RunOptions):
    """Settings of :func:`~experiments.ladder.run.run` (see each field's ``help``).

    Bins are ``"HI:LO"`` strings (``lo < log10 v_ref <= hi``), disjoint; ``train`` and
    ``test`` prompts are kept per bin; the candidates are drawn as
    :mod:`experiments.ladder.sets` says.
    """

    bins: tuple[str, ...] = option(
        ("-1:-2", "-2:-3", "-3:-4", "-4:-6", "-30:-inf"),
        "Bins of log10 v_ref, each 'HI:LO' (LO < log10 v_ref <= HI; LO may be -inf); on the "
        "command line with '=' (--bins=-1:-2,-30:-inf), as the values start with '-'.",
    )
    train: int = option(200, "Training prompts per bin (>= 200 in the full run).", 1)
    test: int = option(200, "Held-out prompts per bin (>= 200 in the full run).", 1)
    candidates: int = option(
        120000, "Zero-rich 4-digit candidates drawn (before dedup: about 45000 distinct).", 1
    )
    long_candidates: int = option(1000, "5-digit candidates drawn (the zero-pass regime).", 1)
    top_ups: int = option(
        0,
        "Times the draw may add `candidates` more zero-rich problems (new seeds) while a bin "
        "holds too few (a stronger reference leaves fewer hard ones); 0: the sets as drawn.",
        0,
    )
    zero_low: float = option(0.5, "Lowest chance that a digit of a zero-rich operand is 0.")
    zero_high: float = option(0.95, "Highest chance that a digit of a zero-rich operand is 0.")
    seed: int = option(30, "Seed of the candidates' draw.", 0)
    sample_seed: int = option(31, "Seed of the pass@k samples.", 0)
    k: int = option(64, "Reference samples per prompt (pass@k = 0 for k = 8 and k).", 8)
    batch: int = option(256, "Sequences per teacher-forced forward pass.", 1)
    generation_batch_size: int = option(2048, "Sequences per generate call.", 1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.bins, tuple) or not self.bins:
            raise ValueError(f"bins must be a non-empty tuple of 'HI:LO', got {self.bins!r}.")
        edges = sorted((parse_bin(b) for b in self.bins), reverse=True)
        for (_, lo), (hi, _) in itertools.pairwise(edges):
            if hi > lo:
                raise ValueError(f"bins must not overlap, got {self.bins!r}.")
        if len(set(self.bins)) != len(self.bins):
            raise ValueError(f"bins must be distinct, got {self.bins!r}.")
        if not 0 <= self.zero_low <= self.zero_high < 1:
            raise ValueError(
                f"0 <= zero_low <= zero_high < 1 is required, got {self.zero_low} and "
                f"{self.zero_high}."
            )

    @property
    def digits(self) -> int:
        """Operand digits of the zero-rich candidates: the SFT data's."""
        return SCRATCHPAD_DIGITS

    @property
    def long_digits(self) -> int:
        """Operand digits of the long candidates: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1

    def protocol(self) -> Protocol:
        """The protocol of the reference: the scratchpad task (the efficiency and zero-pass
        studies' reference, from the same cache) with a budget for the long candidates' gold
        responses (``16 d + 6`` tokens with EOS, plus 8)."""
        return Protocol(
            threads=self.threads,
            rerun_slow=self.rerun_slow,
            task="scratchpad",
            max_new_tokens=16 * self.long_digits + 6 + 8,
            sft_lr=get_task("scratchpad").sft_lr,
            generation_batch_size=self.generation_batch_size,
        )


#: ``--quick``: every bin, 6 + 6 prompts each, topped up from new draws while a bin is short
#: (a reference SFT'd on another machine can be stronger: fewer hard candidates).
QUICK: dict[str, Any] = dict(train=6, test=6, candidates=24000, long_candidates=200, top_ups=6)


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields ``--quick`` sets (:data:`QUICK`)."""
    return dict(QUICK) if quick else {}
