"""The refresh study's rules: exact pass@k, the summary's paired verdicts, bad configs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from experiments.refresh.config import RefreshConfig
from experiments.refresh.report import summarize, to_markdown
from experiments.refresh.run import exact_pass_at_k


def test_exact_pass_at_k() -> None:
    p = np.array([0.0, 1e-12, 0.01, 0.5, 1.0])
    got = exact_pass_at_k(p, 64)
    want = [1 - (1 - q) ** 64 for q in p]
    np.testing.assert_allclose(got[2:4], want[2:4], rtol=1e-12)
    assert got[0] == 0.0 and got[1] == pytest.approx(64e-12, rel=1e-6)
    assert got[4] == pytest.approx(1.0)


def _result(pass_fixed: list[float], pass_refresh: list[float]) -> dict:
    runs = []
    for k, values in ((0, pass_fixed), (5, pass_refresh)):
        for seed, v in enumerate(values):
            ev = {"step": 10, "b/pass_at_k": v, "b/expected_accuracy": v / 4, "b/kl0": 0.1 * k}
            start = {"step": 0, "b/pass_at_k": 0.2, "b/expected_accuracy": 0.05, "b/kl0": 0.0}
            refresh = {"samples": 800.0 * (k > 0)}
            runs.append(
                {"refresh_every": k, "seed": seed, "evals": [start, ev], "refresh": refresh}
            )
    config = {"bins": ["b"], "pass_k": 64, "beta2": 1e-3, "learning_rate": 3e-5}
    config.update(batch_size=16, max_steps=10, n_samples=8, seeds=len(pass_fixed), kl_rows=8)
    config.update(ladder="x", ladder_prompts=40)
    reference = {"b/pass_at_k": 0.2, "b/expected_accuracy": 0.05}
    stage1 = {"prompts": 10, "seconds": 1.0}
    return {"config": config, "runs": runs, "reference": reference, "stage1": stage1}


def test_a_refresh_above_the_fixed_run_and_the_reference_moves_the_ceiling() -> None:
    res = _result([0.30, 0.31, 0.29, 0.30], [0.60, 0.62, 0.61, 0.59])
    s = summarize(res)
    assert s["verdicts"]["K=5"]["b"] == "moves the ceiling"
    d = s["differences"]["K=5"]["b"]["pass_at_k"]
    assert d["diff"] == pytest.approx(0.305) and d["p_holm"] >= d["p"]
    assert s["finals"]["K=5"]["stage1_samples"]["mean"] == 800.0
    assert "moves the ceiling" in to_markdown({**res, "summary": s})


def test_below_the_fixed_run_is_lower_and_noise_is_no_difference() -> None:
    assert (
        summarize(_result([0.5, 0.52, 0.51], [0.3, 0.31, 0.29]))["verdicts"]["K=5"]["b"] == "lower"
    )
    noisy = summarize(_result([0.3, 0.5, 0.4], [0.45, 0.3, 0.5]))
    assert noisy["verdicts"]["K=5"]["b"] == "no difference shown"
    # above the fixed run but not above the reference's pass@k: the ceiling has not moved
    res = _result([0.05, 0.06, 0.05, 0.06], [0.15, 0.16, 0.15, 0.16])
    assert summarize(res)["verdicts"]["K=5"]["b"] == "no difference shown"
    assert not math.isnan(summarize(res)["differences"]["K=5"]["b"]["kl0"]["diff"])


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"refresh_every": (25,)}, "start with 0"),
        ({"refresh_every": (0, 25, 25)}, "repeat"),
        ({"refresh_every": (0, -1)}, "integers >= 0"),
        ({"bins": ()}, "distinct"),
        ({"learning_rate": 0.0}, "learning_rate"),
    ],
)
def test_bad_configs_are_refused(fields: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RefreshConfig.from_dict(dict(**fields))


def test_bins_take_the_ladders_labels_or_its_command_line_form() -> None:
    """Labels hold commas, so the command line gives bins as the ladder does ('HI:LO'); both
    spellings become the ladder's labels, and one bin given both ways is refused."""
    cfg = RefreshConfig.from_dict(dict(bins=("0:-1", "[-2,-3)", "-4:-6", "-30:-inf")))
    assert cfg.bins == ("[0,-1)", "[-2,-3)", "[-4,-6)", "<=-30")
    with pytest.raises(ValueError, match="distinct"):
        RefreshConfig.from_dict(dict(bins=("0:-1", "[0,-1)")))


def test_the_quick_preset_runs_every_path_and_the_full_run_keeps_the_ladder_defaults() -> None:
    from experiments.harness.ladder_sets import LadderConfig
    from experiments.refresh.config import QUICK, presets

    quick = RefreshConfig.from_dict(dict(**presets({}, quick=True)))
    assert quick.seeds >= 2  # paired intervals need two seeds
    assert all(0 < k < quick.train.max_steps for k in quick.refresh_every[1:])  # each refreshes
    assert quick.train.eval_steps < quick.train.max_steps  # a curve: step 0, one more, the end
    full = RefreshConfig.from_dict(dict(**presets({}, quick=False)))
    assert not set(QUICK) & set(presets({}, quick=False))
    ladder = LadderConfig()
    assert (full.ladder_build.k, full.ladder_build.long_candidates) == (
        ladder.k,
        ladder.long_candidates,
    )


def test_the_study_runs_its_ladder_with_its_ladder_fields(tmp_path, monkeypatch) -> None:
    import experiments.refresh.run as run_mod
    from experiments.refresh.config import LADDER_BINS, presets

    seen = {}

    class Stop(Exception):
        pass

    def fake_ladder(given, build, runner, **kw):
        seen["cfg"] = build
        raise Stop

    monkeypatch.setattr(run_mod, "ladder_for", fake_ladder)
    cfg = RefreshConfig.from_dict(dict(**presets({}, quick=True)))
    with pytest.raises(Stop):
        run_mod.run(cfg, tmp_path / "out", progress=False)
    got, settings = seen["cfg"], cfg.to_dict()
    assert got.bins == LADDER_BINS and got.train == got.test == settings["ladder_prompts"]
    assert got.candidates == settings["ladder_candidates"]
    assert got.long_candidates == settings["ladder_long_candidates"]
    assert got.k == settings["ladder_k"] == 16


def test_the_studys_reference_settings_reach_the_ladder_it_builds() -> None:
    """The study's SFT settings (``--sft-steps``, ``--sft-lr``, ``--reference-target``, the
    seed) and ``--cache-dir`` pick the reference of the ladder the runs train from (they were
    silently ignored: the ladder took its own defaults); the defaults give the ladder's own
    reference, so the committed runs keep theirs."""
    from dataclasses import replace

    from experiments.harness.ladder_sets import LadderConfig
    from experiments.refresh.config import presets
    from experiments.refresh.run import ladder_to_build

    cfg = RefreshConfig.from_dict({**presets({}, True), "sft_steps": 7, "cache_dir": "/tmp/c"})
    built = ladder_to_build(replace(cfg, sft=replace(cfg.sft, seed=2)))
    assert built.protocol.sft.seed == 2 and built.protocol.sft.steps == 7
    assert built.protocol.cache_dir == "/tmp/c"
    default = ladder_to_build(RefreshConfig.from_dict(presets({}, False)))
    assert (
        default.protocol.sft == LadderConfig().protocol.sft and default.protocol.cache_dir is None
    )
