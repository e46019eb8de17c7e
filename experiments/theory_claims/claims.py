r"""The claims table of docs/theory.md, computed from the experiments' JSON.

:func:`claims` returns one :class:`Claim` per row; every verdict comes from a rule of
:mod:`experiments.theory_claims.verdicts` applied to numbers of the JSON, and every row quotes the
interval that decided it. ``experiments/theory_claims/fill_page.py`` renders the rows and
``experiments/tests/test_theory_claims.py`` recomputes them against the committed page.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from experiments.theory_claims.claims_baselines import (
    UNTESTABLE,
    assumption_claims,
    baseline_claims,
)
from experiments.theory_claims.claims_update import update_claims
from experiments.theory_claims.verdicts import (
    Claim,
    bound,
    combine,
    converges,
    coverage_row,
    fmt,
    gci,
    interval,
    learns,
    near_optimum,
    rate,
    slope_ci,
    two_beta_cell,
)

__all__ = ["claims", "grid_se", "slope_windows"]

Results = dict[str, dict[str, Any]]


def slope_windows(v: list[float], slopes: list[float], cut: float) -> list[tuple[float, float]]:
    """Contiguous ranges of the midpoints sqrt(v_i v_i+1) where the local slope is <= cut."""
    mids = [math.sqrt(a * b) for a, b in itertools.pairwise(v)]
    out: list[tuple[float, float]] = []
    prev = False
    for m, s in zip(mids, slopes, strict=True):
        if s <= cut:
            out[-1:] = [(out[-1][0], m)] if prev else [*out[-1:], (m, m)]
        prev = s <= cut
    return out


def grid_se(grid: dict[str, Any]) -> float:
    """Median standard error of a ``grid`` cell's mean log gap over the fitted cells (8 seeds)."""
    keep = np.array(grid["steps"]) >= grid["config"]["fit_t_min"]
    n = grid["n_seeds"]
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.975, n - 1))
    se = [
        (np.log(np.array(c["ghi"])) - np.log(np.array(c["glo"])))[keep] / (2 * half)
        for c in grid["gap"].values()
    ]
    return float(np.median(np.concatenate(se)))


def _rates(res: Results) -> list[Claim]:
    h, r = res["horizon"], res["realizability"]
    sq = h["slopes"]["inverse_sqrt"]
    shared = r["headline"]["shared"]
    slope_r = (shared["slope_last_mean"], *shared["slope_last_ci"])
    w, d = converges(slope_r)
    proj = h["projection"]
    binding = proj["fraction_of_steps_on_sphere"] > 0 or proj["max_abs_theta_difference"] > 0
    return [
        Claim(
            "One on-policy sample per prompt and no exploration bonus drive the gap to 0 on "
            "realizable instances",
            "paper",
            f"`realizability`: last-iterate slope {interval(slope_r, True)} over 5 instances "
            f"(95% over instances); `horizon`: gap {fmt(h['reference_gap'], 3)} -> "
            f"{interval(gci(h['curves']['inverse_sqrt']['last']))} at $T = 10^4$",
            f"{w}: {d}",
            "converges",
        ),
        Claim(
            r"Last iterate with $c/\sqrt t$ steps: gap $O(T^{-1/2})$",
            "textbook",
            "`horizon`: fitted slope, 8 seeds",
            "{}: {}".format(*bound(slope_ci(sq["last"]), -0.5)),
            "bound",
        ),
        Claim(
            r"Mean gap of the iterates (what regret controls): $O(T^{-1/2})$",
            "textbook",
            "`horizon`: fitted slope, 8 seeds",
            "{}: {}".format(*bound(slope_ci(sq["mean_gap"]), -0.5)),
            "bound",
        ),
        Claim(
            r'"The average iterate decays like $1/T$"',
            "textbook",
            "`horizon`: parameter average, fitted slope (outside any regret bound: the loss "
            "is not convex in $\\theta$)",
            "{}: {}".format(*rate(slope_ci(sq["average"]), -1.0)),
            "rate",
            said_by="old page",
        ),
        Claim(
            "The bounded parameter set of the analysis is active (projecting changes the run)",
            "implied",
            f"`horizon`: fraction of steps on the sphere $R = {proj['radius']:.0f}$: "
            f"{fmt(proj['fraction_of_steps_on_sphere'])}; largest parameter difference from "
            f"the unprojected run (same seeds): {fmt(proj['max_abs_theta_difference'])}",
            "agrees: the projection acts (exact, paired)"
            if binding
            else "inconclusive: the runs are identical (exact, paired), so the intervals "
            "coincide; the projection never acts",
            "order",
            said_by="the analysis",
        ),
    ]


