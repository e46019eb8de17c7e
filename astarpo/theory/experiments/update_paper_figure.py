"""The figure panels of ``update``'s paper-betas setting (:mod:`.update_paper`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from astarpo.theory.experiments.update_paper import (
    CHECKABLE,
    STARTS,
    VALUE_LABEL,
    VALUES,
    VARIANTS,
)

__all__ = ["draw"]


def draw(sub: Any, p: dict[str, Any]) -> None:
    r"""The setting's two panels on a (sub)figure: where each run settles, and the variance.

    Left: the KL to :math:`\pi^*_{10^{-3}}` of the last window's average (seed mean,
    bootstrap 95%), per update and value estimate, both starts and both step rules; dotted:
    the entropy objective's stationary points, solid grey: :math:`\pi_{\mathrm{ref}}`. Right:
    along the plain update's path (the first step rule), the exact second moment of the
    gradient (lines) and the draws' mean [95%] (points; open where more than
    :data:`~.update_paper.CHECKABLE` of the moment lies on actions the draws expect to see
    less than once), per value estimate and start (at :math:`\theta^*` with :math:`\delta = 0`
    it is 0 up to rounding, and not drawn).
    """
    from astarpo.analysis.figures import errorbars, legend_below

    ax_kl, ax_var = sub.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1.0]})
    rules = list(p["config"]["step_rules"])
    rows = [(var, v) for var in VARIANTS for v in VALUES]
    marker = dict(zip(rules, "os", strict=False))
    color = {"theta*": "C0", "reference": "C1"}
    start_name = {"theta*": r"from $\theta^*$", "reference": r"from $\pi_{\mathrm{ref}}$"}
    floor = 1e-4
    for i, (var, v) in enumerate(rows):
        for j, (rule, start) in enumerate((r, s) for r in rules for s in STARTS):
            kl, lo, hi = p["runs"][rule][var][start][v]["change"]["kl_after"]
            y = i + (j - 1.5) * 0.17
            if kl < floor:  # at pi* (rounding): on the left edge
                ax_kl.plot([floor], [y], "<", color=color[start], ms=6, clip_on=False)
                continue
            errorbars(
                ax_kl, [kl], [y], [lo], [hi], horizontal=True, fmt=marker[rule], ms=4,
                color=color[start], capsize=2, lw=1.0,
            )  # fmt: skip
    sp = p["entropy_stationary_points"]
    for k, pt in enumerate(sp.values()):
        ax_kl.axvline(pt["kl_to_opt"], color="0.3", ls=":", lw=1.2,
                      label=r"stationary points of $J + 0.5H$" if k == 0 else None)  # fmt: skip
    ax_kl.axvline(p["reference_kl"], color="0.6", lw=1.5, label=r"$\pi_{\mathrm{ref}}$")
    ax_kl.set_yticks(range(len(rows)), [f"{var}, {VALUE_LABEL[v]}" for var, v in rows])
    ax_kl.invert_yaxis()
    ax_kl.set(xscale="log", xlabel=r"KL to $\pi^*_{10^{-3}}$, last window")
    ax_kl.set_xlim(left=floor)
    ax_kl.set_title(r"where the runs settle (◀: at $\pi^*$)")
    for rule in rules:
        ax_kl.plot([], [], marker[rule], color="0.2", ms=4, label=rule.replace("constant, ", ""))
    for s in STARTS:
        ax_kl.plot([], [], "s", color=color[s], ms=6, label=start_name[s])
    rule = rules[0]
    steps = np.array(p["steps"], dtype=float)
    lowest = np.inf
    for k, v in enumerate(VALUES):
        for s, ls in zip(STARTS, ("--", "-"), strict=True):
            path = p["variance_path"][rule][s][v]
            f, m = np.array(path["formula"]), np.array(path["measured"])
            ok = f > 1e-25  # at theta* with delta = 0 the moment is 0 up to rounding: not drawn
            ax_var.plot(steps[ok], f[ok], ls, color=f"C{k + 2}", lw=1.2)
            lowest = min(lowest, f[ok].min(initial=np.inf))
            seen = np.array(path["rare_share"]) <= CHECKABLE
            for checked, face in ((True, None), (False, "none")):
                pick = ok & (np.arange(len(f)) % 3 == 0) & (seen == checked) & (m[:, 0] > 0)
                low = np.maximum(m[pick, 1], 1e-300)  # an interval reaching 0 runs off the axis
                errorbars(
                    ax_var, steps[pick], m[pick, 0], low, m[pick, 2], fmt="o", ms=3,
                    color=f"C{k + 2}", mfc=face, capsize=0, lw=0.8,
                )  # fmt: skip
                lowest = min(lowest, m[pick, 0].min(initial=np.inf))
    for k, v in enumerate(VALUES):
        ax_var.plot([], [], "-", color=f"C{k + 2}", label=VALUE_LABEL[v])
    ax_var.set(xscale="log", yscale="log", xlabel="$t$", ylabel=r"$E\|g\|^2$")
    ax_var.set_ylim(bottom=lowest / 3)
    ax_var.set_title(
        f"plain update, {rule.replace('constant, ', '')}:\nexact (lines), draws (●, ○)"
    )
    handles, labels = ax_kl.get_legend_handles_labels()
    legend_below(sub, handles, labels, 3, "left")
    handles, labels = ax_var.get_legend_handles_labels()
    legend_below(sub, handles, labels, 1, "right", title="dashed: from θ*")
