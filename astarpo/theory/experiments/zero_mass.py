r"""Contexts the reference never solves, with and without transfer from solvable ones.

Part of ``coverage``. In this policy class (:math:`\pi_\theta \propto \pi_{ref}\,e^{\theta^\top
\phi}`) an action with exactly zero reference mass keeps zero mass under every policy, and
:math:`\pi^*_\beta` gives it none either: at :math:`v_{ref} = 0` exactly the hard contexts have
nothing to learn (``coverage``'s last row). A language model's softmax is never exactly zero,
so the hard contexts here put :math:`\varepsilon = 10^{-8}` of reference mass on their correct
actions: N = 16 samples find it with probability :math:`1.6\cdot 10^{-7}` (the Stage 1 hits on
those contexts are counted and recorded), yet with :math:`\beta_1 = \beta_2 = 0.05` the
optimum :math:`\pi^* \propto \pi_{ref} e^{r/\beta}` puts :math:`\varepsilon e^{20}/(1 +
\varepsilon e^{20}) \approx 0.83` on them: there is a gap to close.

Two instances of the default shape (32 contexts, the first 4 hard): ``transfer`` (the
``shared`` family: 8 features shared by every context, so what the solvable contexts teach
moves the hard ones) and ``no_transfer`` (``tabular``: one-hot features). Methods at equal
samples, each with its own c tuned over ``TUNE_C`` by the final gap over all contexts:
A*-PO with :math:`\hat V^*`, with the exact :math:`V^*`, with the filter, and PG (G = 4).

Verdict per method on the hard contexts, from the 95% Student-t interval [lo, hi] of the mean
final hard-context gap over seeds, against the reference's gap g_ref there: "leaves the gap"
if lo >= 0.9 g_ref, "closes it" if hi <= 0.1 g_ref, "partly" otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.experiments.common import INSTANCE
from astarpo.theory.experiments.tuning import astarpo_runs, best_c, final_by_c, pg_runs
from astarpo.theory.instances import hard_contexts, make_instance, radius_for
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.streams import STAGE1, generators
from astarpo.theory.tracking import Stage2Result

__all__ = ["EPSILON", "INSTANCES", "METHODS", "plot_instance", "run_zero_mass", "verdict"]

#: Reference mass on each hard context's correct actions (in total).
EPSILON = 1e-8
#: Instance name -> family of :func:`make_instance`.
INSTANCES = {"transfer": "shared", "no_transfer": "tabular"}
#: The methods, in plotting order (the first three are A*-PO variants).
METHODS = ("estimated", "exact", "filter", "pg")


def verdict(ci: dict[str, Any], reference_gap: float) -> str:
    """The rule of the module docstring on an arithmetic ``mean_ci`` of the hard-context gap."""
    lo, hi = float(np.ravel(ci["lo"])[0]), float(np.ravel(ci["hi"])[0])
    if lo >= 0.9 * reference_gap:
        return "leaves the gap"
    if hi <= 0.1 * reference_gap:
        return "closes it"
    return "partly"


def _summary(
    bandit: LogLinearBandit, run: Stage2Result, sl: slice, hard: np.ndarray, ref_gap: float
) -> dict[str, Any]:
    correct = (bandit.policy(run.theta[sl]) * bandit.rewards).sum(-1)  # [S, X]
    gap_hard = mean_ci(run.context_last[sl, -1][:, hard].mean(-1, keepdims=True))
    return {
        "gap": mean_ci(run.last[sl, -1:]),
        "gap_hard": gap_hard,
        "hard_curve": mean_ci(run.context_last[sl][:, :, hard].mean(-1)),
        "steps": run.steps.tolist(),
        "correct_mass_hard": mean_ci(correct[:, hard].mean(-1, keepdims=True)),
        "verdict": verdict(gap_hard, ref_gap),
    }


def _instance(
    family: str, beta: float, t_max: int, n: int, seeds: int, seed: int, grid: tuple[float, ...]
) -> dict[str, Any]:
    bandit = make_instance(family, **{**INSTANCE, "v_ref": EPSILON})
    hard = hard_contexts(bandit.n_contexts)
    v_star, solved = estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds))
    exact = np.tile(bandit.optimal_value(beta), (seeds, 1))
    radius = radius_for(bandit, beta)
    ones = np.ones_like(v_star)
    astar = astarpo_runs(
        bandit,
        np.concatenate([v_star, exact, v_star]),
        beta,
        t_max,
        radius,
        seed,
        grid,
        weights=np.concatenate([ones, ones, solved.astype(float)]),
    )
    pg = pg_runs(bandit, beta, t_max, n, 4, radius, seeds, seed, grid)
    ref_ctx = bandit.context_suboptimality(bandit.ref_probs, beta)
    ref_gap = float(ref_ctx[hard].mean())
    opt_correct = (bandit.optimal_policy(beta) * bandit.rewards).sum(-1)
    row: dict[str, Any] = {
        "family": family,
        "reference_gap_hard": ref_gap,
        "reference_gap": float(ref_ctx @ bandit.context_probs),
        "reference_correct_mass_hard": float(bandit.solve_rate()[hard].mean()),
        "optimal_correct_mass_hard": float(opt_correct[hard].mean()),
        "v_star_hard": float(bandit.optimal_value(beta)[hard].mean()),
        "v_hat_hard_max": float(v_star[:, hard].max()),
        "stage1_hard_contexts_solved": int(solved[:, hard].sum()),
        "stage1_hard_draws": int(seeds * len(hard) * n),
        "methods": {},
    }
    for i, name in enumerate(METHODS[:3]):
        sl = slice(i * seeds, (i + 1) * seeds)
        c = best_c(astar, sl)
        row["methods"][name] = {
            "c": c,
            "final_by_c": final_by_c(astar, sl),
            **_summary(bandit, astar[c], sl, hard, ref_gap),
        }
    c = best_c(pg)
    row["methods"]["pg"] = {
        "c": c,
        "final_by_c": final_by_c(pg),
        **_summary(bandit, pg[c], slice(None), hard, ref_gap),
    }
    return row


def run_zero_mass(
    seeds: int, quick: bool, seed: int, grid: tuple[float, ...], n: int = 16
) -> dict[str, Any]:
    """Both instances, every method tuned (see the module docstring); a JSON-ready dict.

    Args:
        seeds: S.
        quick: T = 120 instead of 2000.
        seed: Base seed.
        grid: The step constants c each method is tuned over.
        n: Stage 1's N (PG, G = 4, gets (T + N) / 4 rounds).
    """
    beta, t_max = 0.05, (120 if quick else 2000)
    out: dict[str, Any] = {
        "epsilon": EPSILON,
        "beta1": beta,
        "beta2": beta,
        "T": t_max,
        "n_samples": n,
        "pg_group_size": 4,
        "tune_c": list(grid),
        "verdict_rule": "leaves the gap if lo >= 0.9 g_ref; closes it if hi <= 0.1 g_ref; "
        "partly otherwise ([lo, hi]: 95% Student-t interval of the mean final hard gap)",
        "instances": {},
    }
    for name, family in INSTANCES.items():
        out["instances"][name] = _instance(family, beta, t_max, n, seeds, seed, grid)
    return out


#: Method -> (label, colour, line style) in :func:`plot_instance`.
_STYLE = {
    "estimated": (r"A*-PO $\hat V^*$", "tab:blue", "-"),
    "exact": (r"A*-PO exact $V^*$", "tab:green", "--"),
    "filter": ("A*-PO filter", "tab:purple", "-."),
    "pg": ("PG, $G=4$", "tab:orange", ":"),
}


def plot_instance(ax: Any, res: dict[str, Any], name: str) -> None:
    """The hard contexts' gap along the run, by samples per context, one curve per method.

    Args:
        ax: A matplotlib axes.
        res: The dict of :func:`run_zero_mass`.
        name: A key of ``INSTANCES``.
    """
    from astarpo.analysis.figures import band, log_y_labels, mark_zeros

    inst = res["instances"][name]
    n, g = res["n_samples"], res["pg_group_size"]
    ref = inst["reference_gap_hard"]
    for method, (label, colour, ls) in _STYLE.items():
        d = inst["methods"][method]
        x = np.array(d["steps"]) * g if method == "pg" else np.array(d["steps"]) + n
        label = f"{label}, $c={d['c']:g}$"
        if np.all(np.asarray(d["hard_curve"]["gmean"], dtype=float) == ref):
            label += r" (all $= \pi_{ref}$)"  # hidden under the reference's line
        band(ax, x, d["hard_curve"], label, color=colour, ls=ls)
        mark_zeros(ax, x, d["hard_curve"]["gmean"], colour)
    ax.axhline(ref, color="k", ls=":", lw=1.0, label=r"$\pi_{ref}$")
    ax.set(xscale="log", yscale="log", xlabel="samples per context", ylabel="gap on hard contexts")
    ax.set_title(name.replace("_", " "))
    log_y_labels(ax)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
