"""Tests of the online-gradient-descent oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from astarpo import OnlineGradientDescent


def quadratic(a: np.ndarray, b: np.ndarray):
    """f(x) = 0.5 x^T A x - b^T x, strongly convex; minimizer A^-1 b."""
    return (lambda x: a @ x - b), np.linalg.solve(a, b)


@pytest.mark.parametrize("schedule", ["constant", "inverse_sqrt", "inverse"])
def test_reaches_minimizer_of_strongly_convex_quadratic(schedule: str) -> None:
    a = np.array([[2.0, 0.5], [0.5, 1.0]])
    grad, x_star = quadratic(a, np.array([1.0, -1.0]))
    lr = {"constant": 0.3, "inverse_sqrt": 0.6, "inverse": 1.5}[schedule]
    ogd = OnlineGradientDescent(lr, schedule)  # type: ignore[arg-type]
    x = np.zeros(2)
    state = ogd.init(x)
    for _ in range(3000):
        x, state = ogd.update(x, grad(x), state)
    np.testing.assert_allclose(x, x_star, atol=1e-4)
    assert state.step == 3000
    np.testing.assert_allclose(state.average, x_star, atol=0.05)


def test_constant_unprojected_equals_plain_gradient_descent_bitwise() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    a = a @ a.T + np.eye(4)
    grad, _ = quadratic(a, rng.normal(size=4))
    ogd = OnlineGradientDescent(0.05)
    x = rng.normal(size=4)
    y = x.copy()
    state = ogd.init(x)
    for _ in range(50):
        x, state = ogd.update(x, grad(x), state)
        y = y - 0.05 * grad(y)
    assert np.array_equal(x, y)


def test_torch_matches_numpy_and_keeps_inputs() -> None:
    ogd = OnlineGradientDescent(0.5, "inverse_sqrt", radius=1.0)
    xn = np.array([[3.0, 4.0], [0.1, 0.2]])
    xt = torch.tensor(xn)
    sn, st = ogd.init(xn), ogd.init(xt)
    for _ in range(5):
        gn = 2 * xn - 1.0
        gt = 2 * xt - 1.0
        xn_new, sn = ogd.update(xn, gn, sn)
        xt_new, st = ogd.update(xt, gt, st)
        assert not np.shares_memory(xn_new, xn)
        xn, xt = xn_new, xt_new
        np.testing.assert_allclose(xt.numpy(), xn, rtol=1e-12)
    np.testing.assert_allclose(st.average.numpy(), sn.average, rtol=1e-12)


def test_projection_onto_l2_ball_per_row() -> None:
    ogd = OnlineGradientDescent(1.0, radius=2.0)
    x = np.array([[3.0, 4.0], [0.3, 0.4]])
    p = ogd.project(x)
    np.testing.assert_allclose(np.linalg.norm(p, axis=-1), [2.0, 0.5])
    np.testing.assert_allclose(p[0], [1.2, 1.6])
    new, _ = ogd.update(np.zeros((2, 2)), -x, ogd.init(np.zeros((2, 2))))
    assert np.all(np.linalg.norm(new, axis=-1) <= 2.0 + 1e-12)


def test_step_sizes() -> None:
    assert OnlineGradientDescent(2.0).step_size(9) == 2.0
    assert OnlineGradientDescent(2.0, "inverse_sqrt").step_size(9) == pytest.approx(2 / 3)
    assert OnlineGradientDescent(2.0, "inverse").step_size(8) == 0.25
    with pytest.raises(ValueError, match="t counts from 1"):
        OnlineGradientDescent(1.0).step_size(0)


def test_average_iterate_is_the_mean_of_iterates() -> None:
    ogd = OnlineGradientDescent(0.1, "inverse")
    x = np.array([1.0])
    state = ogd.init(x)
    seen = []
    for _ in range(7):
        seen.append(x.copy())
        x, state = ogd.update(x, np.array([math.cos(len(seen))]), state)
    np.testing.assert_allclose(state.average, np.mean(seen, axis=0), rtol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"learning_rate": 1.0, "schedule": "cosine"}, "schedule"),
        ({"learning_rate": 1.0, "radius": 0.0}, "radius"),
    ],
)
def test_bad_config_raises(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        OnlineGradientDescent(**kwargs)


def test_shape_mismatch_raises() -> None:
    ogd = OnlineGradientDescent(1.0)
    with pytest.raises(ValueError, match="shape"):
        ogd.update(np.zeros(3), np.zeros(2), ogd.init(np.zeros(3)))
