"""Summary, Markdown table and plot of :func:`astarpo.llm.bench.run_bench` results.

Per algorithm (means over seeds): training wall time per training prompt, CPU time per prompt,
time to reach the target held-out accuracy, peak memory, final held-out accuracy and KL to the
reference, each also as a ratio to A*-PO. A*-PO's Stage 1 (offline, ``n_samples`` reference
samples per prompt) is reported on its own and added in the ``total`` column.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

__all__ = ["PAPER", "summarize", "to_markdown", "write"]

#: Figures the A*-PO paper reports (Gao et al. 2025; Qwen2.5 on MATH, 4xH100), for comparison.
PAPER: dict[str, Any] = {
    "training_hours": {
        "1.5B": {"astarpo": 6.92, "grpo": 15.01},
        "7B": {"astarpo": 11.01, "grpo": 20.15},
    },
    "peak_memory_percent_1.5B": {"astarpo": 41.6, "grpo": 42.2, "rebel": 63.3},
}


def _mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else math.nan


def _std(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def _memory_mb(run: dict[str, Any]) -> float:
    """CUDA: peak allocated (weights, optimizer, activations). CPU: peak resident memory during
    training minus the resident memory with the models loaded (libraries excluded)."""
    mem = run["memory"]
    if "cuda_peak_allocated_mb" in mem:
        return float(mem["cuda_peak_allocated_mb"])
    return float(mem["rss_peak_mb"] - mem["rss_before_train_mb"])


def _time_to(evals: list[dict[str, Any]], target: float) -> float | None:
    for e in evals:
        if e["accuracy"] >= target:
            return float(e["time"])
    return None


def _accuracy_at(evals: list[dict[str, Any]], t: float) -> float:
    """Greedy accuracy of the last evaluation made by training wall time ``t``."""
    return float([e for e in evals if e["time"] <= t][-1]["accuracy"])


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Aggregate ``result["runs"]`` per algorithm (see the module doc).

    Returns:
        ``{"target_accuracy", "target_auto", "memory_kind", "algos": {name: {...}}}`` where each
        algorithm has means (``train_s_per_prompt``, ``cpu_s_per_prompt``, ``time_to_target_s``,
        ``peak_memory_mb``, ``train_memory_mb``, ``final_accuracy`` (+ ``_std``), ``final_kl``),
        ``reached`` (runs that reached the target), ``accuracy_at_astarpo_time`` (greedy
        accuracy of the last evaluation within A*-PO's mean Stage 2 time) and ``ratio_*``
        entries relative to A*-PO.
    """
    cfg = result["config"]
    runs: list[dict[str, Any]] = result["runs"]
    by_algo: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_algo.setdefault(r["algo"], []).append(r)
    finals = {a: _mean([r["evals"][-1]["accuracy"] for r in rs]) for a, rs in by_algo.items()}
    ref_acc = float(result["reference"]["accuracy"])
    target: float | None = float(cfg["target_accuracy"]) or None
    auto = target is None
    if auto:
        low = min(finals.values())
        target = ref_acc + 0.8 * (low - ref_acc) if low > ref_acc else None
    cuda = any("cuda_peak_allocated_mb" in r["memory"] for r in runs)
    algos: dict[str, dict[str, Any]] = {}
    for a, rs in by_algo.items():
        times = [_time_to(r["evals"], target) for r in rs] if target is not None else []
        reached = [t for t in times if t is not None]
        algos[a] = {
            "samples_per_prompt": rs[0]["samples_per_prompt"],
            "seeds": len(rs),
            "train_s": _mean([r["train_s"] for r in rs]),
            "train_s_per_prompt": _mean([r["train_s"] / r["prompts"] for r in rs]),
            "cpu_s_per_prompt": _mean([r["cpu_train_s"] / r["prompts"] for r in rs]),
            "time_to_target_s": _mean(reached) if reached and len(reached) == len(rs) else None,
            "reached": len(reached),
            "peak_memory_mb": _mean([_memory_mb(r) for r in rs]),
            "train_memory_mb": _mean(
                [r["memory"]["rss_peak_mb"] - r["memory"]["rss_before_train_mb"] for r in rs]
            ),
            "final_accuracy": finals[a],
            "final_accuracy_std": _std([r["evals"][-1]["accuracy"] for r in rs]),
            "final_sampled_accuracy": _mean(
                [r["evals"][-1].get("sampled_accuracy", math.nan) for r in rs]
            ),
            "final_kl": _mean([r["evals"][-1]["kl"] for r in rs]),
            "phases_s": {k: _mean([r["phases"][k] for r in rs]) for k in rs[0]["phases"]},
        }
    base = algos["astarpo"]
    for a, rs in by_algo.items():  # accuracy with A*-PO's time budget (Stage 2 only / total)
        algos[a]["accuracy_at_astarpo_time"] = _mean(
            [_accuracy_at(r["evals"], base["train_s"]) for r in rs]
        )
    stage1 = float(result["stage1"]["seconds"])
    base["stage1_s"] = stage1
    for a, s in algos.items():
        s["total_s"] = s["train_s"] + (stage1 if a == "astarpo" else 0.0)
        for key in (
            "train_s_per_prompt",
            "cpu_s_per_prompt",
            "time_to_target_s",
            "peak_memory_mb",
            "train_memory_mb",
            "train_s",
            "total_s",
        ):
            num, den = s.get(key), base.get(key)
            s[f"ratio_{key}"] = num / den if num is not None and den else None
        s["ratio_total_vs_astarpo_total"] = s["total_s"] / base["total_s"]
    return {
        "target_accuracy": target,
        "target_auto": auto,
        "reference_accuracy": ref_acc,
        "memory_kind": "CUDA peak allocated"
        if cuda
        else "peak resident memory during training minus resident memory with the models loaded",
        "algos": algos,
    }


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}g}"


