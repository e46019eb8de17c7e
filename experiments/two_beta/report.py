r"""The two-beta study's report: ``two_beta.json``, ``two_beta.md``, ``two_beta.png``.

The proposition of docs/theory.md ("Two betas") says that on-policy, the expected A*-PO update
does not depend on ``beta1`` (V* multiplies :math:`E[\nabla \log \pi] = 0`) and that ``beta1``
moves only its variance. Outcomes at equal steps cannot show the expected update directly (a
noisier gradient with the same mean also trains differently, under AdamW all the more), so the
verdicts, per learning rate, over the comparisons of every ``beta1`` against 0.5 on paired
seeds, Holm-adjusted within each family, are (:data:`RULE`):

- **accuracy**: *differs* where an adjusted paired difference of the final expected accuracy
  has p < 0.05 (named), else *no difference found*;
- **noise**: the same for the paired ratio of the mean squared gradient norm;
- **reading**: *through the noise* when every ``beta1`` whose accuracy differs also has its
  noise differ, on the other side (lower noise, higher accuracy), as the proposition allows;
  *not through the noise* when some accuracy difference has no noise difference against it
  (``beta1`` then acts on the outcome some other way); *noise only* when the noise differs and
  the accuracy does not; *no effect* when neither does;
- *inconclusive* with fewer than two pairs in a comparison.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from astarpo.analysis import (
    errorbars,
    figure,
    holm,
    legend_below,
    mean_interval,
    paired_difference,
    paired_ratio,
    save,
    styled,
    target_levels,
    time_to_target,
)
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, fmt_ci, fmt_ratio, process_lines, table
from experiments.harness.report import write as write_report
from experiments.two_beta.config import PAIRED

__all__ = ["RULE", "describe", "per_run", "refresh", "summarize", "to_markdown", "write"]

#: The verdict rule, as the report states it.
RULE = (
    "Per learning rate, every beta1 is compared with beta1 = 0.5 on paired seeds (same data "
    "order, sampling seeds and initial weights; only V* differs), Holm-adjusted within each "
    "family of comparisons (family-wise 5%). Accuracy: *differs* where an adjusted paired "
    "difference of the final expected accuracy has p < 0.05, else *no difference found*. "
    "Noise: the same for the paired ratio of the mean squared gradient norm. Reading: *through "
    "the noise* when every beta1 whose accuracy differs has its noise differ on the other side "
    "(lower noise, higher accuracy), as the proposition allows (the expected update does not "
    "depend on beta1, its variance does); *not through the noise* when some accuracy "
    "difference has no opposite noise difference; *noise only* when only the noise differs; "
    "*no effect* when neither does. Fewer than two pairs: *inconclusive*. Outcomes at equal "
    "steps cannot test the expected update itself: a noisier gradient with the same mean "
    "also trains differently."
)
ALPHA = 0.05


def describe(result: dict[str, Any]) -> str:
    """A finished run's line: its steps and final expected accuracy."""
    last = result["evals"][-1]["expected_accuracy"] if result.get("evals") else float("nan")
    return f"{result.get('steps', 0)} steps, expected accuracy {last:.3f}"


def _label(b: float) -> str:
    return "mean (1e3)" if b >= 1e3 else f"{b:g}"


def per_run(run: dict[str, Any], targets: dict[str, float]) -> dict[str, Any]:
    """What a run contributes: ``final`` (last expected accuracy), ``kl`` (last held-out KL),
    ``grad_sq`` (mean over steps of the squared gradient norm, before clipping) and
    ``steps_to`` (first step at each target, None if never)."""
    steps = [e["step"] for e in run["evals"]]
    acc = [e["expected_accuracy"] for e in run["evals"]]
    g = np.asarray(run["grad_norm"], np.float64)
    return {
        "final": acc[-1],
        "kl": run["evals"][-1]["kl"],
        "grad_sq": float(np.mean(g**2)) if g.size else None,
        "steps_to": {k: time_to_target(steps, acc, v) for k, v in targets.items()},
    }


def _holm_into(cells: dict[str, dict[str, Any]], key: str) -> None:
    adjusted = holm({b: c[key]["p"] for b, c in cells.items()})
    for b, c in cells.items():
        c[key]["p_holm"] = adjusted[b]


