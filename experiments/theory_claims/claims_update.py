r"""Claims rows on the scripts' update, at :math:`\beta_2 = 0.1` and at the paper's betas.

Part of :func:`experiments.theory_claims.claims.claims`; each row's verdict comes from a rule of
:mod:`experiments.theory_claims.verdicts`, applied to the ``update`` experiment's JSON (its
``paper_betas`` part: :mod:`astarpo.theory.experiments.update_paper`).
"""

from __future__ import annotations

from typing import Any

from astarpo.theory import CHECKABLE
from experiments.theory_claims.verdicts import Claim, combine, fmt, interval, near_optimum, order

__all__ = ["RULE_LABEL", "START_LABEL", "paper_betas_claims", "update_claims", "variance_check"]

Results = dict[str, dict[str, Any]]

#: How the page names the step rules and the starts of the paper-betas setting.
RULE_LABEL = {"constant, c=0.01": "$c = 0.01$", "constant, c=0.001": "$c = 0.001$"}
START_LABEL = {"theta*": "from $\\theta^*$", "reference": "from $\\pi_{\\mathrm{ref}}$"}


def _shift(u: dict[str, Any], name: str, delta: float) -> tuple[float, float, float]:
    i = u["config"]["delta"].index(delta)
    s = u["variants"][name]["shift"][i]
    if s["lo"] is None:  # an exact 0 (every resampled gap 0 too): the interval is the point
        return s["gap"], s["gap"], s["gap"]
    return s["gap"], s["lo"], s["hi"]


def update_claims(res: Results) -> list[Claim]:
    """Rows on the scripts' update at :math:`\\beta_2 = 0.1`, then at the paper's betas."""
    u = res["update"]
    mb = [order(_shift(u, "minibatches=2", d), _shift(u, "plain", d)) for d in (-0.5, 0.5)]
    e0 = order(_shift(u, "entropy=0.001", 0.0), _shift(u, "plain", 0.0))
    return [
        Claim(
            "$\\hat V$ still drops out with the scripts' 2 minibatch steps per batch",
            "implied",
            "`update`: fixed-point shift at $\\delta = \\mp 0.5$ [bootstrap 95%], 2 minibatches "
            + ", ".join(interval(_shift(u, "minibatches=2", d)) for d in (-0.5, 0.5))
            + " vs plain "
            + ", ".join(interval(_shift(u, "plain", d)) for d in (-0.5, 0.5)),
            (
                "disagrees: the shift is larger at both"
                if mb == ["higher", "higher"]
                else "inconclusive: " + ", ".join(mb)
            ),
            "order",
            said_by="the scripts",
        ),
        Claim(
            "An entropy bonus of 0.001 leaves the fixed point in place ($\\beta_2 = 0.1$)",
            "implied",
            "`update`: shift at $\\delta = 0$ with the bonus "
            f"{interval(_shift(u, 'entropy=0.001', 0.0))} vs plain "
            f"{interval(_shift(u, 'plain', 0.0))}",
            "disagrees: it moves the fixed point" if e0 == "higher" else f"inconclusive: {e0}",
            "order",
            said_by="the scripts",
        ),
        *paper_betas_claims(res),
    ]


def _kl(
    p: dict[str, Any], rule: str, variant: str, start: str, value: str
) -> tuple[float, float, float]:
    """(KL, lo, hi) of the last-window average (seed mean, bootstrap interval)."""
    k, lo, hi = p["runs"][rule][variant][start][value]["change"]["kl_after"]
    return float(k), float(lo), float(hi)


def variance_check(p: dict[str, Any]) -> dict[str, Any]:
    """The plain update's exact second moment against its draws, over every path point.

    A point is checked when its draws can see the moment (``rare_share`` at most
    :data:`~astarpo.theory.experiments.update_paper.CHECKABLE`) and the moment is not 0.

    Returns:
        ``inside`` (formula within the draws' 95% interval), ``checked``, ``excluded``
        (rarely drawn actions carry the moment) and ``worst`` (largest relative difference
        over the checked points).
    """
    out = {"inside": 0, "checked": 0, "excluded": 0, "worst": 0.0}
    for by_start in p["variance_path"].values():
        for by_value in by_start.values():
            for path in by_value.values():
                rows = zip(path["formula"], path["measured"], path["rare_share"], strict=True)
                for f, (m, lo, hi), rare in rows:
                    if not f > 1e-25:  # 0 up to rounding: theta* with delta = 0
                        continue
                    if rare > CHECKABLE:
                        out["excluded"] += 1
                        continue
                    out["checked"] += 1
                    out["inside"] += lo <= f <= hi
                    out["worst"] = max(out["worst"], abs(f / m - 1))
    return out


