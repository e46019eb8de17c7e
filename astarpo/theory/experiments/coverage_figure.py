"""The ``coverage`` figures: hard-context gaps, their course, the zero-mass instances, c and MSE.

Four figures of two panels each, under the rules of :mod:`astarpo.analysis.figures` (7.5 in wide,
150 dpi, text >= 10 pt, legends outside the data with at most eight entries, one colour per
curve within a panel, 95% bands): ``coverage.png`` (final hard-context gap against
:math:`v_{ref}`), ``coverage-time.png`` (its course against :math:`t\\,v_{ref}`),
``coverage-zero-mass.png`` (the never-solved contexts) and ``coverage-regimes.png`` (the tuned
c and the local slope of the exact MSE of :math:`\\hat V^*`). :data:`FILES` names them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from astarpo.analysis.figures import (
    band,
    figure,
    legend_below,
    log_y_labels,
    mark_zeros,
    save,
    styled,
)

__all__ = ["FILES", "draw"]

#: Suffix of each figure's file name after ``coverage`` -> what it shows.
FILES = {
    "": "final gap on the hard contexts against v_ref, shared and tabular features",
    "-time": "the hard contexts' gap along the run against t v_ref",
    "-zero-mass": "contexts the reference never solves, with and without transfer",
    "-regimes": "the tuned c, and the local slope of the exact MSE of V-hat",
}
#: Hard-gap panels: key of ``gap_hard`` -> (label, colour); one colour per method everywhere.
_METHODS = {
    "estimated": (r"A*-PO $\hat V^*$, $c=1$", "tab:blue"),
    "estimated_tuned": (r"A*-PO $\hat V^*$, tuned $c$", "tab:cyan"),
    "exact": (r"A*-PO exact $V^*$, $c=1$", "tab:green"),
    "filter": (r"A*-PO filter, $c=1$", "tab:purple"),
    "pg": (r"PG $G=4$, $c=1$", "tab:red"),
    "pg_tuned": (r"PG $G=4$, tuned $c$", "tab:orange"),
}


def _positive(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with v_ref > 0 (at v_ref = 0 there is nothing to learn; the tables show it)."""
    return [r for r in rows if r["v_ref"] > 0]


def _hard_gap_panel(ax: Any, rows: list[dict[str, Any]], fam: str) -> None:
    rows = _positive(rows)
    v = np.array([r["v_ref"] for r in rows])
    for key, (label, colour) in _METHODS.items():
        ci = {k: [r["gap_hard"][key][k][0] for r in rows] for k in ("gmean", "glo", "ghi")}
        ls = "--" if key.endswith("tuned") else "-"  # visible where tuned c is 1
        band(ax, v, ci, label, color=colour, ls=ls, marker="o", ms=3)
        mark_zeros(ax, v, ci["gmean"], colour)
    ax.plot(v, [r["reference_gap_hard"] for r in rows], "k:", label=r"$\pi_{ref}$")
    ax.set(xscale="log", yscale="log", title=f"{fam} features", xlabel=r"$v_{ref}$")
    log_y_labels(ax)


def _time_panel(ax: Any, rows: list[dict[str, Any]], fam: str) -> None:
    from matplotlib import colormaps

    rows = _positive(rows)
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(rows)))
    for r, colour in zip(rows, colours, strict=True):
        x = np.array(r["steps"]) * r["v_ref"]
        band(ax, x, r["hard_curve"]["estimated"], f"$v_{{ref}}={r['v_ref']:g}$", color=colour)
        mark_zeros(ax, x, r["hard_curve"]["estimated"]["gmean"], colour)
    ax.set(xscale="log", yscale="log", xlabel=r"$t \cdot v_{ref}$", title=f"{fam} features")
    log_y_labels(ax)


