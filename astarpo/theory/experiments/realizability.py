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

from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import regression_gradient, run_stage2
from astarpo.theory.stats import fit_slope, mean_ci
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


def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Excess gap vs T per instance and family, and the per-instance slopes.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.theory.plots import band, figure, fit_window, reference_slopes, save

    fig, axes = figure(4)
    for ax, fam in zip(axes[:3], FAMILIES, strict=True):
        for r in res["families"][fam]["instances"]:
            band(
                ax,
                r["steps"],
                r["excess_last"],
                f"instance {r['instance_seed']} ({r['slope_last']['slope']:.2f})",
            )
        first = res["families"][fam]["instances"][0]
        fit_window(ax, first["slope_last"]["x_min"], first["slope_last"]["x_max"])
        reference_slopes(
            ax,
            first["steps"],
            first["excess_last"]["gmean"][0],
            {r"$T^{-1/2}$": -0.5, r"$T^{-1}$": -1.0},
        )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=r"$T$",
            title=f"{fam}: last iterate",
            ylabel=r"gap $-$ best-in-class gap",
        )
        ax.legend(fontsize=5)
    ax = axes[3]
    for i, fam in enumerate(FAMILIES):
        rows = res["families"][fam]["instances"]
        for j, key in enumerate(("slope_last", "slope_average")):
            ys = [r[key]["slope"] for r in rows]
            ax.plot(np.full(len(ys), 2 * i + j) + np.linspace(-0.1, 0.1, len(ys)), ys, "o", ms=4)
    ax.set_xticks(
        range(2 * len(FAMILIES)),
        [f"{f[:7]}\n{k}" for f in FAMILIES for k in ("last", "avg")],
        fontsize=6,
    )
    for y in (-0.5, -1.0):
        ax.axhline(y, color="0.45", ls="--", lw=0.8)
    ax.set(ylabel="fitted slope (one point per instance)", title="slopes across instances")
    return save(fig, path, f"realizability: {res['n_seeds']} seeds per instance")
