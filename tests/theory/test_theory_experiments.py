"""The experiments and the ``astarpo theory`` verb in their quick versions."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from astarpo import __version__
from astarpo.analysis.stats import mean_ci
from astarpo.cli import main
from astarpo.commands.theory import NAMES
from astarpo.theory.fits import fit_slope

# The band stated in docs/theory.md for the quick c/sqrt(t) last-iterate slope (4 seeds,
# t from 10 to 1000): theory for a strongly convex loss gives -1/2; the quick fit still contains
# the end of the transient, so it is steeper.
QUICK_SQRT_SLOPE_BAND = (-1.3, -0.3)


@pytest.fixture(scope="module")
def quick_all(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("theory_all")
    assert main(["theory", "all", "--quick", "--out", str(out)]) == 0
    return out


@pytest.mark.e2e
def test_all_writes_every_file(quick_all: Path) -> None:
    summary = json.loads((quick_all / "results.json").read_text())
    assert summary["version"] == __version__ and summary["quick"] is True
    for name in NAMES:
        res = json.loads((quick_all / name / "results.json").read_text())
        assert res["experiment"] == name and res["version"] == __version__
        assert res["seeds"] == [0, 1, 2, 3] and "config" in res and res["runtime_s"] > 0
        png = quick_all / name / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 300_000
        assert summary["results"][name]["dir"] == name


#: Keys every quick result must carry (beyond the header), per experiment.
KEYS = {
    "horizon": ("curves", "slopes", "projection", "baseline", "steps"),
    "samples": ("settings",),
    "coverage": ("families", "value_error_regimes", "zero_mass"),
    "two-beta": ("grid", "kl_between_optima"),
    "grid": ("gap", "fit", "t_slope_per_n", "fisher_min"),
    "update": ("variants", "entropy_exact", "paper_betas"),
    "small-beta": ("rules", "reference_gap"),
    "realizability": ("families",),
    "adaptive": ("rows",),
    "fisher": ("cases",),
}


@pytest.mark.e2e
def test_quick_results_have_their_keys(quick_all: Path) -> None:
    assert set(KEYS) == set(NAMES)
    summary = json.loads((quick_all / "results.json").read_text())
    for name, keys in KEYS.items():
        res = json.loads((quick_all / name / "results.json").read_text())
        for key in (*keys, "headline", "config", "seed_scheme"):
            assert key in res, (name, key)
        assert summary["results"][name]["headline"] == res["headline"]
    horizon = json.loads((quick_all / "horizon" / "results.json").read_text())
    for kind in ("last", "average", "mixture", "mean_gap", "fisher_min"):
        assert kind in horizon["curves"]["inverse_sqrt"]
    assert horizon["projection"]["radius"] == pytest.approx(20.0)  # 2 ||theta*|| = 2 / beta


@pytest.mark.e2e
def test_quick_coverage_records_the_sweep_and_the_hard_contexts(quick_all: Path) -> None:
    res = json.loads((quick_all / "coverage" / "results.json").read_text())
    assert res["config"]["instance"]["v_ref"] != 0.1  # the sweep, not one value
    assert res["config"]["hard_contexts"] == [0, 1, 2, 3]
    for fam in ("shared", "tabular"):
        rows = res["families"][fam]
        assert [r["v_ref"] for r in rows] == res["config"]["v_ref"]
    # the never-solved contexts at both betas, their verdicts in the headline
    assert list(res["zero_mass"]["by_beta"]) == ["0.05", "0.001"]
    assert list(res["headline"]["zero_mass"]) == ["0.05", "0.001"]
    for run in res["headline"]["zero_mass"].values():
        assert set(run) == {"transfer", "no_transfer"}


@pytest.mark.e2e
def test_quick_horizon_slope_is_negative_and_in_band(quick_all: Path) -> None:
    res = json.loads((quick_all / "horizon" / "results.json").read_text())
    s = res["slopes"]["inverse_sqrt"]["last"]
    lo, hi = QUICK_SQRT_SLOPE_BAND
    assert s["slope"] < 0
    assert lo <= s["slope"] <= hi, s
    assert s["lo"] <= s["slope"] <= s["hi"]
    # every schedule makes progress from the reference policy
    for sched in ("constant", "inverse_sqrt", "inverse"):
        curve = res["curves"][sched]["average"]["mean"]
        assert curve[-1] < 0.1 * res["reference_gap"]


@pytest.mark.e2e
def test_two_beta_limit_does_not_depend_on_beta1(quick_all: Path) -> None:
    res = json.loads((quick_all / "two-beta" / "results.json").read_text())
    for b2 in res["config"]["beta2"]:
        cells = [c for c in res["grid"] if c["beta2"] == b2]
        det = np.array([c["deterministic"]["kl_to_opt_beta2"] for c in cells])
        # exact gradients: V̂* drops out, so every beta1 gives the same iterate
        np.testing.assert_allclose(det, det[0], rtol=1e-6, atol=1e-12)


@pytest.mark.e2e
def test_samples_value_error_is_exact_and_falls(quick_all: Path) -> None:
    res = json.loads((quick_all / "samples" / "results.json").read_text())
    same = res["settings"]["beta1=0.1"]["value_error"]["vs_beta1"]["mse"]
    assert all(a > b for a, b in itertools.pairwise(same))  # MSE falls with N when beta1 = beta2
    other = res["settings"]["beta1=0.5"]["value_error"]["vs_beta2"]["mse"]
    assert other[-1] > 10 * same[-1]  # beta1 != beta2: a bias that N does not remove


def test_same_seed_same_results(tmp_path: Path) -> None:
    for run in ("a", "b"):
        assert (
            main(["theory", "samples", "--quick", "--seeds", "2", "--out", str(tmp_path / run)])
            == 0
        )
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    a.pop("runtime_s"), b.pop("runtime_s")
    assert a == b


def test_fit_slope_and_mean_ci() -> None:
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    y = np.stack([3.0 * x**-0.5, 5.0 * x**-0.7])
    s = fit_slope(x, y)
    assert s["per_seed"] == pytest.approx([-0.5, -0.7])
    assert s["lo"] < -0.6 < s["hi"]
    ci = mean_ci(np.array([[1.0], [3.0]]))
    assert ci["mean"] == [2.0] and ci["gmean"] == pytest.approx([np.sqrt(3.0)])


def test_cli_rejects_one_seed(tmp_path: Path) -> None:
    assert main(["theory", "horizon", "--quick", "--seeds", "1", "--out", str(tmp_path)]) == 2


@pytest.mark.e2e
def test_quick_update_intervals_contain_their_points(quick_all: Path) -> None:
    res = json.loads((quick_all / "update" / "results.json").read_text())
    for name, v in res["variants"].items():
        for s, div in zip(v["shift"], v["diverged_fraction"], strict=True):
            if div == 0 and s["gap"] > 0:
                assert s["lo"] <= s["gap"] <= s["hi"], (name, s)


@pytest.mark.e2e
def test_quick_update_at_the_paper_betas(quick_all: Path) -> None:
    """The paper-betas part: every run has a verdict by the stated rule, the windows are the
    rule's, and along the plain path the exact moment is recorded at every point."""
    from astarpo.theory.convergence import windows
    from astarpo.theory.experiments.update_paper import STARTS, VALUES

    p = json.loads((quick_all / "update" / "results.json").read_text())["paper_betas"]
    t = p["config"]["T"]
    assert p["config"]["windows"] == [list(w) for w in windows(t)]
    assert {t // 2, 3 * t // 4, t} <= set(p["steps"])
    words = {"resolved", "settled apart", "still moving", "not resolved"}
    states = {"at optimum", "still moving", "settled", "undecided"}
    for rule in p["config"]["step_rules"]:
        for var in ("plain", "scripts"):
            for v in VALUES:
                assert p["verdicts"][rule][var][v]["word"] in words
                for s in STARTS:
                    c = p["runs"][rule][var][s][v]["change"]
                    assert c["state"] in states
                    k, lo, hi = c["kl_after"]
                    assert lo <= k <= hi
        # the plain update from theta* with the exact V* never leaves pi*
        assert p["runs"][rule]["plain"]["theta*"]["exact"]["change"]["state"] == "at optimum"
        for s in STARTS:
            for v in VALUES:
                path = p["variance_path"][rule][s][v]
                assert len(path["formula"]) == len(path["measured"]) == len(p["steps"])
                assert all(0 <= r <= 1 for r in path["rare_share"])
                share = p["premise_path"][rule][s][v]["v_hat_share"]
                if v == "exact":  # no offset: the second step's V-hat term is exactly 0
                    assert all(x["mean"] == 0 for x in share)
    sp = p["entropy_stationary_points"]
    assert (
        sp["reference"]["objective"] > sp["theta*"]["objective"]
    )  # two maxima; the far one higher
