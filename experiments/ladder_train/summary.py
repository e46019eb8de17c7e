"""The ladder-train study's readings (:func:`summarize`): per run name, bin and training set the
held-out gain over the reference with its interval and verdict (:data:`RULE`, Holm's adjustment
over every verdict: one family), the review's 2x2 per near bin (:func:`two_by_two`) and the
v_ref below which each run name stops learning (:func:`threshold`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from astarpo.analysis import holm, mean_interval, t_test_p
from experiments.ladder_train.config import ALONE, ARMS, MIXED

__all__ = ["ALPHA", "MIN_GAIN", "READINGS", "RULE", "gain_cell", "one_sided_p", "summarize"]
__all__ += ["threshold", "two_by_two", "verdicts"]

#: Smallest gain of a held-out expected accuracy called learning: half a point (1 in 200).
MIN_GAIN = 0.005
#: Family-wise error rate of the verdicts.
ALPHA = 0.05
#: The verdict rule, as written in the JSON and the report.
RULE = (
    "per seed: gain = last-evaluation minus reference expected accuracy on the bin's held-out "
    f"prompts; 'learns' if the mean gain exceeds {MIN_GAIN} by the one-sided t-test over seeds "
    f"(H0: mean gain <= {MIN_GAIN}) at Holm-adjusted p < {ALPHA}, the family being every (run, "
    "bin, training set) verdict of the study; 'n/a' below 2 seeds or when skipped; 'does not "
    "learn' otherwise (no gain shown within the budget)"
)
#: The reading of a run name's 2x2 on one bin: (learns alone, learns mixed) -> text.
READINGS = {
    (True, True): "learns alone and mixed",
    (True, False): "learns alone, not mixed",
    (False, True): "learns only with the easy prompts mixed in",
    (False, False): "learns neither alone nor mixed",
}


def one_sided_p(xs: Sequence[float], null: float) -> float:
    """p-value of the one-sided t-test of ``mean(xs) > null`` (NaN below 2 values)."""
    p = t_test_p(xs, null)
    if math.isnan(p):
        return p
    return p / 2 if float(np.mean(xs)) > null else 1.0 - p / 2


def gain_cell(runs: list[dict[str, Any]], ref: Mapping[str, float]) -> dict[str, Any]:
    """One run name's seeds on one bin and training set: ``gain`` (the bin's held-out
    expected accuracy, last evaluation minus ``ref``'s), ``easy_change``, ``log10_gold_change``
    (bin), ``train_gain`` (the bin's training prompts, when evaluated), ``p`` (one-sided, vs
    :data:`MIN_GAIN`), ``seeds_gaining`` (how many seeds' own gain exceeds :data:`MIN_GAIN`: a
    count, not a verdict, for cells whose seeds split into learners and non-learners; the gains
    themselves are ``seed_gains``), success
    counts on the bin's training prompts and the first success's step (median over the seeds
    with one, and how many had one)."""
    last = [r["evals"][-1] for r in runs]
    out: dict[str, Any] = {"seeds": len(runs)}
    gains = [e["bin_expected_accuracy"] - ref["bin_expected_accuracy"] for e in last]
    out["gain"], out["p"] = mean_interval(gains), one_sided_p(gains, MIN_GAIN)
    out["interval_above"] = bool(out["gain"]["low"] > MIN_GAIN)
    out["seeds_gaining"] = int(sum(g > MIN_GAIN for g in gains))
    out["seed_gains"] = [float(g) for g in gains]
    out["final"] = mean_interval([e["bin_expected_accuracy"] for e in last], bounds=(0.0, 1.0))
    out["easy_change"] = mean_interval(
        [e["easy_expected_accuracy"] - ref["easy_expected_accuracy"] for e in last]
    )
    out["log10_gold_change"] = mean_interval(
        [e["bin_log10_gold"] - ref["bin_log10_gold"] for e in last]
    )
    if "train_expected_accuracy" in ref:
        out["train_gain"] = mean_interval(
            [e["train_expected_accuracy"] - ref["train_expected_accuracy"] for e in last]
        )
    out["samples"] = int(sum(r["samples"]["bin"] for r in runs))
    out["successes"] = int(sum(r["successes"]["bin"] for r in runs))
    steps = [r["first_success"]["step"] for r in runs if r.get("first_success")]
    out["first_success"] = {
        "seeds": len(steps),
        "median_step": float(np.median(steps)) if steps else None,
    }
    out["steps"] = int(min(r["steps"] for r in runs))
    return out


def verdicts(cells: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Holm over every cell's ``p`` (one family), then each cell's ``p_holm`` and ``verdict`` by
    :data:`RULE` (in place; ``cells[arm][set|bin]``)."""
    family = {
        f"{arm}|{key}": c["p"]
        for arm, row in cells.items()
        for key, c in row.items()
        if "p" in c and c["seeds"] >= 2
    }
    adjusted = holm(family)
    for arm, row in cells.items():
        for key, c in row.items():
            p = adjusted.get(f"{arm}|{key}", math.nan)
            c["p_holm"] = p
            if "skipped" in c or c["seeds"] < 2 or math.isnan(p):
                c["verdict"] = "n/a"
            elif c["gain"]["mean"] > MIN_GAIN and p < ALPHA:
                c["verdict"] = "learns"
            else:
                c["verdict"] = "does not learn"


