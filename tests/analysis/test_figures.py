"""The figure rules of astarpo.analysis.figures: every theory figure readable on the page."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from astarpo.analysis import figures as plots
from astarpo.theory.experiments import EXPERIMENTS

STATIC = Path(__file__).resolve().parents[2] / "docs" / "_static" / "theory"


def test_check_figure_rejects_small_text_wide_figures_and_long_legends() -> None:
    fig, axes = plots.figure(1)
    axes[0].set_title("fine")
    plots.check_figure(fig)
    axes[0].text(0.5, 0.5, "tiny", fontsize=6)
    with pytest.raises(ValueError, match="pt"):
        plots.check_figure(fig)
    fig, axes = plots.figure(1)
    for k in range(plots.MAX_LEGEND + 1):
        axes[0].plot([0, 1], [k, k], label=f"line {k}")
    axes[0].legend(fontsize=plots.FONT)
    with pytest.raises(ValueError, match="entries"):
        plots.check_figure(fig)
    fig.set_figwidth(plots.WIDTH + 1)
    with pytest.raises(ValueError, match="wide"):
        plots.check_figure(fig)


def test_mark_zeros_marks_only_exact_zeros() -> None:
    _fig, axes = plots.figure(1)
    axes[0].set_yscale("log")
    assert plots.mark_zeros(axes[0], [1, 2, 3], [0.0, 1e-300, 1.0], "C0")
    assert len(axes[0].lines) == 1  # one triangle, for the one exact zero
    assert not plots.mark_zeros(axes[0], [1], [1e-20], "C0")


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_committed_results_redraw_under_the_rules(name: str, tmp_path: Path) -> None:
    """Each plot (strict: it checks fonts, legends, width) redraws from the committed JSON."""
    res = json.loads((STATIC / f"{name}.json").read_text())
    out = EXPERIMENTS[name].plot(res, tmp_path / f"{name}.png")
    from PIL import Image

    with Image.open(out) as im:
        assert round(im.info["dpi"][0]) == plots.DPI
        assert im.size[0] == round(plots.WIDTH * plots.DPI)
    assert np.isfinite(im.size).all()


def test_coverage_redraws_its_four_figures_under_the_rules(tmp_path: Path) -> None:
    """coverage writes one PNG per key of FILES, each 7.5 in wide at 150 dpi (strict save)."""
    from PIL import Image

    from astarpo.theory.experiments.coverage_figure import FILES

    res = json.loads((STATIC / "coverage.json").read_text())
    EXPERIMENTS["coverage"].plot(res, tmp_path / "coverage.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"coverage{k}.png" for k in FILES)
    for suffix in FILES:
        assert (STATIC / f"coverage{suffix}.png").exists()  # committed next to coverage.json
        with Image.open(tmp_path / f"coverage{suffix}.png") as im:
            assert im.size[0] == round(plots.WIDTH * plots.DPI)


def test_check_interval_refuses_an_interval_without_its_point() -> None:
    from astarpo.analysis.figures import check_interval

    check_interval([1.0, 2.0], [0.5, 2.0], [1.5, 3.0])  # inclusive bounds
    check_interval([1.0], [float("nan")], [float("nan")])  # no interval: nothing to check
    with pytest.raises(ValueError, match=r"interval 1: \[2.1, 3\] does not contain its point 2"):
        check_interval([1.0, 2.0], [0.5, 2.1], [1.5, 3.0])
    with pytest.raises(ValueError, match="does not contain"):
        check_interval(0.2, 0.3, 0.47)  # the zero-pass slip: a geometric mean 0.2 < 0.3


def test_errorbars_draws_valid_intervals_and_refuses_others() -> None:
    from astarpo.analysis.figures import errorbars, figure

    _, (ax,) = figure()
    bars = errorbars(ax, [1, 2], [1.0, 2.0], [0.5, float("nan")], [1.5, float("nan")])
    (seg,) = bars.lines[2]
    ys = [tuple(np.round(s[:, 1], 6)) for s in seg.get_segments()]
    assert ys[0] == (0.5, 1.5) and ys[1] == (2.0, 2.0)  # NaN bounds: a bar of length 0
    errorbars(ax, [1.0], [0.0], [0.9], [1.1], horizontal=True)
    with pytest.raises(ValueError, match="does not contain"):
        errorbars(ax, [1.0], [1.0], [1.2], [1.5])
    with pytest.raises(ValueError, match="does not contain"):
        errorbars(ax, [1.0], [0.0], [1.2], [1.5], horizontal=True)


def test_seed_errorbars_draws_markers_at_the_evaluations_only() -> None:
    _fig, axes = plots.figure(1)
    curves = [([0.0, 10.0, 20.0], [0.1, 0.2, 0.3]), ([1.0, 11.0], [0.3, 0.4])]
    means = plots.seed_errorbars(axes[0], curves, "astarpo", "C0")
    assert means == pytest.approx([0.2, 0.3])  # the two evaluations both seeds have
    line = axes[0].lines[0]
    assert list(line.get_xdata()) == pytest.approx([0.5, 10.5]) and line.get_marker() == "o"
    assert line.get_linewidth() < 1.0  # a thin line joins the markers; it is no data
    assert axes[0].get_legend_handles_labels()[1] == ["astarpo (n = 2 seeds)"]
    assert plots.seed_errorbars(axes[0], [], "none", "C1") == []


@pytest.mark.parametrize(
    ("low", "high", "labelled"),
    [
        (0.09, 0.75, {"0.1", "0.2", "0.5"}),  # two partial decades: 1, 2 and 5 only
        (0.22, 0.9, {"0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}),  # inside one decade
    ],
)
def test_log_y_labels_never_crowd_ticks_of_two_decades(
    low: float, high: float, labelled: set[str]
) -> None:
    """0.09 and 0.1 (or 0.6 and 0.7 beside 0.5) are not both labelled on an axis over two
    partial decades; inside one decade every tick is."""
    fig, axes = plots.figure(1)
    ax = axes[0]
    ax.plot([0, 1], [low, high])
    ax.set_yscale("log")
    ax.set_ylim(low, high)
    plots.log_y_labels(ax)
    fig.canvas.draw()
    ticks = [*ax.yaxis.get_majorticklabels(), *ax.yaxis.get_minorticklabels()]
    shown = {t.get_text() for t in ticks if t.get_text() and low <= t.get_position()[1] <= high}
    assert shown == labelled
