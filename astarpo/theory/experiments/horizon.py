r"""``horizon``: the gap vs T for three step sizes, four readings of it, and PG at equal samples.

Default: the default instance, T = 10^4, N = 16, :math:`\beta_1 = \beta_2 = 0.1`, iterates
projected on the ball of radius :math:`2\|\theta^*_{\beta_2}\|` (the bounded set of the
analysis; one unprojected :math:`c/\sqrt t` run says whether it matters). For each schedule:
the last iterate, the parameter average, the mixture policy and the mean gap over iterates,
slopes fitted for :math:`t \ge T/100`, and the Fisher floor along the run. Against the PG
baseline (G = 4) at equal samples per context, both with their step constant tuned over
{0.3, 1, 3, 10} by the final gap at the budget; the crossing points of the two curves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.baseline import policy_gradient_baseline
from astarpo.theory.experiments.common import (
    INSTANCE,
    STEP_C,
    config,
    crossings,
    curve_summary,
    header,
    progress,
)
from astarpo.theory.fits import fit_slope
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.streams import STAGE1, generators

KINDS = ("last", "average", "mixture", "mean_gap")
TUNE_C = (0.3, 1.0, 3.0, 10.0)


def _tuned(runs: dict[float, Any], budget_index: int = -1) -> tuple[float, Any]:
    finals = {
        c: float(np.exp(np.log(np.maximum(o.last[:, budget_index], 1e-300)).mean()))
        for c, o in runs.items()
    }
    best = min(finals, key=lambda c: finals[c])
    return best, runs[best]


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
    t_max, beta, n, group = (250 if quick else 10_000), 0.1, 16, 4
    x_min = 10.0 if quick else t_max / 100
    bandit = make_instance("shared", **INSTANCE)
    radius = radius_for(bandit, beta)
    res = header(
        "horizon",
        seeds,
        seed,
        quick,
        {
            "T": t_max,
            "n_samples": n,
            "beta1": beta,
            "beta2": beta,
            "step_c": STEP_C,
            "learning_rate": "c / beta2**2",
            "slope_fit_t_min": x_min,
            "radius": radius,
            "pg_group_size": group,
            "tune_c": list(TUNE_C[1:3] if quick else TUNE_C),
        },
    )
    v_star, _ = estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds))
    res["curves"], res["slopes"] = {}, {}
    for sched in progress(STEP_C, "horizon", progress_bar):
        out = run_stage2_cfg(bandit, v_star, config(beta, t_max, sched, radius=radius), seed)
        res["steps"] = out.steps.tolist()
        res["curves"][sched] = curve_summary(out)
        res["slopes"][sched] = {k: fit_slope(out.steps, getattr(out, k), x_min) for k in KINDS}
        res["curves"][sched]["at_radius"] = float(out.at_radius.mean())
        res["curves"][sched]["norm_max"] = float(out.norm_max.max())
        if sched == "inverse_sqrt":
            projected = out
    free = run_stage2_cfg(bandit, v_star, config(beta, t_max, "inverse_sqrt"), seed)
    res["projection"] = {
        "radius": radius,
        "fraction_of_steps_on_sphere": float(projected.at_radius.mean()),
        "norm_max_unprojected": float(free.norm_max.max()),
        "final_last_projected": mean_ci(projected.last[:, -1:]),
        "final_last_unprojected": mean_ci(free.last[:, -1:]),
        "max_abs_theta_difference": float(np.abs(free.theta - projected.theta).max()),
    }
    res["baseline"] = _baseline(
        bandit,
        v_star,
        beta,
        t_max,
        n,
        group,
        radius,
        seeds,
        seed,
        projected,
        TUNE_C[1:3] if quick else TUNE_C,
    )
    res["reference_gap"] = float(bandit.suboptimality(bandit.ref_probs, beta))
    s = res["slopes"]["inverse_sqrt"]
    res["headline"] = {
        **{f"sqrt_{k}_slope": s[k]["slope"] for k in KINDS},
        **{f"sqrt_{k}_final": res["curves"]["inverse_sqrt"][k]["gmean"][-1] for k in KINDS},
        "fisher_min_final": res["curves"]["inverse_sqrt"]["fisher_min"]["gmean"][-1],
        "fisher_min_start": res["curves"]["inverse_sqrt"]["fisher_min"]["gmean"][0],
        "crossings": res["baseline"]["crossings"],
    }
    return res


def run_stage2_cfg(bandit: Any, v_star: np.ndarray, cfg: Any, seed: int) -> Any:
    """``run_stage2`` with this experiment's Stage 2 seed."""
    from astarpo.theory.stage2 import run_stage2

    return run_stage2(bandit, v_star, cfg, seed=seed)