def _n_rates(res: Results) -> list[Claim]:
    s, g = res["samples"], res["grid"]
    n_all = slope_ci(s["settings"]["beta1=0.1"]["slopes"]["final_last_all_n"])
    n_64 = slope_ci(s["settings"]["beta1=0.1"]["slopes"]["final_last"])
    (w_all, _), (w_64, _) = rate(n_all, -0.75), rate(n_64, -0.75)
    verb = {"agrees": "contains", "disagrees": "excludes"}
    n1 = slope_ci(g["t_slope_per_n"]["1"])
    add, prod = g["fit"], g["fit_product"]
    se = grid_se(g)
    better = "product" if prod["rms_log_residual"] < add["rms_log_residual"] else "additive"
    margin = abs(prod["rms_log_residual"] - add["rms_log_residual"])
    return [
        Claim(
            r'"The gap falls like $N^{-3/4}$"',
            "implied",
            f"`samples`: slope over N = 1-256 {interval(n_all, True)}, over $N \\le 64$ "
            f"{interval(n_64, True)}; `grid`: at N = 1 the gap still falls with T "
            f"(slope {interval(n1, True)})",
            f"{combine([w_all, w_64])}: the N = 1-256 fit {verb[w_all]} -3/4, the "
            f"$N \\le 64$ fit {verb[w_64]} it; "
            "N sets Stage 2's noise level, not a floor",
            "rate",
            said_by="old page",
        ),
        Claim(
            "The T and N terms add ($aT^{-p} + bN^{-q} + c$)",
            "textbook",
            f"`grid`: rms log residual additive {add['rms_log_residual']:.2f}, product "
            f"$aT^{{-p}}(N^{{-q}}+c)$ {prod['rms_log_residual']:.2f} (cell standard error "
            f"{se:.2f}); product $p$ = {prod['p']:.2f} [{prod['ci']['p'][0]:.2f}, "
            f"{prod['ci']['p'][1]:.2f}], $q$ = {prod['q']:.2f} [{prod['ci']['q'][0]:.2f}, "
            f"{prod['ci']['q'][1]:.2f}] (bootstrap)",
            (
                f"{'disagrees' if better == 'product' else 'agrees'}: the {better} model fits "
                f"better by {margin:.2f} > {se:.2f}"
                if margin > se
                else f"inconclusive: the residuals differ by {margin:.2f} <= {se:.2f}"
            ),
            "fit",
        ),
    ]


