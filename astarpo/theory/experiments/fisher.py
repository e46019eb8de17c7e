r"""``fisher``: the Fisher-information floor :math:`\lambda_{\min}(F(\theta_t))` along the runs.

The paper's Assumption 4 asks for a floor :math:`\lambda > 0` on the Fisher information of the
policies the algorithm visits (on the identifiable subspace, see
:mod:`astarpo.theory.fisher`). Measured along :math:`c/\sqrt t` Stage 2 runs (N = 16,
:math:`\beta_1 = \beta_2`) on: the default instance at :math:`\beta_2 = 0.1` and at
:math:`\beta_2 = 10^{-3}` (c = 0.01), a non-realizable instance, and a small tabular instance
(X = 8, Y = 8, d = 64), with the floor at :math:`\pi_{ref}` and at :math:`\pi^*_{\beta_2}` (or
:math:`\theta^*` of the least-squares fit) for comparison.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.fisher import fisher_floor
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import STAGE1, generators

CASES = {
    "shared, beta2=0.1": ("shared", INSTANCE, 0.1, 1.0),
    "shared, beta2=1e-3": ("shared", INSTANCE, 1e-3, 0.01),
    "nonrealizable, beta2=0.1": ("nonrealizable", INSTANCE, 0.1, 1.0),
    "tabular 8x8, beta2=0.1": ("tabular", {**INSTANCE, "n_contexts": 8, "n_actions": 8}, 0.1, 1.0),
}


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
    t_max, n = (100 if quick else 3000), 16
    res = header(
        "fisher",
        seeds,
        seed,
        quick,
        {
            "T": t_max,
            "n_samples": n,
            "cases": {k: [v[0], v[2], v[3]] for k, v in CASES.items()},
            "schedule": "inverse_sqrt",
        },
    )
    res["cases"] = {}
    for name, (fam, inst, beta, c) in progress(CASES.items(), "fisher", progress_bar):
        bandit = make_instance(fam, **inst)
        v_star = estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds))[0]
        out = run_stage2(
            bandit, v_star, config(beta, t_max, c=c, radius=radius_for(bandit, beta)), seed=seed
        )
        theta_star = bandit.optimal_theta(beta)[0]
        res["steps"] = out.steps.tolist()
        res["cases"][name] = {
            "fisher_min": mean_ci(out.fisher_min),
            "gap": mean_ci(out.last),
            "at_reference": float(fisher_floor(bandit, np.zeros(bandit.dim))),
            "at_theta_star": float(fisher_floor(bandit, theta_star)),
            "min_along_run": float(out.fisher_min.min()),
        }
    res["headline"] = {
        k: {
            "at_reference": v["at_reference"],
            "at_theta_star": v["at_theta_star"],
            "final": v["fisher_min"]["gmean"][-1],
            "min_along_run": v["min_along_run"],
        }
        for k, v in res["cases"].items()
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """The Fisher floor vs t per case, with its value at theta*, and the gap.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import band, figure, legend_below, save

    fig, axes = figure(2, 1, height=3.6)
    steps = np.array(res["steps"])
    for k, (name, c) in enumerate(res["cases"].items()):
        band(axes[0], steps, c["fisher_min"], name, color=f"C{k}")
        if c["at_theta_star"] > 0:
            axes[0].axhline(c["at_theta_star"], color=f"C{k}", ls=":", lw=1.0)
        band(axes[1], steps, c["gap"], None, color=f"C{k}")
    axes[0].set(xscale="log", yscale="log", xlabel=r"$T$", ylabel=r"$\lambda_{\min}(F(\theta_t))$")
    axes[0].set_title(r"Fisher floor (dotted: at $\theta^*$)")
    axes[1].set(xscale="log", yscale="log", xlabel=r"$T$", ylabel="gap", title="gap")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, 2)
    return save(fig, path, f"fisher: {res['n_seeds']} seeds, 95% intervals", strict=True)
