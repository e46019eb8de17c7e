"""Where the time goes: per-phase split, pool revisits, memory both ways and the cost model.

Read from the runs of :func:`~astarpo.studies.efficiency.run.run` (pure functions on their
result dicts):

* :func:`phase_split`: per run name, the mean seconds of each phase (Stage 1, generation,
  reward, reference pass, update) and each phase's share of the Stage 2 step;
* :func:`revisits`: how many times a run went through its pool (prompts seen / pool size);
* :func:`memory_ratios`: A*-PO's peak memory over each run's, as total peak RSS and as the
  increment over the resident memory with the models loaded;
* :func:`cost_model`: the step ratio that docs/baselines.md's cost model predicts from measured
  unit costs, beside the measured ratio.

The cost model: per prompt, an A*-PO step generates 1 response and makes one reference pass
and one policy pass; Stage 1 adds ``N / E`` generations per prompt when the pool is gone
through ``E`` times. A GRPO step generates ``G`` responses and makes ``G`` policy passes (and
``G`` reference passes when its KL term needs them). With per-sequence unit costs ``g``
(generation), ``r`` (reference pass), ``u`` (update) measured on GRPO's own steps,

.. math:: \\frac{T_{A^*PO}}{T_{GRPO}} = \\frac{g + r + u}{G (g + r_G + u)}

per step (``r_G`` = GRPO's own reference cost per sequence, 0 without one), and with Stage 1
amortised, ``((N/E + 1) g + r + u) / (G (g + r_G + u))`` per prompt.
"""

from __future__ import annotations

import math
from typing import Any

from astarpo.analysis.stats import mean_interval, paired_ratio, t_interval
from astarpo.studies.harness.report import fmt_ratio, missing, table
from astarpo.studies.harness.training import PHASES

__all__ = [
    "cost_model",
    "markdown_lines",
    "memory_ratios",
    "phase_split",
    "predicted_ratio",
    "revisits",
    "summarize_mechanism",
]


def _stage2_s(run: dict[str, Any]) -> float:
    """Seconds of a run's Stage 2 steps (the sum of its :data:`PHASES`)."""
    return sum(run["phases"].get(k, 0.0) for k in PHASES)


