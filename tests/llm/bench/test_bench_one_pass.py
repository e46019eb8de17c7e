"""The benchmark's one-pass setting, the sweep's grid extension and the scratchpad2 task."""

from __future__ import annotations

import math

import pytest

from astarpo.llm.bench import run as run_mod
from astarpo.llm.bench import runner as runner_mod
from astarpo.llm.bench.config import BenchConfig
from astarpo.llm.bench.one_pass import one_pass_pool_size
from astarpo.llm.bench.report import edge_note
from astarpo.llm.bench.stats import extend_grid


def test_extend_grid_steps_beyond_the_edge_the_choice_sits_on():
    assert extend_grid({1e-4: 0.5, 3e-4: 0.4, 1e-3: 0.1}) == pytest.approx(3.33e-5)
    assert extend_grid({1e-4: 0.1, 3e-4: 0.4, 1e-3: 0.5}) == pytest.approx(3.33e-3)
    assert extend_grid({1e-4: 0.1, 3e-4: 0.5, 1e-3: 0.4}) is None  # bracketed
    assert extend_grid({1e-4: 0.1}) is None  # nothing to bracket with one rate
    # A diverged (NaN) edge never wins, so it never triggers an extension past itself.
    assert extend_grid({1e-4: 0.2, 3e-4: 0.5, 1e-3: math.nan}) is None


@pytest.mark.parametrize(
    ("extensions", "added", "still_edge"),
    [(0, [], True), (2, [3.33e-5, 1.11e-5], True), (3, [3.33e-5, 1.11e-5, 3.7e-6], False)],
)
def test_sweep_extends_a_grid_whose_choice_is_an_edge(
    monkeypatch, tmp_path, extensions, added, still_edge
):
    """Scores peak at 1e-5, below the grid 1e-4..1e-3: each extension steps one grid ratio
    further down until the choice is bracketed or the extensions run out."""
    tried = []

    def fake_score(runner, algo, lr, val, values):
        tried.append(lr)
        return -((math.log10(lr) + 5.0) ** 2)

    monkeypatch.setattr(runner_mod, "sweep_score", fake_score)
    cfg = BenchConfig(
        out_dir=str(tmp_path), algos=("astarpo",), lr_grid=(1e-4, 3e-4, 1e-3),
        grid_extensions=extensions,
    )  # fmt: skip
    runner = runner_mod.Runner(cfg, tmp_path, [], lambda *a: None)
    result = runner_mod.sweep(runner, [], tmp_path / "values.jsonl")["astarpo"]
    assert result["extended"] == pytest.approx(added)
    assert len(tried) == 3 + len(added)
    assert result["chosen"] == pytest.approx(min([1e-4, *added]) if still_edge else 1.11e-5)
    note = edge_note(result)
    assert ("edge" in note) == still_edge
    assert ("extended" in note) == bool(added)


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
    # A*-PO trains on rate * (B - s1 * P) prompts of that pool: fewer than the pool.
    assert 80.0 * (60.0 - 896 / 16) <= 896
    capped = one_pass_pool_size(runs, budget_s=60.0, batch_size=32, limit=500)
    assert capped["pool_size"] == 500 and capped["capped"]
    with pytest.raises(ValueError, match="no main run"):
        one_pass_pool_size([_run("ppo", 0, 10, 60.0, 0.0)], 60.0, 32)
    with pytest.raises(ValueError, match="must be > 0"):
        one_pass_pool_size(runs, 60.0, 32, margin=0.0)


def test_bench_config_checks_the_new_fields(tmp_path):
    with pytest.raises(ValueError, match="grid_extensions must be an integer >= 0"):
        BenchConfig(grid_extensions=-1)
    with pytest.raises(ValueError, match="cannot hold the scratchpad2 task's gold"):
        BenchConfig(task="scratchpad2", max_new_tokens=37)  # 37 characters + EOS = 38
    assert BenchConfig(task="scratchpad2", max_new_tokens=38).task == "scratchpad2"


def test_scratchpad2_task_rows_score_one_and_are_38_tokens():
    from astarpo.llm.models.toy import make_char_tokenizer
    from astarpo.llm.toy.tasks import get_task

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


def test_cli_task_defaults_run_the_full_protocol(monkeypatch, tmp_path):
    """``--task scratchpad`` runs every algorithm, the drop arm and the one-pass setting;
    ``--quick`` and ``--no-one-pass`` turn the latter off; scratchpad2 runs A*-PO and GRPO."""
    from astarpo.cli import main
    from astarpo.llm.bench import run as bench_run

    seen = {}

    def fake_run_bench(cfg, overwrite=False):
        seen["cfg"] = cfg
        (tmp_path / "bench.md").write_text("table\n")
        return {}

    monkeypatch.setattr(bench_run, "run_bench", fake_run_bench)
    out = ["bench", "--out", str(tmp_path), "--task"]
    assert main([*out, "scratchpad"]) == 0
    cfg = seen["cfg"]
    assert cfg.algos == ("astarpo", "grpo", "rloo", "ppo", "rebel") and cfg.drop_all_wrong
    assert cfg.one_pass and cfg.seeds == 5 and cfg.grid_extensions == 2
    assert main([*out, "scratchpad", "--no-one-pass", "--grid-extensions", "0"]) == 0
    assert not seen["cfg"].one_pass and seen["cfg"].grid_extensions == 0
    assert main([*out, "scratchpad", "--quick"]) == 0
    assert not seen["cfg"].one_pass and seen["cfg"].algos == ("astarpo", "grpo")
    assert main([*out, "scratchpad2"]) == 0
    assert seen["cfg"].algos == ("astarpo", "grpo") and seen["cfg"].max_new_tokens == 46


