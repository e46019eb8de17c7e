r"""``update``: the paper's real update, and where "V* drops out of the gradient" stops holding.

The identity :math:`E_{y\sim\pi_\theta}\nabla\ell = -2\beta_2\nabla J_{\beta_2}` needs the sample
to come from the iterate the gradient is taken at, and the plain gradient. The official
training scripts take 2 minibatch steps per sampled batch (the second is off-policy), clip the
gradient norm at 1.0 and add an entropy bonus of 0.001; asynchronous samplers add staleness.
For each variant, and for :math:`\hat V^* = V^*_{\beta_2} + \delta` with a constant offset
:math:`\delta`, T steps of constant-step OGD are run *from* :math:`\theta^*_{\beta_2}` and the
parameters are averaged over the steps and the seeds: the fixed point of the expected update.
Its shift is reported as the gap of :math:`\pi_{\bar\theta}` under :math:`J_{\beta_2}` (with a
bootstrap interval over seeds); the plain update is the control (its shift is the noise and the
constant step's own bias). The entropy bonus's fixed point does not depend on :math:`\delta`
(in expectation the bonus is a fixed extra objective); it is also computed with exact
gradients, at :math:`\beta_2 = 0.1` and at the paper's :math:`\beta_2 = 10^{-3}`, where it
weighs :math:`0.001/(2\beta_2) = 0.5` against the KL term.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo import optimal_policy
from astarpo.analysis.figures import styled
from astarpo.analysis.stats import log_bootstrap_interval
from astarpo.theory.experiments.common import INSTANCE, config, header, progress
from astarpo.theory.experiments.update_paper import run as run_paper_betas
from astarpo.theory.instances import make_instance
from astarpo.theory.stage2 import regression_gradient, run_stage2


def _variants(clip_active: float) -> dict[str, dict[str, Any]]:
    return {
        "plain": {},
        "minibatches=2": {"minibatches": 2},
        "clip=1.0": {"clip_norm": 1.0},
        f"clip={clip_active:.2g}": {"clip_norm": clip_active},
        "entropy=0.001": {"entropy": 1e-3},
        "staleness=4": {"staleness": 4},
        "scripts (2 minibatches, clip 1.0, entropy 0.001)": {
            "minibatches": 2,
            "clip_norm": 1.0,
            "entropy": 1e-3,
        },
    }


def _shift(bandit: Any, theta_avg: np.ndarray, beta: float, seed: int) -> dict[str, Any]:
    """Gap of pi at the seed-mean average parameter, with a bootstrap interval over seeds.

    The gap is convex in the parameter, so the gaps of resampled means lie mostly above the gap
    of the mean: their percentiles need not contain it. The interval is the basic bootstrap
    interval on the log scale (:func:`~astarpo.analysis.stats.log_bootstrap_interval`), which
    contains its point.
    """
    rng = np.random.default_rng(seed)
    gap = float(bandit.suboptimality(bandit.policy(theta_avg.mean(0)), beta))
    idx = rng.integers(0, len(theta_avg), (200, len(theta_avg)))
    boots = bandit.suboptimality(bandit.policy(theta_avg[idx].mean(1)), beta)
    if not (np.isfinite(gap) and gap > 0 and np.all(np.isfinite(boots) & (boots > 0))):
        return {"gap": gap, "lo": None, "hi": None}  # diverged, or exactly 0: no interval
    lo, hi = log_bootstrap_interval(gap, boots)
    return {"gap": gap, "lo": lo, "hi": hi}


def _entropy_fixed_points(bandit: Any, t_max: int) -> dict[str, Any]:
    out = {}
    for beta in (0.1, 1e-3):
        theta_star, _ = bandit.optimal_theta(beta)
        cfg = config(
            beta, t_max, "constant", c=0.3, mode="deterministic", entropy=1e-3, track_fisher=False
        )
        det = run_stage2(bandit, np.zeros((1, bandit.n_contexts)), cfg, theta0=theta_star[None])
        grad, _ = regression_gradient(
            bandit, det.theta, np.zeros((1, bandit.n_contexts)), beta, entropy=1e-3
        )
        kappa = 1e-3 / (2 * beta)  # J + kappa H is maximized by ref^(b/(b+k)) e^(r/(b+k))
        scaled_ref = np.where(bandit.support, bandit.log_ref * beta / (beta + kappa), -np.inf)
        free = np.exp(optimal_policy(scaled_ref, bandit.rewards, beta + kappa))
        out[str(beta)] = {
            "gap_of_unrestricted_optimum": float(bandit.suboptimality(free, beta)),
            "gap_of_fixed_point": float(det.last[0, -1]),
            "kl_to_opt": float(det.last[0, -1] / beta),
            "reference_gap": float(bandit.suboptimality(bandit.ref_probs, beta)),
            "gradient_norm_at_end": float(np.linalg.norm(grad)),
            "entropy_weight_vs_kl": 1e-3 / (2 * beta),
        }
    return out


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
    deltas = [-0.5, 0.0, 0.5] if quick else [-0.5, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5]
    t_max, beta = (150 if quick else 3000), 0.1
    bandit = make_instance("shared", **INSTANCE)
    theta_star, _ = bandit.optimal_theta(beta)
    g0, _ = regression_gradient(
        bandit, np.zeros((1, bandit.dim)), bandit.optimal_value(beta)[None], beta
    )
    clip_active = float(0.1 * np.linalg.norm(g0))
    variants = _variants(clip_active)
    res = header(
        "update",
        seeds,
        seed,
        quick,
        {
            "delta": deltas,
            "T": t_max,
            "beta1": "exact V*_beta2 + delta",
            "beta2": beta,
            "schedule": "constant",
            "step_c": 0.3,
            "start": "theta*_beta2",
            "clip_active": clip_active,
            "clip_active_rule": "0.1 * ||expected gradient at theta=0||",
            "variants": {k: v for k, v in variants.items()},
        },
    )
    v_star = np.concatenate([np.tile(bandit.optimal_value(beta) + d, (seeds, 1)) for d in deltas])
    theta0 = np.tile(theta_star, (len(v_star), 1))
    res["variants"] = {}
    for name, kw in progress(variants.items(), "update", progress_bar):
        cfg = config(beta, t_max, "constant", c=0.3, track_fisher=False, **kw)
        with np.errstate(all="ignore"):  # staleness can diverge; it is recorded
            out = run_stage2(bandit, v_star, cfg, seed=seed, theta0=theta0)
        avg = out.theta_average.reshape(len(deltas), seeds, -1)
        norms = out.norm_max.reshape(len(deltas), seeds)
        res["variants"][name] = {
            "shift": [_shift(bandit, avg[i], beta, seed + i) for i in range(len(deltas))],
            "clipped_fraction": [
                float(out.clipped.reshape(len(deltas), seeds)[i].mean()) for i in range(len(deltas))
            ],
            "final_last": [
                mean_last(out.last[i * seeds : (i + 1) * seeds, -1]) for i in range(len(deltas))
            ],
            # a seed diverged: its parameters left 100 ||theta*|| (or overflowed)
            "diverged_fraction": [
                float(np.mean(~(norms[i] < 100 * np.linalg.norm(theta_star))))
                for i in range(len(deltas))
            ],
        }
    res["entropy_exact"] = _entropy_fixed_points(bandit, 100 if quick else 3000)
    res["paper_betas"] = run_paper_betas(seeds, quick, seed, progress_bar)
    res["reference_gap"] = float(bandit.suboptimality(bandit.ref_probs, beta))
    res["headline"] = {
        name: {
            str(d): v["shift"][i]["gap"] if v["diverged_fraction"][i] == 0 else "diverged"
            for i, d in enumerate(deltas)
        }
        for name, v in res["variants"].items()
    }
    return res


def mean_last(x: np.ndarray) -> float:
    """Geometric mean of the last iterates' gaps."""
    return float(np.exp(np.log(np.maximum(x, 1e-300)).mean()))


