"""What every measurement of the package shares: statistics, curves and figures.

* :mod:`astarpo.analysis.stats` -- intervals over seeds and bootstrap resamples, paired
  differences and ratios, Holm's adjustment.
* :mod:`astarpo.analysis.curves` -- a learning curve's value at a time, its time to a target,
  its area.
* :mod:`astarpo.analysis.figures` -- figure helpers (matplotlib, imported lazily).

The theory experiments and the lab's studies and benchmarks (``experiments/`` in a clone) all
use these, from here (``from astarpo.analysis import paired_ratio, figure``); the library
layers below them (``objective``, the bandits, ``llm``) never import them.
"""

from astarpo.analysis.curves import curve_area, target_levels, time_to_target, value_at
from astarpo.analysis.figures import (
    CURVES,
    DPI,
    FONT,
    MAX_LEGEND,
    WIDTH,
    band,
    check_figure,
    check_interval,
    errorbars,
    figure,
    fit_window,
    legend_below,
    log_y_labels,
    mark_zeros,
    reference_slopes,
    save,
    seed_errorbars,
    styled,
)
from astarpo.analysis.stats import (
    NAN,
    bootstrap_interval,
    holm,
    interval_order,
    log_bootstrap_interval,
    mean_ci,
    mean_interval,
    paired_difference,
    paired_ratio,
    seed_curve,
    t_interval,
    t_test_p,
)

__all__ = [
    "CURVES",
    "DPI",
    "FONT",
    "MAX_LEGEND",
    "NAN",
    "WIDTH",
    "band",
    "bootstrap_interval",
    "check_figure",
    "check_interval",
    "curve_area",
    "errorbars",
    "figure",
    "fit_window",
    "holm",
    "interval_order",
    "legend_below",
    "log_bootstrap_interval",
    "log_y_labels",
    "mark_zeros",
    "mean_ci",
    "mean_interval",
    "paired_difference",
    "paired_ratio",
    "reference_slopes",
    "save",
    "seed_curve",
    "seed_errorbars",
    "styled",
    "t_interval",
    "t_test_p",
    "target_levels",
    "time_to_target",
    "value_at",
]
