"""Stage 2's variants on the bandit: the projection, the mixture gap, the off-policy and
entropy-bonus gradients, clipping with minibatches and staleness."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit, Stage2Config, regression_gradient, run_stage2
from astarpo.theory.instances import radius_for


def test_projection_enforces_the_radius() -> None:
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.1, seed=3)
    beta, radius = 0.5, 0.3  # ||theta*|| = 2: the ball binds
    cfg = Stage2Config(beta, 300, 1.0 / beta**2, radius=radius)
    out = run_stage2(bandit, np.zeros((3, 8)), cfg)
    assert out.norm_max.max() <= radius * (1 + 1e-12)
    assert np.all(np.linalg.norm(out.theta, axis=-1) <= radius * (1 + 1e-12))
    assert out.at_radius.min() > 0.5
    free = run_stage2(bandit, np.zeros((3, 8)), Stage2Config(beta, 300, 1.0 / beta**2))
    assert free.norm_max.max() > 2 * radius
    assert radius_for(bandit, beta) == pytest.approx(2 / beta, rel=1e-9)


def test_mixture_gap_is_at_most_the_mean_gap() -> None:
    """J is concave in pi: the mixture's gap <= the mean of the iterates' gaps (can fail if
    the mixture or the mean were taken over different iterates)."""
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.1, seed=1)
    out = run_stage2(bandit, np.zeros((4, 8)), Stage2Config(0.5, 200, 4.0))
    assert np.all(out.mixture <= out.mean_gap * (1 + 1e-9) + 1e-15)
    assert np.all(out.mean_gap[:, 0] == out.last[:, 0] * 0 + out.mean_gap[:, 0])
    ref_gap = float(bandit.suboptimality(bandit.ref_probs, 0.5))
    assert out.mean_gap[0, 0] == pytest.approx(ref_gap)  # t = 1: only theta_0 = 0 played


def test_off_policy_gradient_depends_on_v_star() -> None:
    """On-policy, V* drops out of the expected gradient; from another policy it does not."""
    bandit = LogLinearBandit.random(5, 6, 3, v_ref=0.2, seed=11)
    theta = np.array([[0.4, -0.3, 0.2]])
    other = np.array([[-0.5, 0.1, 0.6]])
    a, _ = regression_gradient(bandit, theta, np.zeros((1, 5)), 0.5)
    b, _ = regression_gradient(bandit, theta, np.ones((1, 5)), 0.5)
    np.testing.assert_allclose(a, b, atol=1e-12)
    c, _ = regression_gradient(bandit, theta, np.zeros((1, 5)), 0.5, sampling_theta=other)
    d, _ = regression_gradient(bandit, theta, np.ones((1, 5)), 0.5, sampling_theta=other)
    assert np.abs(c - d).max() > 1e-3


def test_entropy_bonus_gradient_is_minus_entropy_gradient() -> None:
    bandit = LogLinearBandit.random(5, 6, 3, v_ref=0.2, seed=4)
    theta, lam, h = np.array([0.3, 0.2, -0.4]), 0.05, 1e-6

    def entropy(th: np.ndarray) -> float:
        p = bandit.policy(th)
        return float((-(p * np.log(p)).sum(-1)) @ bandit.context_probs)

    fd = np.array([(entropy(theta + h * e) - entropy(theta - h * e)) / (2 * h) for e in np.eye(3)])
    v = np.zeros((1, 5))
    g0, _ = regression_gradient(bandit, theta[None], v, 0.5)
    g1, _ = regression_gradient(bandit, theta[None], v, 0.5, entropy=lam)
    np.testing.assert_allclose(g1[0] - g0[0], -lam * fd, rtol=1e-5, atol=1e-9)


def test_clipping_and_minibatches_and_staleness_run() -> None:
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.1, seed=2)
    base = {"beta2": 0.5, "n_iterations": 40, "learning_rate": 4.0}
    clipped = run_stage2(bandit, np.zeros((2, 8)), Stage2Config(**base, clip_norm=1e-6))
    assert clipped.clipped.min() == 1.0
    assert clipped.norm_max.max() <= 40 * 4.0 * 1e-6 * (1 + 1e-9)  # sum of clipped steps
    plain = run_stage2(bandit, np.zeros((2, 8)), Stage2Config(**base, mode="deterministic"))
    stale = run_stage2(
        bandit, np.zeros((2, 8)), Stage2Config(**base, mode="deterministic", staleness=3)
    )
    two = run_stage2(
        bandit, np.zeros((2, 8)), Stage2Config(**base, mode="deterministic", minibatches=2)
    )
    assert not np.allclose(plain.theta, stale.theta)
    assert not np.allclose(plain.theta, two.theta)
    with pytest.raises(ValueError):
        Stage2Config(**base, clip_norm=0.0)


def test_entropy_gradient_is_finite_with_zero_mass_actions() -> None:
    """v_ref = 0: some actions have no reference mass; the bonus's gradient must stay finite
    (it was NaN: -inf * 0 off the support, through autograd)."""
    bandit = LogLinearBandit.random(6, 5, 3, v_ref=0.0, seed=5)
    assert not bandit.support.all()
    theta, v = np.array([[0.2, -0.1, 0.4]]), np.zeros((1, 6))
    u = np.random.default_rng(0).random((1, 6))
    for uniforms in (None, u):
        g, _ = regression_gradient(bandit, theta, v, 0.5, uniforms=uniforms, entropy=0.1)
        assert np.isfinite(g).all()


def test_a_diverged_iterate_gives_nan_not_an_error() -> None:
    """A diverging run (staleness) is recorded, not stopped by the loss's NaN check."""
    bandit = LogLinearBandit.random(5, 6, 3, v_ref=0.2, seed=11)
    g, _ = regression_gradient(bandit, np.full((1, 3), np.inf), np.zeros((1, 5)), 0.5)
    assert np.isnan(g).all()
    with pytest.raises(ValueError, match="beta2"):
        regression_gradient(bandit, np.zeros((1, 3)), np.zeros((1, 5)), 0.0)


def test_extra_points_are_evaluated_and_the_path_is_recorded() -> None:
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.1, seed=2)
    cfg = Stage2Config(0.5, 60, 4.0, extra_points=(15, 45))
    out = run_stage2(bandit, np.zeros((3, 8)), cfg)
    assert {15, 45, 60} <= set(out.steps.tolist())
    assert out.path.shape == (3, len(out.steps), 4) == out.average_path.shape
    np.testing.assert_array_equal(out.path[:, -1], out.theta)
    np.testing.assert_array_equal(out.average_path[:, -1], out.theta_average)
    k = out.steps.tolist().index(15)
    gap = bandit.suboptimality(bandit.policy(out.path[:, k]), 0.5)
    np.testing.assert_allclose(gap, out.last[:, k])  # the path is the iterate at that point
    with pytest.raises(ValueError, match="extra_points"):
        Stage2Config(0.5, 60, 4.0, extra_points=(61,))
