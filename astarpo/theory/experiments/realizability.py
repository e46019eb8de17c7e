r"""``realizability``: rates on several random instances, realizable and not.

M random instances per family (instance seeds 0..M-1; the default instance is seed 0):
``shared`` (realizable) and ``nonrealizable`` (the reward is not in the feature span, so
:math:`\pi^*_\beta` is outside the class), and between them ``misspecified`` (the
realizable features plus noise of standard deviation 0.3). N = 16, :math:`\beta_1 = \beta_2 = 0.1`,
T = 3000 steps of :math:`c/\sqrt t` OGD projected on :math:`2\|\theta^*\|`. On non-realizable
instances the gap cannot vanish; the best policy of the class (L-BFGS on the exact
:math:`J_{\beta_2}`) gives the floor and the *excess* gap over it is fitted. The slope of each
instance (mean over its seeds) is one sample of the across-instance mean and interval, so a
slope is not the property of one instance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.fits import fit_slope
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import regression_gradient, run_stage2
from astarpo.theory.streams import STAGE1, generators

FAMILIES = ("shared", "misspecified", "nonrealizable")


def best_in_class(bandit: Any, beta: float) -> tuple[np.ndarray, float]:
    """The class's best parameter (L-BFGS on :math:`-J_\\beta`) and its gap."""
    from scipy.optimize import minimize

    zero_v = np.zeros((1, bandit.n_contexts))

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        gap = float(bandit.suboptimality(bandit.policy(theta[None]), beta)[0])
        grad, _ = regression_gradient(bandit, theta[None], zero_v, beta)
        return gap, grad[0] / (2 * beta)  # grad of the loss = -2 beta grad J = 2 beta grad gap

    start = bandit.optimal_theta(beta)[0]
    fit = minimize(
        fun, start, jac=True, method="L-BFGS-B", options={"maxiter": 2000, "gtol": 1e-12}
    )
    return fit.x, float(fit.fun)


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
    m, t_max, n, beta = (2 if quick else 5), (200 if quick else 3000), 16, 0.1
    x_min = 10.0 if quick else t_max / 100
    res = header(
        "realizability",
        seeds,
        seed,
        quick,
        {
            "instances": m,
            "T": t_max,
            "n_samples": n,
            "beta1": beta,
            "beta2": beta,
            "slope_fit_t_min": x_min,
            "schedule": "inverse_sqrt",
            "step_c": 1.0,
        },
        instance={**INSTANCE, "seed": "0..M-1"},
    )
    res["families"] = {}
    for fam in FAMILIES:
        rows = []
        for inst in progress(range(m), f"realizability {fam}", progress_bar):
            bandit = make_instance(fam, **{**INSTANCE, "seed": inst})
            _, floor = best_in_class(bandit, beta)
            v_star = estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds))[0]
            out = run_stage2(
                bandit, v_star, config(beta, t_max, radius=radius_for(bandit, beta)), seed=seed
            )
            excess = np.maximum(out.last - floor, 1e-300)
            excess_avg = np.maximum(out.average - floor, 1e-300)
            rows.append(
                {
                    "instance_seed": inst,
                    "class_floor": floor,
                    "residual": bandit.optimal_theta(beta)[1],
                    "reference_gap": float(bandit.suboptimality(bandit.ref_probs, beta)),
                    "excess_last": mean_ci(excess),
                    "excess_average": mean_ci(excess_avg),
                    "slope_last": fit_slope(out.steps, excess, x_min),
                    "slope_average": fit_slope(out.steps, excess_avg, x_min),
                    "fisher_min": mean_ci(out.fisher_min),
                    "steps": out.steps.tolist(),
                }
            )
        slopes = np.array([[r["slope_last"]["slope"], r["slope_average"]["slope"]] for r in rows])
        res["families"][fam] = {
            "instances": rows,
            "across_instances": {
                "slope_last": mean_ci(slopes[:, :1]),
                "slope_average": mean_ci(slopes[:, 1:]),
            },
        }
    res["headline"] = {
        fam: {
            "slope_last_mean": v["across_instances"]["slope_last"]["mean"][0],
            "slope_last_ci": [
                v["across_instances"]["slope_last"]["lo"][0],
                v["across_instances"]["slope_last"]["hi"][0],
            ],
            "slope_average_mean": v["across_instances"]["slope_average"]["mean"][0],
            "class_floors": [r["class_floor"] for r in v["instances"]],
        }
        for fam, v in res["families"].items()
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Excess gap vs T per instance and family, and the per-instance slopes with intervals.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import band, errorbars, figure, fit_window, legend_below, save

    fig, axes = figure(2, 2, height=2.7)
    for ax, fam in zip(axes[:3], FAMILIES, strict=True):
        for k, r in enumerate(res["families"][fam]["instances"]):
            band(ax, r["steps"], r["excess_last"], f"instance {r['instance_seed']}", color=f"C{k}")
        first = res["families"][fam]["instances"][0]
        fit_window(ax, first["slope_last"]["x_min"], first["slope_last"]["x_max"])
        ax.set(xscale="log", yscale="log", xlabel=r"$T$", ylabel="excess gap", title=fam)
    ax = axes[3]
    for i, fam in enumerate(FAMILIES):
        rows = res["families"][fam]["instances"]
        for k, r in enumerate(rows):
            s = r["slope_last"]
            errorbars(
                ax,
                [i + (k - 2) * 0.09],
                [s["slope"]],
                [s["lo"]],
                [s["hi"]],
                fmt="o",
                ms=4,
                color=f"C{k}",
                capsize=2,
            )
        a = res["families"][fam]["across_instances"]["slope_last"]
        errorbars(
            ax,
            [i + 0.36],
            a["mean"],
            a["lo"],
            a["hi"],
            fmt="s",
            ms=6,
            color="k",
            capsize=3,
        )
    ax.axhline(-0.5, color="0.45", ls="--", lw=1.0)
    names = {"nonrealizable": "non-\nrealizable", "misspecified": "mis-\nspecified"}
    ax.set_xticks(range(len(FAMILIES)), [names.get(f, f) for f in FAMILIES])
    ax.set(ylabel="slope, last iterate", title="slopes [95%]; black: mean")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, 5)
    return save(
        fig,
        path,
        f"realizability: {res['n_seeds']} seeds per instance, 95% intervals; dashed: -1/2",
        strict=True,
    )
