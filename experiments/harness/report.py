"""The report every study writes (:func:`write`: ``NAME.json/md/png``) and the formatting its
Markdown shares (:func:`fmt`, :func:`fmt_ci`, :func:`fmt_ratio`, :func:`table`,
:func:`process_lines`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from experiments.harness.output import OutputDir
from experiments.harness.runner import MIN_CPU_SHARE

__all__ = ["fmt", "fmt_ci", "fmt_ratio", "missing", "process_lines", "standard_json", "table"]
__all__ += ["write", "write_json"]


def missing(x: Any) -> bool:
    """True for ``None`` and NaN: no value (an interval of one seed, after JSON: ``null``)."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits; ``n/a`` for a missing value."""
    return "n/a" if missing(x) else f"{x:.{digits}g}"


def fmt_ci(c: Mapping[str, Any], digits: int = 3) -> str:
    """``mean [low, high]`` of an interval dict; the mean alone without an interval."""
    if missing(c["low"]):
        return fmt(c["mean"], digits)
    return f"{fmt(c['mean'], digits)} [{fmt(c['low'], digits)}, {fmt(c['high'], digits)}]"


def fmt_ratio(r: Mapping[str, Any]) -> str:
    """A :func:`~astarpo.analysis.stats.paired_ratio`: ``ratio [low, high]``, with the pairs
    used when some are missing (a target not reached)."""
    total = r["pairs"] + r["missing"]
    if not r["pairs"]:
        return f"n/a (0/{total} pairs)"
    ci = "" if missing(r["low"]) else f" [{r['low']:.2f}, {r['high']:.2f}]"
    return f"{r['ratio']:.2f}{ci}" + (f" ({r['pairs']}/{total} pairs)" if r["missing"] else "")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines (cells as ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def process_lines(result: Mapping[str, Any]) -> list[str]:
    """The report's lines on the clock: the study's wall time and load average, a load warning,
    how many runs had CPU/wall below :data:`MIN_CPU_SHARE` and how many were read back by
    ``--resume`` (a result from before the runs recorded their processes: the wall time and
    load alone)."""
    if "wall_s" not in result:
        return []
    load = result.get("load") or {"start": result.get("load_start"), "end": result.get("load_end")}
    runs = [r for r in result.get("runs", []) if "process" in r]
    lines = [
        "",
        f"Wall time of the whole study: {result['wall_s']:.0f} s; load average (1/5/15 min) "
        f"at the start {load['start']}, at the end {load['end']}.",
    ]
    if runs:
        lines[-1] += (
            f" Every run's clock and its process's wall and CPU time are in its result: "
            f"{result.get('slow_runs', 0)} of {len(runs)} runs had CPU/wall below "
            f"{MIN_CPU_SHARE} (`process.slow`: their core was shared, their times are longer "
            "than on an idle machine)."
        )
    if result.get("resumed_runs"):
        lines[-1] += (
            f" {result['resumed_runs']} runs were read back from an earlier, interrupted run of "
            "the study (`--resume`; `process.resumed`): the wall time is this process's only."
        )
    if load.get("warning"):
        lines.append(f"Warning at the start: {load['warning']}.")
    return lines


def standard_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by ``None`` (in nested dicts, lists and
    tuples too), so that ``json.dumps(..., allow_nan=False)`` writes standard JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: standard_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [standard_json(v) for v in obj]
    return obj


def write_json(output: OutputDir, result: dict[str, Any]) -> None:
    """Write ``NAME.json`` into ``output`` (recorded in its manifest first): standard JSON
    (:func:`standard_json`), written whole (a file beside it, then renamed); then seal every
    folder the study recorded (:meth:`~experiments.harness.output.OutputDir.seal`)."""
    path = output.record(f"{output.stem}.json")
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps(standard_json(result), indent=1, allow_nan=False) + "\n")
    tmp.replace(path)
    output.seal()  # the study's folders are written: their files are the study's


def write(
    output: OutputDir,
    result: dict[str, Any],
    markdown: str,
    plot: Callable[[dict[str, Any], Any], Any],
    with_json: bool = True,
) -> None:
    """Write ``NAME.json`` (unless not ``with_json``), ``NAME.md`` and ``NAME.png`` (drawn by
    ``plot(result, path)``) into ``output``, recording each in its manifest first."""
    stem = output.stem
    if with_json:
        write_json(output, result)
    output.record(f"{stem}.md").write_text(markdown)
    plot(result, output.record(f"{stem}.png"))
