"""The efficiency study's one-pass setting and the scratchpad2 task it measures."""

from __future__ import annotations

import json

import pytest

from experiments.efficiency import run as run_mod
from experiments.efficiency.config import EfficiencyConfig
from experiments.efficiency.one_pass import one_pass_pool_size
from experiments.efficiency.report import edge_note


def _run(arm, seed, steps, train_s, stage1_s, pool=320):
    return {"arm": arm, "seed": seed, "steps": steps, "train_s": train_s,
            "stage1_s": stage1_s, "pool": pool}  # fmt: skip


def test_one_pass_pool_size_closed_form():
    """A*-PO: 100 steps x 32 prompts in 40 s of Stage 2 (80 prompts/s) after 20 s of Stage 1
    on 320 prompts (1/16 s each): P >= 80 * 60 / (1 + 80/16) = 800. GRPO: 640 prompts in 60 s
    (10.67/s): P >= 640. Pool: 32 * ceil(1.1 * 800 / 32) = 896."""
    runs = [
        _run("astarpo", 0, 100, 40.0, 20.0),
        _run("astarpo", 1, 90, 40.0, 20.0),  # slower seed: not the bound
        _run("grpo", 0, 20, 60.0, 0.0),
        _run("ppo", 0, 1000, 60.0, 0.0),  # not an arm of the one-pass setting
    ]
    sizing = one_pass_pool_size(runs, budget_s=60.0, batch_size=32)
    assert sizing["need"]["astarpo"] == pytest.approx(800.0)
    assert sizing["need"]["grpo"] == pytest.approx(640.0)
    assert sizing["rate"]["astarpo"] == pytest.approx(80.0)
    assert sizing["stage1_s_per_prompt"]["astarpo"] == pytest.approx(1 / 16)
    assert sizing["pool_size"] == 896 and not sizing["capped"]
    assert 80.0 * (60.0 - 896 / 16) <= 896  # A*-PO trains on fewer prompts than the pool
    capped = one_pass_pool_size(runs, budget_s=60.0, batch_size=32, limit=500)
    assert capped["pool_size"] == 500 and capped["capped"]
    with pytest.raises(ValueError, match="no main run"):
        one_pass_pool_size([_run("ppo", 0, 10, 60.0, 0.0)], 60.0, 32)
    with pytest.raises(ValueError, match="must be > 0"):
        one_pass_pool_size(runs, 60.0, 32, margin=0.0)


def test_edge_note_says_what_the_sweep_did():
    at_edge = {"scores": {"0.0001": 0.5, "0.0003": 0.4}, "chosen": 1e-4, "extended": []}
    assert edge_note(at_edge) == ", at an edge"
    grown = {**at_edge, "scores": {"3.33e-05": 0.6, **at_edge["scores"]}, "chosen": 3.33e-5}
    assert edge_note({**grown, "extended": [3.33e-5]}).endswith("still at an edge of the grid")
    assert edge_note({"scores": {"1": 0.1, "2": 0.3, "3": 0.2}, "chosen": 2.0}) == ""


def test_scratchpad2_task_rows_score_one_and_are_38_tokens():
    from astarpo.llm import get_task, make_char_tokenizer

    task = get_task("scratchpad2")
    rows = task.rows(50, 0)
    assert len({r["prompt"] for r in rows}) == 50 and all(len(r["prompt"]) == 6 for r in rows)
    scores = task.reward(
        [r["prompt"] for r in rows], [r["answer"] for r in rows], [r["answer"] for r in rows],
        truncated=[False] * len(rows),
    )  # fmt: skip
    assert scores == [1.0] * 50
    tok = make_char_tokenizer()
    lengths = {len(tok(r["answer"], add_special_tokens=False)["input_ids"]) + 1 for r in rows}
    assert lengths == {38} == {task.response_tokens}


def _tiny(tmp_path, **kw):
    from experiments.tests.lab_setup import TINY

    return EfficiencyConfig.from_dict(dict(
        algos=("astarpo", "grpo"), drop_all_wrong=False, seeds=1, eval_every_seconds=1.0,
        lr_grid=(1e-3,), batch_size=2, pool_size=4, eval_size=4, val_size=4, n_samples=2,
        group_size=2, sft_steps=1, model_overrides=TINY, cache_dir=str(tmp_path / "cache"),
        one_pass=True, **kw,
    ))  # fmt: skip


@pytest.mark.slow
def test_one_pass_runs_on_a_pool_sized_from_the_main_runs(tmp_path):
    """A shrunk study with ``one_pass``: A*-PO and GRPO run again on the pool that
    :func:`one_pass_pool_size` gives from the main runs, read on the main runs' targets."""
    res = run_mod.run(_tiny(tmp_path, max_train_seconds=3.0), tmp_path / "b", progress=False)
    one = res["one_pass"]
    expected = one_pass_pool_size(res["runs"], 3.0, 2, limit=run_mod.SFT)["pool_size"]
    assert one["sizing"]["pool_size"] == expected == one["config"]["pool_size"]
    pools = {(r["arm"], r["pool"]) for r in one["runs"]}
    assert pools == {("astarpo", expected), ("grpo", expected)}
    a_star = next(r for r in one["runs"] if r["arm"] == "astarpo")
    grpo = next(r for r in one["runs"] if r["arm"] == "grpo")
    streamed = a_star["stage1_streamed"]  # Stage 1 of each prompt when first drawn, no table
    assert a_star["stage1_s"] == 0.0 and "stage1_streamed" not in grpo
    assert streamed["prompts"] == min(a_star["prompts"], expected)  # each drawn prompt once
    assert streamed["samples"] == a_star["stage1_samples"] == streamed["prompts"] * 2
    assert a_star["phases"]["stage1"] == streamed["seconds"] > 0
    last = a_star["evals"][-1]  # the training clock holds it; the Stage 2 clock does not
    assert last["stage2_time"] == pytest.approx(last["time"] - streamed["seconds"])
    assert one["summary"]["targets"] == res["summary"]["targets"]
    assert "One pass: no prompt seen twice" in (tmp_path / "b" / "bench.md").read_text()
    assert json.loads((tmp_path / "b" / "bench.json").read_text())["one_pass"]["sizing"]


@pytest.mark.slow
def test_a_failed_one_pass_run_keeps_the_main_report(tmp_path, monkeypatch):
    """The main runs' bench.json is written before the one-pass setting starts; a one-pass run
    that fails (e.g. Stage 1 longer than the budget) is reported, and nothing is lost."""

    def failing(*args, **kwargs):
        raise RuntimeError("astarpo: Stage 1 took 61.0 s of a 60 s budget")

    monkeypatch.setattr(run_mod, "_one_pass", failing)
    res = run_mod.run(_tiny(tmp_path, max_train_seconds=2.0), tmp_path / "b", progress=False)
    saved = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert "Stage 1 took 61.0 s" in saved["one_pass_error"] and "one_pass" not in saved
    assert len(saved["runs"]) == 2 == len(res["runs"])
    assert "The one-pass setting failed" in (tmp_path / "b" / "bench.md").read_text()
