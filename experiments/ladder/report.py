"""The ladder study's report: ``ladder.json``, ``ladder.md`` (one row per bin) and
``ladder.png`` (the pass@k = 0 fractions per bin, sampled against what v_ref predicts)."""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis import figure, legend_below, save, styled
from experiments.harness.ladder_build import summarize
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, process_lines, table
from experiments.harness.report import write as write_report

__all__ = ["plot", "refresh", "to_markdown", "write"]


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its summary made again from its bins."""
    return {**result, "summary": summarize(result)}


def to_markdown(result: dict[str, Any]) -> str:
    """The report: one row per bin."""
    ks, cfg = result["pass_k"], result["config"]
    header = ["bin (log10 v_ref)", "prompts (train + test)", "candidates in bin", "log10 v_ref"]
    for k in ks:
        header += [f"pass@{k} = 0 (sampled)", f"pass@{k} = 0 (from v_ref)", "p"]
    rows = []
    for label, s in result["summary"]["bins"].items():
        span = f"{s['log10_min']:.2f} .. {s['log10_max']:.2f}"
        row = [label, s["prompts"], s["candidates"], span]
        for k in ks:
            row += [fmt(s[f"pass{k}_zero"]), fmt(s[f"pass{k}_zero_expected"])]
            row.append(fmt(s[f"pass{k}_p_value"], 2))
        rows.append(row)
    tf = result["teacher_forcing"]
    lines = ["# The v_ref ladder: prompt sets by the reference's exact solve probability", ""]
    lines += [
        f"v_ref is the reference's teacher-forced probability of a prompt's one gold worked "
        f"solution followed by EOS (exact-match reward), computed for {tf['candidates']} "
        f"candidates in {tf['seconds']:.1f} s; each bin keeps {cfg['train']} training and "
        f"{cfg['test']} held-out prompts (`ladder_prompts.jsonl`; the reference in "
        "`reference/`, read back with `experiments.harness.ladder_sets.load_reference`). "
        "pass@k = 0 is sampled "
        f"({cfg['k']} reference samples per prompt at "
        "temperature 1, the first k of them); 'from v_ref' is the mean of (1 - v_ref)^k, and p "
        "the exact two-sided Poisson-binomial p-value of the sampled count.",
        "",
    ]
    lines += table(header, rows)
    return "\n".join([*lines, *process_lines(result)]) + "\n"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Per bin, the sampled pass@k = 0 fraction (bars) and the v_ref prediction (markers)."""
    fig, (ax,) = figure()
    labels = list(result["summary"]["bins"])
    x, ks = np.arange(len(labels)), result["pass_k"]
    width = 0.8 / len(ks)
    for j, k in enumerate(ks):
        rows = [result["summary"]["bins"][b] for b in labels]
        pos = x + (j - (len(ks) - 1) / 2) * width
        ax.bar(pos, [r[f"pass{k}_zero"] for r in rows], width, color=f"C{j}",
               label=f"pass@{k} = 0, sampled")  # fmt: skip
        ax.plot(pos, [r[f"pass{k}_zero_expected"] for r in rows], "k_", markersize=14,
                label="from v_ref" if j == 0 else None)  # fmt: skip
    ax.set_xticks(x, labels)
    ax.set(xlabel="bin of log10 v_ref", ylabel="fraction of prompts", ylim=(0, 1.05))
    handles, names = ax.get_legend_handles_labels()
    legend_below(fig, handles, names, ncol=3)
    return save(fig, path, "Prompts the reference never solves in k samples, by v_ref", strict=True)


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``ladder.json`` (unless not ``with_json``), ``ladder.md`` and ``ladder.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