def _c_panel(ax: Any, res: dict[str, Any]) -> None:
    styles = {
        ("shared", "estimated"): "tab:blue",
        ("shared", "pg"): "tab:red",
        ("tabular", "estimated"): "tab:cyan",
        ("tabular", "pg"): "tab:orange",
    }
    offsets = (0.9, 0.95, 1.05, 1.1)  # apart, so that equal choices stay visible
    for ((fam, name), colour), k, marker in zip(styles.items(), offsets, "osD^", strict=True):
        rows = _positive(res["families"][fam])
        v = [r["v_ref"] for r in rows]
        c = [k * r["tuned_c"][name] for r in rows]
        method = "A*-PO" if name == "estimated" else "PG"
        ax.plot(v, c, marker + "-", color=colour, ms=4, label=f"{method}, {fam}")
    grid = res["config"]["tune_c"]
    ax.set(xscale="log", yscale="log", xlabel=r"$v_{ref}$", ylabel="chosen $c$")
    ax.set_ylim(min(grid) / 1.6, max(grid) * 1.6)
    ax.set_yticks(grid, [f"{c:g}" for c in grid])
    ax.set_yticks([], minor=True)
    ax.set_title("tuned $c$ (markers offset\nby up to 10%)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)


def _slope_panel(ax: Any, res: dict[str, Any]) -> None:
    reg = res["value_error_regimes"]
    vv = np.array(reg["v"])
    colours = ("tab:blue", "tab:green", "tab:red", "tab:purple")
    for case, colour in zip(reg["cases"], colours, strict=False):
        ax.plot(
            np.sqrt(vv[1:] * vv[:-1]),
            case["local_slopes"],
            color=colour,
            label=rf"$N={case['n']}$, $\beta_1={case['beta1']}$",
        )
    for y in (-1, -2):
        ax.axhline(y, color="0.45", ls="--", lw=0.8)
    ax.set(xscale="log", xlabel=r"solve rate $p$", ylabel=r"$d\log \mathrm{MSE}/d\log p$")
    ax.set_title("local slope of the exact\n" r"$E(\hat V^*-V^*)^2$")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1)


def _name(path: Path, suffix: str) -> Path:
    return path.with_name(f"{path.stem}{suffix}{path.suffix}")


@styled
def draw(res: dict[str, Any], path: str | Path) -> Path:
    """Write the four figures of the module docstring next to each other.

    Args:
        res: The dict returned by ``run``.
        path: Where to write ``coverage.png``; the others go to the same folder, their names
            the stem of ``path`` followed by the keys of :data:`FILES`.

    Returns:
        ``path``.
    """
    from astarpo.theory.experiments.zero_mass import plot_instance

    path = Path(path)
    cfg = res["config"]
    setting = f"{res['n_seeds']} seeds, N = {cfg['n_samples']}, T = {cfg['T']}"
    families = cfg["families"]

    fig, axes = figure(2, height=3.4)
    for ax, fam in zip(axes, families, strict=True):
        _hard_gap_panel(ax, res["families"][fam], fam)
    axes[0].set_ylabel("gap on hard contexts at T")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=3)
    save(fig, path, f"coverage: hard contexts at T ({setting})\n"
         "geometric mean, 95% interval of the mean log", strict=True)  # fmt: skip

    fig, axes = figure(2, height=3.4)
    for ax, fam in zip(axes, families, strict=True):
        _time_panel(ax, res["families"][fam], fam)
    axes[0].set_ylabel("gap on hard contexts")
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncol=4)
    save(fig, _name(path, "-time"), r"coverage: hard contexts along the run ($\hat V^*$, $c=1$)"
         "\ngeometric mean, 95% interval of the mean log", strict=True)  # fmt: skip

    zm = res["zero_mass"]
    fig, axes = figure(2, rows=len(zm["by_beta"]), height=4.4)
    panels = [(b, name) for b, run in zm["by_beta"].items() for name in run["instances"]]
    for ax, (beta, name) in zip(axes, panels, strict=True):
        plot_instance(ax, zm, name, beta)
    save(fig, _name(path, "-zero-mass"), f"coverage: reference mass {zm['epsilon']:g} on the "
         r"hard contexts' correct actions, $\beta_1 = \beta_2 = \beta$" "\n"
         "geometric mean, 95% interval of the mean log", strict=True)  # fmt: skip

    fig, axes = figure(2, height=4.2)
    _c_panel(axes[0], res)
    _slope_panel(axes[1], res)
    save(fig, _name(path, "-regimes"), "coverage: the tuned c (by the gap over all contexts)\n"
         r"and the regimes of the error of $\hat V^*$ (exact)", strict=True)  # fmt: skip
    return path
