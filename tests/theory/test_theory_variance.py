"""The one-sample gradient's moments along a path: exact sums over y against draws."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit, regression_gradient
from astarpo.theory.variance import (
    gradient_moments,
    gradient_squared_norms,
    gradient_variance_formula,
    stratified_interval,
)


def test_moments_at_theta_star_are_the_formula() -> None:
    bandit = LogLinearBandit.random(6, 5, 3, v_ref=0.2, seed=3)
    beta = 0.3
    theta_star, _ = bandit.optimal_theta(beta)
    for v in (bandit.optimal_value(0.7), bandit.optimal_value(beta)):
        m = gradient_moments(bandit, theta_star[None], v, beta)
        assert m["second_moment"][0] == pytest.approx(gradient_variance_formula(bandit, v, beta))
        assert m["mean_norm_sq"][0] == pytest.approx(0.0, abs=1e-20)  # theta* is stationary


@pytest.mark.parametrize("entropy", [0.0, 0.05])
def test_moments_away_from_the_optimum_match_draws(entropy: float) -> None:
    """At random iterates (zero-mass actions included) the exact second moment lies within
    4 standard errors of 20000 draws, and its mean part is the exact expected gradient."""
    bandit = LogLinearBandit.random(5, 6, 3, v_ref=0.0, seed=3)
    beta, rng = 0.3, np.random.default_rng(0)
    theta, v = rng.normal(size=(2, 3)), rng.normal(size=(2, 5))
    m = gradient_moments(bandit, theta, v, beta, entropy=entropy)
    d = gradient_squared_norms(bandit, theta, v, beta, 20000, rng, entropy=entropy)
    se = d.std(1, ddof=1) / np.sqrt(d.shape[1])
    assert np.all(np.abs(d.mean(1) - m["second_moment"]) < 4 * se)
    g, _ = regression_gradient(bandit, theta, v, beta, entropy=entropy)
    np.testing.assert_allclose(m["mean_norm_sq"], (g**2).sum(-1), rtol=1e-10)
    # V-hat enters only the noise: another V-hat, the same mean
    other = gradient_moments(bandit, theta, v + 1.0, beta, entropy=entropy)
    np.testing.assert_allclose(other["mean_norm_sq"], m["mean_norm_sq"], rtol=1e-10)
    assert not np.allclose(other["noise"], m["noise"])


def test_stratified_interval_uses_the_per_row_variances() -> None:
    """Rows with different means and equal spreads: the interval's width is set by the
    spreads (the pooled one would be ~100x wider), and it covers the true mean ~95% of the
    time over 400 repetitions."""
    rng = np.random.default_rng(1)
    means = np.array([[0.0], [10.0]])
    hits, widths = 0, []
    for _ in range(400):
        draws = means + rng.normal(0.0, 0.1, (2, 50))
        m, lo, hi = stratified_interval(draws)
        assert lo <= m <= hi and m == pytest.approx(draws.mean())
        hits += lo <= 5.0 <= hi
        widths.append(hi - lo)
    assert 0.92 <= hits / 400 <= 0.98
    expected = 2 * 1.96 * np.sqrt(2 * 0.1**2 / 50) / 2
    assert np.median(widths) == pytest.approx(expected, rel=0.1)
    with pytest.raises(ValueError, match="n >= 2"):
        stratified_interval(np.ones((3, 1)))
