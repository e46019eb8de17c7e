"""The ``coverage`` figure: hard-context gaps, the zero-mass instances, the tuned c, MSE slopes.

Eight panels at 150 dpi, text of at least 9 pt, every legend below its panel (at most eight
entries), one colour per curve within a panel and the same colour for a method throughout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DPI", "FONT", "draw", "save_png"]

#: Figure resolution and smallest font size (points).
DPI, FONT = 150, 9
#: Hard-gap panels: key of ``gap_hard`` -> (label, colour); one colour per method everywhere.
_METHODS = {
    "estimated": (r"A*-PO $\hat V^*$, $c=1$", "tab:blue"),
    "estimated_tuned": (r"A*-PO $\hat V^*$, tuned $c$", "tab:cyan"),
    "exact": (r"A*-PO exact $V^*$, $c=1$", "tab:green"),
    "filter": (r"A*-PO filter, $c=1$", "tab:purple"),
    "pg": (r"PG $G=4$, $c=1$", "tab:red"),
    "pg_tuned": (r"PG $G=4$, tuned $c$", "tab:orange"),
}


def _legend(ax: Any, ncol: int = 1) -> None:
    """The legend below the axes (outside the data)."""
    ax.legend(
        fontsize=FONT, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol, frameon=False
    )


def _hard_gap_panel(ax: Any, rows: list[dict[str, Any]], fam: str) -> None:
    from astarpo.theory.plots import band

    rows = [r for r in rows if r["v_ref"] > 0]  # at 0 every gap is 0: nothing to learn
    v = np.array([r["v_ref"] for r in rows])
    for key, (label, colour) in _METHODS.items():
        ci = {k: [r["gap_hard"][key][k][0] for r in rows] for k in ("gmean", "glo", "ghi")}
        band(ax, v, ci, label, color=colour, marker="o", ms=3)
    ax.plot(v, [r["reference_gap_hard"] for r in rows], "k:", label=r"$\pi_{ref}$")
    ax.set(xscale="log", yscale="log", title=f"{fam}: hard contexts at T", xlabel=r"$v_{ref}$")
    ax.set_ylabel("gap on hard contexts")
    _legend(ax, 2)


def _time_panel(ax: Any, rows: list[dict[str, Any]], fam: str) -> None:
    from matplotlib import colormaps

    from astarpo.theory.plots import band

    rows = [r for r in rows if r["v_ref"] > 0]
    colours = colormaps["viridis"](np.linspace(0.0, 0.9, len(rows)))
    for r, colour in zip(rows, colours, strict=True):
        x = np.array(r["steps"]) * r["v_ref"]
        band(ax, x, r["hard_curve"]["estimated"], f"$v_{{ref}}={r['v_ref']:g}$", color=colour)
    ax.set(xscale="log", yscale="log", xlabel=r"$t \cdot v_{ref}$", ylabel="gap on hard contexts")
    ax.set_title(rf"{fam}: hard contexts vs $t\,v_{{ref}}$ ($\hat V^*$, $c=1$)")
    _legend(ax, 2)


def _c_panel(ax: Any, res: dict[str, Any]) -> None:
    styles = {
        ("shared", "estimated"): "tab:blue",
        ("shared", "pg"): "tab:red",
        ("tabular", "estimated"): "tab:cyan",
        ("tabular", "pg"): "tab:orange",
    }
    offsets = (0.9, 0.95, 1.05, 1.1)  # apart, so that equal choices stay visible
    for ((fam, name), colour), k, marker in zip(styles.items(), offsets, "osD^", strict=True):
        rows = res["families"][fam]
        v = [r["v_ref"] for r in rows if r["v_ref"] > 0]
        c = [k * r["tuned_c"][name] for r in rows if r["v_ref"] > 0]
        method = "A*-PO" if name == "estimated" else "PG"
        ax.plot(v, c, marker + "-", color=colour, ms=4, label=f"{method}, {fam}")
    grid = res["config"]["tune_c"]
    ax.set(xscale="log", yscale="log", xlabel=r"$v_{ref}$", ylabel="chosen $c$")
    ax.set_ylim(min(grid) / 1.6, max(grid) * 1.6)
    ax.set_yticks(grid, [f"{c:g}" for c in grid])
    ax.set_yticks([], minor=True)
    ax.set_title("tuned $c$ (by the gap over all contexts;\nmarkers offset by up to 10%)")
    _legend(ax, 2)


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
    ax.set_title(r"local slope of $E(\hat V^*-V^*)^2$ (exact)")
    _legend(ax, 2)


def draw(res: dict[str, Any], path: str | Path) -> Path:
    """Hard-context gaps vs v_ref (tuned and untuned), the zero-mass instances, c, t v_ref, MSE.

    Args:
        res: The dict returned by ``run``.
        path: Where to write the PNG (150 dpi, text >= 9 pt, legends below the panels).

    Returns:
        ``path``.
    """
    import matplotlib

    from astarpo.theory.experiments.zero_mass import plot_instance
    from astarpo.theory.plots import figure

    with matplotlib.rc_context({"font.size": FONT, "axes.titlesize": FONT + 1}):
        fig, axes = figure(4, width=4.8, height=5.0, rows=2)
        for j, fam in enumerate(res["config"]["families"]):
            _hard_gap_panel(axes[0][j], res["families"][fam], fam)
            _time_panel(axes[1][j], res["families"][fam], fam)
        for j, name in enumerate(res["zero_mass"]["instances"]):
            plot_instance(axes[0][2 + j], res["zero_mass"], name)
        _c_panel(axes[1][2], res)
        _slope_panel(axes[1][3], res)
        fig.suptitle(
            f"coverage: {res['n_seeds']} seeds, N = {res['config']['n_samples']}, "
            f"T = {res['config']['T']} (log axes: geometric mean, 95% interval of the mean log)",
            fontsize=FONT + 2,
        )
        return save_png(fig, path)


def save_png(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` at ``DPI`` as a 256-colour PNG (a third of the size of the RGBA one)."""
    from PIL import Image

    fig.set_dpi(DPI)
    fig.canvas.draw()
    image = Image.fromarray(np.asarray(fig.canvas.buffer_rgba())[..., :3])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True, dpi=(DPI, DPI))
    return path
