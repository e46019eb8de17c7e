r"""``two-beta``: where Stage 2 converges when :math:`\beta_1 \neq \beta_2`, on a grid.

For each pair: N = 16 samples per context for :math:`\hat V^*_{\beta_1}`, T steps of
:math:`c/\sqrt t` OGD on the :math:`\beta_2` regression (stochastic, projected on
:math:`2\|\theta^*_{\beta_2}\|`), then for the last and average iterate
:math:`E_x KL(\pi\|\pi^*_{\beta_2})`, :math:`E_x KL(\pi\|\pi^*_{\beta_1})` and the gap under
:math:`J_{\beta_2}`; the spread over seeds; the target error
:math:`E(\hat V^*_{\beta_1} - V^*_{\beta_2})^2` and its N-free part, the exact
:math:`E_x(V^*_{\beta_1} - V^*_{\beta_2})^2`. A deterministic run (exact gradients) per cell
checks the limit: by the gradient identity it cannot depend on :math:`\beta_1`. At
:math:`\theta^*_{\beta_2}` the variance of the one-sample gradient is measured (Monte Carlo,
autograd) against its formula (:mod:`astarpo.theory.variance`), with the exact
:math:`\hat V = V^*_{\beta_1}` and with the Stage 1 estimates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import styled
from astarpo.analysis.stats import mean_ci
from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.instances import make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import PROBE, STAGE1, generators
from astarpo.theory.variance import gradient_variance_formula, gradient_variance_measured

#: c per beta2 for c/sqrt(t) steps (see the ``small-beta`` experiment for beta2 = 1e-3).
TWO_BETA_C = {1e-3: 0.01, 0.1: 1.0, 1.0: 1.0}


def _cell(
    bandit: Any,
    out: Any,
    det: Any,
    i: int,
    b1: float,
    b2: float,
    seeds: int,
    v_rows: list[np.ndarray],
    t_max: int,
) -> dict[str, Any]:
    sl = slice(i * seeds, (i + 1) * seeds)
    cell: dict[str, Any] = {"beta1": b1, "beta2": b2}
    for name, theta in (("last", out.theta[sl]), ("average", out.theta_average[sl])):
        pol = bandit.policy(theta)
        cell[name] = {
            "kl_to_opt_beta2": mean_ci(bandit.suboptimality(pol, b2)[:, None] / b2),
            "kl_to_opt_beta1": mean_ci(bandit.suboptimality(pol, b1)[:, None] / b1),
            "gap_beta2": mean_ci(bandit.suboptimality(pol, b2)[:, None]),
        }
    v2 = bandit.optimal_value(b2)
    half = out.steps >= t_max / 2
    cell["gap_std_over_seeds"] = float(out.last[sl, -1].std(ddof=1)) if seeds > 1 else 0.0
    cell["curve_std_last_half"] = float(out.last[sl][:, half].std(-1).mean())
    cell["target_mse"] = float(((v_rows[i] - v2) ** 2).mean())
    cell["target_bias"] = float((v_rows[i] - v2).mean())
    cell["stage1_term_exact"] = float(((bandit.optimal_value(b1) - v2) ** 2) @ bandit.context_probs)
    cell["fisher_min_final"] = mean_ci(out.fisher_min[sl, -1:])
    pol_det = bandit.policy(det.theta[i])
    cell["deterministic"] = {
        "kl_to_opt_beta2": float(bandit.suboptimality(pol_det, b2) / b2),
        "kl_to_opt_beta1": float(bandit.suboptimality(pol_det, b1) / b1),
    }
    return cell


def _variance(
    bandit: Any, b1: float, b2: float, v_rows: np.ndarray, n_draws: int, rng: Any
) -> dict[str, Any]:
    """Formula and Monte Carlo of E||g||^2 at theta*_beta2, exact V*_beta1 and Stage 1 rows."""
    exact = bandit.optimal_value(b1)
    return {
        "formula_exact": gradient_variance_formula(bandit, exact, b2),
        "measured_exact": gradient_variance_measured(bandit, exact, b2, n_draws, rng),
        "formula_stage1": float(
            np.mean([gradient_variance_formula(bandit, v, b2) for v in v_rows])
        ),
        "measured_stage1": gradient_variance_measured(bandit, v_rows, b2, n_draws, rng),
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
    beta1s, beta2s = [1e-3, 0.1, 0.5, 1.0, 10.0], [1e-3, 0.1, 1.0]
    t_max, n, n_draws = (150 if quick else 3000), 16, (400 if quick else 4000)
    bandit = make_instance("shared", **INSTANCE)
    res = header(
        "two-beta",
        seeds,
        seed,
        quick,
        {
            "beta1": beta1s,
            "beta2": beta2s,
            "T": t_max,
            "n_samples": n,
            "schedule": "inverse_sqrt",
            "step_c": {str(k): v for k, v in TWO_BETA_C.items()},
            "radius": "2 ||theta*_beta2||",
            "variance_draws": n_draws,
        },
    )
    grid: list[dict[str, Any]] = []
    for b2 in progress(beta2s, "two-beta", progress_bar):
        v_rows = [
            estimate_values(bandit, n, b1, generators(STAGE1, seed, seeds))[0] for b1 in beta1s
        ]
        v_all = np.concatenate(v_rows)
        r = radius_for(bandit, b2)
        out = run_stage2(bandit, v_all, config(b2, t_max, c=TWO_BETA_C[b2], radius=r), seed=seed)
        det_cfg = config(b2, t_max, c=TWO_BETA_C[b2], radius=r, mode="deterministic")
        det = run_stage2(bandit, v_all[::seeds], det_cfg)
        cells = [
            _cell(bandit, out, det, i, b1, b2, seeds, v_rows, t_max) for i, b1 in enumerate(beta1s)
        ]
        for cell, b1, v in zip(cells, beta1s, v_rows, strict=True):
            rng = generators(PROBE, seed, 1, tag=len(grid))[0]
            cell["variance_at_optimum"] = _variance(bandit, b1, b2, v, n_draws, rng)
            grid.append(cell)
    res["grid"] = grid
    res["reference_gap"] = {
        str(b): float(bandit.suboptimality(bandit.ref_probs, b)) for b in beta2s
    }
    res["kl_between_optima"] = {
        f"{b1},{b2}": float(bandit.suboptimality(bandit.optimal_policy(b2), b1) / b1)
        for b1 in beta1s
        for b2 in beta2s
    }
    paper = next(c for c in grid if c["beta1"] == 0.5 and c["beta2"] == 1e-3)
    res["headline"] = {
        "stage1_term_exact_beta1_0.5_beta2_0.1": next(
            c["stage1_term_exact"] for c in grid if c["beta1"] == 0.5 and c["beta2"] == 0.1
        ),
        "paper_setting_gap": paper["last"]["gap_beta2"]["mean"][0],
        "paper_setting_deterministic_kl": paper["deterministic"]["kl_to_opt_beta2"],
    }
    return res


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Tables over (beta1, beta2) of the KLs and the gap, and the gradient variance's check.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import errorbars, figure, legend_below, save

    fig, axes = figure(1, 4, height=2.05)
    b1s, b2s = res["config"]["beta1"], res["config"]["beta2"]
    cells = {(c["beta1"], c["beta2"]): c for c in res["grid"]}
    panels = (
        ("kl_to_opt_beta2", r"$\mathrm{KL}(\pi_T\,\|\,\pi^*_{\beta_2})$"),
        ("kl_to_opt_beta1", r"$\mathrm{KL}(\pi_T\,\|\,\pi^*_{\beta_1})$"),
        ("gap_beta2", r"gap under $J_{\beta_2}$"),
    )
    for ax, (key, title) in zip(axes, panels, strict=False):
        ci = [[cells[(b1, b2)]["last"][key] for b1 in b1s] for b2 in b2s]
        m = np.array([[c["mean"][0] for c in row] for row in ci])
        half = np.array([[(c["hi"][0] - c["lo"][0]) / 2 for c in row] for row in ci])
        lm = np.log10(np.maximum(m, 1e-300))
        ax.imshow(lm, cmap="Blues", aspect="auto", alpha=0.6)
        for i in range(len(b2s)):
            for j in range(len(b1s)):
                ax.text(j, i, f"{m[i, j]:.2g} ± {half[i, j]:.1g}", ha="center", va="center")
        ax.set_xticks(range(len(b1s)), [f"{b:g}" for b in b1s])
        ax.set_yticks(range(len(b2s)), [f"{b:g}" for b in b2s])
        ax.set(xlabel=r"$\beta_1$", ylabel=r"$\beta_2$", title=title + ", mean ± 95% half-width")
    ax = axes[3]
    var = [(c, c.get("variance_at_optimum")) for c in res["grid"]]
    var = [(c, v) for c, v in var if v is not None and v["formula_exact"] > 0]
    for k, b2 in enumerate(b2s):
        pts = [v for c, v in var if c["beta2"] == b2]
        if not pts:
            continue
        f = np.array([v["formula_exact"] for v in pts])
        m = np.array([v["measured_exact"]["mean"][0] for v in pts])
        lo = np.array([v["measured_exact"]["lo"][0] for v in pts])
        hi = np.array([v["measured_exact"]["hi"][0] for v in pts])
        errorbars(ax, f, m / f, lo / f, hi / f, color=f"C{k}", label=rf"$\beta_2 = {b2:g}$")
    ax.axhline(1.0, color="0.45", ls="--", lw=1.0)
    ax.set(
        xscale="log",
        xlabel=r"formula $E\Vert g\Vert^2$ at $\theta^*_{\beta_2}$",
        ylabel="measured / formula",
    )
    ax.set_title(r"gradient variance, $\hat V = V^*_{\beta_1}$, $\beta_1 \neq \beta_2$ [95%]")
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        legend_below(fig, handles, labels, 3)
    return save(
        fig,
        path,
        f"two-beta: last iterate after T = {res['config']['T']}, {res['n_seeds']} seeds",
        strict=True,
    )
