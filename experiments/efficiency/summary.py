"""The efficiency study's summary per run name (the peers by their
:data:`~experiments.efficiency.config.ARM_LABELS`, and :data:`REUSED`): final held-out
accuracy at the budget, KL, peak memory, time to each target and per-phase time, as 95%
Student-t intervals over seeds clipped to the quantity's range, and ratios to A*-PO paired by
seed (:func:`~astarpo.analysis.stats.paired_ratio`). Targets are read on ``expected_accuracy``:
``reference + f * (best - reference)`` per ``target_fractions`` ``f``, ``best`` the highest mean
final accuracy of any run.
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import (
    holm,
    mean_interval,
    paired_difference,
    paired_ratio,
    target_levels,
    time_to_target,
    value_at,
)
from experiments.efficiency.config import ARM_LABELS
from experiments.efficiency.mechanism import by_arm, phase_seconds, summarize_mechanism

__all__ = ["METRICS", "REUSED", "curve", "groups", "memory_mb", "summarize"]

#: The name of the A*-PO runs read on their Stage 2 clock, as if Stage 1 had been paid before.
REUSED = "astarpo (Stage 1 reused)"
#: The held-out metrics read at the budget (accuracies, but for ``kl``).
METRICS = (
    "expected_accuracy",
    "accuracy",
    "sampled_accuracy",
    "hard_expected_accuracy",
    "hard_accuracy",
    "kl",
)
#: The range of a time, a count or a KL divergence.
POSITIVE = (0.0, math.inf)


def memory_mb(run: dict[str, Any]) -> float:
    """CUDA: peak allocated. CPU: peak resident memory during the run (Stage 1 and training,
    evaluation excluded) minus the resident memory with the models loaded."""
    mem = run["memory"]
    if "cuda_peak_allocated_mb" in mem:
        return float(mem["cuda_peak_allocated_mb"])
    return float(mem["rss_peak_mb"] - mem["rss_before_train_mb"])


def curve(run: dict[str, Any], key: str, clock: str = "time") -> tuple[list[float], list[float]]:
    """``(times on clock, values of key)`` of a run's evaluations that hold ``key``."""
    ev = [e for e in run.get("evals", []) if key in e]
    return [float(e[clock]) for e in ev], [float(e[key]) for e in ev]


