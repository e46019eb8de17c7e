"""The efficiency benchmark: summary arithmetic, memory probe, one in-process run, the CLI."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from astarpo.llm.bench.config import BenchConfig
from astarpo.llm.bench.measure import PeakRSS
from astarpo.llm.bench.report import summarize, to_markdown, write
from astarpo.llm.bench.run import run_one


def fake_run(algo, seed, train_s, accs, times, mem_before=100.0, mem_peak=110.0, spp=1):
    return {
        "algo": algo,
        "seed": seed,
        "evals": [
            {"step": 2 * i, "time": t, "cpu_time": t, "accuracy": a, "kl": 0.1 * i}
            for i, (a, t) in enumerate(zip(accs, times, strict=True))
        ],
        "train_s": train_s,
        "cpu_train_s": train_s / 2,
        "prompts": 10,
        "samples_per_prompt": spp,
        "phases": {"generate": 1.0, "update": 2.0},
        "memory": {"rss_before_train_mb": mem_before, "rss_peak_mb": mem_peak},
    }


def fake_result(target=0.0):
    runs = [
        fake_run("astarpo", 0, 10.0, [0.2, 0.5, 0.8], [0.0, 5.0, 10.0]),
        fake_run("astarpo", 1, 12.0, [0.2, 0.7, 0.8], [0.0, 6.0, 12.0]),
        fake_run("grpo", 0, 20.0, [0.2, 0.4, 0.6], [0.0, 10.0, 20.0], mem_peak=130.0, spp=8),
        fake_run("grpo", 1, 24.0, [0.2, 0.6, 0.6], [0.0, 12.0, 24.0], mem_peak=130.0, spp=8),
    ]
    return {
        "config": {**BenchConfig().__dict__, "target_accuracy": target, "seeds": 2},
        "stage1": {"seconds": 3.0, "prompts": 10, "n_samples": 8},
        "reference": {"accuracy": 0.2, "kl": 0.0},
        "runs": runs,
    }


def test_summary_hand_computed():
    res = fake_result()
    s = summarize(res)
    # Automatic target: ref + 0.8 * (lowest mean final - ref) = 0.2 + 0.8 * 0.4 = 0.52.
    assert s["target_accuracy"] == pytest.approx(0.52)
    a, g = s["algos"]["astarpo"], s["algos"]["grpo"]
    assert a["train_s_per_prompt"] == pytest.approx(1.1)
    assert g["ratio_train_s_per_prompt"] == pytest.approx(2.2 / 1.1)
    # First crossing of 0.52: astarpo at 10 (seed 0) and 6 (seed 1); grpo at 20 and 12.
    assert a["time_to_target_s"] == pytest.approx(8.0)
    assert g["ratio_time_to_target_s"] == pytest.approx(16.0 / 8.0)
    assert a["peak_memory_mb"] == pytest.approx(10.0)
    assert g["ratio_peak_memory_mb"] == pytest.approx(3.0)
    assert a["total_s"] == pytest.approx(11.0 + 3.0)
    assert g["ratio_total_vs_astarpo_total"] == pytest.approx(22.0 / 14.0)
    assert g["final_accuracy"] == pytest.approx(0.6)
    assert a["final_kl"] == pytest.approx(0.2)
    # A*-PO's mean train time is 11: grpo's last evals by then are at 10 (0.4) and 0 (0.2).
    assert g["accuracy_at_astarpo_time"] == pytest.approx(0.3)
    assert a["accuracy_at_astarpo_time"] == pytest.approx((0.8 + 0.7) / 2)


def test_summary_target_not_reached_is_reported():
    res = fake_result(target=0.75)
    s = summarize(res)
    assert s["algos"]["grpo"]["time_to_target_s"] is None
    assert s["algos"]["grpo"]["reached"] == 0
    assert s["algos"]["astarpo"]["time_to_target_s"] == pytest.approx(11.0)
    res["summary"] = s
    md = to_markdown(res)
    assert "(0/2 reached)" in md and "| grpo | 8 |" in md


def test_write_creates_report_files(tmp_path):
    res = fake_result()
    res["summary"] = summarize(res)
    write(res, tmp_path)
    assert json.loads((tmp_path / "bench.json").read_text())["summary"]["target_accuracy"]
    assert (tmp_path / "bench.md").read_text().startswith("# A*-PO against the baselines")
    assert (tmp_path / "bench.png").stat().st_size > 1000


def test_peak_rss_sees_a_temporary_allocation():
    with PeakRSS(interval=0.001) as probe:
        big = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
        time.sleep(0.05)
        del big
    assert probe.peak_mb - probe.start_mb > 48


@pytest.mark.parametrize("algo", ["astarpo", "ppo", "rebel"])
def test_run_one_in_process(tokenizer, tiny_model, tmp_path, algo):
    from astarpo.llm.data.prompts import prompt_key
    from astarpo.llm.stage1.table import ValueRow, ValueTable
    from astarpo.llm.toy.model import addition_task

    ref_path = tmp_path / "ref"
    tiny_model.save_pretrained(ref_path)
    rows = addition_task(8, seed=0)
    train, held = rows[:4], rows[4:]
    cfg = BenchConfig(steps=2, batch_size=2, eval_every=1, eval_size=4, max_new_tokens=3)
    values = tmp_path / "values.jsonl"
    if algo == "astarpo":
        table_rows = [
            ValueRow(prompt_key(r["prompt"]), r["prompt"], (0.0, 1.0), 0.1, 0.5) for r in train
        ]
        ValueTable(table_rows).save(values)
    spec = {
        "algo": algo,
        "seed": 0,
        "config": cfg.__dict__,
        "reference": str(ref_path),
        "values": str(values),
        "train": train,
        "eval": held,
        "out": str(tmp_path / "run"),
    }
    res = run_one(spec)
    assert [e["step"] for e in res["evals"]] == [0, 1, 2]
    assert all(math.isfinite(e["kl"]) and 0 <= e["accuracy"] <= 1 for e in res["evals"])
    assert res["evals"][0]["kl"] == pytest.approx(0.0, abs=1e-5)  # policy == reference
    assert res["prompts"] == 4 and res["train_s"] > 0 and res["cpu_train_s"] > 0
    times = [e["time"] for e in res["evals"]]
    assert times == sorted(times) and times[0] == 0.0
    assert res["memory"]["rss_peak_mb"] >= res["memory"]["rss_before_train_mb"]


def test_bench_config_rejects_bad_values():
    with pytest.raises(ValueError, match="include 'astarpo'"):
        BenchConfig(algos=("grpo",))
    with pytest.raises(ValueError, match="steps"):
        BenchConfig(steps=0)
    with pytest.raises(ValueError, match="target_accuracy"):
        BenchConfig(target_accuracy=1.5)


def test_bench_cli_maps_flags_to_the_config(monkeypatch, tmp_path):
    import astarpo.llm.bench.run as bench_mod
    from astarpo.cli import main

    seen = {}

    def fake_run_bench(cfg):
        seen["cfg"] = cfg
        (tmp_path / "bench.md").write_text("table\n")
        return {}

    monkeypatch.setattr(bench_mod, "run_bench", fake_run_bench)
    argv = ["bench", "--out", str(tmp_path), "--quick", "--seeds", "3", "--lr", "1e-3"]
    assert main([*argv, "--algos", "astarpo,ppo", "--steps", "7"]) == 0
    cfg = seen["cfg"]
    assert (cfg.seeds, cfg.learning_rate, cfg.algos, cfg.steps) == (3, 1e-3, ("astarpo", "ppo"), 7)
    assert cfg.sft_steps == 200 and cfg.batch_size == 8  # --quick sizes, explicit flags win
