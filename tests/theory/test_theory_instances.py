"""The constructed instances and their random streams: hard contexts where they are built,
Stage 1 and Stage 2 drawing from independent streams."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.theory import LogLinearBandit
from astarpo.theory.instances import hard_contexts, make_instance
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
