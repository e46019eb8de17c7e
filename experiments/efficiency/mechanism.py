r"""Where the time goes in the efficiency study's runs (:func:`summarize_mechanism`): the
per-phase split, passes over the pool, memory both ways and the cost model beside the measured
ratios (:func:`cost_model`).

The cost model: per prompt, an A*-PO step generates 1 response and makes one reference and one
policy pass (Stage 1 adds ``N / E`` generations when the pool is gone through ``E`` times); a
GRPO step generates ``G`` responses and makes ``G`` policy passes (and ``G`` reference passes
with a KL term). With per-sequence unit costs ``g`` (generation), ``r`` (reference pass), ``u``
(update) measured on GRPO's own steps (``r_G``: GRPO's reference cost, 0 without one),

.. math:: \frac{T_{A^*PO}}{T_{GRPO}} = \frac{g + r + u}{G (g + r_G + u)}

per step, and ``((N/E + 1) g + r + u) / (G (g + r_G + u))`` per prompt (:func:`predicted_ratio`).
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis import mean_interval, paired_ratio, t_interval
from experiments.harness.report import fmt_ci, fmt_ratio, table
from experiments.harness.training import PHASES

__all__ = [
    "by_arm",
    "cost_model",
    "markdown_lines",
    "phase_seconds",
    "predicted_ratio",
    "seen",
    "summarize_mechanism",
]


def _stage2_s(run: dict[str, Any]) -> float:
    return sum(run["phases"].get(k, 0.0) for k in PHASES)


def _mean(xs: list[float]) -> float:
    return t_interval(xs)[0]


def by_arm(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Run name (``arm``) -> its runs, sorted by seed."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        out.setdefault(r["arm"], []).append(r)
    return out


def phase_seconds(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Phase -> its seconds, mean over ``runs`` (the phases of the first)."""
    return {k: _mean([r["phases"].get(k, 0.0) for r in runs]) for k in runs[0]["phases"]}


