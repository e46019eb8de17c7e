"""The TRL peers for real (``make test-trl``; needs the ``bench-trl`` extra): one short run of
each TRL trainer through the efficiency study's worker on a tiny reference, and ``python -m
experiments.efficiency
--quick --peers trl``. Marked ``trl``: deselected by ``make test``; in .venv-trl a failure fails."""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest
from study_fakes import fake_run

from experiments.efficiency import worker
from experiments.efficiency.config import EfficiencyConfig
from experiments.efficiency.summary import summarize

pytestmark = [pytest.mark.trl, pytest.mark.timeout(300)]  # a run that never stops fails

BUDGET = 3.0  # leaves >= 1 s of training after a slowed Stage 1 on a loaded machine
STEP_SLACK = 0.5  # one step of the tiny model is far shorter


def _spec(tmp_path, tiny_model, arm, stage1_inside=True):
    from astarpo.llm import addition_task

    ref_path = tmp_path / "ref"
    tiny_model.save_pretrained(ref_path)
    rows = addition_task(40, seed=0)
    cfg = EfficiencyConfig.from_dict(
        dict(
            max_train_seconds=BUDGET,
            eval_every_seconds=0.5,
            batch_size=4,
            max_new_tokens=3,
            n_samples=4,
            group_size=4,
            eval_size=4,
            peers=("trl",),
        )
    )
    return {
        "arm": arm,
        "seed": 0,
        "lr": 1e-3,
        "seconds": BUDGET,
        "stage1_inside": stage1_inside,
        "config": cfg.to_dict(),
        "reference": str(ref_path),
        "train": rows[:32],
        "eval": rows[32:36],
        "hard": [True, False, False, True],
        "out": str(tmp_path / "run"),
    }


@pytest.mark.parametrize("arm", ["trl_grpo", "trl_a2po"])
def test_peer_run_keeps_the_clock(tiny_model, tmp_path, monkeypatch, arm):
    """A slow evaluation (0.3 s each) neither shortens the budget nor moves the evaluation
    times; A2PO's (slowed) Stage 1 is counted in the clock; the result is a library run's."""
    import trl

    assert trl.__version__ == "1.16.0"
    real = worker.evaluate_policy
    calls = []

    def slow(*a, **k):
        calls.append(1)
        time.sleep(0.3)
        return real(*a, **k)

    monkeypatch.setattr(worker, "evaluate_policy", slow)
    if arm == "trl_a2po":  # a Stage 1 of >= 0.8 s, which the budget must include
        from trl.experimental.a2po import A2POTrainer

        estimate = A2POTrainer._estimate_optimal_values

        def slow_stage1(self):
            time.sleep(0.8)
            return estimate(self)

        monkeypatch.setattr(A2POTrainer, "_estimate_optimal_values", slow_stage1)
    t0 = time.perf_counter()
    res = worker.run_one(_spec(tmp_path, tiny_model, arm))
    wall = time.perf_counter() - t0
    assert res["arm"] == res["algo"] == arm and res["steps"] >= 2
    assert BUDGET <= res["clock_s"] <= BUDGET + STEP_SLACK
    assert res["clock_s"] == pytest.approx(res["stage1_s"] + res["train_s"])
    assert wall >= res["clock_s"] + 0.3 * len(calls) - 0.05  # evaluations outside the clock
    if arm == "trl_a2po":
        assert res["stage1_s"] >= 0.8 and res["samples_per_prompt"] == 1 and res["pool"] == 32
    else:
        assert res["stage1_s"] == 0.0 and res["samples_per_prompt"] == 4
    ev = res["evals"]
    times = [e["time"] for e in ev]
    assert times[0] == pytest.approx(res["stage1_s"], abs=0.05) and times == sorted(times)
    # start, one per 0.5 s of training crossed (the last may be the final one), the final one
    assert len(calls) == len(ev) >= max(3, int(res["train_s"] // 0.5))
    assert ev[-1]["step"] == res["steps"]
    assert all(b - a < 1.0 for a, b in itertools.pairwise(times))  # ~0.5 s of training apart
    assert ev[0]["kl"] == pytest.approx(0.0, abs=1e-5)  # the policy starts as the reference
    assert all(math.isfinite(e["kl"]) and "hard_expected_accuracy" in e for e in ev)
    assert res["phases"]["generate"] > 0 and res["prompts"] == res["steps"] * 4
    assert res["memory"]["rss_peak_mb"] >= res["memory"]["rss_before_train_mb"]
    json.dumps(res)  # what the worker writes
    base = [fake_run("astarpo", 0, [0.0, 1.0, 2.0], [0.2, 0.3, 0.4])]
    result = {
        "config": {**EfficiencyConfig().to_dict(), "max_train_seconds": BUDGET},
        "reference": {"expected_accuracy": 0.2},
        "runs": [*base, res],
    }
    label = {"trl_grpo": "TRL GRPO", "trl_a2po": "TRL A2PO"}[arm]
    assert label in summarize(result)["ratios"]


def test_a2po_sweep_run_reuses_the_library_stage1_table(tiny_model, tmp_path):
    """With ``stage1_inside`` false (the sweep) A2PO reads the library's V* table: no Stage 1."""
    import numpy as np

    from astarpo.llm import ValueTable
    from astarpo.llm.stage1.rows import make_row

    spec = _spec(tmp_path, tiny_model, "trl_a2po", stage1_inside=False)
    table = [
        make_row(r["prompt"], np.array([1.0, 0.0]), 0.5, {}, r["answer"]) for r in spec["train"]
    ]
    spec["values"] = str(tmp_path / "values.jsonl")
    ValueTable(table).save(spec["values"])
    res = worker.run_one(spec)
    assert res["stage1_s"] == 0.0 and BUDGET <= res["clock_s"] <= BUDGET + STEP_SLACK


def test_bench_quick_with_trl_peers(tmp_path, capsys):
    """``python -m experiments.efficiency --quick --peers trl`` (A*-PO and the two TRL trainers, 2
    seeds)."""
    from experiments.tests.lab_setup import run_cli as main

    out = tmp_path / "bq"
    argv = ["efficiency", "--quick", "--peers", "trl", "--algos", "astarpo", "--no-drop-all-wrong"]
    argv += ["--sft-steps", "20", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
    assert main(argv) == 0
    result = json.loads((out / "bench.json").read_text())
    assert sorted({r["arm"] for r in result["runs"]}) == ["astarpo", "trl_a2po", "trl_grpo"]
    assert result["peers"]["trl"]["version"] == "1.16.0"
    s = result["summary"]
    assert {"TRL GRPO", "TRL A2PO"} <= set(s["ratios"])
    for r in result["runs"]:
        assert r["clock_s"] <= result["config"]["max_train_seconds"] + 2.0
    md = (out / "bench.md").read_text()
    assert "| TRL A2PO |" in md and "Peers: trl 1.16.0" in md
    assert (out / "bench.png").stat().st_size > 1000
