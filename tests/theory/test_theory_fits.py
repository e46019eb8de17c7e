"""The fits behind the rates and the Fisher floor: known exponents recovered, local slopes,
the floor against its definition."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit
from astarpo.theory.fisher import fisher_floor, fisher_information, identifiable_basis
from astarpo.theory.fits import fit_additive, fit_slope, local_slopes
from astarpo.theory.instances import make_instance


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