def _entropy_panel(ax: Any, top: Any, res: dict[str, Any]) -> None:
    """The top right panel: the entropy bonus with exact gradients, per beta2."""
    from astarpo.analysis.figures import legend_below

    ent = res["entropy_exact"]
    betas = list(ent)
    y = np.arange(len(betas))
    after = [ent[b]["gap_of_fixed_point"] for b in betas]
    ax.plot(after, y, "o", color="C3", ms=7, label="3000 steps, c = 0.3")
    points = res["paper_betas"]["entropy_stationary_points"].values()
    i = betas.index("0.001")
    ax.plot([q["gap"] for q in points], [i] * len(points), "D", mfc="none", color="C4", ms=7,
            label="stationary points (L-BFGS)")  # fmt: skip
    refs = [ent[b]["reference_gap"] for b in betas]
    ax.plot(refs, y, "|", color="k", ms=14, mew=2, label=r"$\pi_{\mathrm{ref}}$")
    ax.set_yticks(y, [rf"$\beta_2={b}$" for b in betas])
    ax.set_ylim(-0.6, len(betas) - 0.4)
    ax.set(xscale="log", xlabel="gap")
    ax.margins(x=0.15)
    ax.set_title("entropy bonus\n(exact gradients)")
    handles, labels = ax.get_legend_handles_labels()
    legend_below(top, handles, labels, 1, "right")


