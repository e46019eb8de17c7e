"""Tests of the core objective: closed forms, float64 references, properties, gradients."""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import astarpo
from astarpo import (
    AdvantageRegression,
    advantage_regression_loss,
    optimal_advantage,
    optimal_policy,
    optimal_value,
)

BETAS = [1e-6, 1e-3, 0.5, 1.0, 10.0, 1e3]
finite = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)
reward_rows = arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 12)), elements=finite)


def brute_force_v_star(rewards: np.ndarray, beta: float) -> np.ndarray:
    """V* with mpmath-free high precision: Python's exact exp of shifted values in float64."""
    out = []
    for row in np.atleast_2d(rewards):
        m = max(row)
        s = math.fsum(math.exp((r - m) / beta) for r in row)
        out.append(m + beta * (math.log(s) - math.log(len(row))))
    return np.array(out)


@pytest.mark.parametrize("beta", BETAS)
@pytest.mark.parametrize("c", [-100.0, -1.0, 0.0, 0.3, 100.0])
def test_value_of_constant_rewards_is_the_constant(beta: float, c: float) -> None:
    r = np.full((3, 7), c)
    np.testing.assert_allclose(optimal_value(r, beta), c, rtol=0, atol=1e-12 * max(1, abs(c)))
    t = torch.full((3, 7), c, dtype=torch.float64)
    torch.testing.assert_close(optimal_value(t, beta), torch.full((3,), c, dtype=torch.float64))


@settings(max_examples=200, deadline=None)
@given(reward_rows, st.sampled_from(BETAS))
def test_value_between_mean_and_max_and_matches_reference(r: np.ndarray, beta: float) -> None:
    v = optimal_value(r, beta)
    assert v.shape == r.shape[:-1]
    tol = 1e-9 * (1 + np.abs(r).max())
    assert np.all(v >= r.mean(-1) - tol)
    assert np.all(v <= r.max(-1) + tol)
    np.testing.assert_allclose(v, brute_force_v_star(r, beta), rtol=1e-12, atol=tol)
    vt = optimal_value(torch.from_numpy(r), beta)
    np.testing.assert_allclose(vt.numpy(), v, rtol=1e-12, atol=tol)


def test_value_exact_rational_reference() -> None:
    # 0/1 rewards: V* = beta log(1 + (k/N)(e^(1/beta) - 1)), exact for k successes of N.
    for n in [1, 2, 8, 64]:
        for k in range(n + 1):
            r = np.array([1.0] * k + [0.0] * (n - k))
            for beta in [0.1, 0.5, 2.0]:
                p = float(Fraction(k, n))
                want = beta * math.log1p(p * math.expm1(1 / beta))
                assert optimal_value(r, beta) == pytest.approx(want, rel=1e-13, abs=1e-15)


def test_value_limits_in_beta() -> None:
    r = np.array([0.2, -1.0, 3.0, 0.7])
    assert optimal_value(r, 1e-6) == pytest.approx(3.0, abs=1e-5)
    assert optimal_value(r, 1e6) == pytest.approx(r.mean(), abs=1e-5)
    # monotone in beta: decreasing from max to mean
    vals = [optimal_value(r, b) for b in [1e-3, 0.1, 1.0, 10.0, 1e3]]
    assert all(a >= b for a, b in itertools.pairwise(vals))


@pytest.mark.parametrize("beta", [1e-6, 1e-3])
def test_value_no_overflow_at_small_beta(beta: float) -> None:
    r = np.array([[100.0, -100.0, 99.0], [-100.0, -100.0, -100.0]])
    v = optimal_value(r, beta)
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(v, [100.0 - beta * math.log(3), -100.0], atol=1e-9)
    v32 = optimal_value(torch.tensor(r, dtype=torch.float32), beta)
    assert v32.dtype == torch.float32 and torch.isfinite(v32).all()


def test_batched_equals_per_row() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(size=(2, 3, 5))
    v = optimal_value(r, 0.5)
    for i in range(2):
        for j in range(3):
            assert v[i, j] == optimal_value(r[i, j], 0.5)


def test_dtypes_and_kinds_are_kept() -> None:
    r32 = np.zeros((2, 3), dtype=np.float32)
    assert optimal_value(r32, 0.5).dtype == np.float32
    assert optimal_value(np.zeros((2, 3)), 0.5).dtype == np.float64
    t = torch.zeros(2, 3, dtype=torch.float64)
    out = optimal_value(t, 0.5)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert isinstance(optimal_value(np.array([1, 0, 1]), 0.5), np.ndarray)  # ints become floats


