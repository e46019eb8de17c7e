"""Checks that could fail: streams, hard contexts, projection, variants, fits, Fisher, budget."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit, Stage2Config, regression_gradient, run_stage2
from astarpo.theory.fisher import fisher_floor, fisher_information, identifiable_basis
from astarpo.theory.instances import hard_contexts, make_instance, radius_for
from astarpo.theory.stage1 import allocate, estimate_values, estimate_values_adaptive
from astarpo.theory.stats import fit_additive, fit_slope, local_slopes
from astarpo.theory.streams import STAGE1, STAGE2, generators


@pytest.mark.parametrize("v_ref", [0.1, 0.01, 1e-3, 0.0])
@pytest.mark.parametrize("family", ["shared", "tabular", "nonrealizable"])
def test_hard_contexts_are_the_constructed_ones(family: str, v_ref: float) -> None:
    bandit = make_instance(family, n_contexts=32, n_actions=16, dim=8, v_ref=v_ref, seed=0)
    hard = hard_contexts(32)
    assert hard.tolist() == [0, 1, 2, 3]
    p = bandit.solve_rate()
    np.testing.assert_allclose(p[hard], v_ref, atol=1e-15)
    assert np.all(np.delete(p, hard) > v_ref)  # the others are drawn above v_ref


def test_stage1_and_stage2_streams_are_independent_at_n_equal_1() -> None:
    """At theta = 0 the policy is pi_ref, so a shared stream would replay Stage 1's samples."""
    bandit = LogLinearBandit.random(32, 16, 8, v_ref=0.1, seed=0)
    seeds = 4
    g1 = generators(STAGE1, 0, seeds, tag=1)
    stage1 = np.stack([bandit.sample(bandit.ref_probs, g, 1)[:, 0] for g in g1])
    g2 = generators(STAGE2, 0, seeds)
    first = np.stack([bandit.sample(bandit.ref_probs, g, 1)[:, 0] for g in g2])
    assert (stage1 != first).mean() > 0.3  # independent draws disagree most of the time
    # and the streams of Stage 1 at N = 1 and N = 2 differ too
    g1b = generators(STAGE1, 0, seeds, tag=2)
    assert not np.array_equal(g1[0].random(8), g1b[0].random(8))
    with pytest.raises(ValueError):
        generators(STAGE1, -1, 2)


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


def test_fit_additive_recovers_known_exponents() -> None:
    rng = np.random.default_rng(0)
    t, n = np.meshgrid([10.0, 30, 100, 300, 1000, 3000], [1.0, 4, 16, 64, 256])
    truth = 2.0 * t**-0.5 + 0.3 * n**-1.0 + 1e-4
    gaps = truth.ravel()[None] * np.exp(0.05 * rng.standard_normal((8, t.size)))
    fit = fit_additive(t.ravel(), n.ravel(), gaps, n_boot=50)
    assert fit["p"] == pytest.approx(0.5, abs=0.05)
    assert fit["q"] == pytest.approx(1.0, abs=0.1)
    assert fit["ci"]["p"][0] - 0.02 <= 0.5 <= fit["ci"]["p"][1] + 0.02
    assert fit["rms_log_residual"] < 0.05
    wrong = fit_additive(
        t.ravel(), n.ravel(), (5.0 * t**-1.5 + 0 * n + 1e-6).ravel()[None], n_boot=5
    )
    assert wrong["p"] == pytest.approx(1.5, abs=0.05)
    # data where N scales the T term: the product model fits, the additive one does not
    prod = (0.5 * t**-0.5 * (n**-1.0 + 0.01)).ravel()[None]
    fp = fit_additive(t.ravel(), n.ravel(), prod, n_boot=5, model="product")
    fa = fit_additive(t.ravel(), n.ravel(), prod, n_boot=5)
    assert fp["p"] == pytest.approx(0.5, abs=0.02) and fp["q"] == pytest.approx(1.0, abs=0.05)
    assert fp["rms_log_residual"] < 0.01 < fa["rms_log_residual"]


def test_local_slopes_and_windowed_fit() -> None:
    x = np.array([1.0, 2, 4, 8, 16])
    assert local_slopes(x, 3 * x**-0.75) == pytest.approx([-0.75] * 4)
    bent = np.where(x <= 4, x**-1.0, 0.25)  # a floor after x = 4
    assert fit_slope(x, bent[None], x_max=4)["slope"] == pytest.approx(-1.0)
    assert fit_slope(x, bent[None])["slope"] > -0.8


def test_fisher_floor_matches_the_definition() -> None:
    bandit = LogLinearBandit.random(4, 5, 3, v_ref=0.2, seed=7)
    theta = np.array([0.2, -0.1, 0.5])
    pol = bandit.policy(theta)
    f = np.zeros((3, 3))
    for x in range(4):
        mean = pol[x] @ bandit.features[x]
        c = bandit.features[x] - mean
        f += bandit.context_probs[x] * (c.T * pol[x]) @ c
    np.testing.assert_allclose(fisher_information(bandit, theta), f, rtol=1e-10, atol=1e-14)
    assert fisher_floor(bandit, theta) == pytest.approx(np.linalg.eigvalsh(f)[0], rel=1e-9)
    tab = make_instance("tabular", n_contexts=3, n_actions=4, dim=2, v_ref=0.2, seed=0)
    assert identifiable_basis(tab).shape == (12, 3 * 3)  # X (Y - 1) identifiable directions
    assert fisher_floor(tab, np.zeros(12)) > 0


def test_allocation_keeps_the_budget_and_favours_failures() -> None:
    first = np.zeros((2, 4, 4))
    first[:, 2:] = 1.0  # contexts 2, 3 solved every time, 0, 1 never
    counts = allocate(first, budget=64, cap=64)
    assert counts.sum(-1).tolist() == [64, 64]
    assert counts[:, :2].min() > counts[:, 2:].max()
    bandit = LogLinearBandit.random(8, 6, 3, v_ref=0.01, seed=0)
    v, n = estimate_values_adaptive(bandit, 8 * 16, 4, 0.1, generators(STAGE1, 0, 3))
    assert v.shape == (3, 8) and n.sum(-1).max() <= 128 and n.min() >= 4
    uniform, _ = estimate_values(bandit, 16, 0.1, generators(STAGE1, 0, 3))
    assert uniform.shape == v.shape
