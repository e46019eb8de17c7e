r"""The quick ladder's search for a short bin (:func:`seek_candidates`, run by
:func:`~experiments.harness.ladder_build.draw_for` for ``top_ups`` rounds): why draws of the
same problems cannot fill the hard bins under a stronger reference, and why the walk can, is in
:mod:`experiments.harness.ladder_sets`. A round scores the one-digit neighbours
(:func:`neighbours`) of the :data:`SEARCH_PARENTS` not-yet-expanded candidates nearest each short
bin from above and as many from below; the first also seeds :data:`SHORT_SEEDS` problems of each
width of :data:`SHORT_DIGITS`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from astarpo.llm import SCRATCHPAD_DIGITS, parse_problem, scratchpad_solution, scratchpad_task
from experiments.harness.ladder_sets import (
    LadderConfig,
    bin_spec,
    new_rows,
    parse_bin,
    short_bins,
)

__all__ = ["SEARCH_PARENTS", "SHORT_DIGITS", "SHORT_SEEDS", "neighbours", "seek_candidates"]

#: Parents per short bin and side (nearest above it, nearest below) of a search round.
SEARCH_PARENTS = 16
#: Operand widths below the SFT data's seeded by the first search round (their v_ref lies
#: below the 4-digit problems': from about 10^-5 down).
SHORT_DIGITS = (SCRATCHPAD_DIGITS - 2, SCRATCHPAD_DIGITS - 1)
#: Problems of each width of :data:`SHORT_DIGITS` seeded by the first search round.
SHORT_SEEDS = 1000


def neighbours(prompt: str) -> list[dict[str, str]]:
    """The problems one operand digit away from the scratchpad problem ``prompt`` (same
    width; ``2 d * 9`` for ``d``-digit operands), in digit then value order, with their worked
    solutions. ``ValueError`` for a prompt that is no scratchpad problem."""
    parsed = parse_problem(prompt)
    if parsed is None:
        raise ValueError(f"{prompt!r} is not a scratchpad problem such as '0123+4567='.")
    a, b, d = parsed
    out = []
    for which in range(2):
        for place in range(d):
            old = ((a, b)[which] // 10**place) % 10
            for digit in range(10):
                if digit != old:
                    ops = [a, b]
                    ops[which] += (digit - old) * 10**place
                    out.append({"prompt": f"{ops[0]:0{d}d}+{ops[1]:0{d}d}=",
                                "answer": scratchpad_solution(ops[0], ops[1], d)})  # fmt: skip
    return out


def seek_candidates(
    cfg: LadderConfig,
    rows: Sequence[dict[str, str]],
    logp: np.ndarray,
    round_: int,
    taken: set[str],
    expanded: set[str],
) -> list[dict[str, str]]:
    """One search round for the short bins of ``cfg`` (see the module doc): the new
    neighbours of the :data:`SEARCH_PARENTS` not-yet-``expanded`` candidates nearest each
    short bin from above and from below (operands of at most ``cfg.digits`` digits; ``logp``:
    the natural-log v_ref of ``rows``), after, in round 1, :data:`SHORT_SEEDS` problems of
    each width of :data:`SHORT_DIGITS`. ``taken`` (prompts drawn or excluded) and
    ``expanded`` gain what the round used. Returns the new rows (``prompt``, ``answer``)."""
    seeds: list[dict[str, str]] = []
    if round_ == 1:
        for d in SHORT_DIGITS:
            seeds += scratchpad_task(SHORT_SEEDS, seed=cfg.seed + 2 + d, digits=d)
    more = new_rows(seeds, taken)
    log10 = np.asarray(logp, dtype=np.float64) / math.log(10.0)
    width = np.array([(parse_problem(r["prompt"]) or (0, 0, 99))[2] for r in rows])
    for label in short_bins(logp, cfg):
        hi, lo = parse_bin(bin_spec(label))
        if lo == -math.inf:
            continue  # the long candidates' bin: nothing to walk from
        gap = np.maximum(log10 - hi, 0.0) + np.maximum(lo - log10, 0.0)
        order = np.argsort(gap, kind="stable").tolist()
        for side in (log10 > lo, log10 <= lo):  # above the bin's floor (or in it), below it
            free = [i for i in order if side[i] and width[i] <= cfg.digits]
            free = [i for i in free if rows[i]["prompt"] not in expanded][:SEARCH_PARENTS]
            for i in free:
                expanded.add(rows[i]["prompt"])
                more += new_rows(neighbours(rows[i]["prompt"]), taken)
    return more
