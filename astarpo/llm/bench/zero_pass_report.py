"""Summary, verdicts and figure of the zero-pass benchmark (:mod:`astarpo.llm.bench.zero_pass`).

Every verdict is computed by one stated rule (:data:`RULE`): per seed, the change of a held-out
expected accuracy from the reference's to the run's last evaluation; the mean change with its
95% Student-t interval over seeds; "improves" when the interval lies above 0 and the mean is at
least :data:`MIN_GAIN`, "worsens" when it lies below 0 and the mean is at most
``-MIN_GAIN``, "stagnates" otherwise, and "n/a" with fewer than two seeds. The review's 2x2
per training set crosses A*-PO's verdict on the hard held-out prompts with the baselines'
(they "improve" when any of GRPO, PPO, REBEL does).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.stats import t_interval

__all__ = ["BASELINES", "MIN_GAIN", "RULE", "cell", "plot", "summarize", "verdict"]

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
_ARMS = ("astarpo", "astarpo_drop", "grpo", "ppo", "rebel")
_LABELS = {
    "astarpo": "A*-PO",
    "astarpo_drop": "A*-PO, all-wrong filter",
    "grpo": "GRPO",
    "ppo": "PPO",
    "rebel": "REBEL",
}
_COLOURS = {
    "astarpo": "tab:blue",
    "astarpo_drop": "tab:cyan",
    "grpo": "tab:red",
    "ppo": "tab:green",
    "rebel": "tab:purple",
}


def _ci(xs: list[float], clip: bool = False) -> dict[str, Any]:
    mean, lo, hi = t_interval(xs)
    if clip and not math.isnan(lo):
        lo, hi = max(lo, 0.0 if mean >= 0 else -1.0), min(hi, 1.0)
    nan = math.isnan
    return {
        "mean": None if nan(mean) else mean,
        "lo": None if nan(lo) else lo,
        "hi": None if nan(hi) else hi,
        "n": len(xs),
    }


def verdict(change: dict[str, Any]) -> str:
    """The rule of the module doc on a ``_ci`` of the per-seed changes."""
    if change["n"] < 2 or change["lo"] is None:
        return f"n/a ({change['n']} seed)"
    if change["lo"] > 0 and change["mean"] >= MIN_GAIN:
        return "improves"
    if change["hi"] < 0 and change["mean"] <= -MIN_GAIN:
        return "worsens"
    return "stagnates"


def cell(astarpo: str, baselines: str) -> str:
    """The review's reading of one cell of its 2x2."""
    a, b = astarpo == "improves", baselines == "improves"
    if not a and b:
        return (
            "A*-PO stagnates, a baseline improves: the no-exploration claim is bounded by v_ref > 0"
        )
    if not a and not b:
        return "all stagnate: no method learns the zero-pass prompts here"
    if a and not b:
        return "A*-PO improves where no baseline does"
    return "A*-PO and a baseline improve"


def _arm(runs: list[dict[str, Any]], ref: dict[str, float]) -> dict[str, Any]:
    last = [r["evals"][-1] for r in runs]
    d_hard = [e["hard_expected_accuracy"] - ref["hard_expected_accuracy"] for e in last]
    d_easy = [e["easy_expected_accuracy"] - ref["easy_expected_accuracy"] for e in last]
    d_log = [e["hard_log10_gold"] - ref["hard_log10_gold"] for e in last]
    out: dict[str, Any] = {
        "seeds": len(runs),
        "steps": _ci([r["steps"] for r in runs]),
        "samples_per_prompt": runs[0]["samples_per_prompt"],
        "hard_final": _ci([e["hard_expected_accuracy"] for e in last], clip=True),
        "easy_final": _ci([e["easy_expected_accuracy"] for e in last], clip=True),
        "hard_change": _ci(d_hard),
        "easy_change": _ci(d_easy),
        "hard_log10_gold_change": _ci(d_log),
        "hard_samples": int(sum(r["samples"]["hard"] for r in runs)),
        "hard_successes": int(sum(r["successes"]["hard"] for r in runs)),
        "easy_samples": int(sum(r["samples"]["easy"] for r in runs)),
        "easy_successes": int(sum(r["successes"]["easy"] for r in runs)),
    }
    out["hard_verdict"] = verdict(out["hard_change"])
    out["easy_verdict"] = verdict(out["easy_change"])
    checks: dict[str, Any] = {}
    for kind in ("hard", "easy"):
        for outcome in ("failures", "successes"):
            got = [r["log_ratio"][kind][outcome] for r in runs if outcome in r["log_ratio"][kind]]
            if got:
                checks[f"{kind}_{outcome}"] = {
                    "count": int(sum(g["count"] for g in got)),
                    "beta2_log_ratio": _ci([g["beta2_log_ratio"] for g in got]),
                    "target": float(np.mean([g["target"] for g in got])),
                }
    out["log_ratio"] = checks
    return out


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per training set and run: changes, verdicts, success counts, the log-ratio check, the
    curves; and the review's 2x2 per set (``answer``)."""
    ref = result["reference"]["eval"]
    sets: dict[str, Any] = {}
    answer: dict[str, Any] = {}
    for set_name in dict.fromkeys(r["set"] for r in result["runs"]):
        rows = [r for r in result["runs"] if r["set"] == set_name]
        arms: dict[str, Any] = {}
        for arm in _ARMS:
            runs = [r for r in rows if r["arm"] == arm and "skipped" not in r]
            skipped = [r for r in rows if r["arm"] == arm and "skipped" in r]
            if runs:
                arms[arm] = {**_arm(runs, ref), "curves": _curves(runs)}
            elif skipped:
                arms[arm] = {"skipped": skipped[0]["skipped"], "seeds": len(skipped)}
        sets[set_name] = arms
        base = [
            arms[b]["hard_verdict"] for b in BASELINES if b in arms and "skipped" not in arms[b]
        ]
        a = arms.get("astarpo", {}).get("hard_verdict", "n/a")
        b = "improves" if "improves" in base else ("n/a" if not base else "stagnates")
        answer[set_name] = {"astarpo": a, "baselines": b, "reading": cell(a, b)}
    return {"rule": RULE, "sets": sets, "answer": answer}