def _stage1(res: Results) -> list[Claim]:
    s, c = res["samples"], res["coverage"]
    ls = s["headline"]["mse_local_slopes"]
    vs1 = s["settings"]["beta1=0.5"]["value_error"]["vs_beta1"]["mse_local_slopes"]
    lsq = s["settings"]["beta1=0.5"]["slopes"]["mse_vs_beta1"]["slope"]
    reg = c["value_error_regimes"]
    case = next(k for k in reg["cases"] if k["n"] == 16 and k["beta1"] == 0.1)
    win = slope_windows(reg["v"], case["local_slopes"], -1.75)
    steep = ", ".join(f"[{fmt(a)}, {fmt(b)}]" for a, b in win) or "nowhere"
    tab, sh = (0.02, 1e-3, 1e-4), (1e-3, 1e-4)
    t_learn = [
        learns(
            gci(coverage_row(res, "tabular", v)["gap_hard"]["estimated"]),
            coverage_row(res, "tabular", v)["reference_gap_hard"],
        )
        for v in tab
    ]
    s_learn = [
        learns(
            gci(coverage_row(res, "shared", v)["gap_hard"]["estimated"]),
            coverage_row(res, "shared", v)["reference_gap_hard"],
        )
        for v in sh
    ]
    word = {True: "learns", False: "does not learn", None: "inconclusive"}
    need = combine(
        [
            "agrees" if x is False else "disagrees" if x else "inconclusive"
            for x in t_learn + s_learn
        ]
    )
    return [
        Claim(
            '"The exact MSE of $\\hat V^*$ has slope -1.61"',
            "implied",
            "`samples`: local slopes of the exact MSE ($\\beta_1 = 0.1$), N = 1 to 256",
            f"identity check: not a power law, local slopes {max(ls):.2f} to {min(ls):.2f}",
            "identity",
            said_by="old page",
        ),
        Claim(
            "Stage 1 error of order $N^{-1/2}$ (MSE $N^{-1}$) when $\\beta_1$ is the target's",
            "textbook",
            "`samples` ($\\beta_1 = 0.5$ vs $V^*_{0.5}$): exact MSE (binomial, no sampling)",
            f"identity check: least-squares slope {lsq:.2f}, local slopes {max(vs1):.2f} to "
            f"{min(vs1):.2f}",
            "identity",
        ),
        Claim(
            "$v_{\\mathrm{ref}} > 0$ is needed for the hard contexts to learn (the old page: "
            "it is not)",
            "implied",
            "`coverage`, hard contexts at T = 2000, gap [95%] vs the reference's: one-hot "
            + "; ".join(
                f"{fmt(v)}: {interval(gci(r['gap_hard']['estimated']))} vs "
                f"{fmt(r['reference_gap_hard'])}"
                for v in tab
                for r in [coverage_row(res, "tabular", v)]
            )
            + "; shared "
            + "; ".join(
                f"{fmt(v)}: {interval(gci(r['gap_hard']['estimated']))} vs "
                f"{fmt(r['reference_gap_hard'])}"
                for v in sh
                for r in [coverage_row(res, "shared", v)]
            ),
            f"{need}: one-hot features "
            + ", ".join(f"{fmt(v)}: {word[x]}" for v, x in zip(tab, t_learn, strict=True))
            + "; shared features "
            + ", ".join(f"{fmt(v)}: {word[x]}" for v, x in zip(sh, s_learn, strict=True)),
            "learns",
            said_by="the paper's assumption; old page",
        ),
        Claim(
            "Stage 1 error grows like $(1/v_{\\mathrm{ref}})^2$",
            "implied",
            "`coverage`: local slope of the exact MSE of $\\hat V^*$ against the solve rate p",
            f"identity check: slope <= -1.75 for p in {steep} (N = 16, $\\beta_1$ = 0.1; "
            f"steepest {min(case['local_slopes']):.2f}), about -1 where $Np \\gg 1$, falling "
            "to 0 with $V^*$ as $p \\to 0$; an exact MSE below a bound is consistent with it",
            "identity",
            said_by="review",
        ),
    ]


