"""The estimator errors of the adaptive-N study against closed forms and the theory's exact sum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astarpo.theory import value_estimate_error
from experiments.adaptive_n.errors import (
    adaptive_estimates,
    estimator_errors,
    exact_v_star,
    fixed_estimates,
)


def test_exact_v_star_closed_form_and_small_rate_limit() -> None:
    p = np.array([0.0, 1e-30, 1e-6, 0.3, 1.0])
    v = exact_v_star(p, 0.5)
    want = [0.5 * math.log(1 - q + q * math.exp(2.0)) for q in (0.0, 0.3, 1.0)]
    np.testing.assert_allclose(v[[0, 3, 4]], want, rtol=1e-14)
    np.testing.assert_allclose(v[1:3], 0.5 * p[1:3] * math.expm1(2.0), rtol=1e-5)
    assert v[4] == pytest.approx(1.0)


def test_fixed_n_error_matches_the_exact_binomial_sum() -> None:
    """Bias and MSE over many prompts of one solve rate (Bernoulli draws) against the exact
    sum over k ~ Bin(N, p) of :func:`astarpo.theory.stage1.value_estimate_error`."""
    rng = np.random.default_rng(0)
    p, n, x = 0.2, 8, 40000
    rewards = (rng.random((x, 16)) < p).astype(float)
    truth = exact_v_star(np.full(x, p), 0.5)
    err = fixed_estimates(rewards, n, 0.5) - truth
    bias, mse = value_estimate_error(np.array([p]), n, 0.5, truth[:1])
    se = err.std() / math.sqrt(x)
    assert abs(err.mean() - bias[0]) < 4 * se
    assert abs((err**2).mean() - mse[0]) < 4 * (err**2).std() / math.sqrt(x)
    assert bias[0] < 0  # Jensen: the log-mean-exp of samples is biased low


def test_adaptive_with_alike_pilots_is_fixed_n() -> None:
    rewards = np.zeros((12, 32))
    rewards[:, ::3] = 1.0  # every pilot alike: allocate gives each prompt the mean
    v, counts = adaptive_estimates(rewards, 8, 4, 32, 0.5, prompts_per_call=6, seed=1)
    assert (counts == 8).all()
    np.testing.assert_array_equal(v, fixed_estimates(rewards, 8, 0.5))


def test_adaptive_gives_the_failed_pilot_the_samples() -> None:
    """Two prompts in a call, budget 2 x 8, pilot 4: weights 1/(1 + 1/4) and 1/(0 + 1/4),
    so the 8 samples left go 8 * 0.8/4.8 -> 1 (largest remainder: 1.33 -> 1) and 6.67 -> 7."""
    rewards = np.zeros((2, 16))
    rewards[0] = 1.0
    rewards[1, 10] = 1.0  # the failed prompt's success lies beyond the pilot
    v, counts = adaptive_estimates(rewards, 8, 4, 16, 0.5, prompts_per_call=2, seed=0)
    assert counts.tolist() == [5, 11]
    assert v[0] == pytest.approx(1.0)
    assert v[1] == pytest.approx(0.5 * math.log(1 + math.expm1(2.0) / 11))


def test_estimator_errors_per_bin_and_rule() -> None:
    rng = np.random.default_rng(3)
    v_ref = np.r_[np.full(200, 0.5), np.full(200, 0.01)]
    rewards = (rng.random((400, 32)) < v_ref[:, None]).astype(float)
    bins = ["easy"] * 200 + ["hard"] * 200
    out = estimator_errors(rewards, v_ref, bins, 0.5, (8,), (8,), 4, 32, 64, 0)
    fixed, adaptive = out["rules"]["fixed N=8"], out["rules"]["adaptive N=8"]
    assert fixed["hard"]["samples"] == 8 and adaptive["hard"]["samples"] > 8
    assert adaptive["easy"]["samples"] < 8
    assert abs(adaptive["easy"]["samples"] + adaptive["hard"]["samples"] - 16) < 1e-9
    assert adaptive["hard"]["all_wrong"] < fixed["hard"]["all_wrong"]
    assert fixed["hard"]["mse"]["low"] >= 0
    assert out["bins"]["hard"]["v_ref_mean"] == pytest.approx(0.01)
    assert abs(out["bins"]["easy"]["sample_rate"] - 0.5) < 0.03


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="probabilities"):
        exact_v_star([1.5], 0.5)
    with pytest.raises(ValueError, match="beta1"):
        exact_v_star([0.5], 0.0)
    with pytest.raises(ValueError, match="n must lie"):
        fixed_estimates(np.zeros((2, 4)), 8, 0.5)
    with pytest.raises(ValueError, match="pilot <= mean_n <= cap"):
        adaptive_estimates(np.zeros((2, 4)), 8, 4, 16, 0.5, 2, 0)
    with pytest.raises(ValueError, match="must agree"):
        estimator_errors(np.zeros((3, 4)), np.zeros(2), ["a", "b"], 0.5, (2,), (), 2, 4, 2, 0)


def test_paired_differences_carry_holm_over_the_family() -> None:
    rng = np.random.default_rng(5)
    v_ref = np.r_[np.full(300, 0.6), np.full(300, 0.02)]
    rewards = (rng.random((600, 32)) < v_ref[:, None]).astype(float)
    bins = ["easy"] * 300 + ["hard"] * 300
    out = estimator_errors(rewards, v_ref, bins, 0.5, (4, 8), (4, 8), 2, 32, 100, 0)
    assert set(out["paired"]) == {"N=4", "N=8"}
    ps = [d["p"] for row in out["paired"].values() for d in row.values()]
    adj = [d["p_holm"] for row in out["paired"].values() for d in row.values()]
    assert len(ps) == 6 and all(a >= p for a, p in zip(adj, ps, strict=True))
    assert min(adj) == pytest.approx(min(1.0, 6 * min(ps)))
    v_fix = fixed_estimates(rewards, 8, 0.5)
    v_ada, _ = adaptive_estimates(rewards, 8, 2, 32, 0.5, 100, 0)
    truth = exact_v_star(v_ref, 0.5)
    by_hand = ((v_ada - truth) ** 2 - (v_fix - truth) ** 2)[300:].mean()
    assert out["paired"]["N=8"]["hard"]["diff"] == pytest.approx(by_hand, rel=1e-12)
