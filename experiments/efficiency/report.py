"""The efficiency study's report: ``bench.md`` (protocol, accuracy and memory, time to targets,
ratios to A*-PO, the sweep, the peers, where the time goes, the one-pass setting) and
``bench.png`` (:func:`plot`; a result whose runs kept no curves: :func:`plot_summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from astarpo.analysis import (
    CURVES,
    MAX_LEGEND,
    WIDTH,
    errorbars,
    figure,
    legend_below,
    save,
    seed_errorbars,
    styled,
)
from experiments.efficiency.config import ARM_LABELS
from experiments.efficiency.mechanism import markdown_lines
from experiments.efficiency.one_pass import markdown_lines as one_pass_lines
from experiments.efficiency.paper import paper_lines, plot_paper, summarize_all
from experiments.efficiency.summary import METRICS, REUSED, curve, groups, summarize
from experiments.harness.output import OutputDir
from experiments.harness.protocol import DROP_ARM, PAPER_SHAPE, STAGE1_ARMS
from experiments.harness.report import fmt, fmt_ci, fmt_ratio, process_lines, table
from experiments.harness.report import write as write_report

__all__ = ["edge_note", "plot", "plot_summary", "refresh", "to_markdown", "write"]

#: The runs that train at A*-PO's chosen rate (not swept; not listed in the sweep line).
A_STAR_RATE = frozenset((DROP_ARM, *STAGE1_ARMS))
#: The suffix of the one-pass runs' names in the figure.
ONE_PASS = "(one pass)"


def edge_note(sweep: dict[str, Any]) -> str:
    """What the report says of a sweep's grid: the rates added beyond an edge, and whether the
    chosen rate is still the smallest or largest one tried."""
    tried = [float(x) for x in sweep["scores"]]
    note = ""
    if sweep.get("extended"):
        note += "; grid extended by " + ", ".join(f"{x:g}" for x in sweep["extended"])
    if len(tried) > 1 and sweep["chosen"] in (min(tried), max(tried)):
        note += ", still at an edge of the grid" if sweep.get("extended") else ", at an edge"
    return note


def _protocol(result: dict[str, Any]) -> list[str]:
    cfg, s, ref = result["config"], result["summary"], result["reference"]
    hard, stage1 = result.get("hard", {}), result["stage1"]
    paper = cfg.get("protocol", "clock") == "paper"
    if paper:
        shape = ", ".join(f"{k} {v:g}" for k, v in PAPER_SHAPE.items())
        run = f"Every run: {cfg['steps']} steps over the same prompt order ({shape}; A*-PO's "
        run += "Stage 1 timed with it),"
        every = f"{cfg['eval_every_steps']} steps"
    else:
        run = f"Every run: {s['budget_s']:g} s of training wall time (A*-PO's Stage 1 inside it),"
        every = f"{cfg['eval_every_seconds']:g} s of training time"
    sizes = {n: w["chosen"] for n, w in result.get("sweep_batch", {}).items() if n in cfg["algos"]}
    prompts = f"{cfg['batch_size']} prompts per step"
    if sizes:
        prompts = (
            "prompts per step per algorithm ("
            + ", ".join(f"{n} {b}" for n, b in sizes.items())
            + ")"
        )
    return [
        f"# A*-PO against the baselines ({'paper' if paper else 'wall-clock'} protocol)",
        "",
        f"{run} {cfg['seeds']} seeds, {prompts} from a pool of "
        f"{cfg['pool_size']}, evaluation every {every} (not counted) on {cfg['eval_size']} "
        f"held-out problems; A*-PO beta1={cfg['beta1']}, "
        f"beta2={cfg['beta2']}, N={cfg['n_samples']}; GRPO/RLOO G={cfg['group_size']}. "
        f"Intervals: 95% Student-t over seeds; ratios paired by seed (geometric mean).",
        f"Reference: expected sampled accuracy {ref['expected_accuracy']:.3f}, sampled "
        f"{ref['sampled_accuracy']:.3f}, greedy {ref['accuracy']:.3f}. Hard subset: "
        f"{hard.get('held_out', 'n/a')}/{hard.get('of', 'n/a')} held-out problems with "
        f"reference pass@{hard.get('n_samples', 'N')} = 0. Stage 1 alone on the pool: "
        f"{stage1['seconds']:.1f} s ({stage1['all_wrong']}/{stage1['prompts']} prompts all "
        "wrong).",
        f"Targets (expected sampled accuracy, from the reference {s['reference']:.3f} to the best "
        f"final {s['best_final']:.3f}): "
        + ", ".join(f"{k} = {v:.3f}" for k, v in s["targets"].items())
        + f". Memory: {s['memory_kind']}.",
        "",
    ]


def _tables(s: dict[str, Any]) -> list[str]:
    arms, labels = s["arms"], list(s["targets"])
    header = ["run", "lr", "steps", "samples/prompt", "expected acc", "greedy acc", "sampled acc"]
    header += ["hard: expected", "hard: greedy", "KL to ref", "peak memory MB", "Stage 1 s"]
    rows = [
        [name, f"{a['lr']:g}", fmt(a["steps"]["mean"]), a["samples_per_prompt"]]
        + [fmt_ci(a["final"][k]) for k in METRICS]
        + [fmt_ci(a["memory_mb"]), fmt_ci(a["stage1_s"])]
        for name, a in arms.items()
    ]
    reached = [
        [
            name,
            *(f"{fmt_ci(t)} ({t['reached']}/{a['seeds']})" for t in a["time_to_target"].values()),
        ]
        for name, a in arms.items()
    ]
    ratios = [
        [n, *(_holm(fmt_ratio(r[k]), r[k]) for k in [*labels, "memory"])]
        for n, r in s["ratios"].items()
    ]
    on_cpu = [
        [n, *(_holm(fmt_ratio(r[k]), r[k], "p_holm_cpu") for k in labels)]
        for n, r in s.get("cpu_ratios", {}).items()
    ]
    cpu_lines = [
        "",
        "The same times read on the process CPU clock (Stage 1 and training, evaluation "
        "excluded; Holm over this reading's ratios and the differences, one family):",
        "",
        *table(["vs", *labels], on_cpu),
    ]
    finals = [[n, _holm(fmt_ci(_as_ci(d)), d)] for n, d in s.get("differences", {}).items()]
    phases = "; ".join(
        f"{n}: " + ", ".join(f"{k} {v:.1f}" for k, v in a["phases_s"].items())
        for n, a in arms.items()
        if n != REUSED
    )
    return [
        *table(header, rows),
        "",
        "Time to target (s of the run's clock; mean [interval] over the seeds that "
        "reached it, reached/seeds):",
        "",
        *table(["run", *labels], reached),
        "",
        "A*-PO's time to target and peak memory as a ratio to each run's (< 1: A*-PO "
        "faster / smaller; Holm-adjusted p over every ratio and difference of this table and "
        "the next, one family):",
        "",
        *table(["vs", *labels, "peak memory"], ratios),
        *(cpu_lines if on_cpu else []),
        *(_finals_lines(finals) if finals else []),
        "",
        f"Per-phase time (s, mean over seeds): {phases}",
    ]


def _finals_lines(finals: list[list[str]]) -> list[str]:
    head = "A*-PO's final expected accuracy minus each run's (paired by seed):"
    return ["", head, "", *table(["vs", "expected accuracy"], finals)]


def _as_ci(d: Mapping[str, Any]) -> dict[str, Any]:
    """A paired difference as an interval dict (``mean``, ``low``, ``high``)."""
    return {"mean": d["diff"], "low": d["low"], "high": d["high"]}


def _holm(text: str, r: Mapping[str, Any], key: str = "p_holm") -> str:
    """``text`` with the Holm-adjusted p of ``r`` (its ``key``) where it has one."""
    p = r.get(key)
    return text if p is None or p != p else f"{text} (p {p:.2g})"


def _sweeps(sweeps: dict[str, Any]) -> str:
    """Each swept run's scores and choice (or its given rate), A*-PO's reusers left out."""
    return "; ".join(
        f"{ARM_LABELS.get(n, n)}: "
        + (
            f"{w['chosen']:g} given, not swept"
            if w.get("given")
            else f"{w['chosen']:g} (one value, not swept)"
            if not w["scores"]
            else ", ".join(f"{x} -> {v:.3f}" for x, v in w["scores"].items())
            + f" (chosen {w['chosen']:g}{edge_note(w)})"
        )
        for n, w in sweeps.items()
        if n not in A_STAR_RATE
    )


def _sweep_and_peers(result: dict[str, Any]) -> list[str]:
    cfg = result["config"]
    sweeps = _sweeps(result["sweep"])
    if cfg.get("protocol", "clock") == "paper":
        what = f"average of the validation expected accuracy over {cfg['steps']} steps"
    else:
        what = f"time-average of the validation expected accuracy over {cfg['sweep_seconds']:g} s"
    first, n = cfg["sweep_seed"], int(cfg.get("sweep_seeds", 1))
    seeds = f"seeds {first}-{first + n - 1}" if n > 1 else f"seed {first}"
    text = f"Learning-rate sweep (score: {what}, {seeds}): {sweeps}"
    if not any(w["scores"] for w in result["sweep"].values()):  # one rate given: no runs
        rates = {ARM_LABELS.get(k, k): w["chosen"] for k, w in result["sweep"].items()}
        chosen = [f"{k} {lr:g}" for k, lr in rates.items() if k not in A_STAR_RATE]
        text = "Learning rates (given, no sweep): " + ", ".join(chosen)
    lines = ["", text]
    if result.get("sweep_batch"):
        lines += ["", "Prompts-per-step sweep (at each chosen rate; the same score and seeds): "
                  + _sweeps(result["sweep_batch"])]  # fmt: skip
    for lib, info in result.get("peers", {}).items():
        lines += ["", f"Peers: {lib} {info['version']}; its settings that differ from ours:", ""]
        rows = [[k, d[lib], d["ours"]] for k, d in info["differences"].items()]
        lines += table(["setting", lib, "ours"], rows)
    return lines


def to_markdown(result: dict[str, Any]) -> str:
    """The Markdown report, in page order (see the module doc)."""
    s = result["summary"]
    lines = [*_protocol(result), *_tables(s), *_sweep_and_peers(result)]
    if "paper" in s:
        lines += paper_lines(result)
    if "mechanism" in s:
        lines += markdown_lines(s["mechanism"])
    if "one_pass" in result:
        lines += one_pass_lines(result["one_pass"], s)
    if "one_pass_error" in result:
        lines += ["", f"The one-pass setting failed: {result['one_pass_error']}"]
    lines += process_lines(result)
    lines += [
        "",
        "The paper (Table 1; Qwen2.5 on MATH, 4xH100) reports A*-PO/GRPO training "
        "time 0.46 (1.5B), 0.48 (3B), 0.55 (7B); peak memory 41.6% of "
        "the GPU (A*-PO) vs 42.2% (GRPO) and 63.3% (REBEL) at 1.5B.",
    ]
    return "\n".join(lines) + "\n"


#: The figure's panels: metric -> title.
PANELS = {
    "expected_accuracy": "held-out expected sampled accuracy",
    "hard_expected_accuracy": "hard subset (expected)",
}


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Accuracy against the run clock at every evaluation (:data:`PANELS`, the targets dotted),
    a row of panels with its legend per :data:`~astarpo.analysis.figures.MAX_LEGEND` names;
    the one-pass runs, where there are any, in a row of their own (names ``... (one pass)``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not any(r.get("evals") for r in result["runs"]):
        return plot_summary(result, path)
    if "paper" in result["summary"]:
        return plot_paper(result, path)
    by_name = groups(result["runs"])
    names = list(by_name)
    rows = [names[i : i + MAX_LEGEND] for i in range(0, len(names), MAX_LEGEND)]
    if result.get("one_pass"):
        one = {f"{n} {ONE_PASS}": v for n, v in groups(result["one_pass"]["runs"]).items()}
        by_name, names, rows = by_name | one, names + list(one), [*rows, list(one)]
    fig = Figure(figsize=(WIDTH, 4.2 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    for part, row in zip(fig.subfigures(len(rows), 1, squeeze=False).flat, rows, strict=True):
        axes = part.subplots(1, len(PANELS))
        for ax, (key, title) in zip(axes, PANELS.items(), strict=True):
            for name in row:
                curves = [curve(run, key, clock) for run, clock in by_name[name]]
                dashed = name.startswith(REUSED)  # A*-PO on its Stage 2 clock
                base = name.removesuffix(f" {ONE_PASS}")  # a one-pass run: its main run's colour
                color = f"C{names.index(base if base in names else name) % 10}"
                seed_errorbars(ax, curves, name, color, dashed)
            if key == "expected_accuracy":
                for label, level in result["summary"]["targets"].items():
                    ax.axhline(level, color="gray", ls=":", lw=0.8)
                    at = ((1.01, level), ("axes fraction", "data"))
                    ax.annotate(label, at[0], xycoords=at[1], color="gray", va="center")
            ax.set(title=title, xlabel="run clock (s)", ylabel="accuracy")
            ax.grid(alpha=0.3)
        legend_below(part, *axes[0].get_legend_handles_labels())
    task = result["config"].get("task", "addition")
    title = f"{task}: clock = Stage 1 + training, evaluation excluded\n{CURVES}"
    return save(fig, path, title, strict=True)


@styled
def plot_summary(result: dict[str, Any], path: Any) -> Any:
    """Each run name's final expected accuracy (the reference dotted) and time to each target,
    means with their 95% intervals, from the summary alone."""
    s = result["summary"]
    names = list(s["arms"])
    fig, (ax1, ax2) = figure(cols=2, height=4.4)
    y = list(range(len(names)))[::-1]
    _forest(ax1, [s["arms"][n]["final"]["expected_accuracy"] for n in names], y, color="C0")
    ax1.axvline(s["reference"], color="gray", ls=":", lw=1)
    ax1.set(yticks=y, yticklabels=names, xlabel="final expected accuracy\n(reference dotted)")
    for i, label in enumerate(s["targets"]):
        cis = [s["arms"][n]["time_to_target"][label] for n in names]
        ys = [v + 0.25 * (i - 1) for v in y]
        _forest(ax2, cis, ys, color=f"C{i + 1}", label=f"target {label}")
    ax2.set(yticks=y, yticklabels=[""] * len(names), xlabel="time to target\n(s of the run clock)")
    handles, labels = ax2.get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=3)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, axis="x")
    seeds = result["config"]["seeds"]
    return save(fig, path, f"means with 95% intervals over n = {seeds} seeds", strict=True)


def _forest(ax: Any, cis: list[dict[str, Any]], y: Sequence[float], **style: Any) -> None:
    """Horizontal error bars of the intervals ``cis`` at the positions ``y``."""
    low, high = [c["low"] for c in cis], [c["high"] for c in cis]
    errorbars(ax, [c["mean"] for c in cis], y, low, high, horizontal=True, ms=4, **style)


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its summaries made again from its runs, where they hold their curves."""
    if any(r.get("evals") for r in result["runs"]):
        result["summary"] = summarize_all(result)
        if result.get("one_pass"):
            one = result["one_pass"]
            one_result = {**result, "config": one["config"], "runs": one["runs"]}
            one["summary"] = summarize(one_result, result["summary"]["targets"])
    return result


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``bench.json`` (unless not ``with_json``), ``bench.md`` and ``bench.png`` in ``output``."""
    write_report(output, result, to_markdown(result), plot, with_json)
