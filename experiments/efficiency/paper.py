"""The efficiency study on the paper's protocol (``--protocol paper``): every run trains for the
same ``steps`` over the same prompt order in the paper's shape, and is read as the paper's Table 1
is: total time with and without Stage 1, process CPU time, final accuracy, KL to the reference
and peak memory, per algorithm, as ratios (differences, for accuracy and KL) to A*-PO paired by
seed, with Holm's adjustment over the whole family (:func:`summarize_paper`); the mechanism as
steps to each target and the step cost, A*-PO over GRPO (:func:`mechanism_check`); the plateau
rule on the best algorithm (:func:`~experiments.efficiency.plateau.plateau`); its section
of ``bench.md`` (:func:`paper_lines`) and its figure (:func:`plot_paper`).
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import (
    CURVES,
    MAX_LEGEND,
    WIDTH,
    errorbars,
    holm,
    legend_below,
    mean_interval,
    paired_difference,
    paired_ratio,
    save,
    seed_errorbars,
    styled,
    time_to_target,
)
from experiments.efficiency.mechanism import by_arm
from experiments.efficiency.plateau import by_horizon, plateau, value_at_step
from experiments.efficiency.summary import POSITIVE, curve, memory_mb, summarize
from experiments.harness.report import fmt, fmt_ci, fmt_ratio, table

__all__ = [
    "PAPER_ROWS",
    "RATIOS",
    "mechanism_check",
    "paper_lines",
    "plot_paper",
    "summarize_all",
    "summarize_paper",
]

#: The ratios of the table, A*-PO's over each algorithm's: name -> what it reads.
RATIOS = {
    "time": "total time (Stage 1 + training)",
    "cpu_time": "process CPU time (Stage 1 + training)",
    "time_without_stage1": "training time without Stage 1",
    "memory_total": "peak resident memory",
    "memory_increment": "peak memory over the models loaded",
}
#: The paper's Table 1 (Qwen2.5 on MATH, 4xH100) as A*-PO's ratio to each algorithm, where it
#: gives both: training time at 1.5B / 3B / 7B and peak GPU memory at 1.5B (41.6% against
#: GRPO's 42.2% and REBEL's 63.3%).
PAPER_ROWS = {
    "grpo": {"time": "0.46 / 0.48 / 0.55", "memory_total": f"{41.6 / 42.2:.2f}"},
    "rebel": {"time": "0.67 / 0.68 / 0.75", "memory_total": f"{41.6 / 63.3:.2f}"},
}


def _readings(run: dict[str, Any]) -> dict[str, float]:
    """One run's values of :data:`RATIOS` (``cpu_time``: the last evaluation's, evaluation
    excluded)."""
    last = run["evals"][-1] if run.get("evals") else {}
    return {
        "time": float(run["clock_s"]),
        "cpu_time": float(last.get("cpu_time", math.nan)),
        "time_without_stage1": float(run["train_s"]),
        "memory_total": float(run["memory"]["rss_peak_mb"]),
        "memory_increment": memory_mb(run),
    }


def _reach(runs: list[dict[str, Any]], clock: str, level: float) -> list[float | None]:
    """Per run, the ``clock`` reading at which its expected accuracy first reaches ``level``."""
    return [time_to_target(*curve(r, "expected_accuracy", clock), level) for r in runs]


def mechanism_check(a: list[dict[str, Any]], g: list[dict[str, Any]], target: float) -> dict:
    """A*-PO (runs ``a``) over GRPO (``g``) at one target, paired by seed: ``steps`` (steps to
    the target), ``step_cost`` (training seconds per step), ``time`` (run clock to the target)
    and ``product`` (``step_cost * steps``, the time ratio if Stage 1 and the step cost were the
    whole story)."""
    steps = paired_ratio(_reach(a, "step", target), _reach(g, "step", target))
    per_step = [[r["train_s"] / max(r["steps"], 1) for r in rs] for rs in (a, g)]
    cost = paired_ratio(per_step[0], per_step[1])
    time = paired_ratio(_reach(a, "time", target), _reach(g, "time", target))
    return {
        "steps": steps,
        "step_cost": cost,
        "time": time,
        "product": steps["ratio"] * cost["ratio"],
    }


def summarize_paper(result: dict[str, Any], targets: dict[str, float]) -> dict[str, Any]:
    """The paper protocol's readings of ``result["runs"]`` (algorithm -> seeds).

    Returns:
        ``{"steps", "arms", "ratios", "differences", "holm", "mechanism", "plateau"}``:
        ``arms[algo]`` the interval of each :data:`RATIOS` quantity and ``steps_to_target``;
        ``ratios[algo][name]`` A*-PO's over ``algo``'s
        (:func:`~astarpo.analysis.stats.paired_ratio`), ``differences[algo]`` A*-PO minus
        ``algo`` in final expected accuracy and KL
        (:func:`~astarpo.analysis.stats.paired_difference`); ``holm`` the adjusted p-value of
        every comparison of the two, keyed ``algo/name`` (one family); ``mechanism`` per
        target (:func:`mechanism_check`, with GRPO); ``plateau`` the rule on the best run name;
        ``horizons`` the rule on each run's first T/2, 3T/4 and T steps
        (:func:`~experiments.efficiency.plateau.by_horizon`).
    """
    steps, groups = int(result["config"]["steps"]), by_arm(result["runs"])
    arms: dict[str, dict[str, Any]] = {}
    for arm, rs in groups.items():
        values = [_readings(r) for r in rs]
        arms[arm] = {k: mean_interval([v[k] for v in values], bounds=POSITIVE) for k in RATIOS}
        arms[arm]["steps_to_target"] = {
            label: mean_interval(_reach(rs, "step", level), bounds=POSITIVE)
            for label, level in targets.items()
        }
    base, ratios, differences, pvalues = groups.get("astarpo", []), {}, {}, {}
    for arm, rs in groups.items():
        if arm == "astarpo" or len(rs) != len(base):
            continue
        ours, theirs = [_readings(r) for r in base], [_readings(r) for r in rs]
        ratios[arm] = {
            k: paired_ratio([o[k] for o in ours], [t[k] for t in theirs]) for k in RATIOS
        }
        differences[arm] = {
            key: paired_difference(
                [value_at_step(r, key, steps) for r in base],
                [value_at_step(r, key, steps) for r in rs],
            )
            for key in ("expected_accuracy", "kl")
        }
        for name, r in {**ratios[arm], **differences[arm]}.items():
            pvalues[f"{arm}/{name}"] = float(r["p"])
    best = max(
        groups,
        key=lambda a: mean_interval(
            [value_at_step(r, "expected_accuracy", steps) for r in groups[a]]
        )["mean"],
    )
    mechanism = {}
    if base and "grpo" in groups and len(groups["grpo"]) == len(base):
        mechanism = {k: mechanism_check(base, groups["grpo"], v) for k, v in targets.items()}
    return {
        "steps": steps,
        "arms": arms,
        "ratios": ratios,
        "differences": differences,
        "holm": holm(pvalues),
        "mechanism": mechanism,
        "plateau": {"best": best, **plateau(groups[best], steps)},
        "horizons": by_horizon(result["runs"], sorted({steps // 2, 3 * steps // 4, steps})),
    }


def summarize_all(result: dict[str, Any], targets: dict[str, float] | None = None) -> dict:
    """:func:`~experiments.efficiency.summary.summarize`, with ``paper``
    (:func:`summarize_paper`) on the paper protocol."""
    s = summarize(result, targets)
    if result["config"].get("protocol", "clock") == "paper":
        s["paper"] = summarize_paper(result, s["targets"])
    return s


def _plateau_lines(pl: dict[str, Any]) -> list[str]:
    """The plateau rule's sentence (:func:`~experiments.efficiency.plateau.plateau`) and
    the two-reading gain beside it."""
    verdict = "has plateaued" if pl["plateaued"] else "has NOT plateaued: give the runs more steps"
    w, rate, rule = pl["window"], pl["rate"], pl["rule"]
    per = f"per {rule['per_steps']:,} steps"
    if not w["pairs"]:
        return [
            f"Plateau rule: not read. No seed of the best run ({pl['best']}) has an evaluation "
            "in both of the last two quarters of the steps; evaluate at least every quarter of "
            "the steps (`--eval-every-steps`)."
        ]
    return [
        f"Plateau rule: the best run ({pl['best']}) gains {fmt_ci(_as_ci(w))} expected accuracy "
        f"from the mean of its evaluations in the third quarter of the steps to the mean of "
        f"those in the last ({w['pairs']} seeds): {fmt_ci(_as_ci(rate))} {per}. A run has "
        f"plateaued when that rate is below {rule['gain']:g} {per} and its interval's upper "
        f"end below {rule['bound']:g}. It {verdict}.",
        "",
        f"Read on two evaluations instead (the last step minus 3/4 of the steps; not the rule): "
        f"{fmt_ci(_as_ci(pl['gain']))}.",
    ]


def _horizon_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rule on each run's first t steps, as a t-step run (``summary["paper"]["horizons"]``)."""
    if len(rows) < 2:
        return []
    cells = [
        [
            str(h["steps"]),
            h["best"],
            fmt(h["accuracy"][h["best"]], 3),
            fmt_ci(_as_ci(h["rate"])) if h["window"]["pairs"] else "n/a",
            "yes" if h["plateaued"] else "no",
        ]
        for h in rows
    ]
    return [
        "",
        "The rule on each run's first t steps, read as a t-step run (constant learning rate, "
        "steps seeded by their index):",
        "",
        *table(["t", "best at t", "its expected accuracy", "rate per 1,000 steps", "met"], cells),
    ]


