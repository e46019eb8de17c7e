"""Summary, verdicts and report of the zero-pass study (``zero_pass.json/md/png``).

Every verdict follows :data:`RULE` on the per-seed change of a held-out expected accuracy (the
run's last evaluation minus the reference's), with the mean's 95% Student-t interval
(:func:`~astarpo.analysis.stats.mean_interval`). The review's 2x2 per training set crosses
A*-PO's verdict on the hard held-out prompts with the baselines' (any of GRPO, PPO, REBEL).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis import (
    CURVES,
    figure,
    legend_below,
    mean_interval,
    save,
    seed_errorbars,
    styled,
)
from experiments.harness.output import OutputDir
from experiments.harness.report import fmt, fmt_ci, missing, process_lines, table
from experiments.harness.report import write as write_report
from experiments.zero_pass.config import ARMS

__all__ = ["BASELINES", "MIN_GAIN", "RULE", "cell", "describe", "plot", "refresh", "summarize"]
__all__ += ["to_markdown", "verdict", "write"]

#: Smallest change of an accuracy called a change: half a point (1 prompt in 200).
MIN_GAIN = 0.005
#: The verdict rule, as written in the JSON.
RULE = (
    "per seed: last-evaluation minus reference expected accuracy; improves if the 95% t-interval "
    f"of the mean lies above 0 and the mean >= {MIN_GAIN}; worsens if below 0 and the mean <= "
    f"-{MIN_GAIN}; stagnates otherwise; n/a with < 2 seeds"
)
#: The exploration-based baselines of the review's question.
BASELINES = ("grpo", "ppo", "rebel")
_LABELS = dict(zip(ARMS, ("A*-PO", "A*-PO, all-wrong filter", "GRPO", "PPO", "REBEL"), strict=True))
_COLOURS = {a: f"tab:{c}" for a, c in zip(ARMS, "blue cyan red green purple".split(), strict=True)}
#: The figure's rows: metric -> axis label.
ROWS = {
    "hard_expected_accuracy": "hard held-out:\nexpected accuracy",
    "hard_log10_gold": "hard held-out:\n" r"mean $\log_{10}\pi(\mathrm{gold})$",
    "easy_expected_accuracy": "easy held-out:\nexpected accuracy",
}
#: Relative difference below which a curve is drawn as "= reference" (rounding of a mean).
SAME = 1e-12
#: An accuracy panel whose reference is below this is drawn on a log scale.
TINY = 1e-6
#: The cells of the review's 2x2: (A*-PO improves, a baseline improves) -> reading.
READINGS = {
    (False, True): "A*-PO stagnates, a baseline improves: the no-exploration claim is bounded by "
    "v_ref > 0",
    (False, False): "all stagnate: no method learns the zero-pass prompts here",
    (True, False): "A*-PO improves where no baseline does",
    (True, True): "A*-PO and a baseline improve",
}


def describe(result: dict[str, Any]) -> str:
    """A finished run's line: its steps, or why it was skipped."""
    return result.get("skipped") or f"{result.get('steps', 0)} steps"


def verdict(change: dict[str, Any]) -> str:
    """:data:`RULE` on a :func:`~astarpo.analysis.stats.mean_interval` of per-seed changes."""
    if change["n"] < 2 or missing(change["low"]):
        return f"n/a ({change['n']} seed)"
    if change["low"] > 0 and change["mean"] >= MIN_GAIN:
        return "improves"
    if change["high"] < 0 and change["mean"] <= -MIN_GAIN:
        return "worsens"
    return "stagnates"


def cell(astarpo: str, baselines: str) -> str:
    """The review's reading of one cell of its 2x2 (:data:`READINGS`)."""
    return READINGS[(astarpo == "improves", baselines == "improves")]