@pytest.mark.slow
def test_one_pass_runs_on_a_pool_sized_from_the_main_runs(tmp_path):
    """A shrunk bench with ``one_pass``: A*-PO and GRPO run again on the pool that
    :func:`one_pass_pool_size` gives from the main runs, read on the main runs' targets."""
    import json

    from toy_setup import TINY

    cfg = BenchConfig(
        out_dir=str(tmp_path / "b"), algos=("astarpo", "grpo"), drop_all_wrong=False,
        seeds=1, max_train_seconds=3.0, eval_every_seconds=1.0, lr_grid=(1e-3,), batch_size=2,
        pool_size=4, eval_size=4, val_size=4, n_samples=2, group_size=2, sft_steps=1,
        model_overrides=TINY, cache_dir=str(tmp_path / "cache"), one_pass=True,
    )  # fmt: skip
    res = run_mod.run_bench(cfg, progress=False)
    one = res["one_pass"]
    expected = one_pass_pool_size(res["runs"], 3.0, 2, limit=run_mod.REF_SFT)["pool_size"]
    assert one["sizing"]["pool_size"] == expected == one["config"]["pool_size"]
    assert {(r["arm"], r["pool"]) for r in one["runs"]} == {
        ("astarpo", expected),
        ("grpo", expected),
    }
    assert one["summary"]["targets"] == res["summary"]["targets"]
    assert "One pass: no prompt seen twice" in (tmp_path / "b" / "bench.md").read_text()
    assert json.loads((tmp_path / "b" / "bench.json").read_text())["one_pass"]["sizing"]


@pytest.mark.slow
def test_a_failed_one_pass_run_keeps_the_main_report(tmp_path, monkeypatch):
    """The main runs' bench.json is written before the one-pass setting starts; a one-pass run
    that fails (e.g. Stage 1 longer than the budget) is reported, and nothing is lost."""
    import json

    from toy_setup import TINY

    def failing(*args, **kwargs):
        raise RuntimeError("astarpo: Stage 1 took 61.0 s of a 60 s budget")

    monkeypatch.setattr(run_mod, "_one_pass", failing)
    cfg = BenchConfig(
        out_dir=str(tmp_path / "b"), algos=("astarpo", "grpo"), drop_all_wrong=False,
        seeds=1, max_train_seconds=2.0, eval_every_seconds=1.0, lr_grid=(1e-3,), batch_size=2,
        pool_size=4, eval_size=4, val_size=4, n_samples=2, group_size=2, sft_steps=1,
        model_overrides=TINY, cache_dir=str(tmp_path / "cache"), one_pass=True,
    )  # fmt: skip
    res = run_mod.run_bench(cfg, progress=False)
    saved = json.loads((tmp_path / "b" / "bench.json").read_text())
    assert "Stage 1 took 61.0 s" in saved["one_pass_error"] and "one_pass" not in saved
    assert len(saved["runs"]) == 2 == len(res["runs"])
    assert "The one-pass setting failed" in (tmp_path / "b" / "bench.md").read_text()


def test_kl_interval_stays_at_or_above_zero():
    """Two seeds whose final KL is 0.0 and 1.2: Student-t over 2 seeds (t = 12.7) would reach
    far below 0; a KL is never negative, so the band is clipped there."""
    from astarpo.llm.bench.report import summarize

    def run(seed, kl):
        evals = [
            {"time": t, "stage2_time": t, "expected_accuracy": a, "accuracy": a,
             "sampled_accuracy": a, "kl": k}
            for t, a, k in ((0.0, 0.2, 0.0), (10.0, 0.5, kl))
        ]  # fmt: skip
        return {"arm": "astarpo", "seed": seed, "lr": 1e-3, "evals": evals, "stage1_s": 0.0,
                "train_s": 10.0, "clock_s": 10.0, "steps": 5, "pool": 10, "prompts": 10,
                "samples_per_prompt": 1, "phases": {"stage1": 0.0, "generate": 1.0},
                "memory": {"rss_peak_mb": 2.0, "rss_before_train_mb": 1.0}}  # fmt: skip

    result = {
        "config": {**BenchConfig().__dict__, "max_train_seconds": 10.0, "seeds": 2},
        "reference": {"expected_accuracy": 0.2},
        "runs": [run(0, 0.0), run(1, 1.2)],
    }
    kl = summarize(result)["arms"]["astarpo"]["final"]["kl"]
    assert kl["mean"] == pytest.approx(0.6) and kl["low"] == 0.0 and kl["high"] > 1.2