def paper_lines(result: dict[str, Any]) -> list[str]:
    """The paper protocol's section of ``bench.md`` (from ``summary["paper"]``)."""
    p = result["summary"]["paper"]
    adj = p["holm"]
    lines = [
        "",
        f"## The paper's protocol: {p['steps']} steps for every run",
        "",
        *_plateau_lines(p["plateau"]),
        *_horizon_lines(p["horizons"]),
        "",
        "A*-PO's over each algorithm's (ratio [95% interval], paired by seed; Holm-adjusted "
        "p-value over every comparison of this table and the next, one family); the paper's "
        "Table 1 below its row where it gives the number:",
        "",
    ]
    rows = []
    for arm, r in p["ratios"].items():
        rows.append([arm, *(f"{fmt_ratio(r[k])} (p {fmt(adj[f'{arm}/{k}'], 2)})" for k in RATIOS)])
        if arm in PAPER_ROWS:
            rows.append([f"paper: {arm}", *(PAPER_ROWS[arm].get(k, "") for k in RATIOS)])
    lines += table(["vs", *RATIOS.values()], rows)
    lines += ["", "A*-PO minus each algorithm at the last step (paired by seed):", ""]
    rows = [
        [arm, *(f"{fmt_ci(_as_ci(d[k]))} (p {fmt(adj[f'{arm}/{k}'], 2)})" for k in d)]
        for arm, d in p["differences"].items()
    ]
    lines += table(["vs", "expected accuracy", "KL(pi || pi_ref)"], rows)
    if p["mechanism"]:
        lines += ["", "The mechanism, A*-PO over GRPO per target (paired by seed):", ""]
        rows = [
            [
                k,
                fmt_ratio(m["steps"]),
                fmt_ratio(m["step_cost"]),
                fmt(m["product"]),
                fmt_ratio(m["time"]),
            ]
            for k, m in p["mechanism"].items()
        ]
        header = ["target", "steps to target", "s per step", "product", "time to target"]
        lines += table(header, rows)
        lines += [
            "",
            "product = steps ratio x step-cost ratio: the time ratio if the step cost were the "
            "whole story (the time to target adds Stage 1 and reads the curve between "
            "evaluations).",
        ]
    return lines