def paper_betas_claims(res: Results) -> list[Claim]:
    """Rows on the scripts' update at beta1 = 0.5 (through delta(x)) and beta2 = 1e-3."""
    p = res["update"]["paper_betas"]
    rules = list(p["config"]["step_rules"])
    sp = p["entropy_stationary_points"]
    bonus = [
        order(_kl(p, r, "scripts", "reference", "exact"), _kl(p, r, "plain", "reference", "exact"))
        for r in rules
    ]
    word = {"higher": "disagrees", "lower": "agrees", "overlap": "inconclusive"}
    said = {"higher": "higher with the bonus", "lower": "lower with it", "overlap": "overlap"}
    near = {
        (r, s): near_optimum(_kl(p, r, "scripts", s, "delta(x)"))
        for r in rules
        for s in START_LABEL
    }
    check = variance_check(p)
    return [
        Claim(
            "An entropy bonus of 0.001 is harmless at $\\beta_2 = 10^{-3}$",
            "implied",
            "`update` at the paper's betas, exact $V^*_{10^{-3}}$, from $\\pi_{\\mathrm{ref}}$: "
            "KL to $\\pi^*$ of the last-window average, the scripts' update (bonus, 2 minibatch "
            "steps, clip) vs plain: "
            + "; ".join(
                f"{RULE_LABEL[r]}: {interval(_kl(p, r, 'scripts', 'reference', 'exact'), d=3)} vs "
                f"{interval(_kl(p, r, 'plain', 'reference', 'exact'), d=3)}"
                for r in rules
            )
            + "; exact gradients: $J + 0.5H$ has stationary points at KL "
            f"{fmt(sp['theta*']['kl_to_opt'])} (from $\\theta^*$) and "
            f"{fmt(sp['reference']['kl_to_opt'], 3)} (from $\\pi_{{\\mathrm{{ref}}}}$)",
            f"{combine([word[o] for o in bonus])}: "
            + ", ".join(f"{RULE_LABEL[r]} {said[o]}" for r, o in zip(rules, bonus, strict=True)),
            "order",
            said_by="the scripts",
        ),
        Claim(
            "The scripts' update converges to $\\pi^*_{10^{-3}}$ at the paper's betas "
            "($\\beta_1 = 0.5$, through $\\delta(x)$)",
            "implied",
            "`update` at the paper's betas, $\\hat V = V^*_{0.5}$: KL to $\\pi^*$ of the "
            "last-window average after T = "
            f"{p['config']['T']} steps: "
            + "; ".join(
                f"{RULE_LABEL[r]} {START_LABEL[s]}: "
                f"{interval(_kl(p, r, 'scripts', s, 'delta(x)'), d=3)}"
                for r in rules
                for s in START_LABEL
            ),
            f"{combine(['agrees' if n else 'disagrees' for n in near.values()])}: "
            f"{sum(near.values())} of {len(near)} runs within 0.05 nats",
            "near",
            said_by="the scripts",
        ),
        Claim(
            "Along the path, the second moment of the one-sample gradient is the exact "
            "on-policy formula (the plain update)",
            "textbook",
            "`update` at the paper's betas: exact $E\\lVert g\\rVert^2$ at every evaluation "
            "point of the plain runs against "
            f"{p['config']['variance_draws_per_seed']} draws per seed [95%]",
            f"identity check: the formula is inside the interval at {check['inside']} of "
            f"{check['checked']} points (about {0.95 * check['checked']:.0f} expected), at most "
            f"{100 * check['worst']:.0f}% off; {check['excluded']} points left out, where more "
            f"than {100 * CHECKABLE:.0f}% of the moment lies on actions the draws expect to "
            "see less than once",
            "identity",
        ),
    ]