def _curves(runs: list[dict[str, Any]]) -> dict[str, Any]:
    n = min(len(r["evals"]) for r in runs)
    out: dict[str, Any] = {"time": [], "steps": []}
    for key in ("hard_expected_accuracy", "hard_log10_gold", "easy_expected_accuracy"):
        out[key] = []
        for i in range(n):
            out[key].append(_ci([r["evals"][i][key] for r in runs], clip="accuracy" in key))
    for i in range(n):
        out["time"].append(float(np.mean([r["evals"][i]["stage2_time"] for r in runs])))
    return out


#: The figure's width (in), resolution and smallest text (pt): the docs page shows it at about
#: 736 CSS px, so its 10 pt text shows at 9.8 pt or more.
WIDTH, DPI, FONT = 7.5, 150, 10.0
#: Relative difference below which a curve is drawn as "= reference" (rounding of a mean).
SAME = 1e-12
_ROWS = (
    ("hard_expected_accuracy", "hard held-out:\nexpected accuracy"),
    ("hard_log10_gold", "hard held-out:\n" r"mean $\log_{10}\pi(\mathrm{gold})$"),
    ("easy_expected_accuracy", "easy held-out:\nexpected accuracy"),
)


def _panel(ax: Any, arms: dict[str, Any], key: str, ref: float) -> None:
    """Means over seeds with their 95% bands, the reference dotted; a note where every run's
    mean equals the reference at every evaluation (to :data:`SAME`: the mean over seeds of
    equal numbers can differ from them in the last bits)."""
    unmoved = True
    for arm, s in arms.items():
        if "curves" not in s:
            continue
        c = s["curves"]
        mean = np.array([x["mean"] for x in c[key]], dtype=float)
        lo = np.array([np.nan if x["lo"] is None else x["lo"] for x in c[key]], dtype=float)
        hi = np.array([np.nan if x["hi"] is None else x["hi"] for x in c[key]], dtype=float)
        ax.plot(c["time"], mean, "o-", ms=3, color=_COLOURS[arm], label=_LABELS[arm])
        ax.fill_between(c["time"], lo, hi, color=_COLOURS[arm], alpha=0.2, lw=0)
        unmoved = unmoved and bool(np.all(np.abs(mean - ref) <= SAME * abs(ref)))
    ax.axhline(ref, color="k", ls=":", lw=1.0, label="reference")
    if unmoved:
        ax.set_yticks([ref], [f"{ref:.3g}"])
        ax.text(0.5, 0.65, f"every run = reference\n(to {SAME:g}) at every\nevaluation",
                transform=ax.transAxes, ha="center", va="center")  # fmt: skip


def plot(result: dict[str, Any], path: str | Path) -> Path:
    """Rows: hard accuracy, hard mean log10 gold probability, easy accuracy; columns: the
    training sets. Means over seeds with 95% bands, the reference dotted; 7.5 in wide at
    150 dpi, every text >= 10 pt, the legend below the panels."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summary, ref = result["summary"]["sets"], result["reference"]["eval"]
    style = {"font.size": FONT, "axes.titlesize": FONT, "legend.frameon": False,
             "figure.titlesize": FONT + 1}  # fmt: skip
    with matplotlib.rc_context(style):  # type: ignore[arg-type]
        fig = Figure(figsize=(WIDTH, 2.2 * len(_ROWS) + 1.6), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(_ROWS), len(summary), squeeze=False, sharex=True)
        for j, (set_name, arms) in enumerate(summary.items()):
            axes[0][j].set_title(f"trained on {set_name}")
            for i, (key, label) in enumerate(_ROWS):
                _panel(axes[i][j], arms, key, ref[key])
                if j == 0:
                    axes[i][j].set_ylabel(label)
            axes[-1][j].set_xlabel("Stage 2 time (s)")
        entries: dict[str, Any] = {}
        for ax in axes.flat:  # one entry per run name, from whichever panel has it
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                entries.setdefault(label, handle)
        fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncol=3)
        h, cfg = result["hard_set"], result["config"]
        fig.suptitle(
            f"zero-pass: {h['digits']}-digit hard prompts (SFT: {h['sft_digits']} digits), "
            f"pass@{h['k']} = 0\nseeds: {cfg['seeds_main']} for A*-PO and GRPO on hard and "
            f"mixed, {cfg['seeds_other']} otherwise; bands: 95% t-interval over seeds"
        )
        path = Path(path)
        fig.savefig(path, dpi=DPI)
    return path