def test_value_gradient_is_softmax_weights() -> None:
    r = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    optimal_value(r, 0.5).backward()
    assert r.grad is not None
    torch.testing.assert_close(r.grad, torch.softmax(r.detach() / 0.5, dim=-1))


@pytest.mark.parametrize(
    ("rewards", "beta", "match"),
    [
        (np.zeros(3), 0.0, "beta"),
        (np.zeros(3), -1.0, "beta"),
        (np.zeros(3), float("nan"), "beta"),
        (np.zeros(3), float("inf"), "beta"),
        (np.zeros((2, 0)), 0.5, "N = 0"),
        (np.array(1.0), 0.5, "scalar"),
        (np.array([0.0, np.nan]), 0.5, "NaN"),
        (np.array([0.0, np.inf]), 0.5, "infinite"),
        (torch.tensor([0.0, float("nan")]), 0.5, "NaN"),
    ],
)
def test_value_bad_input_raises(rewards: np.ndarray, beta: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        optimal_value(rewards, beta)


def test_advantage() -> None:
    np.testing.assert_array_equal(
        optimal_advantage(np.array([1.0, 0.0]), np.array([0.25, 0.25])), [0.75, -0.25]
    )


@pytest.mark.parametrize("beta", [1e-3, 0.1, 0.5, 2.0])
def test_loss_is_zero_at_the_optimal_policy(beta: float) -> None:
    rng = np.random.default_rng(1)
    y = 6
    ref_logp = np.log(rng.dirichlet(np.ones(y)))
    r = rng.integers(0, 2, size=y).astype(float)
    logp_star = optimal_policy(ref_logp, r, beta)
    np.testing.assert_allclose(np.exp(logp_star).sum(), 1.0, rtol=1e-12)
    # The true V* = beta log E_ref exp(r / beta) (a weighted optimal_value).
    v_star = beta * np.log(np.sum(np.exp(ref_logp + r / beta - (r / beta).max()))) + r.max()
    loss = advantage_regression_loss(logp_star, ref_logp, r, np.full(y, v_star), beta)
    np.testing.assert_allclose(loss, 0.0, atol=1e-24)
    # any other policy has positive loss on some action
    other = np.log(np.full(y, 1 / y))
    assert advantage_regression_loss(other, ref_logp, r, np.full(y, v_star), beta).max() > 1e-6


def test_loss_equals_formula_and_reductions() -> None:
    logp = np.array([-1.0, -2.0])
    logp_ref = np.array([-1.5, -1.0])
    reward = np.array([1.0, 0.0])
    v_star = np.array([0.3, 0.3])
    want = (0.1 * (logp - logp_ref) - (reward - v_star)) ** 2
    np.testing.assert_allclose(advantage_regression_loss(logp, logp_ref, reward, v_star, 0.1), want)
    assert advantage_regression_loss(logp, logp_ref, reward, v_star, 0.1, "mean") == pytest.approx(
        want.mean()
    )
    assert advantage_regression_loss(logp, logp_ref, reward, v_star, 0.1, "sum") == pytest.approx(
        want.sum()
    )
    with pytest.raises(ValueError, match="reduction"):
        advantage_regression_loss(logp, logp_ref, reward, v_star, 0.1, "avg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beta"):
        advantage_regression_loss(logp, logp_ref, reward, v_star, 0.0)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 8), st.sampled_from([1e-3, 0.1, 1.0]), st.integers(0, 2**31 - 1))
def test_loss_gradient_matches_analytic(b: int, beta: float, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    logp = torch.randn(b, generator=g, dtype=torch.float64, requires_grad=True)
    logp_ref = torch.randn(b, generator=g, dtype=torch.float64)
    reward = torch.randint(0, 2, (b,), generator=g).double()
    v_star = torch.rand(b, generator=g, dtype=torch.float64)
    advantage_regression_loss(logp, logp_ref, reward, v_star, beta).sum().backward()
    want = 2 * beta * (beta * (logp.detach() - logp_ref) - (reward - v_star))
    assert logp.grad is not None
    torch.testing.assert_close(logp.grad, want, rtol=1e-12, atol=1e-15)


def test_optimal_policy_torch_matches_numpy_and_handles_zero_ref_mass() -> None:
    with np.errstate(divide="ignore"):
        ref = np.log(np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]))
    r = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    lp = optimal_policy(ref, r, 1e-3)
    assert np.exp(lp[0, 2]) == 0.0
    np.testing.assert_allclose(np.exp(lp).sum(-1), 1.0)
    np.testing.assert_allclose(np.exp(lp[0, 1]), 1.0, atol=1e-12)
    lt = optimal_policy(torch.from_numpy(ref), torch.from_numpy(r), 1e-3)
    np.testing.assert_allclose(lt.numpy(), lp)