def _arm(runs: list[dict[str, Any]], ref: dict[str, float]) -> dict[str, Any]:
    last = [r["evals"][-1] for r in runs]
    out: dict[str, Any] = {"seeds": len(runs), "steps": mean_interval([r["steps"] for r in runs])}
    out["samples_per_prompt"] = runs[0]["samples_per_prompt"]
    for kind in ("hard", "easy"):
        key = f"{kind}_expected_accuracy"
        out[f"{kind}_final"] = mean_interval([e[key] for e in last], bounds=(0.0, 1.0))
        out[f"{kind}_change"] = mean_interval([e[key] - ref[key] for e in last])
        out[f"{kind}_samples"] = int(sum(r["samples"][kind] for r in runs))
        out[f"{kind}_successes"] = int(sum(r["successes"][kind] for r in runs))
        out[f"{kind}_verdict"] = verdict(out[f"{kind}_change"])
    d_log = [e["hard_log10_gold"] - ref["hard_log10_gold"] for e in last]
    out["hard_log10_gold_change"], out["log_ratio"] = mean_interval(d_log), {}
    for kind in ("hard", "easy"):
        for outcome in ("failures", "successes"):
            got = [r["log_ratio"][kind][outcome] for r in runs if outcome in r["log_ratio"][kind]]
            if got:
                out["log_ratio"][f"{kind}_{outcome}"] = {
                    "count": int(sum(g["count"] for g in got)),
                    "beta2_log_ratio": mean_interval([g["beta2_log_ratio"] for g in got]),
                    "target": float(np.mean([g["target"] for g in got])),
                }
    return out


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per training set and run: changes, verdicts, success counts, the log-ratio check; and the
    review's 2x2 per set (``answer``)."""
    ref = result["reference"]["eval"]
    sets: dict[str, Any] = {}
    answer: dict[str, Any] = {}
    for set_name in dict.fromkeys(r["set"] for r in result["runs"]):
        arms: dict[str, Any] = {}
        for arm in ARMS:
            rows = [r for r in result["runs"] if r["set"] == set_name and r["arm"] == arm]
            runs = [r for r in rows if "skipped" not in r]
            if runs:
                arms[arm] = _arm(runs, ref)
            elif rows:
                arms[arm] = {"skipped": rows[0]["skipped"], "seeds": len(rows)}
        sets[set_name] = arms
        base = [arms[b]["hard_verdict"] for b in BASELINES if "hard_verdict" in arms.get(b, {})]
        a = arms.get("astarpo", {}).get("hard_verdict", "n/a")
        b = "improves" if "improves" in base else ("n/a" if not base else "stagnates")
        answer[set_name] = {"astarpo": a, "baselines": b, "reading": cell(a, b)}
    return {"rule": RULE, "sets": sets, "answer": answer}


def to_markdown(result: dict[str, Any]) -> str:
    """The report: the hard set and its bounds, the review's 2x2, each run name's changes,
    verdicts and success counts per training set, Stage 1, the clock."""
    h, cfg, s = result["hard_set"], result["config"], result["summary"]
    lines = [
        "# Zero-pass prompts: does A*-PO, or an exploring baseline, learn them?",
        "",
        f"Hard set: {h['digits']}-digit scratchpad problems (SFT: {h['sft_digits']} digits) "
        f"with pass@{h['k']} = 0 under the reference, {result['sizes']['hard_train']} for "
        f"training and {result['sizes']['hard_eval']} held out ({h['candidates']} candidates, "
        f"{h['solved_at_least_once']} solved at least once and left out); one-sided 95% upper "
        f"bound of a prompt's solve rate {h['upper95']['per_prompt']:.4f}, of their mean "
        f"{h['upper95']['mean']:.2g}. Every run: {cfg['seconds']:g} s of Stage 2, learning rate "
        f"{cfg['learning_rate']:g}, evaluation every {cfg['eval_every_seconds']:g} s. Verdicts: "
        f"{RULE}.",
        "",
    ]
    rows = [[k, a["astarpo"], a["baselines"], a["reading"]] for k, a in s["answer"].items()]
    lines += table(["trained on", "A*-PO, hard held-out", "baselines", "reading"], rows)
    rows = []
    for set_name, arms in s["sets"].items():
        for arm, a in arms.items():
            if "skipped" in a:
                cells = ["skipped: " + a["skipped"], "", "", "", ""]
            else:
                changes = [
                    f"{fmt_ci(a[f'{k}_change'])} ({a[f'{k}_verdict']})" for k in ("hard", "easy")
                ]
                cells = [fmt(a["steps"]["mean"]), *changes, fmt_ci(a["hard_log10_gold_change"])]
                cells += [f"{a['hard_successes']}/{a['hard_samples']}"]
            rows.append([set_name, arm, a["seeds"], *cells])
    header = ["set", "run", "seeds", "steps", "hard: change", "easy: change"]
    header += ["hard: change of log10 gold", "hard successes/samples"]
    lines += ["", "Change of the held-out expected accuracy from the reference's (95% interval):"]
    lines += ["", *table(header, rows)]
    stage1 = "; ".join(
        f"{k} {v['seconds']:.1f} s ({v['all_wrong']}/{v['prompts']} all wrong)"
        for k, v in result["stage1"].items()
    )
    lines += ["", f"Stage 1 (N = 8, outside the runs' clocks): {stage1}.", *process_lines(result)]
    return "\n".join(lines) + "\n"


