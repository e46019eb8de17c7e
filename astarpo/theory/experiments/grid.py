r"""``grid``: the gap over an (N, T) grid, to test whether the two terms add.

One run per N of :math:`c/\sqrt t` OGD (the schedule does not depend on the horizon, so the
iterate after t steps of a long run is the iterate of a run of length t); N in 1..256, T up to
10^4, :math:`\beta_1 = \beta_2 = 0.1`, projected on :math:`2\|\theta^*\|`. The seed-mean gap
of the last iterate is fitted by :math:`g(T, N) = a T^{-p} + b N^{-q} + c` on the cells with
:math:`T \ge 100` (30 with ``quick``; bootstrap over seeds for the 95% intervals); the fit
says which term
dominates each cell, so the T floor and the N floor are visible. The alternative
:math:`g = a T^{-p}(N^{-q} + c)` (N sets the noise level that more steps then average away) is
fitted too; the smaller misfit says which of the two describes the grid. Also the T-slope at each N
(does the gap at N = 1 keep falling with T?).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, config, header
from astarpo.theory.fits import fit_additive, fit_slope
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import STAGE1, generators


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
    ns = [1, 4, 16, 64] if quick else [1, 4, 16, 64, 256]
    t_max, beta, t_fit = (300 if quick else 10_000), 0.1, (30 if quick else 100)
    bandit = make_instance("shared", **INSTANCE)
    res = header(
        "grid",
        seeds,
        seed,
        quick,
        {
            "n_samples": ns,
            "T_max": t_max,
            "beta1": beta,
            "beta2": beta,
            "fit_t_min": t_fit,
            "schedule": "inverse_sqrt",
            "step_c": 1.0,
            "per_decade": 4,
        },
    )
    rows = [estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds, tag=n))[0] for n in ns]
    cfg = config(beta, t_max, radius=radius_for(bandit, beta), per_decade=4)
    out = run_stage2(bandit, np.concatenate(rows), cfg, seed=seed)
    steps = out.steps
    gaps = out.last.reshape(len(ns), seeds, len(steps))  # [N, S, K]
    keep = steps >= t_fit
    tt, nn = np.meshgrid(steps[keep], ns)  # [N, K']
    cells = gaps[:, :, keep].transpose(1, 0, 2).reshape(seeds, -1)
    boot = 10 if quick else 200
    fit = fit_additive(tt.ravel(), nn.ravel(), cells, n_boot=boot, seed=seed)
    product = fit_additive(tt.ravel(), nn.ravel(), cells, boot, seed, model="product")
    terms = {
        "T_term": (fit["a"] * tt.astype(float) ** -fit["p"]).tolist(),
        "N_term": (fit["b"] * nn.astype(float) ** -fit["q"]).tolist(),
        "floor": fit["c"],
    }
    res["steps"] = steps.tolist()
    res["gap"] = {str(n): mean_ci(gaps[i]) for i, n in enumerate(ns)}
    res["average_gap"] = {
        str(n): mean_ci(out.average.reshape(len(ns), seeds, -1)[i]) for i, n in enumerate(ns)
    }
    res["fisher_min"] = mean_ci(out.fisher_min)
    res["t_slope_per_n"] = {
        str(n): fit_slope(steps, gaps[i], 100.0 if not quick else 30.0) for i, n in enumerate(ns)
    }
    res["fit"] = {**fit, "fit_steps": steps[keep].tolist(), **terms}
    res["fit_product"] = product
    res["headline"] = {
        "p": fit["p"],
        "p_ci": fit["ci"]["p"],
        "q": fit["q"],
        "q_ci": fit["ci"]["q"],
        "c": fit["c"],
        "rms_log_residual": fit["rms_log_residual"],
        "t_slope_n1": res["t_slope_per_n"]["1"]["slope"],
        "t_slope_nmax": res["t_slope_per_n"][str(ns[-1])]["slope"],
        "product": {k: product[k] for k in ("a", "p", "q", "c", "ci", "rms_log_residual")},
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Gap vs T per N with the two fitted models, gap vs N per T, and a table of the gaps.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from matplotlib.lines import Line2D

    from astarpo.analysis.figures import band, figure, fit_window, legend_below, save

    fig, axes = figure(2, 1, height=3.9)
    steps = np.array(res["steps"], dtype=float)
    ns = res["config"]["n_samples"]
    f, fp = res["fit"], res["fit_product"]
    ts = np.array(f["fit_steps"], dtype=float)
    for k, n in enumerate(ns):
        band(axes[0], steps, res["gap"][str(n)], f"$N={n}$", color=f"C{k}")
        add = f["a"] * ts ** -f["p"] + f["b"] * float(n) ** -f["q"] + f["c"]
        axes[0].plot(ts, add, ":", color=f"C{k}", lw=1.3)
        prod = fp["a"] * ts ** -fp["p"] * (float(n) ** -fp["q"] + fp["c"])
        axes[0].plot(ts, prod, "--", color=f"C{k}", lw=1.0)
    fit_window(axes[0], ts.min(), ts.max())
    axes[0].set(xscale="log", yscale="log", xlabel=r"$T$", ylabel="gap", title="gap vs T per N")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [Line2D([], [], color="k", ls=":"), Line2D([], [], color="k", ls="--")]
    legend_below(fig, handles, [*labels, "additive fit", "product fit"], 2, "left")
    idx = sorted({int(np.argmin(np.abs(np.log(steps / t)))) for t in (10, 100, 1000, steps[-1])})
    for k, i in enumerate(idx):
        ci = {key: [res["gap"][str(n)][key][i] for n in ns] for key in ("gmean", "glo", "ghi")}
        band(axes[1], ns, ci, f"$T={steps[i]:.0f}$", marker="o", ms=4, color=f"C{k + 5}")
    axes[1].set(xscale="log", yscale="log", xlabel=r"$N$", ylabel="gap", title="gap vs N per T")
    handles, labels = axes[1].get_legend_handles_labels()
    legend_below(fig, handles, labels, 2, "right")
    return save(fig, path, f"grid: {res['n_seeds']} seeds, last iterate", strict=True)
