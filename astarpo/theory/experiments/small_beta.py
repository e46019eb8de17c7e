r"""``small-beta``: does Stage 2 converge at the paper's :math:`\beta_2 = 10^{-3}`, with what step?

On the default instance :math:`\|\theta^*_{10^{-3}}\| = 1000` and :math:`\pi^*` puts all but
:math:`e^{-1000}` of its mass on correct answers; the gap is then essentially the wrong-answer
mass. Step rules tried, each with the Stage 1 estimate (:math:`\beta_1 = 0.5`, N = 16, the
paper's setting), with the exact :math:`V^*_{\beta_2}`, and with exact gradients: OGD
:math:`c/\sqrt t` and constant, with the usual :math:`c/\beta_2^2` scaling; and normalized
gradient steps :math:`\theta \leftarrow \theta - \eta_t g/\|g\|` with :math:`\eta_t = c/\sqrt t`
in parameter units. All are projected on :math:`2\|\theta^*\|`. The Fisher floor along the best
run says why plain gradient steps slow down: the curvature vanishes as the policy sharpens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, header, progress
from astarpo.theory.fits import fit_slope
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import Stage2Config, run_stage2
from astarpo.theory.streams import STAGE1, generators

BETA2 = 1e-3


def _rules(quick: bool) -> dict[str, dict[str, Any]]:
    cs = (1e-2, 1e-1, 1.0) if quick else (1e-3, 1e-2, 1e-1, 1.0)
    rules: dict[str, dict[str, Any]] = {}
    for c in cs:
        rules[f"c/sqrt(t), c={c:g}"] = {"learning_rate": c / BETA2**2, "schedule": "inverse_sqrt"}
    for c in (1e-3, 1e-2):
        rules[f"constant, c={c:g}"] = {"learning_rate": c / BETA2**2, "schedule": "constant"}
    for c in (1.0, 10.0) if quick else (1.0, 10.0, 100.0):
        rules[f"normalized, c={c:g}/sqrt(t)"] = {
            "learning_rate": c,
            "schedule": "inverse_sqrt",
            "normalize": True,
        }
    return rules


def run(seeds: int = 8, quick: bool = False, seed: int = 0, progress_bar: bool = False) -> dict:
    """Run the experiment (see the module docstring).

    Args:
        seeds: Number of seeds S (a batch axis of the parameters).
        quick: The small version (seconds; used by the tests).
        seed: Base seed of every random stream.
        progress_bar: Show a tqdm bar over the experiment's settings.

    Returns:
        A JSON-ready dict: the header (config, seeds, version), every number plotted, and
        ``headline``, the numbers docs/theory.md quotes.
    """
    t_max, n, beta1 = (100 if quick else 3000), 16, 0.5
    bandit = make_instance("shared", **INSTANCE)
    radius = radius_for(bandit, BETA2)
    rules = _rules(quick)
    res = header(
        "small-beta",
        seeds,
        seed,
        quick,
        {
            "beta2": BETA2,
            "beta1": beta1,
            "n_samples": n,
            "T": t_max,
            "radius": radius,
            "rules": rules,
        },
    )
    v_star = estimate_values(bandit, n, beta1, generators(STAGE1, seed, seeds))[0]
    v_exact = np.tile(bandit.optimal_value(BETA2), (seeds, 1))
    ref_gap = float(bandit.suboptimality(bandit.ref_probs, BETA2))
    res["reference_gap"] = ref_gap
    res["rules"] = {}
    for name, kw in progress(rules.items(), "small-beta", progress_bar):
        cfg = Stage2Config(BETA2, t_max, radius=radius, **kw)
        out = run_stage2(bandit, np.concatenate([v_star, v_exact]), cfg, seed=seed)
        det = run_stage2(
            bandit,
            v_exact[:1],
            Stage2Config(BETA2, t_max, radius=radius, mode="deterministic", **kw),
        )
        res["steps"] = out.steps.tolist()
        res["rules"][name] = {
            "estimated": mean_ci(out.last[:seeds]),
            "exact_v": mean_ci(out.last[seeds:]),
            "deterministic": det.last[0].tolist(),
            "fisher_min": mean_ci(out.fisher_min[:seeds]),
            "norm_max": float(out.norm_max.max()),
            "slope_estimated": fit_slope(out.steps, out.last[:seeds], t_max / 100),
        }
    finals = {k: v["estimated"]["gmean"][-1] for k, v in res["rules"].items()}
    best = min(finals, key=lambda k: finals[k])
    res["headline"] = {
        "reference_gap": ref_gap,
        "final_gap_estimated": finals,
        "final_gap_deterministic": {k: v["deterministic"][-1] for k, v in res["rules"].items()},
        "best_rule": best,
        "best_slope": res["rules"][best]["slope_estimated"]["slope"],
        "best_fisher_min_start_end": [
            res["rules"][best]["fisher_min"]["gmean"][0],
            res["rules"][best]["fisher_min"]["gmean"][-1],
        ],
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Gap vs T per step rule (split by rule family), exact gradients, and the Fisher floor.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import band, figure, legend_below, mark_zeros, save

    fig, axes = figure(2, 2, height=2.6)
    steps = np.array(res["steps"])
    rules = list(res["rules"])
    color = {k: f"C{i}" for i, k in enumerate(rules)}
    families = (
        [k for k in rules if k.startswith("c/")],
        [k for k in rules if not k.startswith("c/")],
    )
    for ax, fam in zip(axes[:2], families, strict=True):
        for k in fam:
            band(ax, steps, res["rules"][k]["estimated"], k, color=color[k])
    for k in rules:
        r = res["rules"][k]
        det = np.array(r["deterministic"], dtype=float)
        axes[2].plot(steps[det > 0], det[det > 0], color=color[k], lw=1.2)
        fm = {key: np.array(r["fisher_min"][key], dtype=float) for key in ("gmean", "glo", "ghi")}
        tiny = fm["gmean"] < 1e-12  # numerically 0: marked on the lower edge, not drawn
        band(
            axes[3],
            steps,
            {key: np.where(tiny, 0.0, v) for key, v in fm.items()},
            None,
            color=color[k],
        )
        mark_zeros(axes[3], steps[tiny][:1], [0.0] * min(int(tiny.sum()), 1), color[k])
    for ax in axes[:3]:
        ax.axhline(res["reference_gap"], color="k", ls=":", lw=1.0)
        ax.set(xscale="log", yscale="log", xlabel=r"$T$", ylabel="gap")
    axes[0].set_title(r"$\hat V^*$ ($\beta_1=0.5$, $N=16$): $c/\sqrt{t}$")
    axes[1].set_title(r"$\hat V^*$: constant, normalized")
    axes[2].set_title("exact gradients, all 9 rules")
    axes[3].set(xscale="log", yscale="log", xlabel=r"$T$", ylabel=r"$\lambda_{\min}(F)$")
    axes[3].set_ylim(bottom=1e-12)
    axes[3].set_title(r"Fisher floor, $\hat V^*$ runs (▼: first $t$ below $10^{-12}$)")
    for ax, where in zip(axes[:2], ("left", "right"), strict=True):
        handles, labels = ax.get_legend_handles_labels()
        legend_below(fig, handles, labels, 1, where)
    return save(
        fig,
        path,
        f"small-beta: $\\beta_2 = 10^{{-3}}$, {res['n_seeds']} seeds, 95% intervals; "
        r"dotted: $\pi_{\mathrm{ref}}$",
        strict=True,
    )
