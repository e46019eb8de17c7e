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


def test_t_interval_matches_the_closed_form_and_clips_to_bounds() -> None:
    from astarpo.analysis.stats import t_interval

    xs = [1.0, 2.0, 3.0, 4.0]
    m, lo, hi = t_interval([*xs, None, float("nan")])  # None and NaN left out
    half = 3.182446305284263 * np.std(xs, ddof=1) / 2  # t_{3, 0.975} s / sqrt(4)
    assert (m, lo, hi) == pytest.approx((2.5, 2.5 - half, 2.5 + half))
    assert t_interval([0.0, 0.01, 0.02], bounds=(0.0, 1.0))[1] == 0.0  # a rate stays >= 0
    assert math.isnan(t_interval([1.0])[1]) and math.isnan(t_interval([])[0])


def test_mean_ci_agrees_with_t_interval_column_by_column() -> None:
    from astarpo.analysis.stats import mean_ci, t_interval

    rng = np.random.default_rng(0)
    v = rng.lognormal(size=(5, 3))
    ci = mean_ci(v)
    for k in range(3):
        m, lo, hi = t_interval(v[:, k])
        assert (ci["mean"][k], ci["lo"][k], ci["hi"][k]) == pytest.approx((m, lo, hi))
        gm, glo, ghi = t_interval(np.log10(v[:, k]))
        assert ci["gmean"][k] == pytest.approx(10**gm) and ci["glo"][k] == pytest.approx(10**glo)
        assert ci["ghi"][k] == pytest.approx(10**ghi)


def test_paired_difference_and_ratio_pair_by_seed_and_count_missing() -> None:
    from scipy.stats import ttest_1samp

    from astarpo.analysis.stats import paired_difference, paired_ratio

    a, b = [1.0, 2.0, 4.0, None], [0.5, 1.0, 1.0, 3.0]
    d = paired_difference(a, b)
    assert d["diff"] == pytest.approx((0.5 + 1 + 3) / 3) and (d["pairs"], d["missing"]) == (3, 1)
    assert d["p"] == pytest.approx(ttest_1samp([0.5, 1.0, 3.0], 0.0).pvalue)
    r = paired_ratio(a, b)
    assert r["ratio"] == pytest.approx((2 * 2 * 4) ** (1 / 3)) and r["low"] > 0
    assert r["p"] == pytest.approx(ttest_1samp(np.log([2.0, 2.0, 4.0]), 0.0).pvalue)
    with pytest.raises(ValueError, match="paired"):
        paired_ratio([1.0], [1.0, 2.0])


def test_holm_against_a_known_case() -> None:
    from astarpo.analysis.stats import holm

    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    adj = holm({"a": 0.03, "b": 0.01, "c": 0.5, "d": 0.02, "e": float("nan")})
    assert adj["b"] == pytest.approx(0.04) and adj["d"] == pytest.approx(0.06)
    assert adj["a"] == pytest.approx(0.06) and adj["c"] == pytest.approx(0.5)
    assert math.isnan(adj["e"]) and list(adj) == ["a", "b", "c", "d", "e"]
    assert holm({"x": 0.6, "y": 0.7}) == {"x": 1.0, "y": 1.0}


def test_bootstrap_interval_is_reproducible_and_contains_its_point() -> None:
    from astarpo.analysis.stats import bootstrap_interval

    xs = [0.1, 0.4, 0.35, 0.8, 0.5]
    p, lo, hi = bootstrap_interval(xs, seed=3)
    assert p == pytest.approx(np.mean(xs)) and lo <= p <= hi
    assert bootstrap_interval(xs, seed=3) == (p, lo, hi)
    assert lo >= min(xs) and hi <= max(xs)


def test_mean_interval_is_t_interval_with_its_count() -> None:
    from astarpo.analysis.stats import mean_interval, t_interval

    xs = [0.1, None, 0.5, float("nan"), 0.9]
    got = mean_interval(xs, bounds=(0.0, 1.0))
    assert (got["mean"], got["low"], got["high"]) == t_interval(xs, bounds=(0.0, 1.0))
    assert got["n"] == 3 and got["low"] == 0.0  # clipped: t_{0.975, 2} * 0.4 / sqrt(3) > 0.5
    one = mean_interval([2.0])
    assert one["mean"] == 2.0 and one["n"] == 1 and math.isnan(one["low"])
