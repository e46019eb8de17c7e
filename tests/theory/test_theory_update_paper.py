"""The paper-betas setting of ``update``: its offsets and the entropy bonus's stationary points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit
from astarpo.theory.experiments.common import INSTANCE
from astarpo.theory.experiments.update_paper import entropy_stationary_points, offsets
from astarpo.theory.instances import make_instance
from astarpo.theory.stage2 import regression_gradient


def _closed_form_value(p: float, b: float) -> float:
    """V*_b(x) = b log E_ref exp(r/b) for 0/1 rewards with solve rate p:
    b log(1 - p + p e^{1/b}) = 1 + b log(p + (1 - p) e^{-1/b}) (no overflow at small b)."""
    return 1.0 + b * math.log(p + (1.0 - p) * math.exp(-1.0 / b))


@pytest.mark.parametrize("betas", [(0.5, 1e-3), (1.0, 0.1), (1e-3, 0.5)])
def test_offsets_are_the_closed_form_difference(betas: tuple[float, float]) -> None:
    b1, b2 = betas
    for bandit in (make_instance("shared", **INSTANCE), LogLinearBandit.random(6, 5, 3, seed=4)):
        p = bandit.solve_rate()
        want = [_closed_form_value(q, b1) - _closed_form_value(q, b2) for q in p]
        np.testing.assert_allclose(offsets(bandit, b1, b2), want, rtol=1e-12, atol=1e-14)
    # beta1 > beta2 lowers V* (a softer max of the 0/1 rewards): the offset is negative
    if b1 > b2:
        assert np.all(offsets(make_instance("shared", **INSTANCE), b1, b2) < 0)


def test_entropy_stationary_points_are_stationary_and_local_maxima() -> None:
    bandit = LogLinearBandit.random(6, 5, 3, v_ref=0.2, seed=7)
    beta, eps = 0.05, 0.02
    kappa = eps / (2 * beta)
    points = entropy_stationary_points(bandit, beta, eps)
    assert set(points) == {"theta*", "reference"}

    def objective(theta: np.ndarray) -> float:
        pol = bandit.policy(theta)
        h = -(np.where(pol > 0, pol * np.log(np.where(pol > 0, pol, 1.0)), 0.0)).sum(-1)
        return float(bandit.objective(pol, beta) + kappa * h @ bandit.context_probs)

    rng = np.random.default_rng(0)
    for pt in points.values():
        assert pt["gradient_norm"] < 1e-6 and pt["kl_to_opt"] >= 0
        assert pt["gap"] == pytest.approx(beta * pt["kl_to_opt"])
    # recover the parameter from theta*: L-BFGS again, then check it is a local maximum
    theta_star, _ = bandit.optimal_theta(beta)
    from scipy.optimize import minimize

    options = {"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000}
    fit = minimize(lambda th: -objective(th), theta_star, method="Nelder-Mead", options=options)
    assert objective(fit.x) == pytest.approx(points["theta*"]["objective"], abs=1e-7)
    for _ in range(5):
        step = 1e-3 * rng.normal(size=3)
        assert objective(fit.x + step) <= objective(fit.x) + 1e-12
    grad, _ = regression_gradient(bandit, fit.x[None], np.zeros((1, 6)), beta, entropy=eps)
    assert np.linalg.norm(grad) < 1e-5  # the bonus's update has no drift there


def test_without_the_bonus_the_stationary_point_is_pi_star() -> None:
    bandit = LogLinearBandit.random(6, 5, 3, v_ref=0.2, seed=7)
    points = entropy_stationary_points(bandit, 0.05, 1e-12)
    assert points["theta*"]["kl_to_opt"] < 1e-8
