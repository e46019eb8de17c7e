"""Algorithm 1 on the bandit: gradient identity, convergence, determinism, exact V̂* error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astarpo.theory import (
    LogLinearBandit,
    Stage2Config,
    estimate_values,
    policy_gradient_baseline,
    regression_gradient,
    run_stage2,
    value_estimate_error,
)
from astarpo.theory.streams import STAGE1, generators, log_checkpoints


def seed_generators(seed: int, n: int) -> list[np.random.Generator]:
    return generators(STAGE1, seed, n)


def _fd_grad_objective(bandit: LogLinearBandit, theta: np.ndarray, beta: float) -> np.ndarray:
    """Central finite differences of J_beta(pi_theta), float64."""
    h = 1e-6
    grad = np.zeros_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = h
        jp = float(bandit.objective(bandit.policy(theta + e), beta))
        jm = float(bandit.objective(bandit.policy(theta - e), beta))
        grad[i] = (jp - jm) / (2 * h)
    return grad


@pytest.mark.parametrize("beta", [0.2, 1.0])
@pytest.mark.parametrize("v_ref", [0.2, 0.0])
def test_expected_gradient_is_minus_two_beta_grad_j(beta: float, v_ref: float) -> None:
    """E_y[grad loss] = -2 beta grad J_beta, whatever V̂* is (the paper's gradient identity)."""
    bandit = LogLinearBandit.random(5, 6, 3, v_ref=v_ref, seed=11)
    rng = np.random.default_rng(0)
    theta = rng.normal(size=3)
    expected = -2 * beta * _fd_grad_objective(bandit, theta, beta)
    for v_star in (np.zeros(5), rng.normal(size=5) * 3, bandit.optimal_value(beta)):
        grad, _ = regression_gradient(bandit, theta[None], v_star[None], beta)
        np.testing.assert_allclose(grad[0], expected, rtol=1e-6, atol=1e-8)


def test_stochastic_gradient_is_unbiased() -> None:
    bandit = LogLinearBandit.random(4, 5, 3, v_ref=0.1, seed=2)
    beta, n = 0.5, 4000
    theta = np.tile(np.array([0.3, -0.2, 0.5]), (n, 1))
    v_star = np.tile(np.random.default_rng(1).uniform(0, 1, 4), (n, 1))
    u = np.random.default_rng(2).random((n, 4))
    grads, _ = regression_gradient(bandit, theta, v_star, beta, uniforms=u)
    exact, _ = regression_gradient(bandit, theta[:1], v_star[:1], beta)
    se = grads.std(0) / math.sqrt(n)
    assert np.all(np.abs(grads.mean(0) - exact[0]) < 5 * se)


def test_deterministic_run_converges_to_theta_star() -> None:
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.1, seed=3)
    beta = 1.0
    theta_star, residual = bandit.optimal_theta(beta)
    assert residual < 1e-9
    # V̂* is deliberately wrong: in expectation it drops out of the gradient
    v_star = np.full((1, 8), 0.3)
    cfg = Stage2Config(beta, 400, 1.0, "constant", mode="deterministic")
    out = run_stage2(bandit, v_star, cfg)
    assert np.linalg.norm(out.theta[0] - theta_star) < 1e-6
    assert out.last[0, -1] < 1e-12
    assert np.all(np.diff(out.last[0]) <= 1e-15)  # monotone on this convex problem


