r"""Figure helpers shared by the theory experiments and the studies (Agg canvas, no global
backend or rcParams change).

Every figure is :data:`WIDTH` inches wide, drawn at :data:`DPI` with every text at
:data:`FONT` pt or more, so that on the docs page (about 736 CSS px of content width) its text
shows at 9.8 pt or more. Legends sit outside the data (below the panel or the figure) with at
most :data:`MAX_LEGEND` entries; exact zeros on a log axis are marked and labelled, not drawn
at a tiny value. Means over seeds come with their 95% intervals (shaded bands or error bars);
a point and its interval are drawn by :func:`errorbars`, which refuses an interval that does not
contain its point (:func:`check_interval`). A curve measured at evaluations (a study's run over
seeds) is drawn at them only, by :func:`seed_errorbars` (:data:`CURVES` says how, for a title).
Each experiment module has its own ``plot(result, path)``, decorated with :func:`styled`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "CURVES",
    "DPI",
    "FONT",
    "MAX_LEGEND",
    "WIDTH",
    "band",
    "check_figure",
    "check_interval",
    "errorbars",
    "figure",
    "fit_window",
    "legend_below",
    "log_y_labels",
    "mark_zeros",
    "reference_slopes",
    "save",
    "seed_errorbars",
    "styled",
]

#: Figure width in inches: the docs show it at about 736 CSS px, so 10 pt text shows at 9.8 pt.
WIDTH = 7.5
#: Resolution of the saved PNG.
DPI = 150
#: Smallest font size in pt of any text in a figure.
FONT = 10.0
#: Most entries of one legend.
MAX_LEGEND = 8
#: How :func:`seed_errorbars` draws a curve, for the title of a figure that holds one.
CURVES = "markers: evaluations, mean over seeds with 95% interval; thin lines only join them"
#: The gap's mathtext label.
GAP = r"$J_{\beta_2}(\pi^*) - J_{\beta_2}(\pi)$"
_STYLE: dict[str, Any] = {
    "font.size": FONT,
    "axes.titlesize": FONT,
    "axes.labelsize": FONT,
    "xtick.labelsize": FONT,
    "ytick.labelsize": FONT,
    "legend.fontsize": FONT,
    "legend.title_fontsize": FONT,
    "figure.titlesize": FONT + 1,
    "lines.linewidth": 1.5,
    "legend.frameon": False,
}
F = TypeVar("F", bound=Callable[..., Any])


def styled(fn: F) -> F:
    """Run a ``plot`` function under this module's font sizes (a local ``rc_context``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib

        with matplotlib.rc_context(_STYLE):  # type: ignore[arg-type]
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def figure(cols: int = 1, rows: int = 1, height: float = 2.9, **kw: Any) -> Any:
    """A constrained-layout figure :data:`WIDTH` wide with ``rows x cols`` axes.

    Args:
        cols: Panels per row.
        rows: Rows of panels.
        height: Height of one row in inches.
        **kw: Passed to ``Figure.subplots`` (e.g. ``gridspec_kw``).

    Returns:
        ``(fig, axes)`` with ``axes`` flat, in row order.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, list(axes.ravel())


def band(ax: Any, x: Any, ci: dict[str, Any], label: str | None, **kw: Any) -> Any:
    """Geometric mean over seeds with the 95% interval of the mean log (for log axes).

    Exact zeros are left out of the line (see :func:`mark_zeros`).
    """
    mean = np.ravel(ci["gmean"]).astype(float)
    lo, hi = np.ravel(ci["glo"]).astype(float), np.ravel(ci["ghi"]).astype(float)
    pos = mean > 1e-300
    (line,) = ax.plot(np.asarray(x)[pos], mean[pos], label=label, **kw)
    ax.fill_between(
        np.asarray(x)[pos], lo[pos], hi[pos], color=line.get_color(), alpha=0.2, linewidth=0
    )
    return line


def check_interval(point: Any, low: Any, high: Any, what: str = "interval") -> None:
    """Raise ``ValueError`` unless every ``low <= point <= high`` (NaN bounds allowed: no interval).

    An interval that does not contain its point is a defect of the computation behind it (an
    arithmetic-mean interval drawn around a geometric mean, a percentile interval of a biased
    statistic): it is refused here, where it would otherwise be drawn, not clipped.

    Args:
        point: Points ``[K]`` (or a scalar).
        low: Lower bounds, same shape.
        high: Upper bounds, same shape.
        what: Named in the error.

    Raises:
        ValueError: naming the first point outside its interval.
    """
    p, lo, hi = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (point, low, high))
    p, lo, hi = np.broadcast_arrays(p, lo, hi)
    bad = ((lo > p) | (hi < p)) & ~np.isnan(lo) & ~np.isnan(hi)
    bad |= np.isnan(p) & ~(np.isnan(lo) & np.isnan(hi))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{what} {i}: [{lo[i]:.6g}, {hi[i]:.6g}] does not contain its point {p[i]:.6g}; "
            "compute the interval for the quantity drawn (e.g. a geometric mean's interval on "
            "the log scale), not for another one."
        )


def errorbars(
    ax: Any, x: Any, y: Any, low: Any, high: Any, horizontal: bool = False, **kw: Any
) -> Any:
    """Points with their intervals as error bars, after :func:`check_interval`.

    Args:
        ax: The axes.
        x: Positions ``[K]`` (the values, when ``horizontal``).
        y: Values ``[K]`` (the positions, when ``horizontal``).
        low: Lower bounds of the values ``[K]``; NaN: no bar.
        high: Upper bounds of the values ``[K]``; NaN: no bar.
        horizontal: Values on the x axis (a forest plot).
        **kw: Passed to ``Axes.errorbar`` (default ``fmt="o"``, ``capsize=3``).

    Returns:
        Matplotlib's ``ErrorbarContainer``.
    """
    value = np.asarray(x if horizontal else y, dtype=float)
    lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    check_interval(value, lo, hi)
    err = np.nan_to_num(np.array([value - lo, hi - value]), nan=0.0)
    kw = {"fmt": "o", "capsize": 3, **kw}
    if horizontal:
        return ax.errorbar(value, y, xerr=err, **kw)
    return ax.errorbar(x, value, yerr=err, **kw)


def seed_errorbars(
    ax: Any,
    curves: Any,
    name: str,
    color: Any,
    dashed: bool = False,
    bounds: tuple[float, float] | None = (0.0, 1.0),
    label: str | None = None,
) -> list[float]:
    """Several seeds' curves (``(times, values)`` each) of run ``name``, at their evaluations
    only: a marker per evaluation (the mean over seeds at the mean time, its 95% interval an
    error bar, :func:`~astarpo.analysis.stats.seed_curve`), joined by a thin line that is no data.

    Args:
        ax: The axes.
        curves: One ``(times, values)`` per seed.
        name: The run name; the label is ``"name (n = 3 seeds)"`` unless ``label`` is given.
        color: The colour.
        dashed: A dashed joining line.
        bounds: The values' range (the interval is clipped to it), or None.
        label: The legend entry (for a figure whose title gives the seeds instead).

    Returns:
        The means drawn.
    """
    from astarpo.analysis.stats import seed_curve

    c = seed_curve(curves, bounds)
    if c["time"]:
        n = f"{name} (n = {c['n']} seed{'s' if c['n'] != 1 else ''})"
        style = dict(fmt="--o" if dashed else "-o", lw=0.8, ms=3.5, capsize=2, color=color)
        errorbars(ax, c["time"], c["mean"], c["low"], c["high"], label=label or n, **style)
    return list(c["mean"])


def mark_zeros(ax: Any, x: Any, y: Any, color: Any, offset: float = 0.0) -> bool:
    """Mark points whose value is exactly 0 on a log axis: a triangle on the lower edge, "0".

    Returns:
        Whether any zero was marked.
    """
    from matplotlib.transforms import blended_transform_factory

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    zero = y == 0
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for xi in x[zero]:
        ax.plot([xi + offset], [0.03], "v", color=color, ms=7, transform=trans, clip_on=False)
    return bool(zero.any())


def log_y_labels(ax: Any) -> None:
    """Tidy a log y axis's tick labels once its data are drawn: over two decades or more,
    label only the decades; over less, label plain numbers (at 1, 2 and 5 of each decade, or
    at every tick when the axis lies inside one decade, where no two labels crowd: ticks of
    two decades, such as 0.09 and 0.1, sit close together)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    lo, hi = ax.get_ylim()
    if hi >= 100 * lo:
        ax.yaxis.set_minor_formatter(NullFormatter())
        return
    every = lo > 0 and np.floor(np.log10(lo)) == np.floor(np.log10(hi))  # inside one decade

    def plain(y: float, _pos: int | None = None) -> str:
        lead = round(y / 10 ** np.floor(np.log10(y)), 6) if y > 0 else 0.0
        return f"{y:.4g}" if every or lead in (1, 2, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(plain))
    ax.yaxis.set_minor_formatter(FuncFormatter(plain))


