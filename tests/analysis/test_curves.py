"""Reading measured curves, and several seeds' curves with their intervals, on synthetic ones
with known answers."""

from __future__ import annotations

import math

import pytest

from astarpo.analysis.curves import curve_area, target_levels, time_to_target, value_at
from astarpo.analysis.stats import seed_curve


def test_time_to_target_interpolates_and_reports_not_reached():
    times, accs = [0.0, 10.0, 20.0, 30.0], [0.2, 0.4, 0.8, 0.6]
    assert time_to_target(times, accs, 0.6) == pytest.approx(15.0)  # halfway 0.4 -> 0.8
    assert time_to_target(times, accs, 0.4) == pytest.approx(10.0)
    assert time_to_target(times, accs, 0.1) == 0.0  # already there at the start
    assert time_to_target(times, accs, 0.81) is None
    with pytest.raises(ValueError, match="length"):
        time_to_target([0.0], [0.1, 0.2], 0.5)


def test_curve_area_value_at_and_targets():
    assert curve_area([0.0, 10.0], [0.5, 0.5], 10.0) == pytest.approx(0.5)
    assert curve_area([0.0, 10.0], [0.0, 1.0], 10.0) == pytest.approx(0.5)
    assert curve_area([0.0, 10.0], [0.0, 1.0], 20.0) == pytest.approx(0.75)  # held after 10
    assert value_at([0.0, 10.0], [0.0, 1.0], 2.5) == pytest.approx(0.25)
    assert math.isnan(value_at([], [], 1.0))
    assert target_levels(0.2, 0.6, [0.25, 0.5]) == pytest.approx({"25%": 0.3, "50%": 0.4})


def test_seed_curve_is_the_mean_at_each_evaluation_clipped_to_its_range():
    c = seed_curve([([0.0, 10.0], [0.1, 0.2]), ([1.0, 11.0, 21.0], [0.9, 0.8, 0.7])])
    assert c["n"] == 2 and c["time"] == pytest.approx([0.5, 10.5])  # the evaluations both have
    assert c["mean"] == pytest.approx([0.5, 0.5])
    assert c["low"] == [0.0, 0.0] and c["high"] == [1.0, 1.0]  # t = 12.7: clipped to [0, 1]
    one = seed_curve([([0.0], [-3.0])], bounds=None)
    assert one["mean"] == [-3.0] and math.isnan(one["low"][0]) and one["n"] == 1
    assert seed_curve([]) == {"time": [], "mean": [], "low": [], "high": [], "n": 0}
