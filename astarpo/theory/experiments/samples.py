r"""``samples``: the final gap vs N, and the exact error of :math:`\hat V^*` vs N.

Default: N in 1, 2, 4, ..., 256; :math:`\beta_2 = 0.1`; :math:`\beta_1 \in \{0.1, 0.5\}`;
T = 2000 steps of :math:`c/\sqrt t` OGD, projected on :math:`2\|\theta^*\|`. Slopes are fitted on
N <= 64 and on all N, with the local slope between successive N (a power law has equal local
slopes). The exact bias and MSE of :math:`\hat V^*` (against :math:`V^*_{\beta_1}` and
:math:`V^*_{\beta_2}`) come from the binomial law of the number of correct samples. Stage 1
and Stage 2 draw from independent streams (at N = 1 the old scheme made them coincide).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, STEP_C, config, header, progress
from astarpo.theory.fits import fit_slope, local_slopes
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values, value_estimate_error
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import STAGE1, generators


def _value_error(bandit: Any, ns: list[int], b1: float, beta2: float) -> dict[str, Any]:
    p, rho = bandit.solve_rate(), bandit.context_probs
    err: dict[str, Any] = {}
    for target, beta_t in (("vs_beta1", b1), ("vs_beta2", beta2)):
        stats = [value_estimate_error(p, n, b1, bandit.optimal_value(beta_t)) for n in ns]
        mse = [float(m @ rho) for _, m in stats]
        err[target] = {
            "bias": [float(b @ rho) for b, _ in stats],
            "abs_bias": [float(np.abs(b) @ rho) for b, _ in stats],
            "mse": mse,
            "mse_local_slopes": local_slopes(np.array(ns), np.array(mse)),
        }
    return err


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
    ns = [1, 4, 16, 64] if quick else [2**k for k in range(9)]
    t_max, beta2, beta1s, n_fit = (200 if quick else 2000), 0.1, [0.1, 0.5], 64
    bandit = make_instance("shared", **INSTANCE)
    radius = radius_for(bandit, beta2)
    res = header(
        "samples",
        seeds,
        seed,
        quick,
        {
            "n_samples": ns,
            "T": t_max,
            "beta2": beta2,
            "beta1": beta1s,
            "schedule": "inverse_sqrt",
            "step_c": STEP_C["inverse_sqrt"],
            "radius": radius,
            "fit_n_max": n_fit,
        },
    )
    res["settings"] = {}
    for b1 in progress(beta1s, "samples", progress_bar):
        rows = [
            estimate_values(bandit, n, b1, generators(STAGE1, seed, seeds, tag=n))[0] for n in ns
        ]
        out = run_stage2(
            bandit, np.concatenate(rows), config(beta2, t_max, radius=radius), seed=seed
        )
        last = out.last[:, -1].reshape(len(ns), seeds).T  # [S, len(ns)]
        avg = out.average[:, -1].reshape(len(ns), seeds).T
        err = _value_error(bandit, ns, b1, beta2)
        x = np.array(ns)
        res["settings"][f"beta1={b1}"] = {
            "beta1": b1,
            "final_last": mean_ci(last),
            "final_average": mean_ci(avg),
            "final_last_local_slopes": local_slopes(x, np.exp(np.log(last).mean(0))),
            "value_error": err,
            "slopes": {
                "final_last": fit_slope(x, last, x_max=n_fit),
                "final_last_all_n": fit_slope(x, last),
                "final_average": fit_slope(x, avg, x_max=n_fit),
                "mse_vs_beta1": fit_slope(x, np.array(err["vs_beta1"]["mse"])[None]),
                "mse_vs_beta2": fit_slope(x, np.array(err["vs_beta2"]["mse"])[None]),
            },
            "fisher_min_final": mean_ci(out.fisher_min[:, -1:]),
        }
    same = res["settings"]["beta1=0.1"]
    res["headline"] = {
        "slope_last_n_le_64": same["slopes"]["final_last"]["slope"],
        "slope_last_all_n": same["slopes"]["final_last_all_n"]["slope"],
        "mse_local_slopes": same["value_error"]["vs_beta1"]["mse_local_slopes"],
        "plateau_mse_vs_beta2_beta1_0.5": res["settings"]["beta1=0.5"]["value_error"]["vs_beta2"][
            "mse"
        ][-1],
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Final gap vs N (both beta1 settings), the exact MSE of V̂* and its local slopes.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from matplotlib.lines import Line2D

    from astarpo.analysis.figures import band, figure, fit_window, save

    fig, axes = figure(2, 2, height=2.7)
    ns = np.array(res["config"]["n_samples"])
    mid = np.sqrt(ns[1:] * ns[:-1])
    for k, s in enumerate(res["settings"].values()):
        color = f"C{k}"
        band(axes[0], ns, s["final_last"], None, marker="o", ms=4, color=color)
        for target, ls in (("vs_beta1", "-"), ("vs_beta2", "--")):
            err = s["value_error"][target]
            axes[1].plot(ns, err["mse"], ls, marker=".", color=color)
            axes[2].plot(mid, err["mse_local_slopes"], ls, marker=".", color=color)
    fit_window(axes[0], ns.min(), res["config"]["fit_n_max"])
    first = next(iter(res["settings"].values()))
    y0 = first["final_last"]["gmean"][0]
    axes[0].plot(ns, y0 / ns, ":", color="0.45", lw=1.0)
    axes[0].plot(ns, y0 / np.sqrt(ns), "-.", color="0.45", lw=1.0)
    axes[1].plot(ns, first["value_error"]["vs_beta1"]["mse"][0] / ns, ":", color="0.45", lw=1.0)
    axes[0].set(xscale="log", yscale="log", xlabel=r"$N$", ylabel="final gap")
    axes[0].set_title(f"final gap, last iterate, $T = {res['config']['T']}$")
    axes[1].set(xscale="log", yscale="log", xlabel=r"$N$", ylabel=r"$E(\hat V^* - V^*)^2$")
    axes[1].set_title(r"exact error of $\hat V^*$")
    axes[2].axhline(-1, color="0.45", ls=":", lw=1.0)
    axes[2].set(xscale="log", xlabel=r"$N$ (midpoint)", ylabel="local slope")
    axes[2].set_title("local slopes of the exact error")
    axes[3].axis("off")
    handles = [
        Line2D([], [], color=f"C{k}", marker="o", label=rf"$\beta_1 = {s['beta1']}$")
        for k, s in enumerate(res["settings"].values())
    ] + [
        Line2D([], [], color="k", ls="-", label=r"error vs $V^*_{\beta_1}$"),
        Line2D([], [], color="k", ls="--", label=r"error vs $V^*_{\beta_2}$"),
        Line2D([], [], color="0.45", ls=":", label=r"$N^{-1}$"),
        Line2D([], [], color="0.45", ls="-.", label=r"$N^{-1/2}$"),
    ]
    axes[3].legend(handles=handles, loc="center", ncol=1)
    return save(fig, path, f"samples: {res['n_seeds']} seeds, mean and 95% interval", strict=True)