def test_facade_defaults_validation_and_delegation() -> None:
    obj = AdvantageRegression()
    assert (obj.beta1, obj.beta2) == (0.5, 1e-3)
    with pytest.raises(ValueError, match="beta1"):
        AdvantageRegression(beta1=0)
    with pytest.raises(ValueError, match="beta2"):
        AdvantageRegression(beta2=-1e-3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.beta1 = 1.0  # type: ignore[misc]
    r = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    assert obj.value(r) == optimal_value(r, 0.5)
    v = obj.value(r)
    torch.testing.assert_close(obj.advantage(torch.tensor([1.0]), v), 1.0 - v)
    lp, lr = torch.tensor([-2.0]), torch.tensor([-3.0])
    torch.testing.assert_close(
        obj.loss(lp, lr, torch.tensor([1.0]), v),
        advantage_regression_loss(lp, lr, torch.tensor([1.0]), v, 1e-3),
    )


def test_import_is_light() -> None:
    import subprocess
    import sys

    code = "import sys, astarpo; print(any(m in sys.modules for m in ('transformers', 'vllm')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert astarpo.__version__


# --- reliability: shapes, NaN, half precision, all -inf reference --------------------------


def test_loss_refuses_inputs_that_broadcast_to_another_shape() -> None:
    logp = torch.zeros(3)
    with pytest.raises(ValueError, match=r"logp_ref \[3, 1\].*broadcast to \[3, 3\]"):
        advantage_regression_loss(logp, torch.zeros(3, 1), torch.zeros(3), torch.zeros(3), 0.1)
    with pytest.raises(ValueError, match=r"v_star \[2\]"):
        advantage_regression_loss(logp, logp, torch.zeros(3), torch.zeros(2), 0.1)
    with pytest.raises(ValueError, match="share one shape"):
        optimal_advantage(np.zeros(3), np.zeros((3, 1)))
    # Scalars and identical shapes stay fine.
    assert advantage_regression_loss(logp, logp, torch.ones(3), 0.5, 0.1).shape == (3,)


@pytest.mark.parametrize("name", ["logp", "logp_ref", "reward", "v_star"])
def test_loss_refuses_nan(name: str) -> None:
    args = {k: torch.zeros(2) for k in ("logp", "logp_ref", "reward", "v_star")}
    args[name] = torch.tensor([0.0, float("nan")])
    with pytest.raises(ValueError, match=f"{name} contains NaN"):
        advantage_regression_loss(**args, beta=0.1)
    # check=False (the trainer, which checks the reduced loss once per step): no check, so no
    # host sync; the NaN reaches the mean loss, where that per-step check sees it.
    loss = advantage_regression_loss(**args, beta=0.1, reduction="mean", check=False)
    assert torch.isnan(loss)


def test_optimal_policy_all_minus_inf_raises_in_torch_as_in_numpy() -> None:
    ref = np.full((2, 3), -np.inf)
    ref[0] = np.log(1 / 3)
    for kind in (np.asarray, torch.from_numpy):
        with pytest.raises(ValueError, match="zero mass"):
            optimal_policy(kind(ref), kind(np.zeros((2, 3))), 0.5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, np.float16])
def test_optimal_value_half_precision_matches_float64(dtype) -> None:
    rng = np.random.default_rng(0)
    r64 = np.concatenate([rng.choice([-100.0, 100.0], size=(16, 8)), rng.normal(size=(16, 8))])
    for beta in (1e-3, 0.5, 10.0):
        want = optimal_value(r64, beta)
        if isinstance(dtype, torch.dtype):
            half = torch.from_numpy(r64).to(dtype)
            got = optimal_value(half, beta)
            assert got.dtype == dtype
            ref = optimal_value(half.double(), beta).numpy()  # exact value of the rounded input
            eps = torch.finfo(dtype).eps
            got_np = got.double().numpy()
        else:
            half = r64.astype(dtype)
            got = optimal_value(half, beta)
            assert got.dtype == dtype
            ref = optimal_value(half.astype(np.float64), beta)
            eps = float(np.finfo(dtype).eps)
            got_np = got.astype(np.float64)
        assert np.isfinite(got_np).all(), (dtype, beta)
        # Within one rounding of the float64 value of the (rounded) input ...
        np.testing.assert_allclose(got_np, ref, rtol=eps, atol=eps)
        # ... and of the float64 value of the original rewards up to input rounding.
        np.testing.assert_allclose(got_np, want, rtol=4 * eps, atol=4 * eps * 100)