def groups(runs: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """Run name -> ``[(run, clock key)]`` sorted by seed; A*-PO also as :data:`REUSED`."""
    out = {ARM_LABELS.get(a, a): [(r, "time") for r in rs] for a, rs in by_arm(runs).items()}
    if "astarpo" in out:
        out[REUSED] = [(r, "stage2_time") for r, _ in out["astarpo"]]
    return out


def _final(run: dict[str, Any], clock: str, end: float) -> float | None:
    """``run``'s expected accuracy at ``end`` on ``clock`` (None without evaluations)."""
    xy = curve(run, "expected_accuracy", clock)
    return value_at(*xy, end) if xy[0] else None


def _arm(rs: list[tuple[dict[str, Any], str]], budget: float, clock: str) -> dict[str, Any]:
    """One name's seeds: final metrics (at ``budget`` on ``clock``), steps, Stage 1 seconds,
    memory, phases."""
    final = {}
    for key in METRICS:
        c = [curve(r, key, clock) for r, _ in rs]
        vals = [value_at(*xy, budget) if xy[0] else None for xy in c]
        final[key] = mean_interval(vals, bounds=POSITIVE if key == "kl" else (0.0, 1.0))
    first = rs[0][0]
    return {
        "seeds": len(rs),
        "lr": first["lr"],
        "samples_per_prompt": first["samples_per_prompt"],
        "steps": mean_interval([r["steps"] for r, _ in rs], bounds=POSITIVE),
        "stage1_s": mean_interval(
            [r["stage1_s"] if c == "time" else 0.0 for r, c in rs], bounds=POSITIVE
        ),
        "final": final,
        "memory_mb": mean_interval([memory_mb(r) for r, _ in rs]),
        "phases_s": phase_seconds([r for r, _ in rs]),
    }


def summarize(result: dict[str, Any], targets: dict[str, float] | None = None) -> dict[str, Any]:
    """Aggregate ``result["runs"]`` (with its ``config`` and ``reference``) per run name.

    Args:
        result: The study's result.
        targets: Levels to read the times on (None: from these runs).

    Returns:
        ``{"mechanism", "budget_s", "reference", "best_final", "targets", "memory_kind",
        "arms", "ratios"}``: ``arms[name]`` holds ``final`` (metric -> interval at the
        budget; on the paper protocol at the last step),
        ``time_to_target`` (target -> per-seed ``times``, ``None`` = not reached, their
        interval, ``reached``), ``memory_mb``, ``phases_s``, ``lr``, ``steps``;
        ``ratios[name]`` A*-PO's time to each target over ``name``'s, and its peak ``memory``;
        ``differences[name]`` A*-PO's final expected accuracy minus ``name``'s (paired by
        seed; not for :data:`REUSED`, A*-PO's own runs); ``cpu_ratios[name]`` the times'
        ratios read on the process CPU clock (:func:`_cpu_ratios`) and the same ``memory``.
        Each ratio and difference carries ``p_holm``: Holm's adjustment over all of them, one
        family; the CPU reading's family (its ratios, the differences) ``p_holm_cpu``.
    """
    cfg = result["config"]
    paper = cfg.get("protocol", "clock") == "paper"  # final values at the last step
    budget = float(cfg["max_train_seconds"])
    end, clock = (float(cfg["steps"]), "step") if paper else (budget, "time")
    by_name = groups(result["runs"])
    arms = {name: _arm(rs, end, clock) for name, rs in by_name.items()}
    ref = float(result["reference"]["expected_accuracy"])
    best = max(a["final"]["expected_accuracy"]["mean"] for a in arms.values())
    if targets is None:
        targets = target_levels(ref, best, result["config"]["target_fractions"])
    for name, rs in by_name.items():
        arms[name]["time_to_target"] = {}
        for label, level in targets.items():
            times = [time_to_target(*curve(r, "expected_accuracy", c), level) for r, c in rs]
            ci = mean_interval(times, bounds=POSITIVE)
            arms[name]["time_to_target"][label] = {"times": times, **ci, "reached": ci["n"]}
    base, ratios = by_name.get("astarpo", []), {}
    for name, rs in by_name.items():
        if name != "astarpo" and len(rs) == len(base):
            ours, theirs = arms["astarpo"]["time_to_target"], arms[name]["time_to_target"]
            ratios[name] = {k: paired_ratio(ours[k]["times"], theirs[k]["times"]) for k in targets}
            mb = [memory_mb(r) for r, _ in base], [memory_mb(r) for r, _ in rs]
            ratios[name]["memory"] = paired_ratio(*mb)
    differences = {}
    for name, rs in by_name.items():
        if name not in ("astarpo", REUSED) and len(rs) == len(base):
            ours_final = [_final(r, clock, end) for r, _ in base]
            differences[name] = paired_difference(
                ours_final, [_final(r, clock, end) for r, _ in rs]
            )
    cpu_ratios = _cpu_ratios(by_name, targets)
    for name, by_k in cpu_ratios.items():  # the CPU reading's family: its times, the same rest
        by_k["memory"] = dict(ratios[name]["memory"])
    _adjust(ratios, differences)
    _adjust(cpu_ratios, differences, key="p_holm_cpu")
    cuda = any("cuda_peak_allocated_mb" in r["memory"] for r in result["runs"])
    kind = "peak resident memory during the run (Stage 1 and training, evaluation excluded) "
    kind += "minus the resident memory with the models loaded"
    return {
        "mechanism": summarize_mechanism(result),
        "budget_s": budget,
        "reference": ref,
        "best_final": best,
        "targets": targets,
        "memory_kind": "CUDA peak allocated" if cuda else kind,
        "arms": arms,
        "ratios": ratios,
        "cpu_ratios": cpu_ratios,
        "differences": differences,
    }


def _cpu_ratios(
    by_name: dict[str, list[tuple[dict[str, Any], str]]], targets: dict[str, float]
) -> dict[str, dict[str, Any]]:
    """A*-PO's time to each target over each run name's, read on the process CPU clock (each
    evaluation's ``cpu_time``: Stage 1 and training, evaluation excluded), paired by seed;
    names whose runs did not record it (results from before the CPU clock) left out."""
    base = by_name.get("astarpo", [])
    out: dict[str, dict[str, Any]] = {}
    for name, rs in by_name.items():
        runs = [r for r, _ in (*base, *rs)]
        if (
            name in ("astarpo", REUSED)
            or len(rs) != len(base)
            or not all(r.get("evals") and all("cpu_time" in e for e in r["evals"]) for r in runs)
        ):
            continue
        on_cpu = [
            [time_to_target(*curve(r, "expected_accuracy", "cpu_time"), lv) for r, _ in g]
            for lv in targets.values()
            for g in (base, rs)
        ]
        out[name] = {
            label: paired_ratio(on_cpu[2 * i], on_cpu[2 * i + 1]) for i, label in enumerate(targets)
        }
    return out


def _adjust(
    ratios: dict[str, dict[str, Any]], differences: dict[str, Any], key: str = "p_holm"
) -> None:
    """Holm's adjustment (:func:`~astarpo.analysis.stats.holm`) over every ratio of ``ratios``
    and every difference, one family, written into each as ``key``."""
    family = {(n, k): r["p"] for n, by_k in ratios.items() for k, r in by_k.items()}
    family |= {(n, "final"): d["p"] for n, d in differences.items()}
    adjusted = holm({f"{n}\t{k}": p for (n, k), p in family.items()})
    for (n, k), name in zip(family, adjusted, strict=True):
        (differences[n] if k == "final" else ratios[n][k])[key] = adjusted[name]
