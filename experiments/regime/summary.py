"""The regime ladder's readings: every paper-protocol cell's runs (one efficiency study per
prompts-per-step size, read from its ``bench.json``) gathered into one table, the gap between
A*-PO and GRPO at each size, the same at equal sequences per step, Holm over the family, and the
rule stated on docs/regimes.md.

Pure functions over plain dicts, so a test can plant runs with a known answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from astarpo.analysis import holm, mean_interval, paired_difference, paired_ratio

__all__ = [
    "METHOD",
    "REGIME",
    "RULE",
    "equal_sequences",
    "gaps",
    "load_cells",
    "rule_verdict",
    "run_rows",
    "summarize",
]

#: The rule's thresholds (docs/regimes.md, committed before the measured runs): A*-PO minus GRPO
#: in final expected accuracy at the largest size both ran.
REGIME = -0.03
METHOD = -0.10
#: The rule as the page states it.
RULE = (
    "d(B) = A*-PO's final held-out expected accuracy minus GRPO's at the same prompts per step "
    "B, paired by seed, with its 95% t-interval; B* = the largest size both ran. The regime: "
    f"mean d(B*) >= {REGIME}. The method: mean d(B*) <= {METHOD} and the interval's upper end "
    f"< {REGIME}. Otherwise in between."
)
#: The baseline of every comparison.
BASE = "astarpo"


def load_cells(folders: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The ``bench.json`` of each cell folder (one efficiency study on the paper protocol), with
    its folder's name under ``"cell"``; ``ValueError`` naming a folder without one or a study
    on another protocol."""
    cells = []
    for folder in folders:
        path = Path(folder) / "bench.json"
        if not path.is_file():
            raise ValueError(f"{folder}: no bench.json (an unfinished cell?); finish it first.")
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON ({e}).") from e
        if result.get("config", {}).get("protocol") != "paper":
            raise ValueError(f"{path} is not a paper-protocol study (its protocol is not 'paper').")
        cells.append({**result, "cell": Path(folder).name})
    return cells


def _final(run: Mapping[str, Any], key: str) -> float:
    evals = run.get("evals") or []
    return float(evals[-1][key]) if evals and key in evals[-1] else math.nan


