r"""Contexts the reference never solves, with and without transfer from solvable ones.

Part of ``coverage``. In this policy class (:math:`\pi_\theta \propto \pi_{ref}\,e^{\theta^\top
\phi}`) an action with exactly zero reference mass keeps zero mass under every policy, and
:math:`\pi^*_\beta` gives it none either: at :math:`v_{ref} = 0` exactly the hard contexts have
nothing to learn (``coverage``'s last row). A language model's softmax is never exactly zero,
so the hard contexts here put :math:`\varepsilon = 10^{-8}` of reference mass on their correct
actions: N = 16 samples find it with probability :math:`1.6\cdot 10^{-7}` (the Stage 1 hits on
those contexts are counted and recorded), yet the optimum :math:`\pi^* \propto \pi_{ref}
e^{r/\beta}` puts :math:`\varepsilon e^{1/\beta}/(1 - \varepsilon + \varepsilon e^{1/\beta})` on
them: about 0.83 at :math:`\beta = 0.05` and 1 up to :math:`e^{-981}` at the paper's
:math:`\beta = 10^{-3}`, where :math:`V^* = \beta\log(1 - \varepsilon + \varepsilon e^{1/\beta})
\approx 1 + \beta\ln\varepsilon \approx 0.98` while :math:`\hat V^* = 0`: there is a gap to
close. The experiment runs at each :math:`\beta_1 = \beta_2` of ``betas`` (default
:data:`BETAS`), everything else equal; every value of :math:`e^{1/\beta}` is taken in the log
domain (log-sum-exp), so :math:`1/\beta = 1000` does not overflow.

Two instances of the default shape (32 contexts, the first 4 hard): ``transfer`` (the
``shared`` family: 8 features shared by every context, so what the solvable contexts teach
moves the hard ones) and ``no_transfer`` (``tabular``: one-hot features). Methods at equal
samples, each with its own c tuned over ``TUNE_C`` by the final gap over all contexts (per
beta and instance; at beta = 1e-3 the grid also holds :data:`SMALL_BETA_C`, since there every
c of ``TUNE_C`` makes the first steps greedy, as ``small-beta`` shows): A*-PO with
:math:`\hat V^*`, with the exact :math:`V^*`, with the filter, and PG (G = 4). Each method's
final hard-context gap is also recorded at every c of the grid (``hard_by_c``), so that the
methods can be compared at equal c.

Verdict per method on the hard contexts, from the 95% Student-t interval [lo, hi] of the mean
final hard-context gap over seeds, against the reference's gap g_ref there: "leaves the gap"
if lo >= 0.9 g_ref, "closes it" if hi <= 0.1 g_ref, "partly" otherwise.
"""

from __future__ import annotations

import time
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

__all__ = [
    "BETAS",
    "EPSILON",
    "INSTANCES",
    "METHODS",
    "RAY_S",
    "SMALL_BETA_C",
    "beta_key",
    "grid_for",
    "on_ray",
    "plot_instance",
    "ray",
    "run_zero_mass",
    "verdict",
]

#: Reference mass on each hard context's correct actions (in total).
EPSILON = 1e-8
#: The KL strengths run (beta1 = beta2 = beta): the former 0.05 and the paper's 1e-3.
BETAS = (0.05, 1e-3)
#: Step constants added below the grid where beta <= SMALL_BETA: at beta2 = 1e-3 every c of
#: ``TUNE_C`` makes the first steps greedy (``small-beta``: c = 0.01 does best there).
SMALL_BETA_C = (0.001, 0.003, 0.01, 0.03, 0.1)
SMALL_BETA = 1e-2
#: Instance name -> family of :func:`make_instance`.
INSTANCES = {"transfer": "shared", "no_transfer": "tabular"}
#: The methods, in plotting order (the first three are A*-PO variants).
METHODS = ("estimated", "exact", "filter", "pg")


def beta_key(beta: float) -> str:
    """The key of ``beta`` in ``by_beta`` of :func:`run_zero_mass` (``"0.05"``, ``"0.001"``)."""
    return f"{beta:g}"


def grid_for(beta: float, grid: tuple[float, ...]) -> tuple[float, ...]:
    """The c grid at ``beta``: ``grid``, with :data:`SMALL_BETA_C` below it if beta <= 1e-2."""
    if beta > SMALL_BETA:
        return tuple(grid)
    return tuple(sorted({*SMALL_BETA_C, *grid}))


