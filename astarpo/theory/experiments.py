r"""The four experiments that test Theorem 1 on exact bandits; each returns a plain dict.

* :func:`horizon` -- suboptimality vs T for three step-size schedules (and a PG baseline).
* :func:`samples` -- final suboptimality and the exact error of :math:`\hat V^*` vs N.
* :func:`coverage` -- what happens as :math:`v_{ref} = \min_x p(x)` goes to 0.
* :func:`two_beta` -- where Stage 2 goes when :math:`\beta_1 \neq \beta_2`.

Every dict holds the config, the seeds, the package version and every number plotted, ready
for ``json.dump``. Step sizes are given as ``c`` and used as ``c / beta2**2`` (the loss is
quadratic in :math:`\beta_2\theta`), so one ``c`` suits every ``beta2``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from astarpo.theory.algorithm import (
    Stage2Config,
    estimate_values,
    policy_gradient_baseline,
    run_stage2,
    seed_generators,
    value_estimate_error,
)
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.stats import fit_slope, mean_ci

__all__ = ["EXPERIMENTS", "coverage", "horizon", "samples", "two_beta"]

#: The default instance: X contexts, Y actions, d features, realizable, v_ref = 0.1.
INSTANCE: dict[str, Any] = {"n_contexts": 32, "n_actions": 16, "dim": 8, "v_ref": 0.1, "seed": 0}
#: Step-size constants c (used as c / beta2**2), chosen once on the default instance.
STEP_C = {"constant": 0.3, "inverse_sqrt": 1.0, "inverse": 1.0}


def _progress(items: Iterable[Any], desc: str, show: bool) -> Iterable[Any]:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(list(items), desc=desc, leave=False)


def _header(
    name: str, seeds: int, seed: int, quick: bool, config: dict[str, Any]
) -> dict[str, Any]:
    from astarpo import __version__

    return {
        "experiment": name,
        "version": __version__,
        "quick": quick,
        "seeds": list(range(seeds)),
        "base_seed": seed,
        "seed_scheme": "seed s draws from numpy default_rng([base_seed * 1000 + offset, s])",
        "n_seeds": seeds,
        "config": {"instance": dict(INSTANCE), **config},
    }


#: two-beta: c per beta2 for c/sqrt(t) steps. With c = 1 at beta2 = 1e-3 the stochastic run
#: collapses onto greedy policies (see ``step_sweep`` in its results), so it uses 0.01.
TWO_BETA_C = {1e-3: 0.01, 0.1: 1.0, 1.0: 1.0}


def _cfg(
    beta2: float, t: int, schedule: str, mode: str = "stochastic", c: float | None = None
) -> Stage2Config:
    c = STEP_C[schedule] if c is None else c
    return Stage2Config(beta2, t, c / beta2**2, schedule, mode=mode)  # type: ignore[arg-type]


def horizon(seeds: int = 8, quick: bool = False, seed: int = 0, progress: bool = False) -> dict:
    """Suboptimality of the last and average iterate vs T, for the three OGD schedules.

    Default: T = 10^4 (4 decades), N = 16, beta1 = beta2 = 0.1; slopes fitted for t >= T/100.
    A GRPO-like baseline (G = 4) on the same bandit is reported against samples per context.
    ``quick``: T = 1000 and slopes for t >= 10.
    """
    t_max, beta, n, group = (1000, 0.1, 16, 4) if quick else (10_000, 0.1, 16, 4)
    x_min = 10.0 if quick else t_max / 100
    bandit = LogLinearBandit.random(**INSTANCE)
    res = _header(
        "horizon",
        seeds,
        seed,
        quick,
        {
            "T": t_max,
            "n_samples": n,
            "beta1": beta,
            "beta2": beta,
            "step_c": STEP_C,
            "learning_rate": "c / beta2**2",
            "slope_fit_t_min": x_min,
            "pg_group_size": group,
        },
    )
    v_hat, _ = estimate_values(bandit, n, beta, seed_generators(seed * 1000, seeds))
    res["curves"], res["slopes"] = {}, {}
    for sched in _progress(STEP_C, "horizon", progress):
        out = run_stage2(bandit, v_hat, _cfg(beta, t_max, sched), seed=seed * 1000 + 1)
        res["steps"] = out.steps.tolist()
        res["curves"][sched] = {"last": mean_ci(out.last), "average": mean_ci(out.average)}
        res["slopes"][sched] = {
            "last": fit_slope(out.steps, out.last, x_min),
            "average": fit_slope(out.steps, out.average, x_min),
        }
        if sched == "inverse_sqrt":
            astar = out
    pg = policy_gradient_baseline(
        bandit, _cfg(beta, (t_max + n) // group, "inverse_sqrt"), group, seeds, seed * 1000 + 2
    )
    res["baseline"] = {
        "note": "samples per context: A*-PO N + t, PG G * t; both c/sqrt(t) steps",
        "astarpo_samples": (astar.steps + n).tolist(),
        "astarpo": mean_ci(astar.last),
        "pg_samples": (pg.steps * group).tolist(),
        "pg": mean_ci(pg.last),
    }
    res["reference_gap"] = float(bandit.suboptimality(bandit.ref_probs, beta))
    return res


def samples(seeds: int = 8, quick: bool = False, seed: int = 0, progress: bool = False) -> dict:
    r"""Final suboptimality vs N with beta1 = beta2 and beta1 != beta2, and the exact V̂* error.

    Default: N in 1, 2, 4, ..., 256; beta2 = 0.1; beta1 in {0.1, 0.5}; T = 2000 rounds of
    c/sqrt(t) OGD. The exact bias and MSE of :math:`\hat V^*` (against :math:`V^*_{\beta_1}`
    and :math:`V^*_{\beta_2}`) come from the binomial law of the number of correct samples.
    """
    ns = [1, 4, 16, 64] if quick else [2**k for k in range(9)]
    t_max, beta2, beta1s = (300 if quick else 2000), 0.1, [0.1, 0.5]
    bandit = LogLinearBandit.random(**INSTANCE)
    p, rho = bandit.solve_rate(), bandit.context_probs
    res = _header(
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
        },
    )
    res["settings"] = {}
    for b1 in _progress(beta1s, "samples", progress):
        rows = [
            estimate_values(bandit, n, b1, seed_generators(seed * 1000 + n, seeds))[0] for n in ns
        ]
        out = run_stage2(
            bandit, np.concatenate(rows), _cfg(beta2, t_max, "inverse_sqrt"), seed=seed * 1000 + 1
        )
        last = out.last[:, -1].reshape(len(ns), seeds).T  # [S, len(ns)]
        avg = out.average[:, -1].reshape(len(ns), seeds).T
        err: dict[str, dict[str, list[float]]] = {}
        for target, beta_t in (("vs_beta1", b1), ("vs_beta2", beta2)):
            v_true = bandit.optimal_value(beta_t)
            stats = [value_estimate_error(p, n, b1, v_true) for n in ns]
            err[target] = {
                "bias": [float(b @ rho) for b, _ in stats],
                "abs_bias": [float(np.abs(b) @ rho) for b, _ in stats],
                "mse": [float(m @ rho) for _, m in stats],
            }
        mse2 = np.array(err["vs_beta2"]["mse"])
        res["settings"][f"beta1={b1}"] = {
            "beta1": b1,
            "final_last": mean_ci(last),
            "final_average": mean_ci(avg),
            "value_error": err,
            "slopes": {
                "final_last": fit_slope(np.array(ns), last),
                "final_average": fit_slope(np.array(ns), avg),
                "mse_vs_beta1": fit_slope(np.array(ns), np.array(err["vs_beta1"]["mse"])[None]),
                "mse_vs_beta2": fit_slope(np.array(ns), mse2[None]),
            },
        }
    return res


def coverage(seeds: int = 8, quick: bool = False, seed: int = 0, progress: bool = False) -> dict:
    """Bias of V̂*, final gap and the effect of the filter as v_ref goes from 0.5 to 0.

    One instance per v_ref (same seed); 1/8 of the contexts have p(x) = v_ref exactly (with
    v_ref = 0 their correct answers have zero reference mass). beta1 = beta2 = 0.1, N = 16,
    c/sqrt(t) OGD for T = 2000 rounds. The filter drops the contexts whose N samples all
    have reward 0 from Stage 2 (per seed; the loss becomes the mean over the kept contexts, as
    when prompts are removed from the training set); the gap is measured on every context.
    """
    v_refs = [0.5, 0.1, 0.01, 0.0] if quick else [0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 1e-3, 1e-4, 0.0]
    t_max, beta, n = (300 if quick else 2000), 0.1, 16
    res = _header(
        "coverage",
        seeds,
        seed,
        quick,
        {
            "v_ref": v_refs,
            "T": t_max,
            "beta1": beta,
            "beta2": beta,
            "n_samples": n,
            "schedule": "inverse_sqrt",
            "step_c": STEP_C["inverse_sqrt"],
        },
    )
    keys = (
        "bias_mean",
        "bias_worst",
        "mse_mean",
        "dropped",
        "gap_nofilter",
        "gap_filter",
        "gap_hard_nofilter",
        "gap_hard_filter",
        "reference_gap",
    )
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    for v_ref in _progress(v_refs, "coverage", progress):
        bandit = LogLinearBandit.random(**{**INSTANCE, "v_ref": v_ref})
        p, rho = bandit.solve_rate(), bandit.context_probs
        bias, mse = value_estimate_error(p, n, beta, bandit.optimal_value(beta))
        v_hat, solved = estimate_values(bandit, n, beta, seed_generators(seed * 1000, seeds))
        weights = np.concatenate([np.ones_like(v_hat), solved.astype(float)])
        out = run_stage2(
            bandit,
            np.concatenate([v_hat, v_hat]),
            _cfg(beta, t_max, "inverse_sqrt"),
            seed=seed * 1000 + 1,
            weights=weights,
        )
        hard = p <= p.min()
        # per-context gap of the final last iterates on the hardest contexts
        gap_hard = bandit.context_suboptimality(bandit.policy(out.theta), beta)[:, hard].mean(-1)
        rows["bias_mean"].append(float(bias @ rho))
        rows["bias_worst"].append(float(bias[np.argmax(np.abs(bias))]))
        rows["mse_mean"].append(float(mse @ rho))
        rows["dropped"].append(mean_ci(1.0 - solved.mean(-1)[:, None]))
        rows["gap_nofilter"].append(mean_ci(out.last[:seeds, -1][:, None]))
        rows["gap_filter"].append(mean_ci(out.last[seeds:, -1][:, None]))
        rows["gap_hard_nofilter"].append(mean_ci(gap_hard[:seeds, None]))
        rows["gap_hard_filter"].append(mean_ci(gap_hard[seeds:, None]))
        rows["reference_gap"].append(float(bandit.suboptimality(bandit.ref_probs, beta)))
    res["results"] = rows
    return res


def two_beta(seeds: int = 8, quick: bool = False, seed: int = 0, progress: bool = False) -> dict:
    r"""Where Stage 2 converges with beta1 != beta2: a beta1 x beta2 grid.

    For each pair: N = 16 samples per context for :math:`\hat V^*_{\beta_1}`, T rounds of
    c/sqrt(t) OGD on the beta2 regression (stochastic), then for the last and average iterate
    :math:`E_x KL(\pi\|\pi^*_{\beta_2})`, :math:`E_x KL(\pi\|\pi^*_{\beta_1})`, the gap under
    :math:`J_{\beta_2}`, the spread of the gap over seeds and over the last half of the curve,
    and the mean squared target error :math:`E(\hat V^*_{\beta_1} - V^*_{\beta_2})^2` (the
    gradient noise at the optimum). A deterministic run (exact gradients) checks the limit.
    """
    beta1s, beta2s = [1e-3, 0.1, 0.5, 1.0, 10.0], [1e-3, 0.1, 1.0]
    t_max, n = (300 if quick else 3000), 16
    bandit = LogLinearBandit.random(**INSTANCE)
    res = _header(
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
        },
    )
    grid: list[dict[str, Any]] = []
    for b2 in _progress(beta2s, "two-beta", progress):
        v_rows = [
            estimate_values(bandit, n, b1, seed_generators(seed * 1000, seeds))[0] for b1 in beta1s
        ]
        v_all = np.concatenate(v_rows)
        cfg = _cfg(b2, t_max, "inverse_sqrt", c=TWO_BETA_C[b2])
        out = run_stage2(bandit, v_all, cfg, seed=seed * 1000 + 1)
        det = run_stage2(
            bandit,
            v_all[::seeds],
            _cfg(b2, t_max, "inverse_sqrt", "deterministic", c=TWO_BETA_C[b2]),
        )
        v2 = bandit.optimal_value(b2)
        half = out.steps >= t_max / 2
        for i, b1 in enumerate(beta1s):
            sl = slice(i * seeds, (i + 1) * seeds)
            cell: dict[str, Any] = {"beta1": b1, "beta2": b2}
            for name, theta in (("last", out.theta[sl]), ("average", out.theta_average[sl])):
                pol = bandit.policy(theta)
                cell[name] = {
                    "kl_to_opt_beta2": mean_ci(bandit.suboptimality(pol, b2)[:, None] / b2),
                    "kl_to_opt_beta1": mean_ci(bandit.suboptimality(pol, b1)[:, None] / b1),
                    "gap_beta2": mean_ci(bandit.suboptimality(pol, b2)[:, None]),
                }
            cell["gap_std_over_seeds"] = float(out.last[sl, -1].std(ddof=1)) if seeds > 1 else 0.0
            cell["curve_std_last_half"] = float(out.last[sl][:, half].std(-1).mean())
            cell["target_mse"] = float(((v_rows[i] - v2) ** 2).mean())
            cell["target_bias"] = float((v_rows[i] - v2).mean())
            pol_det = bandit.policy(det.theta[i])
            cell["deterministic"] = {
                "kl_to_opt_beta2": float(bandit.suboptimality(pol_det, b2) / b2),
                "kl_to_opt_beta1": float(bandit.suboptimality(pol_det, b1) / b1),
            }
            grid.append(cell)
    res["grid"] = grid
    # step-size sweep at the paper's beta2 = 1e-3: with V̂*_{beta1=0.5} and with the exact V*
    b2, sweep = 1e-3, []
    v_hat = estimate_values(bandit, n, 0.5, seed_generators(seed * 1000, seeds))[0]
    v_exact = np.tile(bandit.optimal_value(b2), (seeds, 1))
    for c in (1.0, 0.1, 0.01):
        out = run_stage2(
            bandit,
            np.concatenate([v_hat, v_exact]),
            _cfg(b2, t_max, "inverse_sqrt", c=c),
            seed=seed * 1000 + 1,
        )
        sweep.append(
            {
                "c": c,
                "gap_vhat_beta1_0.5": mean_ci(out.last[:seeds, -1:]),
                "gap_exact_v": mean_ci(out.last[seeds:, -1:]),
            }
        )
    res["step_sweep_beta2_1e-3"] = sweep
    res["reference_gap"] = {
        str(b): float(bandit.suboptimality(bandit.ref_probs, b)) for b in beta2s
    }
    res["kl_between_optima"] = {
        f"{b1},{b2}": float(bandit.suboptimality(bandit.optimal_policy(b2), b1) / b1)
        for b1 in beta1s
        for b2 in beta2s
    }
    return res


EXPERIMENTS = {"horizon": horizon, "samples": samples, "coverage": coverage, "two-beta": two_beta}