def test_stochastic_run_improves_on_reference_and_is_deterministic() -> None:
    bandit = LogLinearBandit.random(16, 8, 4, v_ref=0.1, seed=0)
    beta = 0.5
    v_star, solved = estimate_values(bandit, 8, beta, seed_generators(0, 3))
    assert v_star.shape == (3, 16) and solved.dtype == bool
    cfg = Stage2Config(beta, 200, 1.0 / beta**2, "inverse_sqrt")
    a = run_stage2(bandit, v_star, cfg, seed=5)
    b = run_stage2(bandit, v_star, cfg, seed=5)
    assert np.array_equal(a.last, b.last) and np.array_equal(a.theta, b.theta)
    # seed s draws the same samples however many seeds run beside it (batched matmuls may
    # round differently, so equal up to rounding, not bitwise)
    c = run_stage2(bandit, v_star[:1], cfg, seed=5)
    np.testing.assert_allclose(c.theta[0], a.theta[0], rtol=1e-9, atol=1e-12)
    d = run_stage2(bandit, v_star, cfg, seed=6)
    assert not np.array_equal(d.theta, a.theta)
    ref_gap = float(bandit.suboptimality(bandit.ref_probs, beta))
    assert np.all(a.last[:, -1] < 0.2 * ref_gap)
    pg = policy_gradient_baseline(bandit, cfg, 4, 3, seed=5)
    pg2 = policy_gradient_baseline(bandit, cfg, 4, 3, seed=5)
    assert np.array_equal(pg.theta, pg2.theta)
    assert np.all(pg.last[:, -1] < 0.5 * ref_gap)


@pytest.mark.parametrize("n", [1, 4, 32])
@pytest.mark.parametrize("beta1", [1e-3, 0.5, 10.0])
def test_value_estimate_error_matches_closed_form(n: int, beta1: float) -> None:
    """k ~ Bin(N, p): V̂* = beta1 log(1 + (k/N)(e^{1/beta1} - 1)) (log-space for tiny beta1)."""
    from scipy.stats import binom

    p = np.array([0.0, 0.01, 0.3, 1.0])
    v_true = np.array([0.1, 0.2, 0.3, 0.4])
    bias, mse = value_estimate_error(p, n, beta1, v_true)
    k = np.arange(n + 1)
    frac = k / n
    with np.errstate(divide="ignore"):
        v_k = beta1 * np.logaddexp(np.log1p(-frac), np.log(frac) + 1 / beta1)
    pmf = binom.pmf(k[None], n, p[:, None])
    np.testing.assert_allclose(bias, (pmf * (v_k - v_true[:, None])).sum(-1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mse, (pmf * (v_k - v_true[:, None]) ** 2).sum(-1), rtol=1e-9)
    if n == 1:  # one sample: V̂* is the reward itself
        np.testing.assert_allclose(bias, p - v_true, atol=1e-12)


def test_stage1_matches_exact_moments() -> None:
    bandit = LogLinearBandit.random(4, 6, 2, v_ref=0.2, seed=9)
    beta1, n, s = 0.5, 8, 3000
    v_star, _ = estimate_values(bandit, n, beta1, seed_generators(1, s))
    bias, mse = value_estimate_error(bandit.solve_rate(), n, beta1, bandit.optimal_value(beta1))
    err = v_star - bandit.optimal_value(beta1)
    np.testing.assert_allclose(err.mean(0), bias, atol=5 * np.sqrt(mse / s).max())
    assert np.all(bias < 0)  # Jensen: log of a mean underestimates


def test_checkpoints_and_config_validation() -> None:
    pts = log_checkpoints(10_000, 8)
    assert pts[0] == 1 and pts[-1] == 10_000 and np.all(np.diff(pts) > 0)
    with pytest.raises(ValueError, match="beta2"):
        Stage2Config(0.0, 10, 1.0)
    with pytest.raises(ValueError, match="n_iterations"):
        Stage2Config(0.1, 0, 1.0)
    with pytest.raises(ValueError, match="mode"):
        Stage2Config(0.1, 10, 1.0, mode="exact")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="learning_rate"):
        Stage2Config(0.1, 10, -1.0)
    bandit = LogLinearBandit.random(4, 3, 2, seed=0)
    with pytest.raises(ValueError, match="v_star"):
        run_stage2(bandit, np.zeros(4), Stage2Config(0.1, 10, 1.0))
    with pytest.raises(ValueError, match="group_size"):
        policy_gradient_baseline(bandit, Stage2Config(0.1, 10, 1.0), 1, 2)
