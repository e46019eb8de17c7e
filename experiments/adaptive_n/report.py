"""The adaptive-N study's report: ``adaptive_n.json``, ``adaptive_n.md`` (per bin, every rule's
bias and MSE; the paired verdicts) and ``adaptive_n.png`` (MSE against samples per prompt)."""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import errorbars, figure, legend_below, log_y_labels, save, styled
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, fmt_ci, process_lines, table
from experiments.harness.report import write as write_report

__all__ = [
    "ALPHA",
    "PLOT_MIN_SUCCESSES",
    "plot",
    "refresh",
    "summarize",
    "to_markdown",
    "verdict",
    "write",
]

#: Family-wise error rate of the verdicts (Holm-adjusted p-values below it count).
ALPHA = 0.05
#: A bin is drawn when its reference samples hold at least this many successes: below, no
#: budget finds one, V-hat* is almost always 0, and its error relative to a V* of about 0
#: says nothing (the tables still give it).
PLOT_MIN_SUCCESSES = 5


def verdict(d: dict[str, Any]) -> str:
    """The page's rule for adaptive minus fixed squared error: ``lower`` (adaptive helps) if
    the Holm-adjusted p-value is below :data:`ALPHA` and the mean difference < 0, ``higher``
    (it hurts) if below and > 0, else ``no difference shown``."""
    p = d.get("p_holm", math.nan)
    if math.isnan(p) or p >= ALPHA:
        return "no difference shown"
    return "lower" if d["diff"] < 0 else "higher"


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per budget ``N=n`` and bin (and ``all``): the verdict of :func:`verdict`."""
    return {
        n: {b: verdict(d) for b, d in row.items()} for n, row in result["errors"]["paired"].items()
    }


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its summary made again from its errors."""
    return {**result, "summary": summarize(result)}


def to_markdown(result: dict[str, Any]) -> str:
    """The report: the bins, every rule's error per bin, the paired verdicts."""
    cfg, err = result["config"], result["errors"]
    lines = ["# Stage 1 with adaptive N: the error of V* against the exact value", ""]
    lines += [
        f"Prompts of the v_ref ladder (`{result['ladder']['folder']}`), each with "
        f"{cfg['k']} reference samples scored by the exact-match reward; the exact "
        f"V* = beta1 log(1 + v_ref (e^(1/beta1) - 1)) at beta1 = {cfg['beta1']}. Fixed N reads "
        f"the first N samples of a prompt; the adaptive rule (astarpo.allocation.allocate: a "
        f"pilot of {cfg['pilot']}, then the call's budget shared in proportion to "
        f"1/(pilot pass rate + 1/{cfg['pilot']}), at most {cfg['cap']} per prompt) runs on "
        f"calls of {cfg['prompts_per_call']} prompts of all bins shuffled together (seed "
        f"{cfg['calls_seed']}). Intervals: 95% Student-t over the bin's prompts.",
        "",
    ]
    rows = [
        [
            b,
            i["prompts"],
            f"{i['v_ref_geomean']:.3g}",
            fmt(i["v_ref_mean"]),
            fmt(i["sample_rate"]),
            fmt(i["v_star"]),
        ]
        for b, i in err["bins"].items()
    ]
    lines += table(
        [
            "bin (log10 v_ref)",
            "prompts",
            "v_ref (geometric mean)",
            "v_ref (mean)",
            "sampled success rate",
            "exact V* (mean)",
        ],
        rows,
    )
    for b in err["bins"]:
        lines += ["", f"Bin {b}:", ""]
        rows = [
            [
                rule,
                fmt(r[b]["samples"]),
                fmt_ci(r[b]["bias"]),
                fmt_ci(r[b]["mse"]),
                fmt(r[b]["all_wrong"]),
            ]
            for rule, r in err["rules"].items()
        ]
        lines += table(["rule", "samples/prompt", "bias", "MSE", "V-hat* = 0"], rows)
    lines += [
        "",
        "Adaptive minus fixed squared error at the same budget, paired by prompt (mean "
        "[95% interval], Holm-adjusted p over every cell of this table, one family). Rule: "
        f"'lower' (adaptive helps) or 'higher' (it hurts) when the adjusted p < {ALPHA}, "
        "else 'no difference shown'.",
        "",
    ]
    bins = [*err["bins"], "all"]
    rows = []
    for n, row in err["paired"].items():
        cells = [
            f"{row[b]['diff']:.2e} [{row[b]['low']:.2e}, {row[b]['high']:.2e}] "
            f"(p {fmt(row[b]['p_holm'], 2)}): {result['summary'][n][b]}"
            for b in bins
        ]
        rows.append([n, *cells])
    lines += table(["budget", *bins], rows)
    return "\n".join([*lines, *process_lines(result)]) + "\n"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    r"""Per bin whose samples hold :data:`PLOT_MIN_SUCCESSES` successes or more, the root-MSE
    of :math:`\hat V^*` relative to the bin's mean exact V* against mean samples per prompt:
    fixed N and adaptive, each a marker with its 95% interval (the square root of the MSE's,
    over the same mean V*; no line between budgets). The bins left out are named in the
    title."""
    err, k = result["errors"], int(result["config"]["k"])
    shown = [
        b for b, info in err["bins"].items()
        if info["sample_rate"] * info["prompts"] * k >= PLOT_MIN_SUCCESSES
    ]  # fmt: skip
    left = [b for b in err["bins"] if b not in shown]
    cols = min(len(shown), 4) or 1
    fig, axes = figure(cols, math.ceil(len(shown) / cols) or 1, height=2.6)
    for ax, b in zip(axes, shown, strict=False):
        scale = err["bins"][b]["v_star"]
        for j, family in enumerate(("fixed", "adaptive")):
            rules = [r for name, r in err["rules"].items() if name.startswith(family)]
            x = [r[b]["samples"] for r in rules]
            m = [r[b]["mse"] for r in rules]
            y, lo, hi = (
                [math.sqrt(max(c[k_], 0.0)) / scale for c in m] for k_ in ("mean", "low", "high")
            )
            errorbars(ax, x, y, lo, hi, fmt="os"[j], color=f"C{j}", ms=4, capsize=2,
                      label=f"{family} N")  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        log_y_labels(ax)
        ax.set_title(f"{b} (n = {err['bins'][b]['prompts']})")
        ax.set_xlabel("samples per prompt")
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel("root-MSE / mean V*")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=2)
    title = "Stage 1's V* error by bin of log10 v_ref"
    if left:
        title += (
            f"\nnot drawn: {' and '.join(left)}, under {PLOT_MIN_SUCCESSES} successes in all "
            f"their samples\n({k} per prompt): V-hat* is 0 there at almost every budget"
        )
    return save(fig, path, title, strict=True)


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``adaptive_n.json`` (unless not ``with_json``), ``adaptive_n.md`` and ``adaptive_n.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