def verdict(ci: dict[str, Any], reference_gap: float) -> str:
    """The rule of the module docstring on an arithmetic ``mean_ci`` of the hard-context gap."""
    lo, hi = float(np.ravel(ci["lo"])[0]), float(np.ravel(ci["hi"])[0])
    if lo >= 0.9 * reference_gap:
        return "leaves the gap"
    if hi <= 0.1 * reference_gap:
        return "closes it"
    return "partly"


def _hard_gap(run: Stage2Result, sl: slice, hard: np.ndarray) -> dict[str, Any]:
    """``mean_ci`` over seeds ``sl`` of the final gap averaged over the hard contexts."""
    return mean_ci(run.context_last[sl, -1][:, hard].mean(-1, keepdims=True))


def _hard_by_c(runs: dict[float, Stage2Result], sl: slice, hard: np.ndarray) -> dict[str, Any]:
    return {str(c): _hard_gap(runs[c], sl, hard) for c in sorted(runs)}


def _summary(
    bandit: LogLinearBandit, run: Stage2Result, sl: slice, hard: np.ndarray, ref_gap: float
) -> dict[str, Any]:
    correct = (bandit.policy(run.theta[sl]) * bandit.rewards).sum(-1)  # [S, X]
    gap_hard = _hard_gap(run, sl, hard)
    return {
        "gap": mean_ci(run.last[sl, -1:]),
        "gap_hard": gap_hard,
        "hard_curve": mean_ci(run.context_last[sl][:, :, hard].mean(-1)),
        "steps": run.steps.tolist(),
        "correct_mass_hard": mean_ci(correct[:, hard].mean(-1, keepdims=True)),
        "verdict": verdict(gap_hard, ref_gap),
        "final_gap_by_seed": run.last[sl, -1].tolist(),
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
        "ray": ray(bandit, beta, hard),
        "methods": {},
    }
    for i, name in enumerate(METHODS[:3]):
        sl = slice(i * seeds, (i + 1) * seeds)
        c = best_c(astar, sl)
        row["methods"][name] = {
            "c": c,
            "final_by_c": final_by_c(astar, sl),
            "hard_by_c": _hard_by_c(astar, sl, hard),
            **_summary(bandit, astar[c], sl, hard, ref_gap),
        }
    c = best_c(pg)
    row["methods"]["pg"] = {
        "c": c,
        "final_by_c": final_by_c(pg),
        "hard_by_c": _hard_by_c(pg, slice(None), hard),
        **_summary(bandit, pg[c], slice(None), hard, ref_gap),
    }
    for d in row["methods"].values():
        predicted = on_ray(row["ray"], np.asarray(d["final_gap_by_seed"]))
        d["gap_hard_on_ray"] = mean_ci(predicted[:, None])
    return row


def run_zero_mass(
    seeds: int,
    quick: bool,
    seed: int,
    grid: tuple[float, ...],
    n: int = 16,
    betas: tuple[float, ...] = BETAS,
) -> dict[str, Any]:
    """Both instances at every beta, every method tuned (see the module docstring).

    Args:
        seeds: S.
        quick: T = 120 instead of 2000.
        seed: Base seed.
        grid: The step constants c each method is tuned over (at beta <= 1e-2 extended by
            :data:`SMALL_BETA_C`, see :func:`grid_for`; each beta records its own ``tune_c``).
        n: Stage 1's N (PG, G = 4, gets (T + N) / 4 rounds).
        betas: The values of beta1 = beta2, each run on both instances.

    Returns:
        A JSON-ready dict: the settings, and ``by_beta[beta_key(beta)]`` with ``beta1``,
        ``beta2``, ``instances`` (one row per instance of ``INSTANCES``) and the wall and CPU
        seconds that beta took (``runtime_s``, ``cpu_s``).
    """
    t_max = 120 if quick else 2000
    out: dict[str, Any] = {
        "epsilon": EPSILON,
        "betas": [float(b) for b in betas],
        "T": t_max,
        "n_samples": n,
        "pg_group_size": 4,
        "tune_c": list(grid),
        "verdict_rule": "leaves the gap if lo >= 0.9 g_ref; closes it if hi <= 0.1 g_ref; "
        "partly otherwise ([lo, hi]: 95% Student-t interval of the mean final hard gap)",
        "by_beta": {},
    }
    for beta in betas:
        wall, cpu = time.perf_counter(), time.process_time()
        cs = grid_for(beta, grid)
        instances = {
            name: _instance(family, beta, t_max, n, seeds, seed, cs)
            for name, family in INSTANCES.items()
        }
        out["by_beta"][beta_key(beta)] = {
            "beta1": float(beta),
            "beta2": float(beta),
            "tune_c": list(cs),
            "instances": instances,
            "runtime_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(time.process_time() - cpu, 2),
        }
    return out