def _verdicts(paired: dict[str, dict[str, Any]]) -> dict[str, str]:
    if not paired or any(c["final"]["pairs"] < 2 for c in paired.values()):
        return {"accuracy": "inconclusive", "noise": "inconclusive", "reading": "inconclusive"}
    moved = [b for b, c in paired.items() if c["final"]["p_holm"] < ALPHA]
    noisy = [b for b, c in paired.items() if c["grad_sq"]["p_holm"] < ALPHA]
    opposite = all(
        b in noisy and (paired[b]["final"]["diff"] > 0) == (paired[b]["grad_sq"]["ratio"] < 1)
        for b in moved
    )
    if moved:
        reading = "through the noise" if opposite else "not through the noise"
    else:
        reading = "noise only" if noisy else "no effect"

    def named(bs: list[str], what: str) -> str:
        return f"{what} (beta1 = {', '.join(bs)})" if bs else "no difference found"

    return {
        "accuracy": named(moved, "differs"),
        "noise": named(noisy, "differs"),
        "reading": reading,
    }


def _columns(
    runs: list[dict[str, Any]], lr: float, beta1s: list[float], targets: dict[str, float]
) -> Any:
    """``col(beta1, key, target=None)``: the :func:`per_run` values of one rate's runs at
    ``beta1``, one per seed in seed order (None for a missing run or target not reached)."""
    by = {
        b: {r["seed"]: per_run(r, targets) for r in runs if r["lr"] == lr and r["beta1"] == b}
        for b in beta1s
    }
    seeds = sorted({s for by_seed in by.values() for s in by_seed})

    def col(b: float, key: str, target: str | None = None) -> list[Any]:
        vals = [by[b].get(s) for s in seeds]
        return [None if v is None else (v[key][target] if target else v[key]) for v in vals]

    return col


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per rate and ``beta1``: intervals of each :func:`per_run` quantity over seeds; per rate,
    paired differences (ratios for ``grad_sq`` and steps) against ``beta1 = 0.5`` with their
    Holm-adjusted p-values, and the verdicts of :data:`RULE`."""
    cfg, runs = result["config"], result["runs"]
    reference = float(np.mean([r["evals"][0]["expected_accuracy"] for r in runs]))
    finals: dict[tuple[float, float], list[float]] = defaultdict(list)
    for r in runs:
        finals[(r["lr"], r["beta1"])].append(r["evals"][-1]["expected_accuracy"])
    best = max(float(np.mean(v)) for v in finals.values())  # the best cell sets the targets
    targets = target_levels(reference, best, cfg["target_fractions"])
    out: dict[str, Any] = {"reference_accuracy": reference, "targets": targets, "by_rate": {}}
    for lr in cfg["learning_rates"]:
        col = _columns(runs, lr, cfg["beta1s"], targets)
        cells = {
            _label(b): {
                "beta1": b,
                "final": mean_interval(col(b, "final"), bounds=(0.0, 1.0)),
                "kl": mean_interval(col(b, "kl")),
                "grad_sq": mean_interval(col(b, "grad_sq"), bounds=(0.0, float("inf"))),
                "steps_to": {
                    t: {
                        **mean_interval(col(b, "steps_to", t)),
                        "reached": sum(x is not None for x in col(b, "steps_to", t)),
                    }
                    for t in targets
                },
            }
            for b in cfg["beta1s"]
        }
        paired = {
            _label(b): {
                "final": paired_difference(col(b, "final"), col(PAIRED, "final")),
                "kl": paired_difference(col(b, "kl"), col(PAIRED, "kl")),
                "grad_sq": paired_ratio(col(b, "grad_sq"), col(PAIRED, "grad_sq")),
                "steps_to": {
                    t: paired_ratio(col(b, "steps_to", t), col(PAIRED, "steps_to", t))
                    for t in targets
                },
            }
            for b in cfg["beta1s"]
            if b != PAIRED
        }
        for key in ("final", "grad_sq"):
            _holm_into(paired, key)
        out["by_rate"][f"{lr:g}"] = {"cells": cells, "paired": paired, "verdict": _verdicts(paired)}
    return out


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its summary made again from its runs."""
    return {**result, "summary": summarize(result)}