def reference_slopes(
    ax: Any, x: Any, y0: float, slopes: dict[str, float], anchor: float | None = None
) -> None:
    """Dashed grey lines ``y0 (x / anchor)^slope``, labelled by their keys (mathtext)."""
    x = np.asarray(x, dtype=float)
    x0 = float(x.min() if anchor is None else anchor)
    styles = ("--", ":", "-.")
    for (label, s), ls in zip(slopes.items(), styles, strict=False):
        ax.plot(x, y0 * (x / x0) ** s, ls, color="0.45", lw=1.0, label=label)


def fit_window(ax: Any, x_min: float, x_max: float) -> None:
    """Shade the range of x a slope was fitted on (unlabelled: the captions say so)."""
    ax.axvspan(x_min, x_max, color="0.85", alpha=0.35, lw=0)


def legend_below(
    fig: Any, handles: Any, labels: Any, ncol: int = 2, where: str = "center", **kw: Any
) -> Any:
    """A figure legend under all panels (outside the data); ``where``: left, center or right."""
    return fig.legend(handles, labels, loc=f"outside lower {where}", ncol=ncol, **kw)


def check_figure(fig: Any) -> None:
    """Raise ``ValueError`` if a figure breaks the rules of this module's docstring."""
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    width = fig.get_figwidth()
    if width > WIDTH + 1e-9:
        raise ValueError(f"figure is {width:.2f} in wide; at most {WIDTH} in (use more rows).")
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < FONT - 1e-9:
            raise ValueError(
                f"text {t.get_text()!r} is {t.get_fontsize():.1f} pt; every text must be "
                f">= {FONT} pt to be readable on the page."
            )
    for leg in fig.findobj(Legend):
        n = len(leg.get_texts())
        if n > MAX_LEGEND:
            raise ValueError(f"a legend has {n} entries; at most {MAX_LEGEND} (split panels).")


def save(fig: Any, path: str | Path, title: str, strict: bool = False) -> Path:
    """Title the figure and write it as a PNG at :data:`DPI`.

    Args:
        fig: The figure.
        path: Where to write it.
        title: The figure's title.
        strict: Check the figure first (:func:`check_figure`; raises ``ValueError``). Every
            experiment of this package passes ``True``.

    Returns:
        ``path``.
    """
    fig.suptitle(title)
    if strict:
        check_figure(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path