def _baseline(
    bandit: Any,
    v_star: np.ndarray,
    beta: float,
    t_max: int,
    n: int,
    group: int,
    radius: float,
    seeds: int,
    seed: int,
    c1_run: Any,
    tune: tuple[float, ...],
) -> dict[str, Any]:
    astar = {
        c: (
            c1_run
            if c == 1.0
            else run_stage2_cfg(bandit, v_star, config(beta, t_max, c=c, radius=radius), seed)
        )
        for c in tune
    }
    pg_t = (t_max + n) // group
    pg = {
        c: policy_gradient_baseline(
            bandit, config(beta, pg_t, c=c, radius=radius), group, seeds, seed
        )
        for c in tune
    }
    c_a, best_a = _tuned(astar)
    c_p, best_p = _tuned(pg)
    xa, xp = best_a.steps + n, best_p.steps * group
    return {
        "note": "samples per context: A*-PO N + t, PG G * t; c tuned per method",
        "astarpo_c": c_a,
        "pg_c": c_p,
        "final_by_c": {
            "astarpo": {str(c): mean_ci(o.last[:, -1:]) for c, o in astar.items()},
            "pg": {str(c): mean_ci(o.last[:, -1:]) for c, o in pg.items()},
        },
        "astarpo_samples": xa.tolist(),
        "astarpo": mean_ci(best_a.last),
        "pg_samples": xp.tolist(),
        "pg": mean_ci(best_p.last),
        "astarpo_slope": fit_slope(xa, best_a.last, 10 * n),
        "pg_slope": fit_slope(xp, best_p.last, 10 * n),
        "crossings": crossings(
            xa,
            np.exp(np.log(np.maximum(best_a.last, 1e-300)).mean(0)),
            xp,
            np.exp(np.log(np.maximum(best_p.last, 1e-300)).mean(0)),
        ),
    }


_SCHED = {"constant": r"constant $c$", "inverse_sqrt": r"$c/\sqrt{t}$", "inverse": r"$c/t$"}
_LABEL = {
    "last": "last iterate",
    "average": r"parameter avg. $\bar\theta_t$",
    "mixture": "mixture policy",
    "mean_gap": "mean gap of iterates",
}


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Gap vs T per schedule (four readings), and A*-PO vs PG by samples per context.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import GAP, band, figure, fit_window, legend_below, save

    fig, axes = figure(2, 2, height=2.6)
    steps = np.array(res["steps"])
    for ax, (sched, curves) in zip(axes, res["curves"].items(), strict=False):
        for i, kind in enumerate(KINDS):
            band(ax, steps, curves[kind], _LABEL[kind], color=f"C{i}")
        s = res["slopes"][sched]["last"]
        fit_window(ax, s["x_min"], s["x_max"])
        y0 = curves["last"]["gmean"][0]
        for slope, ls, lab in ((-0.5, "--", r"$T^{-1/2}$"), (-1.0, ":", r"$T^{-1}$")):
            ax.plot(steps, y0 * steps**slope, ls, color="0.45", lw=1.0, label=lab)
        ax.set(xscale="log", yscale="log", xlabel=r"$T$ (steps)", title=_SCHED[sched])
    axes[0].set_ylabel("gap")
    axes[2].set_ylabel("gap")
    b = res["baseline"]
    ax = axes[3]
    band(ax, b["astarpo_samples"], b["astarpo"], f"A*-PO, $c={b['astarpo_c']:g}$", color="C4")
    g = res["config"]["pg_group_size"]
    band(ax, b["pg_samples"], b["pg"], f"PG ($G={g}$), $c={b['pg_c']:g}$", color="C5")
    for x in b["crossings"]:
        ax.axvline(x, color="k", lw=0.6, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="samples per context", title="tuned, equal samples")
    handles, labels = axes[0].get_legend_handles_labels()
    h2, l2 = ax.get_legend_handles_labels()
    legend_below(fig, handles + h2, labels + l2, ncol=4)
    return save(
        fig,
        path,
        f"horizon: {res['n_seeds']} seeds, geometric mean and 95% interval; gap = {GAP}",
        strict=True,
    )