def _two_beta(res: Results) -> list[Claim]:
    tb, u = res["two-beta"], res["update"]
    b1s, b2s = tb["config"]["beta1"], tb["config"]["beta2"]
    det = {(c["beta1"], c["beta2"]): c["deterministic"]["kl_to_opt_beta2"] for c in tb["grid"]}
    ok = [b2 for b2 in b2s if det[b1s[0], b2] > 1e-12]
    spread = max(np.ptp([det[b1, b2] for b1 in b1s]) / det[b1s[0], b2] for b2 in ok)
    near, kls = [], []
    for b2 in b2s:
        ci = [two_beta_cell(res, b1, b2)["last"]["kl_to_opt_beta2"] for b1 in b1s if b1 != b2]
        kl = [(c["mean"][0], c["lo"][0], c["hi"][0]) for c in ci]
        near.append(all(near_optimum(k) for k in kl))
        kls.append(
            f"$\\beta_2$ = {fmt(b2)}: {fmt(min(k[0] for k in kl))}-{fmt(max(k[0] for k in kl))}"
            f" (largest upper end {fmt(max(k[2] for k in kl))})"
        )
    paper_det = det[0.5, 1e-3]
    at = [fmt(b2) for b2, n in zip(b2s, near, strict=True) if n]
    not_at = [fmt(b2) for b2, n in zip(b2s, near, strict=True) if not n]
    var = [c.get("variance_at_optimum") for c in tb["grid"]]
    rows = [
        Claim(
            "Any $\\hat V$ that does not depend on the sampled response drops out of the "
            "expected gradient (the proposition below)",
            "textbook",
            "`two-beta`: exact-gradient iterates for 5 values of $\\beta_1$; `update`: shift "
            "at $\\delta = 0$ of the plain update",
            f"identity check: the 5 exact-gradient runs agree to {fmt(spread)} (relative); "
            f"plain shift at $\\delta = 0$: {fmt(u['headline']['plain']['0.0'])}",
            "identity",
            said_by="this page",
        ),
    ]
    if all(v is not None for v in var):
        zero = [v for v in var if v["formula_exact"] == 0.0]
        rest = [v for v in var if v["formula_exact"] != 0.0]
        inside = sum(
            v["measured_exact"]["lo"][0] <= v["formula_exact"] <= v["measured_exact"]["hi"][0]
            for v in rest
        )
        worst = max(abs(v["formula_exact"] / v["measured_exact"]["mean"][0] - 1) for v in rest)
        tiny = max(v["measured_exact"]["mean"][0] for v in zero) if zero else 0.0
        rows.append(
            Claim(
                "The gradient's variance at $\\pi^*_{\\beta_2}$ is "
                "$4\\beta_2^2\\sum_x\\rho(x)^2(\\hat V - V^*_{\\beta_2})^2"
                "\\,\\mathrm{tr\\,Cov}_{\\pi^*}\\phi$ (the proposition)",
                "textbook",
                f"`two-beta`: Monte Carlo $E\\lVert g\\rVert^2$ over "
                f"{tb['config']['variance_draws']} draws at $\\theta^*_{{\\beta_2}}$ with "
                "$\\hat V = V^*_{\\beta_1}$, each of the 15 cells [95%]",
                f"identity check: the formula is inside the interval in {inside} of {len(rest)} "
                f"cells (about {0.95 * len(rest):.0f} expected), at most {100 * worst:.1f}% off; "
                f"where $\\beta_1 = \\beta_2$ it is 0 and the draws give at most {fmt(tiny)} "
                "(rounding)",
                "identity",
                said_by="this page",
            )
        )
    rows += [
        Claim(
            "With $\\beta_1 \\ne \\beta_2$ the stochastic run converges to $\\pi^*_{\\beta_2}$",
            "implied",
            "`two-beta`: KL of the last iterate to $\\pi^*_{\\beta_2}$ at T = 3000, mean over "
            "8 seeds: " + "; ".join(kls),
            f"{combine(['agrees' if n else 'disagrees' for n in near])}: at $\\pi^*$ for "
            f"$\\beta_2$ = {', '.join(at) or 'none'}; not for $\\beta_2$ = "
            f"{', '.join(not_at) or 'none'} (exact gradients: KL "
            f"{fmt(paper_det)} at $10^{{-3}}$)",
            "near",
            said_by="old page",
        ),
        Claim(
            "The single-$\\beta$ theory with $\\beta = \\beta_2$ describes the run",
            "implied",
            "`two-beta`: exact $E_x(V^*_{\\beta_1} - V^*_{\\beta_2})^2$ at $\\beta_1 = 0.5$, "
            "$\\beta_2 = 0.1$",
            f"identity check: its Stage 1 term carries "
            f"{fmt(two_beta_cell(res, 0.5, 0.1)['stage1_term_exact'])}, which N does not remove",
            "identity",
            said_by="old page",
        ),
    ]
    return rows


def claims(res: Results) -> list[Claim]:
    """Every row of the claims table, computed from ``res``.

    Args:
        res: Experiment name -> its JSON (``horizon``, ``samples``, ...).

    Returns:
        The rows, in page order.
    """
    return [
        *_rates(res),
        *_n_rates(res),
        *_stage1(res),
        *_two_beta(res),
        *update_claims(res),
        *baseline_claims(res),
        *assumption_claims(res),
        *UNTESTABLE,
    ]