def _by_arm(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        out.setdefault(r["arm"], []).append(r)
    return out


def phase_split(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run name: ``seconds`` (phase -> mean over seeds, Stage 1 included), ``share``
    (phase -> mean share of the Stage 2 step time, :data:`PHASES`; each seed's shares sum
    to 1) with ``generate_share`` as a t-interval, and ``step_s`` (Stage 2 seconds per step)."""
    out: dict[str, dict[str, Any]] = {}
    for arm, rs in _by_arm(runs).items():
        if not all("phases" in r for r in rs):
            continue
        secs = {k: t_interval([r["phases"].get(k, 0.0) for r in rs])[0] for k in rs[0]["phases"]}
        shares: dict[str, list[float]] = {k: [] for k in PHASES}
        for r in rs:
            total = _stage2_s(r)
            for k in PHASES:
                shares[k].append(r["phases"].get(k, 0.0) / total if total > 0 else float("nan"))
        out[arm] = {
            "seconds": secs,
            "share": {k: t_interval(v)[0] for k, v in shares.items()},
            "generate_share": mean_interval(shares["generate"], bounds=(0.0, 1.0)),
            "step_s": t_interval([_stage2_s(r) / max(r["steps"], 1) for r in rs])[0],
        }
    return out


def revisits(runs: list[dict[str, Any]], batch_size: int) -> dict[str, dict[str, float]]:
    """Per run name: ``passes`` (mean prompts seen / pool size: how many times the run went
    through its pool) and ``max_seen_per_prompt`` (the same, rounded up: 1 means no prompt was
    seen twice)."""
    out: dict[str, dict[str, float]] = {}
    for arm, rs in _by_arm(runs).items():
        passes = [r["steps"] * batch_size / r["pool"] for r in rs if r.get("pool")]
        if passes:
            out[arm] = {"passes": t_interval(passes)[0], "max_passes": max(passes)}
    return out


def memory_ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A*-PO's peak memory over each other run's, paired by seed: ``total`` (peak RSS during
    the run) and ``increment`` (that peak minus the RSS with the models loaded), each a
    :func:`~astarpo.analysis.stats.paired_ratio`."""
    groups = _by_arm(runs)
    base = groups.get("astarpo", [])
    out: dict[str, dict[str, Any]] = {}

    def total(r: dict[str, Any]) -> float:
        return float(r["memory"]["rss_peak_mb"])

    def increment(r: dict[str, Any]) -> float:
        return float(r["memory"]["rss_peak_mb"] - r["memory"]["rss_before_train_mb"])

    for arm, rs in groups.items():
        if arm == "astarpo" or len(rs) != len(base):
            continue
        out[arm] = {
            "total": paired_ratio([total(r) for r in base], [total(r) for r in rs]),
            "increment": paired_ratio([increment(r) for r in base], [increment(r) for r in rs]),
        }
    return out


def _unit(rs: list[dict[str, Any]], phase: str) -> float:
    """Seconds of ``phase`` per sequence, pooled over seeds."""
    seqs = sum(r["steps"] * r["samples_per_prompt"] for r in rs) or 1
    return sum(r["phases"].get(phase, 0.0) for r in rs) / seqs


def predicted_ratio(
    units: dict[str, float], group_size: int, stage1_per_prompt: float = 0.0
) -> float:
    """The cost model's A*-PO/GRPO time per prompt (module doc) from per-sequence unit costs
    ``g``, ``r``, ``r_grpo``, ``u`` (and ``w``, reward, where counted): ``((s + 1) g + r + u + w)
    / (G (g + r_G + u + w))`` with ``s`` Stage 1's generations per prompt; NaN without a cost."""
    w = units.get("w", 0.0)
    grpo = group_size * (units["g"] + units["r_grpo"] + units["u"] + w)
    ours = (stage1_per_prompt + 1) * units["g"] + units["r"] + units["u"] + w
    return ours / grpo if grpo > 0 else float("nan")


def cost_model(runs: list[dict[str, Any]], cfg: dict[str, Any]) -> dict[str, Any]:
    """The cost model's A*-PO/GRPO ratios (module doc) beside the measured ones.

    Returns:
        ``{}`` without both A*-PO and GRPO runs; else ``units`` (``g``, ``r``, ``r_grpo``,
        ``u``: seconds per sequence, from GRPO's steps; ``r`` from A*-PO's), ``passes`` (E,
        A*-PO's mean passes over its pool), ``predicted_step`` and ``measured_step`` (Stage 2
        seconds per step; measured: A*-PO's over GRPO's, paired by seed), ``predicted_prompt``
        and ``measured_prompt`` (run clock per prompt seen, Stage 1 amortised).
    """
    groups = _by_arm(runs)
    a, g_runs = groups.get("astarpo"), groups.get("grpo")
    if not a or not g_runs:
        return {}
    big_g, n = int(g_runs[0]["samples_per_prompt"]), int(cfg["n_samples"])
    units = {"g": _unit(g_runs, "generate"), "r": _unit(a, "ref_logprobs")}
    units.update(r_grpo=_unit(g_runs, "ref_logprobs"), u=_unit(g_runs, "update"))
    passes = t_interval([x["steps"] * cfg["batch_size"] / x["pool"] for x in a])[0]

    def step_s(x: dict[str, Any]) -> float:
        return _stage2_s(x) / max(x["steps"], 1)

    def prompt_s(x: dict[str, Any]) -> float:
        return float(x["clock_s"]) / max(x["steps"] * cfg["batch_size"], 1)

    return {
        "units": units,
        "group_size": big_g,
        "n_samples": n,
        "passes": passes,
        "predicted_step": predicted_ratio(units, big_g),
        "measured_step": paired_ratio([step_s(x) for x in a], [step_s(x) for x in g_runs]),
        "predicted_prompt": predicted_ratio(units, big_g, n / passes) if passes > 0 else math.nan,
        "measured_prompt": paired_ratio([prompt_s(x) for x in a], [prompt_s(x) for x in g_runs]),
    }


def summarize_mechanism(result: dict[str, Any]) -> dict[str, Any]:
    """:func:`phase_split`, :func:`revisits`, :func:`memory_ratios` and :func:`cost_model` of
    ``result["runs"]``, with the reference's response lengths and the backend."""
    cfg, runs = result["config"], result["runs"]
    ref = result["reference"]
    return {
        "task": cfg.get("task", "addition"),
        "backend": cfg.get("backend", "hf"),
        "micro_batch_size": cfg.get("micro_batch_size", 0),
        "reference_response_tokens": {
            "p50": ref.get("response_tokens_p50"),
            "p90": ref.get("response_tokens_p90"),
            "truncated_rate": ref.get("truncated_rate"),
        },
        "phases": phase_split(runs),
        "revisits": revisits(runs, int(cfg["batch_size"])),
        "memory": memory_ratios(runs),
        "cost_model": cost_model(runs, cfg),
    }


def markdown_lines(m: dict[str, Any]) -> list[str]:
    """The report's section on where the time and memory go (from :func:`summarize_mechanism`)."""
    lengths = m["reference_response_tokens"]
    lines = [
        "",
        f"## Where the time goes (task {m['task']}, backend {m['backend']}, micro-batch "
        f"{m['micro_batch_size'] or 'whole batch'})",
        "",
    ]
    if lengths.get("p50") is not None:
        lines += [
            f"Reference's sampled responses on the held-out set: median {lengths['p50']:.0f} "
            f"tokens, p90 {lengths['p90']:.0f} (EOS included), "
            f"{100 * (lengths['truncated_rate'] or 0):.0f}% truncated.",
            "",
        ]
    rows = []
    for arm, p in m["phases"].items():
        gs, sh = p["generate_share"], p["share"]
        ci = "" if missing(gs["low"]) else f" [{gs['low']:.2f}, {gs['high']:.2f}]"
        passes = m["revisits"].get(arm, {}).get("passes", float("nan"))
        shares = [f"{sh[k]:.2f}" for k in PHASES]
        stage1 = p["seconds"].get("stage1", 0.0)
        rows.append(
            [
                arm,
                f"{p['step_s']:.2f}",
                *shares,
                f"{gs['mean']:.2f}{ci}",
                f"{stage1:.1f}",
                f"{passes:.2f}",
            ]
        )
    header = ["run", "s/step", "generate", "reward", "ref pass", "update"]
    lines += table([*header, "generation share [95%]", "Stage 1 s", "passes over pool"], rows)
    if m["memory"]:
        lines += [
            "",
            "A*-PO's peak memory over each run's (paired by seed): total peak RSS; increment "
            "over the RSS with the models loaded.",
            "",
        ]
        memory = [
            [a, fmt_ratio(x["total"]), fmt_ratio(x["increment"])] for a, x in m["memory"].items()
        ]
        lines += table(["vs", "total", "increment"], memory)
    c = m["cost_model"]
    if c:
        u = c["units"]
        lines += [
            "",
            f"Cost model (A*-PO/GRPO, G={c['group_size']}, N={c['n_samples']}, E="
            f"{c['passes']:.2f} passes): unit costs per sequence from GRPO's steps g="
            f"{1e3 * u['g']:.1f} ms (generation), u={1e3 * u['u']:.1f} ms (update), r_G="
            f"{1e3 * u['r_grpo']:.1f} ms; A*-PO's reference pass r={1e3 * u['r']:.1f} ms. "
            f"Step ratio predicted {c['predicted_step']:.3f}, measured "
            f"{fmt_ratio(c['measured_step'])}; per prompt with Stage 1 amortised predicted "
            f"{c['predicted_prompt']:.3f}, measured {fmt_ratio(c['measured_prompt'])}.",
        ]
    return lines
