r"""Figure helpers shared by the experiments (Agg canvas, no global backend change).

Every figure draws means over seeds with their 95% intervals (shaded), labels in mathtext
(e.g. ``$J_{\beta_2}(\pi^*) - J_{\beta_2}(\pi_T)$``), reference slope lines on rate plots and
the fit window as a grey span. Each experiment module has its own ``plot(result, path)``;
:func:`plot` picks it from ``result["experiment"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["band", "figure", "fit_window", "reference_slopes", "save"]

TINY = 1e-12
#: The gap's mathtext label.
GAP = r"$J_{\beta_2}(\pi^*) - J_{\beta_2}(\pi)$"


def figure(n_panels: int, width: float = 4.2, height: float = 3.4, rows: int = 1) -> Any:
    """A constrained-layout figure with ``rows x n_panels`` axes; returns ``(fig, axes)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_panels, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, n_panels, squeeze=False)
    return fig, (axes[0] if rows == 1 else axes)


def band(ax: Any, x: Any, ci: dict[str, Any], label: str, **kw: Any) -> Any:
    """Geometric mean over seeds with the 95% interval of the mean log (for log axes)."""
    mean = np.maximum(np.ravel(ci["gmean"]), TINY)
    lo = np.maximum(np.ravel(ci["glo"]), TINY)
    hi = np.maximum(np.ravel(ci["ghi"]), TINY)
    (line,) = ax.plot(x, mean, label=label, **kw)
    ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    return line


def reference_slopes(
    ax: Any, x: Any, y0: float, slopes: dict[str, float], anchor: float | None = None
) -> None:
    """Dashed grey lines ``y0 (x / anchor)^slope``, labelled by their keys (mathtext)."""
    x = np.asarray(x, dtype=float)
    x0 = float(x.min() if anchor is None else anchor)
    styles = ("--", ":", "-.")
    for (label, s), ls in zip(slopes.items(), styles, strict=False):
        ax.plot(x, y0 * (x / x0) ** s, ls, color="0.45", lw=0.9, label=label)


def fit_window(ax: Any, x_min: float, x_max: float) -> None:
    """Shade the range of x a slope was fitted on."""
    ax.axvspan(x_min, x_max, color="0.85", alpha=0.35, lw=0, label="fit window")


def save(fig: Any, path: str | Path, title: str, log_note: bool = True) -> Path:
    """Title the figure and write it as a PNG."""
    note = " (log axes: geometric mean, 95% interval of the mean log)" if log_note else ""
    fig.suptitle(title + note, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path
