r"""``coverage``: what happens as :math:`v_{ref} = \min_x p(x)` goes to 0, on two instance families.

``shared`` (d = 8 features shared by every context: the hard contexts can learn from the easy
ones) and ``tabular`` (one-hot features: they cannot). One instance per family and
:math:`v_{ref}`; the first X/8 contexts are the hard ones (:math:`p(x) = v_{ref}` by
construction). :math:`\beta_1 = \beta_2 = 0.1`, N = 16, T = 2000 steps of :math:`c/\sqrt t` OGD,
projected on :math:`2\|\theta^*\|`. Four runs per setting: :math:`\hat V^*` from Stage 1, the
exact :math:`V^*`, the filter (contexts whose N samples are all wrong are dropped from Stage 2),
and the PG baseline (G = 4) at equal samples per context, with c = 1 like A*-PO and with its
c tuned as in ``horizon`` (over ``TUNE_C``, by the final gap over all contexts; A*-PO with
:math:`\hat V^*` is tuned the same way, see :mod:`~astarpo.theory.experiments.tuning`). The
hard contexts' gap is also recorded along the run, to plot it against :math:`t \cdot v_{ref}`.
:mod:`~astarpo.theory.experiments.zero_mass` adds contexts the reference never solves, with and
without transfer, at :math:`\beta_1 = \beta_2 \in \{0.05, 10^{-3}\}`. Finally the exact MSE of
:math:`\hat V^*` on a fine grid of solve rates, with its local slope, locates the range where
it grows like :math:`1/v_{ref}^2` (if any) and where like :math:`1/v_{ref}`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.baseline import policy_gradient_baseline
from astarpo.theory.experiments.common import INSTANCE, STEP_C, config, header, progress
from astarpo.theory.experiments.horizon import TUNE_C
from astarpo.theory.experiments.tuning import (
    astarpo_runs,
    best_c,
    final_by_c,
    pg_runs,
    seed_slice,
)
from astarpo.theory.experiments.zero_mass import run_zero_mass
from astarpo.theory.fits import local_slopes
from astarpo.theory.instances import hard_contexts, make_instance, radius_for
from astarpo.theory.stage1 import estimate_values, value_estimate_error
from astarpo.theory.stage2 import run_stage2
from astarpo.theory.streams import STAGE1, generators

FAMILIES = ("shared", "tabular")
RUNS = ("estimated", "exact", "filter")


def _one(
    bandit: Any,
    v_ref: float,
    t_max: int,
    beta: float,
    n: int,
    seeds: int,
    seed: int,
    grid: tuple[float, ...] = TUNE_C,
) -> dict[str, Any]:
    hard = hard_contexts(bandit.n_contexts)
    p, rho = bandit.solve_rate(), bandit.context_probs
    bias, mse = value_estimate_error(p, n, beta, bandit.optimal_value(beta))
    v_star, solved = estimate_values(bandit, n, beta, generators(STAGE1, seed, seeds))
    exact = np.tile(bandit.optimal_value(beta), (seeds, 1))
    ones = np.ones_like(v_star)
    cfg = config(beta, t_max, radius=radius_for(bandit, beta), track_fisher=bandit.dim <= 64)
    out = run_stage2(
        bandit,
        np.concatenate([v_star, exact, v_star]),
        cfg,
        seed=seed,
        weights=np.concatenate([ones, ones, solved.astype(float)]),
    )
    pg_cfg = config(beta, (t_max + n) // 4, radius=cfg.radius, track_fisher=False)
    pg = policy_gradient_baseline(bandit, pg_cfg, 4, seeds, seed)
    ref_ctx = bandit.context_suboptimality(bandit.ref_probs, beta)
    row: dict[str, Any] = {
        "v_ref": v_ref,
        "bias_mean": float(bias @ rho),
        "bias_worst": float(bias[hard].mean()),
        "mse_mean": float(mse @ rho),
        "dropped": mean_ci(1.0 - solved.mean(-1)[:, None]),
        "reference_gap": float(ref_ctx @ rho),
        "reference_gap_hard": float(ref_ctx[hard].mean()),
        "gap": {},
        "gap_hard": {},
        "hard_curve": {},
        "steps": out.steps.tolist(),
    }
    for i, name in enumerate(RUNS):
        sl = slice(i * seeds, (i + 1) * seeds)
        row["gap"][name] = mean_ci(out.last[sl, -1:])
        row["gap_hard"][name] = mean_ci(out.context_last[sl, -1][:, hard].mean(-1, keepdims=True))
        row["hard_curve"][name] = mean_ci(out.context_last[sl][:, :, hard].mean(-1))
    row["gap"]["pg"] = mean_ci(pg.last[:, -1:])
    row["gap_hard"]["pg"] = mean_ci(pg.context_last[:, -1][:, hard].mean(-1, keepdims=True))
    c1, radius = STEP_C["inverse_sqrt"], radius_for(bandit, beta)
    tuned = {
        "estimated": astarpo_runs(
            bandit,
            v_star,
            beta,
            t_max,
            radius,
            seed,
            grid,
            known={c1: seed_slice(out, slice(0, seeds))},
        ),
        "pg": pg_runs(bandit, beta, t_max, n, 4, radius, seeds, seed, grid, known={c1: pg}),
    }
    row["tuned_c"], row["final_by_c"] = {}, {}
    for name, runs in tuned.items():
        c = best_c(runs)
        row["tuned_c"][name], row["final_by_c"][name] = c, final_by_c(runs)
        row["gap"][f"{name}_tuned"] = mean_ci(runs[c].last[:, -1:])
        row["gap_hard"][f"{name}_tuned"] = mean_ci(
            runs[c].context_last[:, -1][:, hard].mean(-1, keepdims=True)
        )
        row["hard_curve"][f"{name}_tuned"] = mean_ci(runs[c].context_last[:, :, hard].mean(-1))
        row[f"{name}_tuned_steps"] = runs[c].steps.tolist()
    return row


def _runs(x: np.ndarray, sel: np.ndarray) -> list[list[float]]:
    """The contiguous runs of ``x[sel]`` as ``[first, last]`` pairs."""
    runs: list[list[float]] = []
    for i in np.nonzero(sel)[0]:
        if runs and sel[i - 1] and i > 0:
            runs[-1][1] = float(x[i])
        else:
            runs.append([float(x[i]), float(x[i])])
    return runs


def _two_action(v: np.ndarray) -> LogLinearBandit:
    """One context per solve rate ``v``: a wrong action (1 - v) and a correct one (v)."""
    ref = np.stack([1.0 - v, v], -1)
    rewards = np.tile([0.0, 1.0], (len(v), 1))
    return LogLinearBandit(np.zeros((len(v), 2, 1)), rewards, ref)


def value_error_regimes(
    ns: tuple[int, ...] = (16, 256), beta1s: tuple[float, ...] = (0.1, 0.5)
) -> dict[str, Any]:
    """Exact MSE of V̂* for one context with solve rate v, v from 1e-5 to 0.5, and local slopes.

    Returns, per (N, beta1): the grid, the MSE, the local slopes d log MSE / d log v and the
    v intervals (contiguous runs of grid midpoints) where the local slope lies within 0.25 of
    -2 and of -1.
    """
    v = np.logspace(-5, np.log10(0.5), 81)
    out: dict[str, Any] = {"v": v.tolist(), "cases": []}
    for n in ns:
        for b1 in beta1s:
            v_true = _two_action(v).optimal_value(b1)  # V*_beta1 of a context with rate v
            _, mse = value_estimate_error(v, n, b1, v_true)
            sl = np.array(local_slopes(v, mse))
            mid = np.sqrt(v[1:] * v[:-1])

            def where(target: float, sl: np.ndarray = sl, mid: np.ndarray = mid) -> list:
                return _runs(mid, np.abs(sl - target) <= 0.25)

            out["cases"].append(
                {
                    "n": n,
                    "beta1": b1,
                    "mse": mse.tolist(),
                    "local_slopes": sl.tolist(),
                    "range_slope_-2": where(-2.0),
                    "range_slope_-1": where(-1.0),
                }
            )
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
    v_refs = [0.01, 1e-3, 0.0] if quick else [0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 1e-3, 1e-4, 0.0]
    t_max, beta, n = (120 if quick else 2000), 0.1, 16
    grid = TUNE_C[1:3] if quick else TUNE_C
    instance = {**INSTANCE, "v_ref": "swept (config v_ref)"}
    res = header(
        "coverage",
        seeds,
        seed,
        quick,
        {
            "v_ref": v_refs,
            "families": list(FAMILIES),
            "T": t_max,
            "beta1": beta,
            "beta2": beta,
            "n_samples": n,
            "schedule": "inverse_sqrt",
            "step_c": STEP_C["inverse_sqrt"],
            "hard_contexts": hard_contexts(INSTANCE["n_contexts"]).tolist(),
            "pg_group_size": 4,
            "tune_c": list(grid),
            "tune_rule": "per method and setting, the c with the smallest final gap over all "
            "contexts (geometric mean over seeds)",
        },
        instance=instance,
    )
    res["families"] = {}
    for fam in FAMILIES:
        rows = [
            _one(
                make_instance(fam, **{**INSTANCE, "v_ref": v}), v, t_max, beta, n, seeds, seed, grid
            )
            for v in progress(v_refs, f"coverage {fam}", progress_bar)
        ]
        res["families"][fam] = rows
    res["value_error_regimes"] = value_error_regimes()
    res["zero_mass"] = run_zero_mass(seeds, quick, seed, grid, n)
    res["headline"] = {
        fam: {
            str(r["v_ref"]): {
                "hard_gap_estimated": r["gap_hard"]["estimated"]["gmean"][0],
                "hard_gap_exact": r["gap_hard"]["exact"]["gmean"][0],
                "hard_gap_pg": r["gap_hard"]["pg"]["gmean"][0],
                "hard_reference_gap": r["reference_gap_hard"],
                "hard_gap_pg_tuned": r["gap_hard"]["pg_tuned"]["gmean"][0],
                "hard_gap_estimated_tuned": r["gap_hard"]["estimated_tuned"]["gmean"][0],
                "pg_c": r["tuned_c"]["pg"],
                "estimated_c": r["tuned_c"]["estimated"],
            }
            for r in rows
        }
        for fam, rows in res["families"].items()
    }
    res["headline"]["zero_mass"] = {
        beta: {
            name: {m: {"c": d["c"], "verdict": d["verdict"]} for m, d in inst["methods"].items()}
            for name, inst in run["instances"].items()
        }
        for beta, run in res["zero_mass"]["by_beta"].items()
    }
    return res


def plot(res: dict[str, Any], path: str | Path) -> Path:
    """Draw ``res`` (see :func:`astarpo.theory.experiments.coverage_figure.draw`).

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG.

    Returns:
        ``path``.
    """
    from astarpo.theory.experiments.coverage_figure import draw

    return draw(res, path)
