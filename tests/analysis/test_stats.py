"""The shared intervals (astarpo.analysis.stats) against closed forms and their promises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from astarpo.analysis.stats import log_bootstrap_interval


def test_log_bootstrap_interval_is_the_point_times_exp_of_z_sd() -> None:
    r = np.exp([-1.0, 1.0])  # sd of the logs (ddof 1): sqrt(2)
    half = 1.959963984540054 * math.sqrt(2.0)
    lo, hi = log_bootstrap_interval(1.0, r)
    assert lo == pytest.approx(math.exp(-half)) and hi == pytest.approx(math.exp(half))
    lo, hi = log_bootstrap_interval(2.0, 5.0 * r)  # the spread, not the resamples' location
    assert lo == pytest.approx(2 * math.exp(-half)) and hi == pytest.approx(2 * math.exp(half))


@given(
    point=st.floats(1e-12, 1e3),
    logs=st.lists(st.floats(-20, 20), min_size=2, max_size=50),
)
def test_log_bootstrap_interval_contains_its_point_and_stays_positive(
    point: float, logs: list[float]
) -> None:
    lo, hi = log_bootstrap_interval(point, np.exp(logs))
    assert 0 < lo <= point * (1 + 1e-12) and hi >= point * (1 - 1e-12)


def test_a_biased_statistic_below_all_its_resamples_is_still_inside() -> None:
    # The defect of the update experiment: a convex gap at the mean parameter sat below the
    # percentile interval of its resamples.
    boots = np.linspace(2.0, 3.0, 200)
    assert np.percentile(boots, 2.5) > 1.0  # the percentile interval misses the point
    lo, hi = log_bootstrap_interval(1.0, boots)
    assert lo < 1.0 < hi


@pytest.mark.parametrize(
    "point,boots", [(0.0, [1.0, 2.0]), (1.0, [0.0, 1.0]), (1.0, [1.0]), (-1, [1, 2])]
)
def test_log_bootstrap_interval_refuses_non_positive_values(point: float, boots: list) -> None:
    with pytest.raises(ValueError, match="positive"):
        log_bootstrap_interval(point, boots)