#: The points s of the segment from the reference (0) to theta* (1) where :func:`ray` evaluates
#: the gaps: uniform, geometric from 1e-3 (at beta = 1e-3 the hard contexts' correct mass
#: reaches 1/2 at s = beta ln(1/eps) = 0.018) and geometric towards 1.
RAY_S = np.unique(
    np.concatenate(
        [
            np.linspace(0.0, 1.0, 101),
            np.geomspace(1e-3, 1.0, 121),
            1.0 - np.geomspace(1e-4, 0.5, 41),
        ]
    )
)


def ray(bandit: LogLinearBandit, beta: float, hard: np.ndarray) -> dict[str, Any]:
    r"""The gaps along the segment :math:`\theta = s\,\theta^*_\beta`, :math:`s \in [0, 1]`.

    On a realizable instance every method's expected update has its fixed point at
    :math:`\theta^*` (docs/theory.md, the zero-mass derivation); this is the path a run would
    take if the shared parameter moved straight there. Returns the grid ``s`` (:data:`RAY_S`),
    the gap over all contexts, the mean gap on the hard contexts (both clipped at 0 from below:
    rounding) and their mass on correct actions, each ``[len(RAY_S)]``.
    """
    theta, _ = bandit.optimal_theta(beta)
    s = RAY_S
    pol = bandit.policy(s[:, None] * theta)  # [K, X, Y]
    ctx = np.maximum(bandit.context_suboptimality(pol, beta), 0.0)  # [K, X]
    return {
        "s": s.tolist(),
        "gap": (ctx @ bandit.context_probs).tolist(),
        "gap_hard": ctx[:, hard].mean(-1).tolist(),
        "correct_mass_hard": (pol * bandit.rewards).sum(-1)[:, hard].mean(-1).tolist(),
    }


def on_ray(path: dict[str, Any], gaps: np.ndarray) -> np.ndarray:
    """The hard-context gap at the point of ``path`` (:func:`ray`) whose overall gap is ``gaps``.

    The overall gap falls monotonically along the segment; each value of ``gaps`` (one per
    seed) is located on it by interpolation in log gap, clipped to the segment's ends.
    """
    gap = np.minimum.accumulate(np.asarray(path["gap"], dtype=float))  # rounding: monotone
    g = np.log(np.maximum(gap, 1e-300))[::-1]  # increasing
    s = np.interp(np.log(np.maximum(gaps, 1e-300)), g, np.asarray(path["s"])[::-1])
    return np.interp(s, path["s"], path["gap_hard"])


#: Method -> (label, colour, line style) in :func:`plot_instance`.
_STYLE = {
    "estimated": (r"A*-PO $\hat V^*$", "tab:blue", "-"),
    "exact": (r"A*-PO exact $V^*$", "tab:green", "--"),
    "filter": ("A*-PO filter", "tab:purple", "-."),
    "pg": ("PG, $G=4$", "tab:orange", ":"),
}


def plot_instance(ax: Any, res: dict[str, Any], name: str, beta: str) -> None:
    """The hard contexts' gap along the run, by samples per context, one curve per method.

    Args:
        ax: A matplotlib axes.
        res: The dict of :func:`run_zero_mass`.
        name: A key of ``INSTANCES``.
        beta: A key of ``res["by_beta"]`` (see :func:`beta_key`).
    """
    from astarpo.analysis.figures import band, log_y_labels, mark_zeros

    inst = res["by_beta"][beta]["instances"][name]
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
    ax.set_title(rf"{name.replace('_', ' ')}, $\beta = {beta}$")
    log_y_labels(ax)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
