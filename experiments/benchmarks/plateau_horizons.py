"""The plateau rule of the paper protocol read at every horizon of a longer run.

Run from the repository root::

    python -m experiments.benchmarks.plateau_horizons docs/figures/paper_plateau_pilot.json \
        [--start 400] [--every 200]

The argument: a study's ``bench.json`` (or any JSON with ``runs``), or a study's output folder
(its ``runs/*/result.json``: the finished measured runs, the sweep's left out), of the paper
protocol. Each run's first ``t`` steps stand for a ``t``-step run (constant learning rate,
steps seeded by their index; see :func:`experiments.efficiency.plateau.by_horizon`).
Prints a Markdown table: per horizon,
the best run name, its expected accuracy, the earlier two-reading gain, the rule's window gain
and its rate per 1,000 steps (95% intervals over seeds), whether the rule is met, and A*-PO's
expected accuracy and its difference from the best, paired by seed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from astarpo.analysis import paired_difference
from experiments.benchmarks.common import parser
from experiments.efficiency.plateau import by_horizon, value_at_step


def load(src: Path) -> list[dict[str, Any]]:
    """The runs of a result JSON or of a study folder's finished measured runs (``SystemExit``
    saying what is wrong for a missing path, a JSON without ``runs`` or a clock-protocol
    study, whose runs differ in steps)."""
    if src.is_dir():
        found = sorted(src.glob("runs/*/result.json"))
        found = [p for p in found if not p.parent.name.startswith("sweep-")]
        specs = [json.loads((p.parent / "spec.json").read_text()) for p in found]
        protocol = specs[0]["config"].get("protocol", "clock") if specs else "paper"
        runs = [json.loads(p.read_text()) for p in found]
    elif src.is_file():
        try:
            result = json.loads(src.read_text())
            runs = result["runs"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise SystemExit(f"{src}: not a study result (a JSON object with 'runs'): {e}") from e
        protocol = result.get("config", {}).get("protocol", "paper")
    else:
        raise SystemExit(f"{src}: no such file or folder (give a bench.json or a study's --out)")
    if protocol != "paper":
        raise SystemExit(
            f"{src}: a {protocol}-protocol study; the plateau rule reads steps, which only the "
            "paper protocol gives every run alike (--protocol paper)"
        )
    return runs


def ci(d: dict[str, Any]) -> str:
    """``diff [low, high]`` with signs; the difference alone without an interval."""
    if d["low"] is None or not math.isfinite(d["low"]):
        return f"{d['diff']:+.3f}"
    return f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def main() -> None:
    ap = parser(__doc__.splitlines()[0], start=400, every=200)
    ap.add_argument("result", type=Path)
    args = ap.parse_args()
    runs = [r for r in load(args.result) if r.get("evals")]
    if not runs:
        raise SystemExit(f"{args.result}: no run with evaluations")
    last = min(r["steps"] for r in runs)
    horizons = list(range(args.start, last + 1, args.every))
    if not horizons:
        raise SystemExit(f"--start {args.start} is past the shortest run's {last} steps")
    print(
        "| steps T | best | its expected accuracy | its gain, T minus 3T/4 | its window gain "
        "| per 1,000 steps | rule met | A\\*-PO expected accuracy | A\\*-PO minus the best |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    seeds = sorted({r["seed"] for r in runs})

    def at(arm: str, t: int) -> list[float | None]:
        """``arm``'s expected accuracy at step ``t`` per seed (None where it has no run)."""
        by_seed = {r["seed"]: r for r in runs if r["arm"] == arm}
        return [
            value_at_step(by_seed[s], "expected_accuracy", t) if s in by_seed else None
            for s in seeds
        ]

    for row in by_horizon(runs, horizons):
        t, best = row["steps"], row["best"]
        has_a = "astarpo" in row["accuracy"]
        a_acc = f"{row['accuracy']['astarpo']:.3f}" if has_a else "n/a"
        gap = ci(paired_difference(at("astarpo", t), at(best, t))) if has_a else "n/a"
        print(
            f"| {t} | {best} | {row['accuracy'][best]:.3f} | {ci(row['gain'])} "
            f"| {ci(row['window'])} | {ci(row['rate'])} | {'yes' if row['plateaued'] else 'no'} "
            f"| {a_acc} | {gap} |"
        )


if __name__ == "__main__":
    main()
