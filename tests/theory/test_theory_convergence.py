"""The fixed-point rule (astarpo.theory.convergence) on synthetic runs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory.convergence import (
    AT_OPTIMUM,
    FIXED_POINT_RULE,
    TOLERANCE,
    fixed_point_verdict,
    window_average,
    window_change,
    windows,
)

T = 4000


def _record(thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a run records for iterates ``thetas [S, T, d]`` (theta_0 .. theta_{T-1}): the
    evaluation points and the running averages there (mean of theta_0 .. theta_{t-1})."""
    steps = np.array([1, 10, 100, *windows(T)[0], T])
    cum = np.cumsum(thetas, axis=1)
    return steps, np.stack([cum[:, t - 1] / t for t in steps], axis=1)


def _kl(theta: np.ndarray) -> np.ndarray:
    return (theta**2).sum(-1)  # a KL-like distance of the averaged parameter to 0


def _run(center: np.ndarray, noise: float, drift: float, seed: int) -> dict:
    """S = 8 seeds of theta_t = center (1 + drift t / T) + noise e_t, e_t iid normal."""
    rng = np.random.default_rng(seed)
    t = np.arange(T)[None, :, None]
    thetas = center * (1 + drift * t / T) + noise * rng.standard_normal((8, T, len(center)))
    steps, avg = _record(thetas)
    (a, b), (_, end) = windows(T)
    before, after = (window_average(steps, avg, *w) for w in ((a, b), (b, end)))
    return window_change(before, after, _kl, np.random.default_rng(seed + 100))


def test_window_average_is_the_mean_of_the_window() -> None:
    rng = np.random.default_rng(0)
    thetas = rng.normal(size=(3, T, 2))
    steps, avg = _record(thetas)
    (a, b), (_, end) = windows(T)
    np.testing.assert_allclose(window_average(steps, avg, a, b), thetas[:, a:b].mean(1))
    np.testing.assert_allclose(window_average(steps, avg, b, end), thetas[:, b:].mean(1))
    np.testing.assert_allclose(window_average(steps, avg, 0, 100), thetas[:, :100].mean(1))
    with pytest.raises(ValueError, match="extra_points"):
        window_average(steps, avg, 7, end)
    with pytest.raises(ValueError, match="multiple of 4"):
        windows(4001)


def test_a_stationary_run_has_settled() -> None:
    out = _run(np.array([1.0, 2.0]), noise=0.5, drift=0.0, seed=1)
    assert out["state"] == "settled" and out["direction"] is None
    assert out["lo"] <= 0.0 <= out["hi"] and max(-out["lo"], out["hi"]) <= np.log1p(TOLERANCE)
    kl, lo, hi = out["kl_after"]
    assert lo <= kl <= hi and kl == pytest.approx(5.0, rel=0.02)


def test_a_drifting_run_is_still_moving() -> None:
    up = _run(np.array([1.0, 2.0]), noise=0.5, drift=0.2, seed=2)
    assert up["state"] == "still moving" and up["direction"] == "rising" and up["lo"] > 0
    down = _run(np.array([1.0, 2.0]), noise=0.5, drift=-0.2, seed=3)
    assert down["state"] == "still moving" and down["direction"] == "falling"


def test_a_noisy_run_is_undecided() -> None:
    """Noise so large that the change's interval is wider than the tolerance, around 0."""
    out = _run(np.array([0.1, 0.1]), noise=20.0, drift=0.0, seed=4)
    assert out["state"] == "undecided"
    assert out["lo"] < 0 < out["hi"]


def test_exactly_at_the_optimum() -> None:
    out = _run(np.zeros(2), noise=0.0, drift=0.0, seed=5)
    assert out["state"] == "at optimum" and out["kl_after"][0] < AT_OPTIMUM


def test_the_setting_verdict_combines_the_starts() -> None:
    same = {s: _run(np.array([1.0, 2.0]), 0.5, 0.0, seed) for s, seed in (("a", 6), ("b", 7))}
    assert fixed_point_verdict(same)[0] == "resolved"
    apart = {"a": same["a"], "b": _run(np.array([3.0, 2.0]), 0.5, 0.0, 8)}
    assert fixed_point_verdict(apart)[0] == "settled apart"
    moving = {"a": same["a"], "b": _run(np.array([1.0, 2.0]), 0.5, -0.2, 9)}
    word, detail = fixed_point_verdict(moving)
    assert word == "still moving" and detail == "from b: falling"
    noisy = {"a": same["a"], "b": _run(np.array([0.1, 0.1]), 20.0, 0.0, 4)}
    assert fixed_point_verdict(noisy)[0] == "not resolved"
    assert f"{100 * TOLERANCE:.0f}%" in FIXED_POINT_RULE and "still moving" in FIXED_POINT_RULE
