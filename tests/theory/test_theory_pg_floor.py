"""The PG baseline's floor in ``horizon``: an absorbing over-confident region, not noise at pi*.

With a large step (c = 10) the group-mean policy gradient overshoots: it drives the wrong
answers' mass far below pi*'s, after which every sampled action is correct, the group-centred
scores are equal and the stochastic gradient is exactly zero. The run then sits at
``overconfident_gap`` = beta E_x[-log pi*(correct|x)], the same for every seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from astarpo.theory.baseline import overconfident_gap, policy_gradient_baseline, split_gap
from astarpo.theory.experiments.common import INSTANCE, config
from astarpo.theory.instances import make_instance, radius_for

HORIZON = Path(__file__).resolve().parents[2] / "docs" / "_static" / "theory" / "horizon.json"


def test_pg_with_a_large_step_is_absorbed_at_the_overconfident_gap() -> None:
    bandit = make_instance("shared", **INSTANCE)
    beta = 0.1
    floor = overconfident_gap(bandit, beta)
    cfg = config(beta, 200, c=10.0, radius=radius_for(bandit, beta), track_fisher=False)
    out = policy_gradient_baseline(bandit, cfg, group_size=4, n_seeds=2, seed=0)
    np.testing.assert_allclose(out.last[:, -1], floor, rtol=0.01)
    for theta in out.theta:
        policy = bandit.policy(theta)
        wrong = (policy * (bandit.rewards < 0.5)).sum(-1)
        wrong_opt = (bandit.optimal_policy(beta) * (bandit.rewards < 0.5)).sum(-1)
        assert np.all(wrong < 1e-2 * wrong_opt)  # over-confident: far less wrong mass than pi*
        # the whole gap is the correct/wrong split, none is inside the correct answers
        assert split_gap(bandit, policy, beta) >= 0.99 * bandit.suboptimality(policy, beta)
    # absorbed: only rounding moves it (a wrong sample has probability ~1e-6 per round;
    # the last two evaluation points are rounds 151 and 200)
    np.testing.assert_allclose(out.last[:, -1], out.last[:, -2], rtol=1e-9)


def test_committed_horizon_pg_at_c10_is_the_overconfident_gap() -> None:
    """The flat, seed-free 1.1457e-5 of ``horizon.json`` at c = 10 is that region's gap."""
    res = json.loads(HORIZON.read_text())
    c10 = res["baseline"]["final_by_c"]["pg"]["10.0"]
    floor = overconfident_gap(make_instance("shared", **INSTANCE), res["config"]["beta2"])
    np.testing.assert_allclose(c10["gmean"][0], floor, rtol=0.01)
    assert (c10["ghi"][0] - c10["glo"][0]) / c10["gmean"][0] < 0.01  # no spread over seeds


def test_overconfident_gap_and_split_gap_closed_forms() -> None:
    bandit = make_instance("shared", **INSTANCE)
    beta = 0.1
    opt = bandit.optimal_policy(beta)
    correct = bandit.rewards > 0.5
    # the limit policy: pi* restricted to the correct answers, renormalised
    limit = np.where(correct, opt, 0.0)
    limit /= limit.sum(-1, keepdims=True)
    np.testing.assert_allclose(bandit.suboptimality(limit, beta), overconfident_gap(bandit, beta))
    assert split_gap(bandit, opt, beta) == 0.0
    np.testing.assert_allclose(split_gap(bandit, limit, beta), overconfident_gap(bandit, beta))