def _as_ci(d: dict[str, Any]) -> dict[str, Any]:
    return {"mean": d["diff"], "low": d["low"], "high": d["high"]}


def _stage1_responses(run: dict[str, Any], sizes: dict[str, int]) -> int:
    """The responses ``run``'s Stage 1 generated: its ``stage1_samples``, or for a run that
    does not record it, N per pool prompt if it ran a Stage 1."""
    if "stage1_samples" in run:
        return int(run["stage1_samples"])
    return sizes["pool"] * sizes["n_samples"] if run["stage1_s"] > 0 else 0


#: The curves' x axes: label -> the x of evaluation ``e`` of run ``r`` (``n``: the study's
#: pool size and N; A*-PO's Stage 1 generated its responses before its first step).
AXES = {
    "steps": lambda r, e, n: float(e["step"]),
    "responses generated (Stage 1 included)": lambda r, e, n: float(
        e["responses"] + _stage1_responses(r, n)
    ),
    "tokens generated in training, millions (Stage 1 not)": lambda r, e, n: e["tokens"] / 1e6,
    "run clock (s)": lambda r, e, n: float(e["time"]),
}
#: The axes of :data:`AXES` drawn on a log scale: a group method generates ``group_size`` times
#: the responses per step, so on a linear axis the one-sample methods fill its first fifth.
LOG_AXES = (
    "responses generated (Stage 1 included)",
    "tokens generated in training, millions (Stage 1 not)",
)
#: The forest plot's colours and markers per quantity of :data:`RATIOS`: none of the colours
#: the curves give the algorithms (``C0``-``C4``), so a colour means one thing per figure.
RATIO_STYLES = (("C9", "o"), ("C5", "s"), ("C8", "^"), ("C6", "D"), ("C7", "v"))


