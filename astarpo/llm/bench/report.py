"""Summary, Markdown report and plot of :func:`astarpo.llm.bench.run.run_bench` results.

Per run name (``astarpo``, the baselines, ``astarpo_drop``, and ``astarpo (Stage 1 reused)``:
the A*-PO runs read on their Stage 2 clock, as if Stage 1 had been paid before): final held-out
accuracy at the budget (expected sampled, greedy, on the hard subset), KL to the reference,
peak memory, time to each target, per-phase time; intervals are 95% Student-t over seeds, and
ratios to A*-PO are paired by seed (:func:`~astarpo.llm.bench.stats.paired_ratio`).

The targets are read on ``expected_accuracy`` (the sampled pass@1 without sampling noise, see
:func:`~astarpo.llm.eval.answer_probability`): ``reference + f * (best - reference)``
for every ``f`` of ``target_fractions``, where ``best`` is the highest mean final accuracy of
any run.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from astarpo.analysis.stats import paired_ratio, t_interval
from astarpo.llm.bench import figures
from astarpo.llm.bench.config import ARM_LABELS
from astarpo.llm.bench.mechanism import markdown_lines, summarize_mechanism
from astarpo.llm.bench.one_pass import REUSED
from astarpo.llm.bench.one_pass import markdown_lines as one_pass_lines
from astarpo.llm.bench.stats import target_levels, time_to_target
from astarpo.llm.bench.stats import value_at as _value_at

__all__ = ["PAPER", "edge_note", "summarize", "to_markdown", "write"]


#: Figures of the A*-PO paper (Brantley et al. 2025, Table 1; Qwen2.5 on MATH, 4xH100).
PAPER: dict[str, Any] = {
    "training_hours": {
        "1.5B": {"astarpo": 6.92, "grpo": 15.01},
        "7B": {"astarpo": 11.01, "grpo": 20.15},
    },
    "time_ratio_astarpo_grpo": {"1.5B": 0.46, "3B": 0.48, "7B": 0.55},
    "peak_memory_percent_1.5B": {"astarpo": 41.6, "grpo": 42.2, "rebel": 63.3},
}

METRICS = (
    "expected_accuracy",
    "accuracy",
    "sampled_accuracy",
    "hard_expected_accuracy",
    "hard_accuracy",
    "kl",
)


def _memory_mb(run: dict[str, Any]) -> float:
    """CUDA: peak allocated. CPU: peak resident memory during the run (Stage 1 and training,
    evaluation excluded) minus the resident memory with the models loaded."""
    mem = run["memory"]
    if "cuda_peak_allocated_mb" in mem:
        return float(mem["cuda_peak_allocated_mb"])
    return float(mem["rss_peak_mb"] - mem["rss_before_train_mb"])


def _curve(run: dict[str, Any], key: str, clock: str = "time") -> tuple[list[float], list[float]]:
    ev = [e for e in run["evals"] if key in e]
    return [float(e[clock]) for e in ev], [float(e[key]) for e in ev]


def _groups(runs: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """Run name (a peer's by :data:`~astarpo.llm.bench.config.ARM_LABELS`, e.g. "TRL GRPO")
    -> [(run, clock key)] sorted by seed; A*-PO also as :data:`REUSED`."""
    out: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        out.setdefault(ARM_LABELS.get(r["arm"], r["arm"]), []).append((r, "time"))
    if "astarpo" in out:
        out[REUSED] = [(r, "stage2_time") for r, _ in out["astarpo"]]
    return out


#: Bounds of a time, a count or a KL divergence: their intervals are clipped at 0.
POSITIVE = (0.0, math.inf)

#: Metrics that are accuracies: their intervals are clipped to [0, 1].
ACCURACIES = frozenset(METRICS) - {"kl"}


def _ci(xs: list[float | None], bounds: tuple[float, float] | None = None) -> dict[str, float]:
    m, lo, hi = t_interval([x for x in xs if x is not None], bounds=bounds)
    return {"mean": m, "low": lo, "high": hi}


def summarize(result: dict[str, Any], targets: dict[str, float] | None = None) -> dict[str, Any]:
    """Aggregate ``result["runs"]`` per run name (see the module doc).

    Args:
        result: ``{"config", "reference", "runs"}`` of a benchmark.
        targets: Target levels to read the times on (None: from these runs, module doc); the
            one-pass runs are read on the main runs' targets.

    Returns:
        ``{"budget_s", "reference", "best_final", "targets", "memory_kind", "arms",
        "ratios"}``; ``arms[name]`` holds ``final`` (metric -> mean/low/high at the budget),
        ``time_to_target`` (target -> per-seed times, ``None`` = not reached, the interval over
        the reached ones, ``reached``), ``memory_mb``, ``phases_s``, ``lr``, ``steps``;
        ``ratios[name][target]`` is A*-PO's time over ``name``'s (:func:`paired_ratio`) and
        ``ratios[name]["memory"]`` A*-PO's peak memory over ``name``'s.
    """
    cfg = result["config"]
    budget = float(cfg["max_train_seconds"])
    groups = _groups(result["runs"])
    arms: dict[str, dict[str, Any]] = {}
    for name, rs in groups.items():
        final: dict[str, dict[str, float]] = {}
        for key in METRICS:
            # On the run clock for every row: "Stage 1 reused" ends with the same runs' accuracy.
            vals = [
                _value_at(*_curve(r, key), budget) if _curve(r, key)[0] else None for r, _ in rs
            ]
            final[key] = _ci(vals, (0.0, 1.0) if key in ACCURACIES else POSITIVE)
        arms[name] = {
            "seeds": len(rs),
            "lr": rs[0][0]["lr"],
            "samples_per_prompt": rs[0][0]["samples_per_prompt"],
            "steps": _ci([r["steps"] for r, _ in rs], POSITIVE),
            "stage1_s": _ci([r["stage1_s"] if c == "time" else 0.0 for r, c in rs], POSITIVE),
            "final": final,
            "memory_mb": _ci([_memory_mb(r) for r, _ in rs]),
            "phases_s": {
                k: _ci([r["phases"][k] for r, _ in rs])["mean"] for k in rs[0][0]["phases"]
            },
        }
    ref = float(result["reference"]["expected_accuracy"])
    best = max(a["final"]["expected_accuracy"]["mean"] for a in arms.values())
    if targets is None:
        targets = target_levels(ref, best, cfg["target_fractions"])
    for name, rs in groups.items():
        ttt = {}
        for label, level in targets.items():
            times = [time_to_target(*_curve(r, "expected_accuracy", c), level) for r, c in rs]
            ttt[label] = {
                "times": times,
                **_ci(times, POSITIVE),
                "reached": sum(t is not None for t in times),
            }
        arms[name]["time_to_target"] = ttt
    ratios: dict[str, dict[str, Any]] = {}
    base = groups.get("astarpo", [])
    for name, rs in groups.items():
        if name == "astarpo" or len(rs) != len(base):
            continue
        ratios[name] = {
            label: paired_ratio(
                arms["astarpo"]["time_to_target"][label]["times"],
                arms[name]["time_to_target"][label]["times"],
            )
            for label in targets
        }
        ratios[name]["memory"] = paired_ratio(
            [_memory_mb(r) for r, _ in base], [_memory_mb(r) for r, _ in rs]
        )
    cuda = any("cuda_peak_allocated_mb" in r["memory"] for r in result["runs"])
    return {
        "mechanism": summarize_mechanism(result),
        "budget_s": budget,
        "reference": ref,
        "best_final": best,
        "targets": targets,
        "memory_kind": "CUDA peak allocated"
        if cuda
        else "peak resident memory during the run (Stage 1 and training, evaluation excluded) "
        "minus the resident memory with the models loaded",
        "arms": arms,
        "ratios": ratios,
    }


def _f(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def _fci(c: dict[str, float], digits: int = 3) -> str:
    if math.isnan(c["low"]):
        return _f(c["mean"], digits)
    return f"{_f(c['mean'], digits)} [{_f(c['low'], digits)}, {_f(c['high'], digits)}]"


def _fratio(r: dict[str, Any]) -> str:
    if not r["pairs"]:
        return f"n/a (0/{r['pairs'] + r['missing']} pairs)"
    ci = "" if math.isnan(r["low"]) else f" [{r['low']:.2f}, {r['high']:.2f}]"
    miss = f" ({r['pairs']}/{r['pairs'] + r['missing']} pairs)" if r["missing"] else ""
    return f"{r['ratio']:.2f}{ci}{miss}"


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


def to_markdown(result: dict[str, Any]) -> str:
    """The Markdown report: protocol, accuracy and memory, time to targets, ratios, sweep."""
    cfg, s = result["config"], result["summary"]
    arms, labels = s["arms"], list(s["targets"])
    ref = result["reference"]
    hard = result.get("hard", {})
    lines = [
        "# A*-PO against the baselines (wall-clock protocol)",
        "",
        f"Every run: {s['budget_s']:g} s of training wall time (A*-PO's Stage 1 inside it), "
        f"{cfg['seeds']} seeds, {cfg['batch_size']} prompts per step from a pool of "
        f"{cfg['pool_size']}, evaluation every {cfg['eval_every_seconds']:g} s of training time "
        f"(not counted) on {cfg['eval_size']} held-out problems; A*-PO beta1={cfg['beta1']}, "
        f"beta2={cfg['beta2']}, N={cfg['n_samples']}; GRPO/RLOO G={cfg['group_size']}. "
        f"Intervals: 95% Student-t over seeds; ratios paired by seed (geometric mean).",
        f"Reference: expected sampled accuracy {ref['expected_accuracy']:.3f}, sampled "
        f"{ref['sampled_accuracy']:.3f}, greedy {ref['accuracy']:.3f}. Hard subset: "
        f"{hard.get('held_out', 'n/a')}/{hard.get('of', 'n/a')} held-out problems with "
        f"reference pass@{hard.get('n_samples', 'N')} = 0. Stage 1 alone on the pool: "
        f"{result['stage1']['seconds']:.1f} s ({result['stage1']['all_wrong']}/"
        f"{result['stage1']['prompts']} prompts all wrong).",
        f"Targets (expected sampled accuracy, from the reference {s['reference']:.3f} to the best "
        f"final {s['best_final']:.3f}): "
        + ", ".join(f"{k} = {v:.3f}" for k, v in s["targets"].items())
        + f". Memory: {s['memory_kind']}.",
        "",
        "| run | lr | steps | samples/prompt | expected acc | greedy acc | sampled acc | "
        "hard: expected | hard: greedy | KL to ref | peak memory MB | Stage 1 s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, a in arms.items():
        fin = a["final"]
        lines.append(
            f"| {name} | {a['lr']:g} | {_f(a['steps']['mean'])} | {a['samples_per_prompt']} | "
            + " | ".join(_fci(fin[k]) for k in METRICS)
            + f" | {_fci(a['memory_mb'])} | {_fci(a['stage1_s'])} |"
        )
    lines += [
        "",
        "Time to target (s of the run's clock; mean [interval] over the seeds that "
        "reached it, reached/seeds):",
        "",
        "| run | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for name, a in arms.items():
        cells = [f"{_fci(t)} ({t['reached']}/{a['seeds']})" for t in a["time_to_target"].values()]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "A*-PO's time to target and peak memory as a ratio to each run's (< 1: A*-PO "
        "faster / smaller):",
        "",
        "| vs | " + " | ".join(labels) + " | peak memory |",
        "|---|" + "---|" * (len(labels) + 1),
    ]
    for name, r in s["ratios"].items():
        lines.append(f"| {name} | " + " | ".join(_fratio(r[k]) for k in [*labels, "memory"]) + " |")
    lines += [
        "",
        "Per-phase time (s, mean over seeds): "
        + "; ".join(
            f"{n}: " + ", ".join(f"{k} {v:.1f}" for k, v in a["phases_s"].items())
            for n, a in arms.items()
            if n != REUSED
        ),
    ]
    lines += [
        "",
        "Learning-rate sweep (score: time-average of the validation expected accuracy "
        f"over {cfg['sweep_seconds']:g} s, seed {cfg['sweep_seed']}): "
        + "; ".join(
            f"{ARM_LABELS.get(n, n)}: "
            + ", ".join(f"{lr} -> {v:.3f}" for lr, v in w["scores"].items())
            + f" (chosen {w['chosen']:g}"
            + edge_note(w)
            + ")"
            for n, w in result["sweep"].items()
            if n != "astarpo_drop"
        ),
    ]
    for lib, info in result.get("peers", {}).items():
        lines += [
            "",
            f"Peers: {lib} {info['version']}; its settings that differ from ours:",
            "",
            f"| setting | {lib} | ours |",
            "|---|---|---|",
        ]
        for k, d in info["differences"].items():
            lines.append(f"| {k} | {d[lib]} | {d['ours']} |")
    if "mechanism" in s:
        lines += markdown_lines(s["mechanism"])
    if "one_pass" in result:
        lines += one_pass_lines(result["one_pass"], s)
    if "one_pass_error" in result:
        lines += ["", f"The one-pass setting failed: {result['one_pass_error']}"]
    if "wall_s" in result:
        lines += [
            "",
            f"Wall time of the whole benchmark: {result['wall_s']:.0f} s; load average "
            f"(1/5/15 min) at the start {result['load']['start']}, at the end "
            f"{result['load']['end']}.",
        ]
    p = PAPER["time_ratio_astarpo_grpo"]
    lines += [
        "",
        "The paper (Table 1; Qwen2.5 on MATH, 4xH100) reports A*-PO/GRPO training "
        f"time {p['1.5B']} (1.5B), {p['3B']} (3B), {p['7B']} (7B); peak memory 41.6% of "
        "the GPU (A*-PO) vs 42.2% (GRPO) and 63.3% (REBEL) at 1.5B.",
    ]
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out_dir: str | Path) -> None:
    """Write ``bench.json``, ``bench.md`` and ``bench.png`` to ``out_dir``."""
    out = Path(out_dir)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    (out / "bench.md").write_text(to_markdown(result))
    groups = _groups(result["runs"])
    panels = {
        key: {name: [_curve(r, key, c) for r, c in rs] for name, rs in groups.items()}
        for key in ("expected_accuracy", "hard_expected_accuracy")
    }
    titles = {
        "expected_accuracy": "held-out expected sampled accuracy",
        "hard_expected_accuracy": "hard subset (expected)",
    }
    s = result["summary"]
    figures.curves(panels, titles, s["targets"], result["config"]["seeds"], s["budget_s"],
                   out / "bench.png", dashed=frozenset({REUSED}))  # fmt: skip


def _main(argv: list[str]) -> int:
    """``python -m astarpo.llm.bench.report OUT``: summarize ``OUT/bench.json`` again and
    rewrite ``bench.json/md/png`` (the runs themselves are not touched)."""
    (out,) = argv
    result = json.loads((Path(out) / "bench.json").read_text())
    result["summary"] = summarize(result)
    if "one_pass" in result:
        one = result["one_pass"]
        mini = {**result, "config": one["config"], "runs": one["runs"]}
        one["summary"] = summarize(mini, targets=result["summary"]["targets"])
    write(result, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
