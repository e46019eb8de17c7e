"""The refresh study's report: ``refresh.json``, ``refresh.md`` (per rule and bin the final
exact pass@k, expected accuracy and KL to the original reference; the paired verdicts) and
``refresh.png`` (pass@k per bin against steps, and the refresh's expected-accuracy difference)."""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import (
    errorbars,
    figure,
    holm,
    legend_below,
    mean_interval,
    paired_difference,
    save,
    seed_errorbars,
    styled,
)
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, fmt_ci, process_lines, table
from experiments.harness.report import write as write_report

__all__ = ["ALPHA", "METRICS", "plot", "refresh", "summarize", "to_markdown", "write"]

#: Family-wise error rate of the verdicts (Holm-adjusted p-values below it count).
ALPHA = 0.05
#: The final held-out measures per bin, in the tables' order.
METRICS = ("pass_at_k", "expected_accuracy", "kl0")


def _final(run: dict[str, Any], key: str) -> float:
    return float(run["evals"][-1][key])


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per rule (``"K=k"``) and bin, each final measure's mean over seeds with its interval;
    per refreshed rule and bin, the paired difference from the fixed reference (``K=0``) with
    Holm's adjustment over every difference (one family), and the verdict: ``moves the
    ceiling`` when the refreshed pass@k is above the fixed run's (adjusted p < :data:`ALPHA`)
    and its interval lies above the original reference's pass@k, ``lower`` when below the fixed
    run's, else ``no difference shown``."""
    cfg = result["config"]
    by_rule: dict[int, dict[int, dict[str, Any]]] = {}
    for r in result["runs"]:
        by_rule.setdefault(int(r["refresh_every"]), {})[int(r["seed"])] = r
    seeds = sorted(by_rule[0])
    finals: dict[str, Any] = {}
    for k, runs in by_rule.items():
        finals[f"K={k}"] = {
            b: {
                m: mean_interval([_final(runs[s], f"{b}/{m}") for s in sorted(runs)])
                for m in METRICS
            }
            for b in cfg["bins"]
        }
        samples = [runs[s]["refresh"].get("samples", 0.0) for s in sorted(runs)]
        finals[f"K={k}"]["stage1_samples"] = mean_interval(samples)
    diffs: dict[str, Any] = {}
    for k in by_rule:
        if k == 0:
            continue
        diffs[f"K={k}"] = {
            b: {
                m: paired_difference(
                    [_final(by_rule[k][s], f"{b}/{m}") if s in by_rule[k] else None for s in seeds],
                    [_final(by_rule[0][s], f"{b}/{m}") for s in seeds],
                )
                for m in METRICS
            }
            for b in cfg["bins"]
        }
    family = {
        f"{k}|{b}|{m}": d["p"]
        for k, row in diffs.items()
        for b, ms in row.items()
        for m, d in ms.items()
    }
    adjusted = holm(family)
    verdicts: dict[str, dict[str, str]] = {}
    for rule, row in diffs.items():
        verdicts[rule] = {}
        for b, ms in row.items():
            for m, d in ms.items():
                d["p_holm"] = adjusted[f"{rule}|{b}|{m}"]
            d, ceiling = ms["pass_at_k"], result["reference"][f"{b}/pass_at_k"]
            above = not math.isnan(d["p_holm"]) and d["p_holm"] < ALPHA
            low = finals[rule][b]["pass_at_k"]["low"]
            if above and d["diff"] > 0 and not math.isnan(low) and low > ceiling:
                verdicts[rule][b] = "moves the ceiling"
            elif above and d["diff"] < 0:
                verdicts[rule][b] = "lower"
            else:
                verdicts[rule][b] = "no difference shown"
    return {"finals": finals, "differences": diffs, "verdicts": verdicts}


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """The result with its summary made again from its runs."""
    return {**result, "summary": summarize(result)}


