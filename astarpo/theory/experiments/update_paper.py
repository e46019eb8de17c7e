r"""``update`` at the paper's own betas: what the scripts' update converges to.

:math:`\beta_2 = 10^{-3}` in the regression and Stage 1 at :math:`\beta_1 = 0.5`, whose target
:math:`V^*_{0.5}` is exact here: it adds the per-context offset
:math:`\delta(x) = V^*_{0.5}(x) - V^*_{10^{-3}}(x)` to the exact :math:`V^*_{10^{-3}}`. Three
value estimates (exact, :math:`\delta = 0`; :math:`V^*_{0.5}`, :math:`\delta(x)`; Stage 1 at
N = 8, :math:`\beta_1 = 0.5`), two updates (the plain one of the analysis; the scripts' 2
minibatch steps per batch, clip 1.0 and entropy bonus 0.001), two starts
(:math:`\theta^*_{10^{-3}}` and :math:`\pi_{\mathrm{ref}}`) and two constant step rules that the
``small-beta`` experiment found workable at :math:`10^{-3}` (:data:`STEP_RULES`). Each run is T
steps long; the parameter averages over :math:`[T/4, T/2)` and :math:`[T/2, T)` decide by
:data:`~astarpo.theory.convergence.FIXED_POINT_RULE` whether the run has reached its fixed point.

Along the path, at every evaluation point: the exact second moment of the one-sample on-policy
gradient (:func:`~astarpo.theory.variance.gradient_moments`) against Monte Carlo draws, for the
plain update (where it is the update's own gradient); for the scripts' update, the two parts of
its expected step that the proposition of docs/theory.md does not cover: the entropy term, and
the :math:`\hat V`-dependent term of the off-policy second minibatch step. With exact
gradients, the stationary points of the objective the entropy bonus adds,
:math:`J_{\beta_2} + \frac{0.001}{2\beta_2}H`, found by L-BFGS from each start.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from astarpo.analysis.stats import mean_ci
from astarpo.theory.bandit import LogLinearBandit
from astarpo.theory.convergence import (
    fixed_point_verdict,
    window_average,
    window_change,
    windows,
)
from astarpo.theory.experiments.common import INSTANCE, config, progress
from astarpo.theory.instances import make_instance
from astarpo.theory.stage1 import estimate_values
from astarpo.theory.stage2 import regression_gradient, run_stage2
from astarpo.theory.streams import PROBE, STAGE1, generators
from astarpo.theory.variance import gradient_moments, gradient_squared_norms, stratified_interval

__all__ = [
    "BETA1",
    "BETA2",
    "CHECKABLE",
    "STARTS",
    "STEP_RULES",
    "VALUES",
    "VALUE_LABEL",
    "VARIANTS",
    "entropy_stationary_points",
    "offsets",
    "run",
]

BETA1, BETA2, ENTROPY, N_STAGE1 = 0.5, 1e-3, 1e-3, 8
#: Constant step rules (c, used as c / beta2**2) from ``small-beta``: both reach gaps of about
#: 0.0015 there with Stage 1's estimate; c = 0.01 is that experiment's best with the exact V*.
STEP_RULES = {"constant, c=0.01": 0.01, "constant, c=0.001": 0.001}
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "scripts": {"minibatches": 2, "clip_norm": 1.0, "entropy": ENTROPY},
}
VALUES = ("exact", "delta(x)", "stage 1")
#: How the page and the figure name the value estimates.
VALUE_LABEL = {
    "exact": r"$\delta = 0$",
    "delta(x)": r"$\delta(x)$",
    "stage 1": "Stage 1, N = 8",
}


#: Largest share of the second moment on rarely drawn actions for which draws check the formula.
CHECKABLE = 0.05
STARTS = ("theta*", "reference")


def offsets(bandit: LogLinearBandit, beta1: float, beta2: float) -> np.ndarray:
    r""":math:`\delta(x) = V^*_{\beta_1}(x) - V^*_{\beta_2}(x)`, ``[X]``: what :math:`\beta_1` adds.

    With :math:`V^*_b(x) = b \log E_{\pi_{ref}} e^{r(x,\cdot)/b}` (exact, log-space).
    """
    return bandit.optimal_value(beta1) - bandit.optimal_value(beta2)


def _value_rows(bandit: LogLinearBandit, seeds: int, seed: int) -> dict[str, np.ndarray]:
    v2 = bandit.optimal_value(BETA2)
    stage1 = estimate_values(bandit, N_STAGE1, BETA1, generators(STAGE1, seed, seeds, N_STAGE1))
    return {
        "exact": np.tile(v2, (seeds, 1)),
        "delta(x)": np.tile(v2 + offsets(bandit, BETA1, BETA2), (seeds, 1)),
        "stage 1": stage1[0],
    }


def entropy_stationary_points(
    bandit: LogLinearBandit, beta2: float, entropy: float
) -> dict[str, dict[str, float]]:
    r"""Stationary points of :math:`J_{\beta_2} + \kappa H`, :math:`\kappa = \epsilon/(2\beta_2)`.

    In expectation the on-policy update with the entropy bonus :math:`\epsilon` is gradient
    ascent on that objective; L-BFGS on it (the library's gradient, exact over y) from
    :math:`\theta^*_{\beta_2}` and from :math:`\theta = 0` (:math:`\pi_{\mathrm{ref}}`).

    Returns:
        Start -> ``kl_to_opt`` (nats), ``gap`` (under :math:`J_{\beta_2}`), ``objective``,
        ``gradient_norm`` (of the loss at the end) and ``norm`` (:math:`\lVert\theta\rVert`).
    """
    from scipy.optimize import minimize

    kappa = entropy / (2 * beta2)
    zero_v = np.zeros((1, bandit.n_contexts))

    def entropy_of(theta: np.ndarray) -> float:
        logp = bandit.log_policy(theta[None])[0]
        plogp = np.where(bandit.support, np.exp(logp) * np.where(bandit.support, logp, 0.0), 0.0)
        return float(-plogp.sum(-1) @ bandit.context_probs)

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        gap = float(bandit.suboptimality(bandit.policy(theta[None]), beta2)[0])
        grad, _ = regression_gradient(bandit, theta[None], zero_v, beta2, entropy=entropy)
        return gap - kappa * entropy_of(theta), grad[0] / (2 * beta2)

    out = {}
    for name, start in zip(
        STARTS, (bandit.optimal_theta(beta2)[0], np.zeros(bandit.dim)), strict=True
    ):
        fit = minimize(
            fun, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-13}
        )
        gap = float(bandit.suboptimality(bandit.policy(fit.x[None]), beta2)[0])
        out[name] = {
            "kl_to_opt": gap / beta2,
            "gap": gap,
            "objective": float(-fit.fun + bandit.objective(bandit.optimal_policy(beta2), beta2)),
            "gradient_norm": float(np.linalg.norm(fit.jac) * 2 * beta2),
            "norm": float(np.linalg.norm(fit.x)),
        }
    return out


def _kl(bandit: LogLinearBandit, theta: np.ndarray) -> np.ndarray:
    """E_rho KL(pi_theta || pi*_beta2) per row, ``[S]`` (the gap over beta2)."""
    return bandit.suboptimality(bandit.policy(theta), BETA2) / BETA2


def _windows(
    bandit: LogLinearBandit, out: Any, sl: slice, t_max: int, rng: np.random.Generator
) -> dict[str, Any]:
    (a, b), (_, end) = windows(t_max)
    before = window_average(out.steps, out.average_path[sl], a, b)
    after = window_average(out.steps, out.average_path[sl], b, end)
    change = window_change(before, after, lambda th: _kl(bandit, th), rng)
    return {
        "change": change,
        "gap_last_window": [BETA2 * x for x in change["kl_after"]],
        "kl_last_window_per_seed": mean_ci(_kl(bandit, after)),
        "kl_last_iterate": mean_ci(out.last[sl, -1] / BETA2),
        "kl_last_curve": mean_ci(out.last[sl] / BETA2),
    }


def _variance_path(
    bandit: LogLinearBandit, out: Any, v_all: np.ndarray, groups: dict[str, slice], rng: Any, n: int
) -> dict[str, Any]:
    r"""Plain update: exact second moment vs draws at every evaluation point, per group.

    ``rare_share`` is the share of the second moment's per-action terms carried by actions that
    a seed's n draws expect to see less than once (:math:`n\pi_\theta(y|x) < 1`). Near
    :math:`\pi^*_{10^{-3}}` with :math:`\delta = 0` the moment is carried by rare wrong answers
    (residual about 1, against about 0 on the correct ones): where that share exceeds
    :data:`CHECKABLE`, the draws' mean misses it and is no check of the formula.
    """
    v_exact = np.broadcast_to(bandit.optimal_value(BETA2), v_all.shape)
    keys = ("formula", "noise", "noise_if_exact_v", "measured", "rare_share")
    res: dict[str, Any] = {k: {key: [] for key in keys} for k in groups}
    for k in range(len(out.steps)):
        theta = out.path[:, k]
        mom = gradient_moments(bandit, theta, v_all, BETA2, per_action=True)
        rare = n * bandit.policy(theta) < 1  # actions a seed's n draws expect to miss
        noise0 = gradient_moments(bandit, theta, v_exact, BETA2)["noise"]
        draws = gradient_squared_norms(bandit, theta, v_all, BETA2, n, rng)
        terms = mom["per_action"]
        for name, sl in groups.items():
            r = res[name]
            r["formula"].append(float(mom["second_moment"][sl].mean()))
            r["noise"].append(float(mom["noise"][sl].mean()))
            r["noise_if_exact_v"].append(float(noise0[sl].mean()))
            r["measured"].append(list(stratified_interval(draws[sl])))
            r["rare_share"].append(float(terms[sl][rare[sl]].sum() / terms[sl].sum()))
    return res


def _norm(g: np.ndarray) -> np.ndarray:
    return np.linalg.norm(g, axis=-1)


def _premise_path(
    bandit: LogLinearBandit, out: Any, v_all: np.ndarray, groups: dict[str, slice], lr: float
) -> dict[str, Any]:
    """Scripts' update: the entropy term and the V-hat term of the second step, per point.

    At an iterate theta (a round's start), the first minibatch's expected step gives theta';
    the second step's expected gradient at theta' with samples from theta depends on V-hat:
    its V-hat part is the difference from the same gradient with V-hat = V*_beta2.
    """
    x = bandit.n_contexts
    mb = [np.tile(bandit.context_probs * (np.arange(x) % 2 == m), (len(v_all), 1)) for m in (0, 1)]
    v_exact = np.tile(bandit.optimal_value(BETA2), (len(v_all), 1))
    keys = ("entropy_share", "v_hat_share")
    res: dict[str, Any] = {k: {key: [] for key in keys} for k in groups}
    for k in range(len(out.steps)):
        th = out.path[:, k]
        plain, _ = regression_gradient(bandit, th, v_all, BETA2)
        full, _ = regression_gradient(bandit, th, v_all, BETA2, entropy=ENTROPY)
        g1, _ = regression_gradient(bandit, th, v_all, BETA2, weights=mb[0], entropy=ENTROPY)
        th2 = th - lr * g1
        kw = {"weights": mb[1], "sampling_theta": th, "entropy": ENTROPY}
        g2, _ = regression_gradient(bandit, th2, v_all, BETA2, **kw)
        g2_0, _ = regression_gradient(bandit, th2, v_exact, BETA2, **kw)
        ent = _norm(full - plain) / np.maximum(_norm(full), 1e-300)
        vh = _norm(g2 - g2_0) / np.maximum(_norm(g2), 1e-300)
        for name, sl in groups.items():
            res[name]["entropy_share"].append(mean_ci(ent[sl]))
            res[name]["v_hat_share"].append(mean_ci(vh[sl]))
    return res


def _config(t_max: int, n_draws: int) -> dict[str, Any]:
    return {
        "beta1": BETA1,
        "beta2": BETA2,
        "entropy": ENTROPY,
        "n_stage1": N_STAGE1,
        "T": t_max,
        "windows": [list(w) for w in windows(t_max)],
        "step_rules": STEP_RULES,
        "schedule": "constant",
        "variants": VARIANTS,
        "starts": list(STARTS),
        "values": list(VALUES),
        "variance_draws_per_seed": n_draws,
    }


def run(seeds: int = 8, quick: bool = False, seed: int = 0, progress_bar: bool = False) -> dict:
    """Run the setting (see the module docstring); a part of ``update``'s result.

    Args:
        seeds: Number of seeds S per (start, value estimate).
        quick: The small version (seconds).
        seed: Base seed of every random stream.
        progress_bar: Show a tqdm bar over the runs.

    Returns:
        A JSON-ready dict: ``config``, ``runs`` (rule -> variant -> start -> value ->
        windows, change, curves), ``verdicts`` (rule -> variant -> value -> word, detail),
        ``variance_path`` (rule -> start -> value: plain update), ``premise_path`` (rule ->
        start -> value: scripts' update), ``entropy_stationary_points``, ``offsets`` and
        ``steps``.
    """
    start_time = time.perf_counter()
    t_max, n_draws = (200, 8) if quick else (40000, 128)
    bandit = make_instance("shared", **INSTANCE)
    theta_star = bandit.optimal_theta(BETA2)[0]
    values = _value_rows(bandit, seeds, seed)
    v_all = np.concatenate([values[v] for _ in STARTS for v in VALUES])
    theta0 = np.concatenate(
        [np.tile(t, (seeds * len(VALUES), 1)) for t in (theta_star, np.zeros(bandit.dim))]
    )
    groups = {
        (s, v): slice((i * len(VALUES) + j) * seeds, (i * len(VALUES) + j + 1) * seeds)
        for i, s in enumerate(STARTS)
        for j, v in enumerate(VALUES)
    }
    named = {f"{s}|{v}": sl for (s, v), sl in groups.items()}
    delta = offsets(bandit, BETA1, BETA2)
    res: dict[str, Any] = {
        "config": _config(t_max, n_draws),
        "offsets": {
            "mean": float(delta @ bandit.context_probs),
            "min": float(delta.min()),
            "max": float(delta.max()),
            "mean_square": float(delta**2 @ bandit.context_probs),
        },
        "reference_kl": float(_kl(bandit, np.zeros((1, bandit.dim)))[0]),
        "runs": {},
        "verdicts": {},
        "variance_path": {},
        "premise_path": {},
    }
    jobs = [(r, v) for r in STEP_RULES for v in VARIANTS]
    for k, (rule, variant) in enumerate(progress(jobs, "update (paper's betas)", progress_bar)):
        c = STEP_RULES[rule]
        cfg = config(
            BETA2,
            t_max,
            "constant",
            c=c,
            track_fisher=False,
            extra_points=tuple(w[0] for w in windows(t_max)),
            **VARIANTS[variant],
        )
        out = run_stage2(bandit, v_all, cfg, seed=seed, theta0=theta0)
        res["steps"] = out.steps.tolist()
        boot = generators(PROBE, seed, 1, tag=200 + k)[0]
        runs = {
            s: {v: _windows(bandit, out, groups[s, v], t_max, boot) for v in VALUES} for s in STARTS
        }
        res["runs"].setdefault(rule, {})[variant] = {
            **runs,
            "clipped_fraction": float(out.clipped.mean()),
        }
        verdicts = {
            v: fixed_point_verdict({s: runs[s][v]["change"] for s in STARTS}) for v in VALUES
        }
        res["verdicts"].setdefault(rule, {})[variant] = {
            v: {"word": w, "detail": d} for v, (w, d) in verdicts.items()
        }
        if variant == "plain":
            rng = generators(PROBE, seed, 1, tag=100 + k)[0]
            path = _variance_path(bandit, out, v_all, named, rng, n_draws)
        else:
            path = _premise_path(bandit, out, v_all, named, cfg.learning_rate)
        target = res["variance_path" if variant == "plain" else "premise_path"]
        target[rule] = {s: {v: path[f"{s}|{v}"] for v in VALUES} for s in STARTS}
    res["entropy_stationary_points"] = entropy_stationary_points(bandit, BETA2, ENTROPY)
    res["runtime_s"] = round(time.perf_counter() - start_time, 2)
    return res