@styled
def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Top: fixed-point shift vs delta per variant, and the entropy bonus's exact shift;
    bottom: the paper's betas (:func:`~astarpo.theory.experiments.update_paper_figure.draw`).

    Exact zeros are marked on the lower edge (a triangle), not drawn on the log axis.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.analysis.figures import errorbars, figure, legend_below, mark_zeros, save
    from astarpo.theory.experiments.update_paper_figure import draw as draw_paper_betas

    fig, placeholder = figure(1, 1, height=8.8)
    fig.delaxes(placeholder[0])
    top, bottom = fig.subfigures(2, 1, height_ratios=[4.2, 4.6])
    axes = list(top.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1.0]}))
    d = np.array(res["config"]["delta"])
    names = list(res["variants"])
    markers = "osD^v<>"
    zeros = False
    for k, name in enumerate(names):
        v = res["variants"][name]
        off = (k - (len(names) - 1) / 2) * 0.012  # side by side, so no curve hides another
        bad = np.array(v.get("diverged_fraction", [0.0] * len(d))) > 0
        gap = np.array([s["gap"] for s in v["shift"]], dtype=float)
        lo = np.array([s["lo"] for s in v["shift"]], dtype=float)
        hi = np.array([s["hi"] for s in v["shift"]], dtype=float)
        ok = ~bad & (gap > 0)
        errorbars(
            axes[0],
            d[ok] + off,
            gap[ok],
            lo[ok],
            hi[ok],
            fmt=markers[k] + "-",
            ms=4,
            capsize=2,
            color=f"C{k}",
            label=name.replace("scripts (", "scripts\n("),
            lw=1.0,
        )
        zeros |= mark_zeros(axes[0], d[~bad], gap[~bad], f"C{k}", off)
        for x in d[bad]:
            axes[0].plot(
                [x + off],
                [1.03],
                "x",
                color=f"C{k}",
                ms=8,
                transform=axes[0].get_xaxis_transform(),
                clip_on=False,
            )
    axes[0].set(yscale="log", xlabel=r"$\delta = \hat V^* - V^*_{\beta_2}$", ylabel="shift (gap)")
    axes[0].set_title(
        "fixed-point shift [95%]; ▼ exact 0, × diverged"
        if zeros
        else "fixed-point shift [95%]; × diverged",
        pad=16,
    )
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(top, handles, labels, 2, "left")
    _entropy_panel(axes[1], top, res)
    top.suptitle(rf"$\beta_2 = 0.1$, constant offsets $\delta$, T = {res['config']['T']}")
    p = res["paper_betas"]
    draw_paper_betas(bottom, p)
    bottom.suptitle(
        rf"the paper's betas ($\beta_1 = 0.5$, $\beta_2 = 10^{{-3}}$), T = {p['config']['T']}"
    )
    return save(fig, path, f"update: {res['n_seeds']} seeds", strict=True)
