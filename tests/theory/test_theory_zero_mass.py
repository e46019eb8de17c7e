"""coverage's additions: tuned step sizes at equal samples and the never-solved contexts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from astarpo.theory.experiments.tuning import best_c, final_by_c, seed_slice
from astarpo.theory.experiments.zero_mass import EPSILON, run_zero_mass, verdict
from astarpo.theory.tracking import Stage2Result


def _result(finals: list[float]) -> Stage2Result:
    s = len(finals)
    last = np.stack([np.full(s, 1.0), np.full(s, 0.5), np.array(finals)], -1)  # [S, K=3]
    z = np.zeros((s, 3))
    return Stage2Result(
        steps=np.array([1, 10, 100]),
        last=last,
        average=z,
        mixture=z,
        mean_gap=z,
        context_last=np.zeros((s, 3, 4)),
        path=np.zeros((s, 3, 2)),
        average_path=np.zeros((s, 3, 2)),
        fisher_min=z,
        theta=np.arange(2 * s, dtype=float).reshape(s, 2),
        theta_average=np.zeros((s, 2)),
        norm_max=np.zeros(s),
        at_radius=np.zeros(s),
        clipped=np.zeros(s),
    )


def test_best_c_takes_the_smallest_geometric_mean_final_gap() -> None:
    runs = {0.3: _result([1e-2, 1e-2]), 1.0: _result([1e-4, 1.0]), 3.0: _result([2e-3, 2e-3])}
    # geometric means: 1e-2, 1e-2, 2e-3 (an arithmetic mean would pick 0.3 or 3.0 apart)
    assert best_c(runs) == 3.0
    assert best_c(runs, slice(0, 1)) == 1.0  # the first seed alone
    tie = {1.0: _result([1e-3]), 0.3: _result([1e-3])}
    assert best_c(tie) == 0.3
    assert set(final_by_c(runs)) == {"0.3", "1.0", "3.0"}


def test_seed_slice_keeps_steps_and_slices_every_per_seed_array() -> None:
    run = _result([1.0, 2.0, 3.0])
    part = seed_slice(run, slice(1, 3))
    assert part.last.shape == (2, 3) and part.theta.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert part.steps.tolist() == [1, 10, 100] and part.context_last.shape == (2, 3, 4)


@pytest.mark.parametrize(
    ("lo", "hi", "want"),
    [(0.095, 0.1, "leaves the gap"), (0.0, 0.01, "closes it"), (0.02, 0.09, "partly")],
)
def test_verdict_rule(lo: float, hi: float, want: str) -> None:
    assert verdict({"lo": [lo], "hi": [hi]}, 0.1) == want


@pytest.fixture(scope="module")
def zero_mass() -> dict:
    return run_zero_mass(seeds=3, quick=True, seed=0, grid=(1.0, 3.0))


def test_zero_mass_instances_match_their_closed_forms(zero_mass: dict) -> None:
    beta = zero_mass["beta2"]
    z = EPSILON * math.exp(1.0 / beta)
    for inst in zero_mass["instances"].values():
        # pi* on a hard context: eps e^{1/beta} / (eps e^{1/beta} + 1 - eps)
        assert inst["optimal_correct_mass_hard"] == pytest.approx(z / (z + 1 - EPSILON), rel=1e-9)
        v_star = beta * math.log(1 - EPSILON + z)
        assert inst["v_star_hard"] == pytest.approx(v_star, rel=1e-9)
        # the reference's gap there: V* - E_ref[r] (its KL to itself is 0)
        assert inst["reference_gap_hard"] == pytest.approx(v_star - EPSILON, rel=1e-9)
        assert inst["reference_correct_mass_hard"] == pytest.approx(EPSILON)
        # never solved in Stage 1, so V-hat* is exactly 0 on every hard context
        assert inst["stage1_hard_contexts_solved"] == 0 and inst["v_hat_hard_max"] == 0.0


def test_without_transfer_no_method_moves_the_hard_contexts(zero_mass: dict) -> None:
    inst = zero_mass["instances"]["no_transfer"]
    for name in ("estimated", "filter", "pg"):
        m = inst["methods"][name]
        # one-hot features and correct actions never sampled: their mass stays eps exactly
        assert m["correct_mass_hard"]["mean"][0] == pytest.approx(EPSILON, rel=1e-6), name
        assert m["verdict"] == "leaves the gap", name
        assert m["c"] in zero_mass["tune_c"]