def threshold(order: Sequence[str], row: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Where one run name stops learning alone: going down ``order`` (bins, highest v_ref first),
    ``learns_down_to`` (the last bin of the first run of 'learns'; None if the first bin is not
    learned), ``stops_at`` (the first bin after it not learned; None if it learns on every
    bin), ``learned`` (every bin it learns on) and ``monotone`` (no bin learned below
    ``stops_at``)."""
    verdict = [row.get(b, {}).get("verdict", "n/a") for b in order]
    learned = [b for b, v in zip(order, verdict, strict=True) if v == "learns"]
    k = next((i for i, v in enumerate(verdict) if v != "learns"), len(order))
    down = order[k - 1] if k > 0 else None
    stops = order[k] if k < len(order) else None
    return {"learns_down_to": down, "stops_at": stops, "learned": learned,
            "monotone": set(learned) <= set(order[:k])}  # fmt: skip


def two_by_two(cells: Mapping[str, Mapping[str, Any]], near: Sequence[str]) -> dict[str, Any]:
    """Per near bin and run name with both training sets: its verdicts alone and mixed, and
    the :data:`READINGS` reading (None where a verdict is n/a)."""
    out: dict[str, Any] = {}
    for b in near:
        for arm, row in cells.items():
            a, m = row.get(f"{ALONE}|{b}"), row.get(f"{MIXED}|{b}")
            if a is None or m is None:
                continue
            va, vm = a["verdict"], m["verdict"]
            reading = None if "n/a" in (va, vm) else READINGS[(va == "learns", vm == "learns")]
            out.setdefault(b, {})[arm] = {ALONE: va, MIXED: vm, "reading": reading}
    return out


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """``rule``, ``cells[arm]["set|bin"]`` (:func:`gain_cell`, ``p_holm``, ``verdict``; or
    ``skipped``), ``order`` (the bins by median held-out log10 v_ref, highest first), the
    ``curve`` per run name and set (bin, x = median log10 v_ref, gain interval), the
    ``two_by_two`` and the ``thresholds`` (alone)."""
    cfg, ref, bins = result["config"], result["reference"], result["bins"]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    for arm in ARMS:
        for set_name in (ALONE, MIXED):
            for b in cfg["bins"]:
                rows = [
                    r
                    for r in result["runs"]
                    if (r["arm"], r["set"], r["bin"]) == (arm, set_name, b)
                ]
                if not rows:
                    continue
                runs = [r for r in rows if "skipped" not in r]
                key = f"{set_name}|{b}"
                if runs:
                    cells.setdefault(arm, {})[key] = gain_cell(runs, ref[b])
                else:
                    cells.setdefault(arm, {})[key] = {"skipped": rows[0]["skipped"], "seeds": 0}
    verdicts(cells)
    x = {b: bins[b]["test_log10_v_ref"]["median"] for b in cfg["bins"]}
    order = sorted(cfg["bins"], key=lambda b: -x[b])
    curve: dict[str, Any] = {}
    for arm, row in cells.items():
        for key, c in row.items():
            set_name, b = key.split("|", 1)
            if "gain" in c:
                point = {"bin": b, "log10_v_ref": x[b], "gain": c["gain"]}
                point["seed_gains"] = c["seed_gains"]
                curve.setdefault(arm, {}).setdefault(set_name, []).append(point)
    for sets in curve.values():
        for points in sets.values():
            points.sort(key=lambda p: -p["log10_v_ref"])
    alone = {arm: {k.split("|", 1)[1]: c for k, c in row.items() if k.startswith(f"{ALONE}|")}
             for arm, row in cells.items()}  # fmt: skip
    thresholds = {
        arm: threshold([b for b in order if b in row], row) for arm, row in alone.items() if row
    }
    for t in thresholds.values():
        for key in ("learns_down_to", "stops_at"):
            t[f"{key}_log10_v_ref"] = x[t[key]] if t[key] else None
    return {"rule": RULE, "cells": cells, "order": order, "curve": curve,
            "two_by_two": two_by_two(cells, cfg["near"]), "thresholds": thresholds}  # fmt: skip