@styled
def plot_paper(result: dict[str, Any], path: Any) -> Any:
    """Held-out expected accuracy against steps, responses and tokens generated and the run
    clock per algorithm (top, :data:`AXES`), and a forest plot of A*-PO's ratios with their
    intervals (bottom)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cfg, p = result["config"], result["summary"]["paper"]
    groups = by_arm(result["runs"])
    sizes = {"pool": cfg["pool_size"], "n_samples": cfg["n_samples"]}
    fig = Figure(figsize=(WIDTH, 10.0), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subfigures(2, 1, squeeze=False, height_ratios=[1.6, 1]).flat
    axes = top.subplots(2, 2, sharey=True).flat
    names = list(groups)[:MAX_LEGEND]
    for ax, (label, x_of) in zip(axes, AXES.items(), strict=True):
        for i, arm in enumerate(names):
            curves = [
                (
                    [x_of(r, e, sizes) for e in r["evals"]],
                    [e["expected_accuracy"] for e in r["evals"]],
                )
                for r in groups[arm]
            ]
            seed_errorbars(ax, curves, arm, f"C{i}")
        if label in LOG_AXES:  # the step-0 evaluations at 0 are left out (the steps panel)
            ax.set_xscale("log", nonpositive="mask")
            label = f"{label}\n(log scale)"
        ax.set(xlabel=label, ylabel="held-out expected accuracy")
        ax.grid(alpha=0.3)
    handles, labels = top.axes[0].get_legend_handles_labels()
    legend_below(top, handles, labels, ncol=3 if max(map(len, labels)) <= 24 else 2)
    ax = bottom.subplots()
    algos, width = list(p["ratios"]), len(RATIOS) + 1  # a group of rows per algorithm
    for i, k in enumerate(RATIOS):
        ys = [-(j * width + i) for j in range(len(algos))]
        rs = [p["ratios"][a][k] for a in algos]
        ok = [(y, r) for y, r in zip(ys, rs, strict=True) if not math.isnan(r["ratio"])]
        if ok:
            low, high = [r["low"] for _, r in ok], [r["high"] for _, r in ok]
            pos, ratio = [y for y, _ in ok], [r["ratio"] for _, r in ok]
            color, marker = RATIO_STYLES[i % len(RATIO_STYLES)]
            errorbars(ax, ratio, pos, low, high, True, color=color, fmt=marker, label=RATIOS[k])
    centers = [-(j * width + (len(RATIOS) - 1) / 2) for j in range(len(algos))]
    ax.axvline(1.0, color="gray", ls=":", lw=1)
    ax.set(xscale="log", yticks=centers, yticklabels=algos, xlabel="A*-PO's / the algorithm's")
    ax.grid(alpha=0.3, axis="x")
    handles, labels = ax.get_legend_handles_labels()
    legend_below(bottom, handles, labels, ncol=2)
    seeds = cfg["seeds"]
    title = (
        f"{cfg.get('task', 'addition')}, {p['steps']} steps per run, n = {seeds} seeds\n{CURVES}"
    )
    return save(fig, path, title, strict=True)
