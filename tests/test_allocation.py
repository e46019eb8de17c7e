"""The adaptive-N rule (``astarpo.allocation.allocate``) on cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest

from astarpo.allocation import allocate


def test_failed_pilot_gets_the_larger_share_by_hand() -> None:
    # n0 = 4, X = 2, budget 16: rest 8 split 4 : 0.8 (w = 1 / (p + 1/4)), i.e. 6.67 : 1.33;
    # floors 6, 1 and the one left over to the larger remainder (the first prompt).
    first = np.array([[0, 0, 0, 0], [1, 1, 1, 1]], dtype=float)
    assert allocate(first, 16, 32).tolist() == [11, 5]
    assert allocate(first, 16, 6).tolist() == [6, 5]  # the cap; samples above it not drawn
    assert allocate(first, 8, 32).tolist() == [4, 4]  # no budget beyond the pilot


def test_alike_pilots_give_uniform_n_and_leading_dims_are_kept() -> None:
    first = np.zeros((3, 5, 2))
    first[1] = 1.0
    counts = allocate(first, 8 * 5, 64)
    assert counts.shape == (3, 5) and (counts == 8).all()


def test_bad_budget_or_cap_is_named() -> None:
    with pytest.raises(ValueError, match="below the pilot's 8 samples"):
        allocate(np.zeros((2, 4)), 7, 8)
    with pytest.raises(ValueError, match="cap 3 is below the pilot's 4"):
        allocate(np.zeros((2, 4)), 8, 3)