def run_rows(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured run of every cell: ``algo``, ``seed``, ``prompts_per_step``,
    ``sequences_per_step``, ``lr``, ``steps``, ``time`` (Stage 1 + training, wall), ``cpu_time``
    (the same on the process CPU clock, evaluation excluded), ``wall_seconds`` and
    ``cpu_seconds`` (the whole process), ``accuracy`` (final held-out expected accuracy),
    ``greedy`` (final greedy accuracy), ``kl`` (final KL to the reference) and ``cell``."""
    rows = []
    for cell in cells:
        batch = int(cell["config"]["batch_size"])
        for r in cell["runs"]:
            rows.append(
                {
                    "algo": r["algo"],
                    "seed": int(r["seed"]),
                    "prompts_per_step": batch,
                    "sequences_per_step": batch * int(r["samples_per_prompt"]),
                    "lr": float(r["lr"]),
                    "steps": int(r["steps"]),
                    "time": float(r["clock_s"]),
                    "cpu_time": _final(r, "cpu_time"),
                    "wall_seconds": float(r.get("wall_seconds", math.nan)),
                    "cpu_seconds": float(r.get("cpu_seconds", math.nan)),
                    "accuracy": _final(r, "expected_accuracy"),
                    "greedy": _final(r, "accuracy"),
                    "kl": _final(r, "kl"),
                    "cell": cell["cell"],
                }
            )
    return rows


def _by_seed(rows: Sequence[Mapping[str, Any]], algo: str, batch: int) -> dict[int, Mapping]:
    return {r["seed"]: r for r in rows if r["algo"] == algo and r["prompts_per_step"] == batch}


def _paired(a: Mapping[int, Mapping], b: Mapping[int, Mapping], key: str) -> tuple[list, list]:
    seeds = sorted(set(a) & set(b))
    return [a[s][key] for s in seeds], [b[s][key] for s in seeds]


def gaps(rows: Sequence[Mapping[str, Any]], peer: str = "grpo") -> dict[int, dict[str, Any]]:
    """Per prompts-per-step size where both ran: A*-PO minus ``peer`` in final expected
    accuracy and KL (:func:`~astarpo.analysis.stats.paired_difference`, paired by seed)."""
    sizes = sorted({r["prompts_per_step"] for r in rows})
    out = {}
    for b in sizes:
        mine, theirs = _by_seed(rows, BASE, b), _by_seed(rows, peer, b)
        if mine and theirs:
            out[b] = {
                "accuracy": paired_difference(*_paired(mine, theirs, "accuracy")),
                "kl": paired_difference(*_paired(mine, theirs, "kl")),
            }
    return out


def equal_sequences(rows: Sequence[Mapping[str, Any]], peer: str = "grpo") -> list[dict]:
    """A*-PO at ``G B`` prompts per step against ``peer`` at ``B`` (the same sequences per step),
    paired by seed: differences in final accuracy and KL, ratios of both clocks."""
    out = []
    for b in sorted({r["prompts_per_step"] for r in rows if r["algo"] == peer}):
        theirs = _by_seed(rows, peer, b)
        sequences = next(iter(theirs.values()))["sequences_per_step"]
        mine = {s: r for s, r in _by_seed(rows, BASE, sequences).items()}
        if not mine:
            continue
        out.append(
            {
                "peer": peer,
                "peer_prompts_per_step": b,
                "astarpo_prompts_per_step": sequences,
                "sequences_per_step": sequences,
                "accuracy": paired_difference(*_paired(mine, theirs, "accuracy")),
                "kl": paired_difference(*_paired(mine, theirs, "kl")),
                "time": paired_ratio(*_paired(mine, theirs, "time")),
                "cpu_time": paired_ratio(*_paired(mine, theirs, "cpu_time")),
            }
        )
    return out


def rule_verdict(gap: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The rule of docs/regimes.md (:data:`RULE`) on :func:`gaps`' output: ``{"size", "d",
    "verdict"}`` with ``verdict`` one of ``"the regime"``, ``"the method"``, ``"in between"``
    (``"not decided"`` without a size both ran)."""
    if not gap:
        return {"size": None, "d": None, "verdict": "not decided"}
    size = max(gap)
    d = gap[size]["accuracy"]
    if d["diff"] >= REGIME:
        verdict = "the regime"
    elif d["diff"] <= METHOD and d["high"] < REGIME:
        verdict = "the method"
    else:
        verdict = "in between"
    return {"size": size, "d": d, "verdict": verdict}


def summarize(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every reading of the ladder: ``runs`` (:func:`run_rows`), ``final`` (per algorithm and
    size: final accuracy, KL and both clocks as mean intervals), ``gaps``, ``equal_sequences``,
    ``holm`` (A*-PO against every peer at every size both ran, final accuracy; one family),
    ``rule`` and the rule's text."""
    rows = run_rows(cells)
    final: dict[str, dict[str, Any]] = {}
    for algo in sorted({r["algo"] for r in rows}):
        final[algo] = {}
        for b in sorted({r["prompts_per_step"] for r in rows if r["algo"] == algo}):
            rs = list(_by_seed(rows, algo, b).values())
            final[algo][str(b)] = {
                k: mean_interval([r[k] for r in rs]) for k in ("accuracy", "kl", "time", "cpu_time")
            } | {"sequences_per_step": rs[0]["sequences_per_step"], "lr": rs[0]["lr"]}
    diffs: dict[str, dict[str, Any]] = {}
    for peer in sorted({r["algo"] for r in rows} - {BASE}):
        for b, g in gaps(rows, peer).items():
            diffs[f"{peer}@{b}"] = g["accuracy"]
    adjusted = holm({k: float(v["p"]) for k, v in diffs.items()})
    gap = gaps(rows)
    return {
        "runs": rows,
        "final": final,
        "gaps": {str(b): g for b, g in gap.items()},
        "differences": {k: {**v, "holm_p": adjusted.get(k, math.nan)} for k, v in diffs.items()},
        "equal_sequences": equal_sequences(rows),
        "rule": {**rule_verdict(gap), "text": RULE},
    }
