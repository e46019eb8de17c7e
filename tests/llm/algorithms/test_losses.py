"""Tests of the baselines' pure losses: hand-computed values, properties, references, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from astarpo.llm.algorithms.gae import gae, value_loss
from astarpo.llm.algorithms.losses import (
    aggregate,
    clipped_policy_loss,
    group_advantages,
    kl_penalty,
    rebel_loss,
    rloo_advantages,
)

D = torch.float64


def t(x: object) -> torch.Tensor:
    return torch.tensor(x, dtype=D)


# ---------------------------------------------------------------- aggregation


def test_aggregate_modes_hand_computed() -> None:
    x = t([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    m = t([[1, 1, 1], [1, 0, 0]])
    # token_mean: (1+2+3+4)/4; seq_mean: (2 + 4)/2; seq_sum_norm with L=4: (6/4 + 4/4)/2
    assert aggregate(x, m, "token_mean").item() == pytest.approx(2.5)
    assert aggregate(x, m, "seq_mean").item() == pytest.approx(3.0)
    assert aggregate(x, m, "seq_sum_norm", norm_len=4).item() == pytest.approx(1.25)


def test_aggregate_ignores_padding_values_and_empty_rows() -> None:
    x = t([[1.0, 1e9], [float("nan"), 5.0]])
    m = t([[1, 0], [0, 1]])
    assert aggregate(x, m, "token_mean").item() == pytest.approx(3.0)
    empty = aggregate(t([[1.0, 2.0]]), t([[0, 0]]), "seq_mean")
    assert empty.item() == 0.0


def test_aggregate_errors() -> None:
    with pytest.raises(ValueError, match="norm_len"):
        aggregate(t([[1.0]]), t([[1]]), "seq_sum_norm")
    with pytest.raises(ValueError, match="mode"):
        aggregate(t([[1.0]]), t([[1]]), "bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="match"):
        aggregate(t([[1.0, 2.0]]), t([[1]]))


# ---------------------------------------------------------------- advantages


def test_group_advantages_hand_computed() -> None:
    r = t([[1.0, 0.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    adv = group_advantages(r, eps=0.0 + 1e-12)
    # mean 0.5, sample std sqrt(((0.5^2)*4)/3) = sqrt(1/3)
    s = math.sqrt(1 / 3)
    assert torch.allclose(adv[0], t([0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s]))
    assert torch.equal(adv[1], torch.zeros(4, dtype=D))
    dr = group_advantages(r, scale_std=False)
    assert torch.allclose(dr[0], t([0.5, -0.5, -0.5, 0.5]))


@settings(max_examples=50, deadline=None)
@given(
    p=st.integers(1, 5),
    g=st.integers(2, 9),
    seed=st.integers(0, 10_000),
    scale=st.booleans(),
)
def test_group_advantages_sum_to_zero_per_group(p: int, g: int, seed: int, scale: bool) -> None:
    gen = torch.Generator().manual_seed(seed)
    r = torch.randint(0, 3, (p, g), generator=gen).to(D) + torch.rand(p, g, generator=gen, dtype=D)
    adv = group_advantages(r, scale_std=scale)
    assert torch.allclose(adv.sum(dim=1), torch.zeros(p, dtype=D), atol=1e-9)
    loo = rloo_advantages(r)
    assert torch.allclose(loo.sum(dim=1), torch.zeros(p, dtype=D), atol=1e-9)


def test_rloo_hand_computed_and_closed_form() -> None:
    r = t([[1.0, 0.0, 0.0]])
    # 1 - 0, 0 - (1+0)/2, 0 - (1+0)/2
    assert torch.allclose(rloo_advantages(r), t([[1.0, -0.5, -0.5]]))
    gen = torch.Generator().manual_seed(0)
    r = torch.rand(4, 6, generator=gen, dtype=D)
    expected = 6 / 5 * (r - r.mean(dim=1, keepdim=True))
    assert torch.allclose(rloo_advantages(r), expected)


@pytest.mark.parametrize("fn", [group_advantages, rloo_advantages])
def test_advantages_reject_groups_of_one(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="G >= 2"):
        fn(t([[1.0], [0.0]]))
    with pytest.raises(ValueError, match=r"\[P, G\]"):
        fn(t([1.0, 0.0]))


# ---------------------------------------------------------------- clipped policy loss


def test_clipped_policy_loss_hand_computed() -> None:
    old = t([[0.0, 0.0], [0.0, 0.0]])
    # ratios: e^{0.5}=1.6487 (clipped to 1.2 for A>0), e^{-0.5}=0.6065 (clipped to 0.8 for A<0:
    # min(0.6065*-1, 0.8*-1) = -0.8), row 2: ratio 1, padding.
    new = t([[0.5, -0.5], [0.0, 9.0]])
    adv = t([[1.0, -1.0], [2.0, 7.0]])
    mask = t([[1, 1], [1, 0]])
    loss = clipped_policy_loss(new, old, adv, mask, clip_eps=0.2)
    # token terms: -min(1.6487, 1.2) = -1.2 ; -min(-0.6065, -0.8) = 0.8 ; -2
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 2.0) / 3)
    # clip-higher: upper range 0.7 keeps 1.6487 unclipped
    loss_hi = clipped_policy_loss(new, old, adv, mask, clip_eps=0.2, clip_eps_high=0.7)
    assert loss_hi.item() == pytest.approx((-math.exp(0.5) + 0.8 - 2.0) / 3)
    seq = clipped_policy_loss(new, old, adv, mask, aggregation="seq_mean")
    assert seq.item() == pytest.approx(((-1.2 + 0.8) / 2 + -2.0) / 2)


def test_clipped_policy_loss_on_policy_gradient_is_policy_gradient() -> None:
    gen = torch.Generator().manual_seed(1)
    logp = -torch.rand(3, 4, generator=gen, dtype=D)
    logp.requires_grad_(True)
    mask = t([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    adv = t([0.5, -1.0, 2.0])
    loss = clipped_policy_loss(logp, logp.detach(), adv, mask, aggregation="token_mean")
    loss.backward()
    expected = -adv[:, None] * mask / mask.sum()
    assert logp.grad is not None
    assert torch.allclose(logp.grad, expected)


def test_clipped_policy_loss_padding_with_inf_is_finite() -> None:
    new = t([[-1.0, -float("inf")]]).requires_grad_(True)
    old = t([[-1.0, 0.0]])
    loss = clipped_policy_loss(new, old, t([1.0]), t([[1, 0]]))
    loss.backward()
    assert torch.isfinite(loss) and new.grad is not None and torch.isfinite(new.grad).all()


def test_clipped_policy_loss_errors() -> None:
    x = torch.zeros(2, 3, dtype=D)
    m = torch.ones(2, 3, dtype=D)
    with pytest.raises(ValueError, match="advantages"):
        clipped_policy_loss(x, x, torch.zeros(3, dtype=D), m)
    with pytest.raises(ValueError, match="clip_eps"):
        clipped_policy_loss(x, x, torch.zeros(2, dtype=D), m, clip_eps=0.0)


# ---------------------------------------------------------------- KL


def test_kl_penalty_estimators_hand_computed() -> None:
    logp = t([[-1.0, -2.0]])
    ref = t([[-1.5, -2.0]])
    d = -0.5  # ref - logp on token 0
    assert torch.allclose(kl_penalty(logp, ref, kind="k1"), t([[0.5, 0.0]]))
    assert torch.allclose(kl_penalty(logp, ref, kind="k2"), t([[0.125, 0.0]]))
    assert torch.allclose(kl_penalty(logp, ref, kind="k3"), t([[math.exp(d) - 1 - d, 0.0]]))
    masked = kl_penalty(logp, ref, t([[0, 1]]), kind="k3")
    assert torch.equal(masked, torch.zeros(1, 2, dtype=D))
    with pytest.raises(ValueError, match="kind"):
        kl_penalty(logp, ref, kind="k4")  # type: ignore[arg-type]


def test_k3_is_unbiased_for_the_exact_kl() -> None:
    # Categorical pi and ref over 5 tokens: E_pi[k1] = E_pi[k3] = KL(pi||ref).
    pi = torch.log_softmax(t([0.3, -1.0, 2.0, 0.0, 0.5]), 0)
    ref = torch.log_softmax(t([0.0, 0.0, 1.0, -0.5, 1.0]), 0)
    exact = (pi.exp() * (pi - ref)).sum()
    for kind in ("k1", "k3"):
        est = (pi.exp() * kl_penalty(pi[None], ref[None], kind=kind)[0]).sum()
        assert est.item() == pytest.approx(exact.item(), rel=1e-12)


# ---------------------------------------------------------------- GAE


def gae_reference(
    rewards: list[list[float]], values: list[list[float]], mask: list[list[int]], gamma, lam
) -> tuple[list[list[float]], list[list[float]]]:
    """Plain-Python GAE: compress each row to its valid tokens, recurse, scatter back."""
    advs, rets = [], []
    for r_row, v_row, m_row in zip(rewards, values, mask, strict=True):
        idx = [i for i, m in enumerate(m_row) if m]
        a_row = [0.0] * len(r_row)
        ret_row = [0.0] * len(r_row)
        last = 0.0
        for k in reversed(range(len(idx))):
            i = idx[k]
            next_v = v_row[idx[k + 1]] if k + 1 < len(idx) else 0.0
            delta = r_row[i] + gamma * next_v - v_row[i]
            last = delta + gamma * lam * last
            a_row[i] = last
            ret_row[i] = last + v_row[i]
        advs.append(a_row)
        rets.append(ret_row)
    return advs, rets


def test_gae_hand_computed() -> None:
    # One row, 3 tokens, reward only at the end, gamma=1, lam=0.5
    r = t([[0.0, 0.0, 1.0]])
    v = t([[0.2, 0.4, 0.6]])
    adv, ret = gae(r, v, t([[1, 1, 1]]), gamma=1.0, lam=0.5)
    d2 = 1.0 - 0.6
    d1 = 0.0 + 0.6 - 0.4
    d0 = 0.0 + 0.4 - 0.2
    a2, a1 = d2, d1 + 0.5 * d2
    a0 = d0 + 0.5 * a1
    assert torch.allclose(adv, t([[a0, a1, a2]]))
    assert torch.allclose(ret, t([[a0 + 0.2, a1 + 0.4, a2 + 0.6]]))
    # lam = 1, gamma = 1: advantage = return-to-go minus value (Monte Carlo)
    adv1, ret1 = gae(r, v, t([[1, 1, 1]]), gamma=1.0, lam=1.0)
    assert torch.allclose(ret1, t([[1.0, 1.0, 1.0]]))
    assert torch.allclose(adv1, 1.0 - v)


@settings(max_examples=60, deadline=None)
@given(
    b=st.integers(1, 4),
    length=st.integers(1, 7),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
    seed=st.integers(0, 10_000),
)
def test_gae_matches_python_loop(b: int, length: int, gamma: float, lam: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    r = torch.randn(b, length, generator=gen, dtype=D)
    v = torch.randn(b, length, generator=gen, dtype=D)
    mask = (torch.rand(b, length, generator=gen) < 0.7).to(torch.int64)
    adv, ret = gae(r, v, mask, gamma=gamma, lam=lam)
    ref_adv, ref_ret = gae_reference(r.tolist(), v.tolist(), mask.tolist(), gamma, lam)
    assert torch.allclose(adv, t(ref_adv), atol=1e-10)
    assert torch.allclose(ret, t(ref_ret), atol=1e-10)


def test_gae_errors() -> None:
    x = torch.zeros(1, 2, dtype=D)
    with pytest.raises(ValueError, match="gamma"):
        gae(x, x, x, gamma=1.5)
    with pytest.raises(ValueError, match="lam"):
        gae(x, x, x, lam=-0.1)
    with pytest.raises(ValueError, match="match"):
        gae(x, torch.zeros(1, 3, dtype=D), x)


# ---------------------------------------------------------------- value loss


def test_value_loss_hand_computed() -> None:
    values = t([[1.0, 0.0]])
    old = t([[0.0, 0.0]])
    ret = t([[2.0, 0.5]])
    mask = t([[1, 1]])
    # unclipped: 0.5*((1-2)^2 + (0-0.5)^2)/2
    assert value_loss(values, old, ret, mask, clip_eps=None).item() == pytest.approx(
        0.5 * (1.0 + 0.25) / 2
    )
    # clipped token 0: old + clip(1, -0.2, 0.2) = 0.2 -> (0.2-2)^2 = 3.24 > 1
    assert value_loss(values, old, ret, mask, clip_eps=0.2).item() == pytest.approx(
        0.5 * (3.24 + 0.25) / 2
    )


def test_value_loss_gradient() -> None:
    values = t([[0.3, -0.1, 5.0]]).requires_grad_(True)
    ret = t([[1.0, 1.0, 0.0]])
    mask = t([[1, 1, 0]])
    value_loss(values, values.detach(), ret, mask, clip_eps=None).backward()
    assert values.grad is not None
    assert torch.allclose(values.grad, (values.detach() - ret) * mask / 2)


# ---------------------------------------------------------------- REBEL


def test_rebel_loss_hand_computed_and_gradient() -> None:
    la = t([-1.0, -2.0]).requires_grad_(True)
    lb = t([-1.5, -2.0])
    oa = t([-1.2, -2.0])
    ob = t([-1.5, -1.0])
    ra, rb = t([1.0, 0.0]), t([0.0, 1.0])
    eta = 2.0
    # pair 0: ((0.2 - 0)/2 - 1)^2 = 0.81 ; pair 1: ((0 - (-1))/2 - (-1))^2 = 2.25
    res = t([0.1 - 1.0, 0.5 + 1.0])
    loss = rebel_loss(la, lb, oa, ob, ra, rb, eta, reduction="none")
    assert torch.allclose(loss, t([0.81, 2.25]))
    rebel_loss(la, lb, oa, ob, ra, rb, eta, reduction="sum").backward()
    assert la.grad is not None
    assert torch.allclose(la.grad, 2.0 / eta * res)
    assert rebel_loss(la, lb, oa, ob, ra, rb, eta).item() == pytest.approx((0.81 + 2.25) / 2)


def test_rebel_loss_is_antisymmetric_in_the_pair() -> None:
    gen = torch.Generator().manual_seed(3)
    xs = [torch.randn(5, generator=gen, dtype=D) for _ in range(6)]
    ab = rebel_loss(*xs, eta=0.3, reduction="none")
    ba = rebel_loss(xs[1], xs[0], xs[3], xs[2], xs[5], xs[4], eta=0.3, reduction="none")
    assert torch.allclose(ab, ba)


def test_rebel_loss_errors() -> None:
    x = torch.zeros(3, dtype=D)
    with pytest.raises(ValueError, match="eta"):
        rebel_loss(x, x, x, x, x, x, eta=0.0)
    with pytest.raises(ValueError, match="share shape"):
        rebel_loss(x, torch.zeros(2, dtype=D), x, x, x, x, eta=1.0)
