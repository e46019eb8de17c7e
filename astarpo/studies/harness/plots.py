"""Curves of the studies' figures, in :mod:`astarpo.analysis.figures`' style.

A run name's curve over seeds is drawn at its evaluations only: one marker per evaluation (the
mean over seeds at the mean time, its 95% interval an error bar drawn by
:func:`~astarpo.analysis.figures.errorbars`), joined by a thin line that is no data (nothing was
evaluated between two markers). :data:`CURVES` says so in a figure's title; each legend entry
gives the seeds behind it (:func:`n_label`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from astarpo.analysis.figures import errorbars
from astarpo.studies.harness.curves import Curve, seed_curve

__all__ = ["CURVES", "curve", "n_label"]

#: How the curves are drawn, for the title of a figure that holds them.
CURVES = "markers: evaluations, mean over seeds with 95% interval; thin lines only join them"


def n_label(name: str, n: int) -> str:
    """``"name (n = 3 seeds)"``."""
    return f"{name} (n = {n} seed{'s' if n != 1 else ''})"


def curve(
    ax: Any,
    curves: Sequence[Curve],
    name: str,
    color: Any,
    dashed: bool = False,
    bounds: tuple[float, float] | None = (0.0, 1.0),
    label: str | None = None,
) -> list[float]:
    """Draw the seeds' ``curves`` (``(times, values)`` each) of run ``name`` (see the module
    doc), labelled ``label`` (default :func:`n_label`: a figure whose legend entries stand for
    different seed counts says them in its title instead). Returns the means drawn."""
    c = seed_curve(curves, bounds)
    if c["time"]:
        style = dict(fmt="--o" if dashed else "-o", lw=0.8, ms=3.5, capsize=2, color=color)
        text = label or n_label(name, c["n"])
        errorbars(ax, c["time"], c["mean"], c["low"], c["high"], label=text, **style)
    return list(c["mean"])
