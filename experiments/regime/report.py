"""The regime ladder's report: ``regime.json`` (the runs, the sweeps, the readings),
``regime.md`` (the tables docs/regimes.md shows) and ``regime.png`` (final accuracy against
prompts per step and against sequences per step, per algorithm, with 95% intervals)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from astarpo.analysis import errorbars, figure, legend_below, save, styled
from experiments.regime.summary import summarize

__all__ = ["build", "plot", "to_markdown", "write"]

#: Algorithms in the order of the tables, with their colour in every panel.
COLORS = {"astarpo": "C0", "grpo": "C1", "rloo": "C2", "ppo": "C3", "rebel": "C4"}
NAMES = {"astarpo": "A*-PO", "grpo": "GRPO", "rloo": "RLOO", "ppo": "PPO", "rebel": "REBEL"}


def build(cells: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The content of ``regime.json``: each cell's config and sweep, and :func:`summarize`."""
    return {
        "cells": {
            c["cell"]: {
                "config": c["config"],
                "sweep": c.get("sweep", {}),
                "wall_s": c.get("wall_s"),
            }
            for c in cells
        },
        **summarize(cells),
    }


def _ci(c: Mapping[str, Any], digits: int = 3) -> str:
    if c is None or math.isnan(c.get("mean", c.get("diff", math.nan))):
        return "-"
    point = c.get("mean", c.get("diff"))
    if math.isnan(c["low"]):
        return f"{point:.{digits}f}"
    return f"{point:.{digits}f} [{c['low']:.{digits}f}, {c['high']:.{digits}f}]"


def _ratio(c: Mapping[str, Any]) -> str:
    return "-" if math.isnan(c["ratio"]) else f"{c['ratio']:.2f} [{c['low']:.2f}, {c['high']:.2f}]"


def to_markdown(result: Mapping[str, Any]) -> str:
    """The tables: final accuracy per algorithm and size, the gap to GRPO by size, equal
    sequences, the Holm family, the rule's answer."""
    final = result["final"]
    sizes = sorted({int(b) for per in final.values() for b in per})
    algos = [a for a in COLORS if a in final]
    lines = ["# The efficiency verdict by regime", "", "## Final held-out expected accuracy", ""]
    lines += ["| prompts per step | " + " | ".join(NAMES[a] for a in algos) + " |"]
    lines += ["| --- |" + " --- |" * len(algos)]
    for b in sizes:
        cells = [_ci(final[a][str(b)]["accuracy"]) if str(b) in final[a] else "" for a in algos]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", "## A*-PO minus GRPO at the same prompts per step", ""]
    lines += ["| prompts per step | accuracy | KL | seeds |", "| --- | --- | --- | --- |"]
    for b, g in result["gaps"].items():
        lines.append(f"| {b} | {_ci(g['accuracy'])} | {_ci(g['kl'])} | {g['accuracy']['pairs']} |")
    lines += ["", "## Equal sequences per step (A*-PO at 8B prompts, GRPO at B)", ""]
    lines += ["| sequences | accuracy | KL | time (wall) | time (CPU) |"]
    lines += ["| --- | --- | --- | --- | --- |"]
    for e in result["equal_sequences"]:
        lines.append(
            f"| {e['sequences_per_step']} (GRPO at {e['peer_prompts_per_step']}) | "
            f"{_ci(e['accuracy'])} | {_ci(e['kl'])} | {_ratio(e['time'])} | "
            f"{_ratio(e['cpu_time'])} |"
        )
    lines += ["", "## Every difference, Holm over the family", ""]
    lines += ["| A*-PO minus | accuracy | p | Holm p |", "| --- | --- | --- | --- |"]
    for k, d in result["differences"].items():
        lines.append(f"| {k} | {_ci(d)} | {d['p']:.3g} | {d['holm_p']:.3g} |")
    rule = result["rule"]
    lines += ["", "## The rule", "", rule["text"], ""]
    if rule["size"] is not None:
        lines.append(f"At B* = {rule['size']}: d = {_ci(rule['d'])}: **{rule['verdict']}**.")
    return "\n".join(lines) + "\n"


@styled
def plot(result: Mapping[str, Any], path: str | Path) -> Path:
    """Two panels: final expected accuracy against prompts per step and against sequences per
    step (log 2 axes), one colour per algorithm in both, 95% intervals over seeds."""
    from matplotlib.ticker import ScalarFormatter

    fig, axes = figure(cols=2, height=3.4)
    final = result["final"]
    for ax, key, label in (
        (axes[0], None, "prompts per step"),
        (axes[1], "sequences_per_step", "sequences per step"),
    ):
        for algo, color in COLORS.items():
            if algo not in final:
                continue
            sizes = sorted(final[algo], key=int)
            xs = [int(b) if key is None else final[algo][b][key] for b in sizes]
            acc = [final[algo][b]["accuracy"] for b in sizes]
            errorbars(
                ax,
                xs,
                [a["mean"] for a in acc],
                [a["low"] for a in acc],
                [a["high"] for a in acc],
                fmt="-o",
                color=color,
                label=NAMES[algo],
                capsize=3,
            )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 16, 32, ... rather than 2^4
        ax.set(xlabel=label, ylabel="final expected accuracy")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=5)
    return save(fig, path, "240 steps, paper protocol; mean over 5 seeds with 95% interval")


def write(result: Mapping[str, Any], out: str | Path) -> None:
    """``regime.json``, ``regime.md`` and ``regime.png`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "regime.json").write_text(json.dumps(result, indent=1, allow_nan=True) + "\n")
    (out / "regime.md").write_text(to_markdown(result))
    plot(result, out / "regime.png")
