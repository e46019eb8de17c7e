"""Stage 1's adaptive allocation: the sample budget is kept and failures get more samples."""

from __future__ import annotations

import numpy as np

from astarpo.allocation import allocate
from astarpo.theory import LogLinearBandit
from astarpo.theory.stage1 import estimate_values, estimate_values_adaptive
from astarpo.theory.streams import STAGE1, generators


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