@styled
def plot(result: dict[str, Any], path: Any) -> Any:
    """Rows: :data:`ROWS`; columns: the training sets; every run name's curve at its
    evaluations, the reference dotted; a note where every run's mean equals the reference at
    every evaluation (to :data:`SAME`: a mean over seeds of equal numbers can differ in the last
    bits)."""
    ref, sets = result["reference"]["eval"], list(dict.fromkeys(r["set"] for r in result["runs"]))
    fig, axes = figure(cols=len(sets), rows=len(ROWS), height=2.2, sharex=True)
    note = f"every run = reference\n(to {SAME:g}) at every\nevaluation"
    for j, set_name in enumerate(sets):
        axes[j].set_title(f"trained on {set_name}")
        for i, (key, label) in enumerate(ROWS.items()):
            ax, unmoved = axes[i * len(sets) + j], True
            bounds = None if "log10" in key else (0.0, 1.0)
            for arm in ARMS:
                runs = [r for r in result["runs"] if (r["set"], r["arm"]) == (set_name, arm)]
                evals = [r["evals"] for r in runs if "skipped" not in r]
                curves = [([e["stage2_time"] for e in ev], [e[key] for e in ev]) for ev in evals]
                means = seed_errorbars(
                    ax, curves, arm, _COLOURS[arm], bounds=bounds, label=_LABELS[arm]
                )
                unmoved &= bool(np.all(np.abs(np.array(means) - ref[key]) <= SAME * abs(ref[key])))
            ax.axhline(ref[key], color="k", ls=":", lw=1.0, label="reference")
            if "log10" not in key and not unmoved and ref[key] < TINY:
                ax.set_yscale("log", nonpositive="clip")  # changes of 1e-37 are not linear
            if unmoved:
                ax.set_yticks([ref[key]], [f"{ref[key]:.3g}"])
                ax.text(0.5, 0.65, note, transform=ax.transAxes, ha="center", va="center")
            if j == 0:
                ax.set_ylabel(label)
            if i == len(ROWS) - 1:
                ax.set_xlabel("Stage 2 time (s)")
    entries: dict[str, Any] = {}
    for ax in axes:  # one entry per run name, from whichever panel has it
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    legend_below(fig, list(entries.values()), list(entries), ncol=3)
    h, cfg = result["hard_set"], result["config"]
    title = (
        f"zero-pass: {h['digits']}-digit hard prompts (SFT: {h['sft_digits']} digits), "
        f"pass@{h['k']} = 0\nn = {cfg['seeds_main']} seeds for A*-PO and GRPO on hard and "
        f"mixed, {cfg['seeds_other']} otherwise\n{CURVES}"
    )
    return save(fig, path, title, strict=True)


def refresh(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with its summary made again from its runs."""
    return {**result, "summary": summarize(result)}


def write(output: OutputDir, result: dict[str, Any], with_json: bool = True) -> None:
    """``zero_pass.json`` (unless not ``with_json``), ``zero_pass.md`` and ``zero_pass.png``."""
    write_report(output, result, to_markdown(result), plot, with_json)
