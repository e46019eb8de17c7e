"""The ladder-train study's report: ``ladder_train.json``, ``ladder_train.md`` (the bins, every
run name's gain and verdict per bin and training set, the review's 2x2, the thresholds) and
``ladder_train.png`` (the held-out gain against the bins' log10 v_ref, per run name)."""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis import errorbars, figure, legend_below, save, styled
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, fmt_ci, process_lines, table
from experiments.harness.report import write as write_report
from experiments.ladder_train.config import ALONE, ARMS, MIXED
from experiments.ladder_train.summary import ALPHA, MIN_GAIN, summarize

__all__ = ["LABELS", "describe", "plot", "refresh", "to_markdown", "write"]

#: The run names as the report writes them.
LABELS = dict(zip(ARMS, ("A*-PO", "GRPO", "A*-PO, all-wrong filter", "PPO", "REBEL"), strict=True))
_COLOURS = dict(
    zip(ARMS, ("tab:blue", "tab:red", "tab:cyan", "tab:green", "tab:purple"), strict=True)
)
_SETS = {ALONE: "trained on the bin alone", MIXED: "trained on the easy bin + the bin"}


def describe(result: dict[str, Any]) -> str:
    """A finished run's line: its steps, successes on the bin, or why it was skipped."""
    if "skipped" in result:
        return f"skipped: {result['skipped']}"
    first = result.get("first_success")
    at = f", first at step {first['step']}" if first else ""
    return f"{result['steps']} steps, {result['successes']['bin']} successes on the bin{at}"


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its summary made again from its runs."""
    return {**result, "summary": summarize(result)}


def _threshold_text(t: dict[str, Any]) -> str:
    if t["stops_at"] is None:
        return f"learns on every bin (down to {t['learns_down_to']})"
    where = f"{t['stops_at']} (median log10 v_ref {t['stops_at_log10_v_ref']:.2f})"
    if t["learns_down_to"] is None:
        text = f"does not learn from the first bin, {where}"
    else:
        low = t["learns_down_to_log10_v_ref"]
        text = f"learns down to {t['learns_down_to']} ({low:.2f}); stops at {where}"
    return text if t["monotone"] else text + f"; yet learns on {', '.join(t['learned'])}"


def to_markdown(result: dict[str, Any]) -> str:
    """The report (see the module doc)."""
    cfg, s, bins = result["config"], result["summary"], result["bins"]
    rates = ", ".join(f"{LABELS.get(a, a)} {r:g}" for a, r in result["rates"].items())
    tuned = "swept here (below)" if result.get("sweep") else (
        "the paper protocol's (docs/figures/paper_protocol_120.json: tuned on the efficiency "
        "study's scratchpad pool, not per bin)"
    )  # fmt: skip
    lines = ["# Who learns, per bin of log10 v_ref", ""]
    lines += [
        f"Every run: {cfg['steps']} steps of {cfg['batch_size']} prompts in the paper "
        f"protocol's shape (entropy bonus {cfg.get('entropy_coef', 1e-3):g}), from the "
        f"ladder's reference ({result['ladder']}); Stage 1 "
        f"(N = {cfg['n_samples']}) once on the {result['stage1']['prompts']} training prompts "
        f"of every bin ({result['stage1']['seconds']:.1f} s, outside the runs). Learning rates "
        f"{tuned}: {rates}. Held-out measures are exact (the gold response's probability): "
        f"the bin's held-out prompts, and the easy bin {cfg['easy']}'s. Verdicts: {s['rule']}.",
        "",
    ]
    header = ["bin", "train/test prompts", "median log10 v_ref (test)", "V-hat* mean (train)"]
    header += ["V-hat* = 0 (train)", "reference accuracy (test)"]
    rows = [
        [b, f"{result['sizes'][b]['train']}/{result['sizes'][b]['test']}",
         f"{bins[b]['test_log10_v_ref']['median']:.2f}", fmt(bins[b]["v_star"]["mean"]),
         fmt(bins[b]["v_star"]["fraction_zero"]),
         fmt(result["reference"][b]["bin_expected_accuracy"])]
        for b in s["order"]
    ]  # fmt: skip
    lines += table(header, rows)
    lines += [
        "",
        "Held-out gain on the bin (last evaluation minus the reference; 95% interval):",
        "",
    ]
    header = ["run", "set", "bin", "seeds", "gain", "p (Holm)", "verdict"]
    header += [f"seeds gaining > {MIN_GAIN:g}", "easy: change"]
    header += ["bin: change of mean log10 pi(gold)"]
    header += ["successes/samples on the bin", "first success: median step (seeds)"]
    rows = []
    for arm, row in s["cells"].items():
        for key, c in row.items():
            set_name, b = key.split("|", 1)
            if "skipped" in c:
                cells = [0, "skipped: " + c["skipped"], "", "n/a", *[""] * 5]
                rows.append([LABELS[arm], set_name, b, *cells])
                continue
            f = c["first_success"]
            first = (
                f"{fmt(f['median_step'])} ({f['seeds']}/{c['seeds']})"
                if f["seeds"]
                else f"none (0/{c['seeds']})"
            )
            cells = [c["seeds"], fmt_ci(c["gain"]), fmt(c["p_holm"], 2), c["verdict"]]
            cells.append(f"{c['seeds_gaining']}/{c['seeds']}")
            cells += [fmt_ci(c["easy_change"]), fmt_ci(c["log10_gold_change"])]
            cells += [f"{c['successes']}/{c['samples']}", first]
            rows.append([LABELS[arm], set_name, b, *cells])
    lines += table(header, rows)
    if s["two_by_two"]:
        lines += [
            "",
            "The review's 2x2 per near bin: does the run learn on the bin alone / mixed?",
            "",
        ]
        rows = [[b, LABELS[arm], c[ALONE], c[MIXED], c["reading"] or "n/a"]
                for b, arms in s["two_by_two"].items() for arm, c in arms.items()]  # fmt: skip
        lines += table(["bin", "run", "alone", "mixed", "reading"], rows)
    lines += ["", "Where each run stops learning on the bin alone, within the budget:", ""]
    rows = [[LABELS[a], _threshold_text(t)] for a, t in s["thresholds"].items()]
    lines += table(["run", "threshold"], rows)
    if result.get("sweep"):
        rows = [[a, ", ".join(f"{k}: {fmt(v)}" for k, v in w["scores"].items()), f"{w['chosen']:g}",
                 _bracket_text(w)] for a, w in result["sweep"].items()]  # fmt: skip
        lines += [
            "",
            f"Sweep on {cfg['sweep_bin']} (score: step-average expected accuracy on its "
            "training prompts):",
            "",
        ]
        lines += table(["algorithm", "scores", "chosen", "bracketed"], rows)
    return "\n".join([*lines, *process_lines(result)]) + "\n"


def _bracket_text(swept: dict[str, Any]) -> str:
    """Whether a sweep's choice has a scored rate on each side ("yes"), or is still an edge of
    the rates it tried after its extension ("no: lowest" / "no: highest")."""
    rates = sorted(float(k) for k in swept["scores"])
    if not rates or swept["chosen"] not in (rates[0], rates[-1]):
        return "yes"
    return "no: lowest" if swept["chosen"] == rates[0] else "no: highest"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Per training set, each run name's held-out gain per bin (a marker with its 95% interval
    over seeds at the bin's position, each seed's gain an open marker beside it; bins evenly
    spaced, labelled with their median log10 v_ref), a star above each cell the rule calls
    "learns" (the threshold :data:`~experiments.ladder_train.summary.MIN_GAIN` is too close to
    zero to tell apart as a line)."""
    s = result["summary"]
    order, bins = s["order"], result["bins"]
    sets = [k for k in (ALONE, MIXED) if any(k in c for c in s["curve"].values())]
    fig, axes = figure(1, max(len(sets), 1), height=3.0)
    arms = [a for a in ARMS if a in s["curve"]]
    for ax, set_name in zip(axes, sets, strict=False):
        for j, arm in enumerate(arms):
            points = s["curve"][arm].get(set_name, [])
            if not points:
                continue
            x = np.array([order.index(p["bin"]) for p in points]) + 0.08 * (j - (len(arms) - 1) / 2)
            g = [p["gain"] for p in points]
            n = max(p["gain"]["n"] for p in points)
            mean, low, high = ([p[k] for p in g] for k in ("mean", "low", "high"))
            style: dict[str, Any] = dict(fmt="o", ms=4, capsize=2, color=_COLOURS[arm])
            errorbars(ax, x, mean, low, high, label=f"{LABELS[arm]} (n = {n})", **style)
            for xi, p in zip(x, points, strict=True):
                each = p.get("seed_gains", [])
                ax.plot([xi + 0.03] * len(each), each, ls="none", marker="o", ms=3, mew=0.6,
                        mfc="none", color=_COLOURS[arm], alpha=0.7)  # fmt: skip
                cell = s["cells"].get(arm, {}).get(f"{set_name}|{p['bin']}", {})
                if cell.get("verdict") == "learns":
                    top = max([p["gain"]["high"], *each])
                    ax.plot([xi], [top + 0.08], ls="none", marker="*", ms=7, color=_COLOURS[arm])
        ax.axhline(0.0, color="0.3", lw=0.8)
        ticks = [f"{b}\n{bins[b]['test_log10_v_ref']['median']:.1f}" for b in order]
        ax.set_xticks(range(len(order)), ticks)
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.set(ylabel="held-out gain\n(expected accuracy)", title=_SETS[set_name])
    axes[-1].set_xlabel("bin of log10 v_ref, and its median (held-out prompts); bins not to scale")
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    legend_below(fig, list(entries.values()), list(entries), ncol=3)
    title = (
        f"Who learns within {result['config']['steps']} steps, per bin of v_ref\n"
        "filled: the mean over seeds with its 95% interval; open: single seeds\n"
        f"star: learns by the rule (mean gain above {MIN_GAIN:g}, Holm-adjusted p < {ALPHA:g})"
    )
    return save(fig, path, title, strict=True)


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``ladder_train.json`` (unless not ``with_json``), ``ladder_train.md`` and ``.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