def _phase_split(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run name: ``seconds`` (phase -> mean over seeds, Stage 1 included), ``share`` (phase
    -> mean share of the Stage 2 time), ``generate_share`` (its interval) and ``step_s``."""
    out: dict[str, dict[str, Any]] = {}
    for arm, rs in by_arm(runs).items():
        shares = {
            k: [r["phases"].get(k, 0.0) / _stage2_s(r) if _stage2_s(r) else math.nan for r in rs]
            for k in PHASES
        }
        out[arm] = {
            "seconds": phase_seconds(rs),
            "share": {k: _mean(v) for k, v in shares.items()},
            "generate_share": mean_interval(shares["generate"], bounds=(0.0, 1.0)),
            "step_s": _mean([_stage2_s(r) / max(r["steps"], 1) for r in rs]),
        }
    return out


def seen(r: dict[str, Any], batch_size: int) -> int:
    """The prompts run ``r`` saw: its ``prompts`` (its own prompts per step, which a
    ``batch_grid`` sweep sets per algorithm), else ``steps * batch_size``."""
    return int(r.get("prompts") or r["steps"] * batch_size)


def _passes(rs: list[dict[str, Any]], batch_size: int) -> list[float]:
    """Per run of ``rs``: the prompts it saw over its pool's size (runs without a pool left out)."""
    return [seen(r, batch_size) / r["pool"] for r in rs if r.get("pool")]


def _revisits(runs: list[dict[str, Any]], batch_size: int) -> dict[str, dict[str, float]]:
    """Per run name: ``passes`` (mean prompts seen / pool size) and ``max_passes`` (of any seed)."""
    per_arm = {arm: _passes(rs, batch_size) for arm, rs in by_arm(runs).items()}
    return {a: {"passes": _mean(p), "max_passes": max(p)} for a, p in per_arm.items() if p}


def _memory_ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A*-PO's peak memory over each other run's, paired by seed: ``total`` (peak RSS during the
    run) and ``increment`` (that peak minus the RSS with the models loaded)."""
    groups = by_arm(runs)
    base, out = groups.get("astarpo", []), {}
    for arm, rs in groups.items():
        if arm != "astarpo" and len(rs) == len(base):
            mem = [[r["memory"] for r in x] for x in (base, rs)]
            total = [[m["rss_peak_mb"] for m in x] for x in mem]
            inc = [[m["rss_peak_mb"] - m["rss_before_train_mb"] for m in x] for x in mem]
            out[arm] = {
                "total": paired_ratio(total[0], total[1]),
                "increment": paired_ratio(inc[0], inc[1]),
            }
    return out


def _unit(rs: list[dict[str, Any]], phase: str) -> float:
    """Seconds of ``phase`` per sequence, pooled over seeds."""
    seqs = sum(r["steps"] * r["samples_per_prompt"] for r in rs) or 1
    return sum(r["phases"].get(phase, 0.0) for r in rs) / seqs


def predicted_ratio(units: dict[str, float], group: int, stage1_per_prompt: float = 0.0) -> float:
    """The cost model's A*-PO/GRPO time per prompt from the unit costs ``g``, ``r``,
    ``r_grpo``, ``u`` (and ``w``, the reward, where counted): ``((s + 1) g + r + u + w) /
    (G (g + r_G + u + w))``, ``s`` Stage 1's generations per prompt; NaN without a cost."""
    w = units.get("w", 0.0)
    grpo = group * (units["g"] + units["r_grpo"] + units["u"] + w)
    ours = (stage1_per_prompt + 1) * units["g"] + units["r"] + units["u"] + w
    return ours / grpo if grpo > 0 else math.nan


def cost_model(runs: list[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """The cost model's A*-PO/GRPO ratios beside the measured ones (``{}`` without both):
    ``units`` (per sequence, from GRPO's steps; ``r`` from A*-PO's), ``passes`` (E),
    ``predicted_step``/``measured_step`` (Stage 2 per step) and
    ``predicted_prompt``/``measured_prompt`` (run clock per prompt seen, Stage 1 amortised)."""
    groups = by_arm(runs)
    a, g_runs = groups.get("astarpo"), groups.get("grpo")
    if not a or not g_runs:
        return {}
    big_g, n, batch = int(g_runs[0]["samples_per_prompt"]), int(cfg["n_samples"]), cfg["batch_size"]
    units = {"g": _unit(g_runs, "generate"), "r": _unit(a, "ref_logprobs")}
    units.update(r_grpo=_unit(g_runs, "ref_logprobs"), u=_unit(g_runs, "update"))
    passes = _mean(_passes(a, batch))
    step = [[_stage2_s(x) / max(x["steps"], 1) for x in rs] for rs in (a, g_runs)]
    prompt = [[float(x["clock_s"]) / max(seen(x, batch), 1) for x in rs] for rs in (a, g_runs)]
    return {
        "units": units,
        "group_size": big_g,
        "n_samples": n,
        "passes": passes,
        "predicted_step": predicted_ratio(units, big_g),
        "measured_step": paired_ratio(step[0], step[1]),
        "predicted_prompt": predicted_ratio(units, big_g, n / passes) if passes > 0 else math.nan,
        "measured_prompt": paired_ratio(prompt[0], prompt[1]),
    }


def summarize_mechanism(result: dict[str, Any]) -> dict[str, Any]:
    """The four readings of ``result["runs"]``, with the reference's response lengths, the
    task, the backend and the micro-batch."""
    cfg, runs, ref = result["config"], result["runs"], result["reference"]
    lengths = {k: ref.get(f"response_tokens_{k}") for k in ("p50", "p90")}
    return {
        "task": cfg.get("task", "addition"),
        "backend": cfg.get("backend", "hf"),
        "micro_batch_size": cfg.get("micro_batch_size", 0),
        "reference_response_tokens": {**lengths, "truncated_rate": ref.get("truncated_rate")},
        "phases": _phase_split(runs),
        "revisits": _revisits(runs, int(cfg["batch_size"])),
        "memory": _memory_ratios(runs),
        "cost_model": cost_model(runs, cfg),
    }


def markdown_lines(m: dict[str, Any]) -> list[str]:
    """The report's section on where the time and memory go (from :func:`summarize_mechanism`)."""
    lengths, micro = m["reference_response_tokens"], m["micro_batch_size"] or "whole batch"
    title = f"Where the time goes (task {m['task']}, backend {m['backend']}, micro-batch {micro})"
    lines = ["", f"## {title}", ""]
    if lengths.get("p50") is not None:
        lines += [
            f"Reference's sampled responses on the held-out set: median {lengths['p50']:.0f} "
            f"tokens, p90 {lengths['p90']:.0f} (EOS included), "
            f"{100 * (lengths['truncated_rate'] or 0):.0f}% truncated.",
            "",
        ]
    rows = []
    for arm, p in m["phases"].items():
        shares = [f"{p['share'][k]:.2f}" for k in PHASES]
        n, gen = m["revisits"].get(arm, {}).get("passes", math.nan), fmt_ci(p["generate_share"], 2)
        stage1 = f"{p['seconds'].get('stage1', 0.0):.1f}"
        rows.append([arm, f"{p['step_s']:.2f}", *shares, gen, stage1, f"{n:.2f}"])
    header = ["run", "s/step", "generate", "reward", "ref pass", "update"]
    lines += table([*header, "generation share [95%]", "Stage 1 s", "passes over pool"], rows)
    if m["memory"]:
        text = "A*-PO's peak memory over each run's (paired by seed): total peak RSS; increment "
        lines += ["", text + "over the RSS with the models loaded.", ""]
        rows = [
            [a, fmt_ratio(x["total"]), fmt_ratio(x["increment"])] for a, x in m["memory"].items()
        ]
        lines += table(["vs", "total", "increment"], rows)
    if c := m["cost_model"]:
        u = {k: f"{1e3 * v:.1f} ms" for k, v in c["units"].items()}
        lines += [
            "",
            f"Cost model (A*-PO/GRPO, G={c['group_size']}, N={c['n_samples']}, E="
            f"{c['passes']:.2f} passes): unit costs per sequence from GRPO's steps g={u['g']} "
            f"(generation), u={u['u']} (update), r_G={u['r_grpo']}; A*-PO's reference pass "
            f"r={u['r']}. Step ratio predicted {c['predicted_step']:.3f}, measured "
            f"{fmt_ratio(c['measured_step'])}; per prompt with Stage 1 amortised predicted "
            f"{c['predicted_prompt']:.3f}, measured {fmt_ratio(c['measured_prompt'])}.",
        ]
    return lines