def to_markdown(result: dict[str, Any]) -> str:
    """The report: per rate, a table of the cells, the paired comparisons and the verdicts."""
    s, cfg = result["summary"], result["config"]
    lines = [
        f"# Two betas on the LLM: A*-PO with V* at each beta1, beta2 = {cfg['beta2']:g}",
        "",
        f"Task {cfg['task']}, {cfg['seeds']} seeds per cell, {cfg['max_steps']} steps per run "
        f"(equal steps), batch {cfg['batch_size']}, N = {cfg['n_samples']} Stage 1 samples "
        f"per prompt (once, shared by every beta1), {cfg['pool_size']} training and "
        f"{cfg['eval_size']} held-out prompts. Reference expected accuracy "
        f"{fmt(s['reference_accuracy'])}; targets "
        + ", ".join(f"{k} = {fmt(v)}" for k, v in s["targets"].items())
        + ".",
        "",
        f"**Rule.** {RULE}",
    ]
    for lr, block in s["by_rate"].items():
        v = block["verdict"]
        lines += ["", f"## Learning rate {lr}", ""]
        lines += [
            f"Accuracy: **{v['accuracy']}**. Noise: **{v['noise']}**. Reading: **{v['reading']}**.",
            "",
        ]
        head = ["beta1", "final expected accuracy", "KL to ref", "mean squared grad norm"]
        head += [f"steps to {t} (reached)" for t in s["targets"]]
        rows = [
            [b, fmt_ci(c["final"]), fmt_ci(c["kl"]), fmt_ci(c["grad_sq"])]
            + [f"{fmt_ci(x)} ({x['reached']}/{c['final']['n']})" for x in c["steps_to"].values()]
            for b, c in block["cells"].items()
        ]
        lines += [*table(head, rows), ""]
        head = ["beta1 vs 0.5", "final accuracy diff", "p (Holm)", "KL diff"]
        head += ["grad-norm^2 ratio", "p (Holm)"]
        rows = [
            [
                b,
                fmt_ci({"mean": c["final"]["diff"], **c["final"]}),
                fmt(c["final"]["p_holm"]),
                fmt_ci({"mean": c["kl"]["diff"], **c["kl"]}),
                fmt_ratio(c["grad_sq"]),
                fmt(c["grad_sq"]["p_holm"]),
            ]
            for b, c in block["paired"].items()
        ]
        lines += table(head, rows)
    return "\n".join([*lines, *process_lines(result)]) + "\n"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Left: final expected accuracy by beta1; right: the mean squared gradient norm's paired
    ratio to beta1 = 0.5 (log scale). One series per rate; 95% intervals over seeds."""
    from matplotlib.ticker import NullFormatter

    s, cfg = result["summary"], result["config"]
    fig, (left, right) = figure(cols=2, height=3.4)
    labels = [_label(b) for b in cfg["beta1s"]]
    x = np.arange(len(labels), dtype=float)
    rates = list(s["by_rate"])
    for i, lr in enumerate(rates):
        block, dx = s["by_rate"][lr], 0.12 * (i - (len(rates) - 1) / 2)
        cells = [block["cells"][b]["final"] for b in labels]
        errorbars(
            left,
            x + dx,
            [c["mean"] for c in cells],
            [c["low"] for c in cells],
            [c["high"] for c in cells],
            color=f"C{i}",
            label=f"lr {lr}",
        )
        idx = [j for j, b in enumerate(labels) if b in block["paired"]]
        ratios = [block["paired"][labels[j]]["grad_sq"] for j in idx]
        errorbars(
            right,
            x[idx] + dx,
            [r["ratio"] for r in ratios],
            [r["low"] for r in ratios],
            [r["high"] for r in ratios],
            color=f"C{i}",
        )
    left.axhline(s["reference_accuracy"], color="0.5", ls=":", lw=1, label="reference")
    right.axhline(1.0, color="0.5", ls=":", lw=1)
    right.set_yscale("log")
    lo, hi = right.get_ylim()
    ticks = [t for t in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0) if lo <= t <= hi]
    right.yaxis.set_minor_formatter(NullFormatter())
    right.set_yticks(ticks, [f"{t:g}" for t in ticks])
    for ax in (left, right):
        ax.set_xticks(x, labels)
        ax.set_xlabel("beta1 (V* of Stage 1)")
    left.set_ylabel("final expected accuracy")
    right.set_ylabel("mean squared grad norm\n÷ that at beta1 = 0.5")
    legend_below(fig, *left.get_legend_handles_labels())
    n = cfg["seeds"]
    title = (
        f"A*-PO, beta2 = {cfg['beta2']:g}, {cfg['max_steps']} steps; 95% intervals over "
        f"n = {n} seed{'s' if n != 1 else ''} (paired, right)"
    )
    return save(fig, path, title, strict=True)


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``two_beta.json`` (unless not ``with_json``), ``two_beta.md`` and ``two_beta.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
