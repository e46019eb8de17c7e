"""The ladder-train study end to end on a tiny ladder built here (a few processes of one step),
and its first-success counter."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from experiments.harness.ladder_sets import LadderConfig
from experiments.ladder.run import run as run_ladder
from experiments.ladder_train.config import SCRATCHPAD, LadderTrainConfig
from experiments.ladder_train.run import FirstSuccess, run


def test_first_success_notes_the_sample_before_it_on_a_bin_prompt() -> None:
    def reward(prompts, completions, answer, truncated=None, report=None):
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    counter = FirstSuccess(reward, ["b1", "b2"])
    assert counter(["e", "b1"], ["x", "y"], ["x", "z"]) == [1.0, 0.0]  # an easy success
    assert counter.first is None
    counter(["b2", "b1", "b2"], ["n", "y", "y"], ["y", "y", "y"])
    assert counter.first is not None and counter.first["sample"] == 3
    counter(["b1"], ["y"], ["y"])
    assert counter.first["sample"] == 3  # the first stays
    assert counter.successes == {"hard": 3, "easy": 1} and counter.samples["hard"] == 5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A ladder of the easy bin and one near bin, 3 + 3 prompts each, then the study on it:
    A*-PO (2 seeds) alone and mixed, PPO (1 seed) alone, one step each."""
    base = tmp_path_factory.mktemp("ladder_train")
    ladder = LadderConfig.from_dict(
        dict(bins=("0:-1", "-2:-3"), train=3, test=3, candidates=1500, k=8)
    )
    run_ladder(replace(ladder, long_candidates=1), base / "L", progress=False)
    cfg = LadderTrainConfig.from_dict(dict(
        **{**SCRATCHPAD, "batch_size": 2}, ladder=str(base / "L"), bins=("[-2,-3)",),
        near=("[-2,-3)",),
        main_arms=("astarpo",), side_arms=("ppo",), mixed_arms=("astarpo",), seeds_main=2,
        seeds_side=1, steps=1, eval_steps=1, train_eval_rows=2, n_samples=2,
    ))  # fmt: skip
    result = run(cfg, base / "out", progress=False)
    return {"out": base / "out", "result": result}


@pytest.mark.e2e
def test_the_study_writes_every_output_from_its_runs(tiny: dict) -> None:
    out, res = tiny["out"], tiny["result"]
    for name in ("ladder_train.json", "ladder_train.md", "ladder_train.png", "stage1.jsonl"):
        assert (out / name).exists()
    assert json.loads((out / "ladder_train.json").read_text())["summary"]["rule"]
    runs = res["runs"]
    assert sorted((r["arm"], r["set"]) for r in runs) == [
        ("astarpo", "alone"), ("astarpo", "alone"), ("astarpo", "mixed"), ("astarpo", "mixed"),
        ("ppo", "alone"),
    ]  # fmt: skip
    for r in runs:
        assert [e["step"] for e in r["evals"]] == [0, 1] and r["steps"] == 1
        assert (
            r["evals"][0]["bin_expected_accuracy"]
            == res["reference"]["[-2,-3)"]["bin_expected_accuracy"]
        )
        assert {"bin_log10_gold", "easy_expected_accuracy", "train_expected_accuracy"} <= set(
            r["evals"][-1]
        )
        assert r["samples"]["bin"] > 0
    mixed = [r for r in runs if r["set"] == "mixed"]
    assert all(r["pool"] == 6 for r in mixed) and all(r["samples"]["easy"] >= 0 for r in mixed)
    v = res["bins"]["[-2,-3)"]["v_star"]
    assert 0.0 <= v["fraction_zero"] <= 1.0 and res["stage1"]["prompts"] == 6
    md = (out / "ladder_train.md").read_text()
    assert "Who learns" in md and "[-2,-3)" in md and "2x2" in md
    assert Path(res["ladder"]) == (out.parent / "L").resolve()