def to_markdown(result: dict[str, Any]) -> str:
    """The report: the protocol, the final measures per rule and bin, the verdicts."""
    cfg, s = result["config"], result["summary"]
    k = cfg["pass_k"]
    lines = ["# A*-PO with a moving reference (refresh_every_steps) on the v_ref ladder", ""]
    lines += [
        f"A*-PO (beta2 = {cfg['beta2']}, lr {cfg['learning_rate']:g}, {cfg['batch_size']} "
        f"prompts per step) for {cfg['max_steps']} steps on the training prompts of "
        f"{', '.join(cfg['bins'])} pooled ({result['stage1']['prompts']} prompts; Stage 1 "
        f"N = {cfg['n_samples']} once, {result['stage1']['seconds']:.1f} s, outside the "
        f"runs), {cfg['seeds']} seeds per rule. K = 0 is the fixed reference; K > 0 copies the "
        f"policy into the reference every K steps and re-estimates V* of the pool with Stage 1 "
        f"(N = {cfg['n_samples']}). Held-out measures per bin are exact: pass@{k} = mean "
        f"1 - (1 - pi(gold))^{k}, expected accuracy = mean pi(gold); KL0 = KL(pi || the "
        f"original reference), sampled on {cfg['kl_rows']} prompts. Intervals: 95% Student-t "
        "over seeds; differences paired by seed, Holm-adjusted over every difference.",
        "",
    ]
    header = ["rule", "bin", f"pass@{k}", "expected accuracy", "KL0", "Stage 1 samples"]
    rows = [
        [
            "reference",
            b,
            fmt(result["reference"][f"{b}/pass_at_k"]),
            fmt(result["reference"][f"{b}/expected_accuracy"]),
            "0",
            "",
        ]
        for b in cfg["bins"]
    ]
    for rule, row in s["finals"].items():
        for b in cfg["bins"]:
            rows.append(
                [rule, b, *(fmt_ci(row[b][m]) for m in METRICS), fmt_ci(row["stage1_samples"])]
            )
    lines += table(header, rows)
    lines += [
        "",
        f"Refreshed minus fixed (paired by seed; Holm-adjusted p). Rule: 'moves the ceiling' "
        f"when pass@{k} is above the fixed run's (adjusted p < {ALPHA}) and its interval lies "
        f"above the original reference's pass@{k}; 'lower' when below the fixed run's; else "
        "'no difference shown'.",
        "",
    ]
    rows = []
    for rule, row in s["differences"].items():
        for b, ms in row.items():
            cells = [
                f"{d['diff']:+.3g} [{fmt(d['low'])}, {fmt(d['high'])}] (p {fmt(d['p_holm'], 2)})"
                for d in (ms[m] for m in METRICS)
            ]
            rows.append([rule, b, *cells, s["verdicts"][rule][b]])
    lines += table(["rule", "bin", f"pass@{k}", "expected accuracy", "KL0", "verdict"], rows)
    return "\n".join([*lines, *process_lines(result)]) + "\n"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Per bin (a column): the exact held-out pass@k against steps per rule (top: every panel on
    [0, 1], the fixed reference solid, each refresh rule dashed and shifted by 2% of the steps so
    that neither hides the other, the original reference's a grey dotted line), and each
    refresh rule's held-out expected accuracy minus the fixed reference's, paired by seed, with
    its 95% t-interval at each evaluation (bottom: the page's finding)."""
    cfg = result["config"]
    bins = cfg["bins"]
    fig, axes = figure(len(bins), 2, height=2.6)
    rules = sorted({int(r["refresh_every"]) for r in result["runs"]})
    runs = {k: sorted((r for r in result["runs"] if int(r["refresh_every"]) == k),
                      key=lambda r: int(r["seed"])) for k in rules}  # fmt: skip
    shift = 0.02 * max((e["step"] for r in result["runs"] for e in r["evals"]), default=0)
    for col, b in enumerate(bins):
        top, bottom = axes[col], axes[len(bins) + col]
        for j, k in enumerate(rules):
            curves = [
                (
                    [e["step"] + shift * j for e in r["evals"]],
                    [e[f"{b}/pass_at_k"] for e in r["evals"]],
                )
                for r in runs[k]
            ]
            name = "fixed reference" if k == 0 else f"refresh every {k}"
            seed_errorbars(top, curves, name, f"C{j}", dashed=k != 0)
            if k == 0:
                continue
            steps = [e["step"] for e in runs[0][0]["evals"]] if runs[0] else []
            diffs = [
                paired_difference(
                    [_at(r, step, f"{b}/expected_accuracy") for r in runs[k]],
                    [_at(r, step, f"{b}/expected_accuracy") for r in runs[0]],
                )
                for step in steps
            ]
            ok = [(s_, d) for s_, d in zip(steps, diffs, strict=True) if not math.isnan(d["diff"])]
            if ok:
                x = [s_ + shift * j for s_, _ in ok]
                mean, low, high = ([d[key] for _, d in ok] for key in ("diff", "low", "high"))
                errorbars(bottom, x, mean, low, high, fmt="--o", lw=0.8, ms=3.5, capsize=2,
                          color=f"C{j}")  # fmt: skip
        top.axhline(result["reference"][f"{b}/pass_at_k"], color="0.4", ls=":", lw=1.0)
        top.set(
            ylim=(-0.03, 1.03),
            title=f"{b} (n = {cfg['ladder_prompts']})" if not cfg["ladder"] else b,
        )
        bottom.axhline(0.0, color="0.3", lw=0.8)
        bottom.set_xlabel("step")
    axes[0].set_ylabel(f"held-out pass@{cfg['pass_k']}\n(exact)")
    axes[len(bins)].set_ylabel("expected accuracy,\nrefreshed - fixed")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=2)
    title = (
        "A moving reference, per ladder bin: pass@k (dotted: the reference's), and the refresh's\n"
        "expected-accuracy difference from the fixed reference, paired by seed (95% intervals)"
    )
    return save(fig, path, title, strict=True)


def _at(run: dict[str, Any], step: int, key: str) -> float | None:
    """``key`` of ``run``'s evaluation at ``step`` (None where it has none)."""
    return next((e[key] for e in run["evals"] if e["step"] == step and key in e), None)


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``refresh.json`` (unless not ``with_json``), ``refresh.md`` and ``refresh.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
