"""LogLinearBandit: exact quantities against brute-force enumeration in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astarpo.theory import LogLinearBandit


def brute_objective(bandit: LogLinearBandit, policy: np.ndarray, beta: float) -> float:
    """J_beta by explicit loops over contexts and actions (the definition, no tricks)."""
    total = 0.0
    for x in range(bandit.n_contexts):
        jx = 0.0
        for y in range(bandit.n_actions):
            p = policy[x, y]
            if p > 0:
                jx += p * bandit.rewards[x, y] - beta * p * math.log(p / bandit.ref_probs[x, y])
        total += bandit.context_probs[x] * jx
    return total


def brute_value(bandit: LogLinearBandit, beta: float) -> np.ndarray:
    """V*(x) = beta log sum_y pi_ref e^{r/beta}, summed naively (moderate beta only)."""
    return np.array(
        [
            beta
            * math.log(
                sum(
                    bandit.ref_probs[x, y] * math.exp(bandit.rewards[x, y] / beta)
                    for y in range(bandit.n_actions)
                )
            )
            for x in range(bandit.n_contexts)
        ]
    )


@pytest.fixture
def small() -> LogLinearBandit:
    rng = np.random.default_rng(3)
    ref = rng.dirichlet(np.ones(5), size=4)
    rho = rng.dirichlet(np.ones(4))
    return LogLinearBandit(rng.normal(size=(4, 5, 3)), rng.uniform(-1, 2, (4, 5)), ref, rho)


@pytest.mark.parametrize("beta", [0.3, 1.0, 5.0])
def test_objective_of_optimum_is_expected_optimal_value(
    small: LogLinearBandit, beta: float
) -> None:
    pi_star = small.optimal_policy(beta)
    np.testing.assert_allclose(pi_star.sum(-1), 1.0, atol=1e-12)
    v = small.optimal_value(beta)
    np.testing.assert_allclose(v, brute_value(small, beta), rtol=1e-12)
    assert brute_objective(small, pi_star, beta) == pytest.approx(
        v @ small.context_probs, rel=1e-12
    )
    assert float(small.objective(pi_star, beta)) == pytest.approx(
        v @ small.context_probs, rel=1e-12
    )


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), beta=st.floats(0.05, 10.0))
def test_suboptimality_is_the_gap_and_nonnegative(seed: int, beta: float) -> None:
    rng = np.random.default_rng(seed)
    bandit = LogLinearBandit(
        rng.normal(size=(3, 4, 2)),
        rng.integers(0, 2, (3, 4)).astype(float),
        rng.dirichlet(np.ones(4), size=3),
    )
    pi = rng.dirichlet(np.ones(4), size=3)
    gap = float(bandit.suboptimality(pi, beta))
    direct = brute_objective(bandit, bandit.optimal_policy(beta), beta) - brute_objective(
        bandit, pi, beta
    )
    assert gap >= 0.0
    assert gap == pytest.approx(direct, rel=1e-9, abs=1e-12)
    assert float(bandit.suboptimality(bandit.optimal_policy(beta), beta)) <= 1e-14


def test_tiny_beta_is_finite_and_exact() -> None:
    bandit = LogLinearBandit.random(8, 6, 4, v_ref=0.01, seed=1)
    beta = 1e-3
    p = bandit.solve_rate()
    v = bandit.optimal_value(beta)
    # V* = beta log(1 - p + p e^{1/beta}) = 1 + beta log(p + (1 - p) e^{-1/beta})
    np.testing.assert_allclose(v, 1.0 + beta * np.log(p), rtol=1e-12)
    theta = np.random.default_rng(0).normal(size=(3, 4)) * 100.0
    for pol in (bandit.policy(theta), bandit.ref_probs, bandit.optimal_policy(beta)):
        assert np.isfinite(bandit.objective(pol, beta)).all()
        assert np.isfinite(bandit.suboptimality(pol, beta)).all()
    # the reference's gap is the mean over contexts of V* - E_ref r + 0 (KL(ref||ref) = 0)
    gap_ref = float(bandit.suboptimality(bandit.ref_probs, beta))
    assert gap_ref == pytest.approx(float((v - p) @ bandit.context_probs), rel=1e-9)


@pytest.mark.parametrize("v_ref", [0.3, 0.01, 0.0])
def test_random_controls_v_ref(v_ref: float) -> None:
    bandit = LogLinearBandit.random(16, 8, 4, v_ref=v_ref, seed=5)
    p = bandit.solve_rate()
    assert p.min() == pytest.approx(v_ref, abs=1e-12)
    assert (p[:2] == pytest.approx(v_ref, abs=1e-12)) and p.max() <= 0.9 + 1e-12
    if v_ref == 0.0:
        assert not bandit.support[0].all()  # correct answers of a hard context have ref mass 0
        assert bandit.optimal_value(0.1)[0] == 0.0
        pol = bandit.policy(np.ones(4) * 50)
        assert (pol[~bandit.support] == 0).all()


@pytest.mark.parametrize("beta", [1e-3, 0.1, 2.0])
def test_realizable_instances_contain_the_optimum(beta: float) -> None:
    bandit = LogLinearBandit.random(10, 6, 5, v_ref=0.1, realizable=True, seed=2)
    theta, residual = bandit.optimal_theta(beta)
    assert residual < 1e-9
    assert np.linalg.norm(theta) == pytest.approx(1 / beta, rel=1e-9)
    assert float(bandit.suboptimality(bandit.policy(theta), beta)) < 1e-9 * max(1.0, 1 / beta)
    other = LogLinearBandit.random(10, 6, 5, v_ref=0.1, realizable=False, seed=2)
    theta_o, residual_o = other.optimal_theta(beta)
    assert residual_o > 0.1 / beta
    assert float(other.suboptimality(other.policy(theta_o), beta)) > 1e-3


def test_sampling_matches_the_policy_and_avoids_zero_mass() -> None:
    bandit = LogLinearBandit.random(3, 5, 2, v_ref=0.0, n_hard=1, seed=4)
    pol = bandit.policy(np.array([[0.3, -0.7]]))[0]
    n = 40_000
    actions = bandit.sample(pol, np.random.default_rng(0), n)
    assert actions.shape == (3, n)
    for x in range(3):
        freq = np.bincount(actions[x], minlength=5) / n
        # 5 standard errors
        assert np.all(np.abs(freq - pol[x]) <= 5 * np.sqrt(pol[x] * (1 - pol[x]) / n) + 1e-12)
        assert (freq[pol[x] == 0] == 0).all()
    again = bandit.sample(pol, np.random.default_rng(0), n)
    assert np.array_equal(actions, again)


def test_bad_input_raises() -> None:
    good = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="shape"):
        LogLinearBandit(np.zeros((2, 3)), np.zeros((2, 3)), good)
    with pytest.raises(ValueError, match="sum"):
        LogLinearBandit(np.zeros((2, 3, 1)), np.zeros((2, 3)), good * 2)
    with pytest.raises(ValueError, match="finite"):
        LogLinearBandit(np.zeros((2, 3, 1)), np.full((2, 3), np.nan), good)
    bandit = LogLinearBandit(np.zeros((2, 3, 1)), np.full((2, 3), 0.5), good)
    with pytest.raises(ValueError, match="binary"):
        bandit.solve_rate()
    with pytest.raises(ValueError, match="theta"):
        bandit.policy(np.zeros(2))
    with pytest.raises(ValueError, match="v_ref"):
        LogLinearBandit.random(v_ref=1.5)
