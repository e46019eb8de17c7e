"""Figures of the efficiency benchmark, drawn for the page they are shown on.

Both figures are drawn about 8 inches wide (the docs page shows them at its 736 px content
width, so 10 pt text shows at >= 9 pt; ``tests/test_figures.py`` checks it), saved at 160 dpi,
with text of at least 10 pt and the legend below the data (split into rows beyond 8 entries):

* :func:`curves`: held-out accuracy against the run clock, one panel per metric, the mean and
  the 95% band over seeds (clipped to [0, 1]) for every run name;
* :func:`summary`: from a summary alone (no curves needed): each run's final expected accuracy
  and its time to each target, means with 95% intervals as error bars.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.bench.stats import band

__all__ = ["DPI", "FONT_PT", "WIDTH_IN", "curves", "summary"]

#: Resolution of every saved figure.
DPI = 160
#: Smallest font size, at the figure's own width.
FONT_PT = 10.0
#: Figure width in inches (legends sit below the panels, so the saved width stays under 8.5 in).
WIDTH_IN = 7.6
#: Most legend entries per panel.
MAX_ENTRIES = 8

Curve = tuple[list[float], list[float]]


def _pyplot() -> Any:
    import matplotlib  # the plotting extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": FONT_PT,
            "axes.titlesize": FONT_PT + 0.5,
            "axes.labelsize": FONT_PT,
            "xtick.labelsize": FONT_PT,
            "ytick.labelsize": FONT_PT,
            "legend.fontsize": FONT_PT,
        }
    )
    return plt


def curves(
    panels: dict[str, dict[str, list[Curve]]],
    titles: dict[str, str],
    targets: dict[str, float],
    seeds: int,
    budget: float,
    path: Path,
    dashed: frozenset[str] = frozenset(),
) -> None:
    """Accuracy against the run clock: ``panels[metric][run name]`` holds one curve per seed.

    One panel per metric in a row; with more than :data:`MAX_ENTRIES` run names, one row per
    group of names (so a legend never lists more). Targets are drawn as dotted lines on the
    ``expected_accuracy`` panel.
    """
    plt = _pyplot()
    names = list(_order(panels))
    groups = [names[i : i + MAX_ENTRIES] for i in range(0, len(names), MAX_ENTRIES)] or [[]]
    keys = list(panels)
    fig, axes = plt.subplots(
        len(groups), len(keys), figsize=(WIDTH_IN, 3.2 * len(groups) + 0.6), squeeze=False
    )
    grid = [budget * i / 60 for i in range(61)]
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}
    for group, row in zip(groups, axes, strict=True):
        for key, ax in zip(keys, row, strict=True):
            for name in group:
                cs = [c for c in panels[key].get(name, []) if c[0]]
                if not cs:
                    continue
                b = band(cs, grid, bounds=(0.0, 1.0))
                lo = [m if math.isnan(x) else x for x, m in zip(b["low"], b["mean"], strict=True)]
                hi = [m if math.isnan(x) else x for x, m in zip(b["high"], b["mean"], strict=True)]
                ls = "--" if name in dashed else "-"
                ax.plot(b["time"], b["mean"], ls=ls, color=colors[name], label=name)
                ax.fill_between(b["time"], lo, hi, color=colors[name], alpha=0.15, lw=0)
            if key == "expected_accuracy":
                for label, level in targets.items():
                    ax.axhline(level, color="gray", ls=":", lw=0.8)
                    ax.annotate(label, (1.0, level), xycoords=("axes fraction", "data"),
                                fontsize=FONT_PT, color="gray", xytext=(3, 0),
                                textcoords="offset points", va="center")  # fmt: skip
            ax.set_title(titles.get(key, key))
            ax.set_xlabel("run clock (s)")
            ax.set_ylabel("accuracy")
            ax.grid(alpha=0.3)
        handles, labels = row[0].get_legend_handles_labels()
        if handles:
            row[0].legend(
                handles, labels, loc="upper left", bbox_to_anchor=(0.0, -0.22), frameon=False,
                ncol=min(3, len(labels)),
            )  # fmt: skip
    fig.suptitle(
        f"mean and 95% band over {seeds} seeds; clock = Stage 1 + training, evaluation excluded"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def _order(panels: dict[str, dict[str, list[Curve]]]) -> dict[str, None]:
    out: dict[str, None] = {}
    for p in panels.values():
        for n in p:
            out.setdefault(n, None)
    return out


def summary(s: dict[str, Any], path: Path, title: str) -> None:
    """Final expected accuracy and time to each target per run name, with 95% intervals.

    Args:
        s: A bench summary (:func:`~astarpo.llm.bench.report.summarize`).
        path: Where the PNG goes.
        title: The figure's title (names the run).
    """
    plt = _pyplot()
    names = list(s["arms"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(WIDTH_IN, 4.4))
    y = list(range(len(names)))[::-1]
    fin = [s["arms"][n]["final"]["expected_accuracy"] for n in names]
    _hbars(ax1, y, fin, "C0")
    ax1.axvline(s["reference"], color="gray", ls=":", lw=1)
    ax1.set_yticks(y, names)
    ax1.set_xlabel("final expected accuracy\n(reference dotted)")
    labels = list(s["targets"])
    for i, label in enumerate(labels):
        cis = [s["arms"][n]["time_to_target"][label] for n in names]
        _hbars(ax2, [v + 0.25 * (i - 1) for v in y], cis, f"C{i + 1}", label=f"target {label}")
    ax2.set_yticks(y, [""] * len(names))
    ax2.set_xlabel("time to target\n(s of the run clock)")
    ax2.legend(loc="upper left", bbox_to_anchor=(-0.2, -0.24), frameon=False, ncol=3)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def _hbars(ax: Any, y: Sequence[float], cis: list[dict[str, float]], color: str, **kw: Any) -> None:
    """Means as dots with their interval as a horizontal error bar (none where it is NaN)."""
    from astarpo.analysis.figures import errorbars

    m, lo, hi = ([c[k] for c in cis] for k in ("mean", "low", "high"))
    errorbars(ax, m, y, lo, hi, horizontal=True, color=color, ms=4, **kw)


def _main(argv: list[str]) -> int:
    """``python -m astarpo.llm.bench.figures BENCH_JSON OUT_PNG TITLE``: :func:`summary` of a
    saved ``bench.json`` (one whose runs kept no curves, e.g. ``docs/figures/bench_cpu.json``)."""
    import json

    src, out, title = argv
    summary(json.loads(Path(src).read_text())["summary"], Path(out), title)
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