def to_markdown(result: dict[str, Any]) -> str:
    """The Markdown report (tables of absolute values and ratios to A*-PO)."""
    cfg, summ = result["config"], result["summary"]
    algos = summ["algos"]
    target = summ["target_accuracy"]
    lines = [
        "# A*-PO against the baselines",
        "",
        f"Model: {'toy default' if not cfg['model_overrides'] else cfg['model_overrides']}; "
        f"device {cfg['device']}; {cfg['seeds']} seeds; {cfg['steps']} steps x "
        f"{cfg['batch_size']} prompts; learning rate {cfg['learning_rate']}; "
        f"max_new_tokens {cfg['max_new_tokens']}.",
        f"Reference held-out greedy accuracy {summ['reference_accuracy']:.3f} (sampled "
        f"{result['reference'].get('sampled_accuracy', math.nan):.3f}); target greedy accuracy "
        f"{_fmt(target)}{' (automatic)' if summ['target_auto'] else ''}. "
        f"Stage 1 of A*-PO (N={result['stage1']['n_samples']} samples x "
        f"{result['stage1']['prompts']} prompts): {result['stage1']['seconds']:.1f} s.",
        f"Memory: {summ['memory_kind']}.",
        "",
        "| algorithm | samples/prompt | train s/prompt (x A*-PO) | CPU s/prompt (x) | "
        "time to target s (x) | total s incl. Stage 1 (x) | peak memory MB (x) | "
        "accuracy at A*-PO's train time | final greedy accuracy | final sampled accuracy | "
        "KL to ref |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a, s in algos.items():
        ttt = _fmt(s["time_to_target_s"])
        if s["time_to_target_s"] is None:
            ttt += f" ({s['reached']}/{s['seeds']} reached)"
        lines.append(
            f"| {a} | {s['samples_per_prompt']} | {_fmt(s['train_s_per_prompt'])} "
            f"({_fmt(s['ratio_train_s_per_prompt'])}) | {_fmt(s['cpu_s_per_prompt'])} "
            f"({_fmt(s['ratio_cpu_s_per_prompt'])}) | {ttt} "
            f"({_fmt(s['ratio_time_to_target_s'])}) | {_fmt(s['total_s'])} "
            f"({_fmt(s['ratio_total_vs_astarpo_total'])}) | {_fmt(s['peak_memory_mb'], 4)} "
            f"({_fmt(s['ratio_peak_memory_mb'])}) | {s['accuracy_at_astarpo_time']:.3f} | "
            f"{s['final_accuracy']:.3f} +- "
            f"{s['final_accuracy_std']:.3f} | {_fmt(s['final_sampled_accuracy'])} | "
            f"{_fmt(s['final_kl'])} |"
        )
    p = PAPER["training_hours"]
    lines += [
        "",
        "The paper (Qwen2.5 on MATH, 4xH100) reports A*-PO/GRPO training time "
        f"{p['1.5B']['astarpo'] / p['1.5B']['grpo']:.2f}x at 1.5B "
        f"({p['1.5B']['astarpo']} h vs {p['1.5B']['grpo']} h) and "
        f"{p['7B']['astarpo'] / p['7B']['grpo']:.2f}x at 7B; peak memory 41.6% of the GPU "
        "(A*-PO) vs 42.2% (GRPO) and 63.3% (REBEL) at 1.5B.",
        "",
        "Training phases (s, mean over seeds): "
        + "; ".join(
            f"{a}: " + ", ".join(f"{k} {v:.2f}" for k, v in s["phases_s"].items())
            for a, s in algos.items()
        ),
    ]
    return "\n".join(lines) + "\n"


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_algo: dict[str, list[dict[str, Any]]] = {}
    for r in result["runs"]:
        by_algo.setdefault(r["algo"], []).append(r)
    stage1 = float(result["stage1"]["seconds"])
    for a, rs in by_algo.items():
        k = min(len(r["evals"]) for r in rs)
        xs = [_mean([r["evals"][i]["time"] for r in rs]) for i in range(k)]
        ys = [_mean([r["evals"][i]["accuracy"] for r in rs]) for i in range(k)]
        (line,) = ax.plot(xs, ys, marker="o", label=a)
        if a == "astarpo":
            ax.plot(
                [x + stage1 for x in xs],
                ys,
                ls="--",
                color=line.get_color(),
                label="astarpo incl. Stage 1",
            )
    target = result["summary"]["target_accuracy"]
    if target is not None:
        ax.axhline(target, color="gray", ls=":", label="target")
    ax.set_xlabel("training wall time (s, evaluation excluded)")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.set_title(f"mean over {result['config']['seeds']} seeds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(result: dict[str, Any], out_dir: str | Path) -> None:
    """Write ``bench.json``, ``bench.md`` and ``bench.png`` to ``out_dir``."""
    out = Path(out_dir)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    (out / "bench.md").write_text(to_markdown(result))
    _plot(result, out / "bench.png")
