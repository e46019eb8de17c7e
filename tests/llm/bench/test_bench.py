"""The efficiency benchmark: statistics on synthetic curves with known answers, the summary,
the clock (evaluation excluded, Stage 1 inside), one in-process run per kind, the CLI."""

from __future__ import annotations

import itertools
import json
import math
import time

import numpy as np
import pytest

from astarpo.analysis.stats import paired_ratio, t_interval
from astarpo.llm.bench import worker
from astarpo.llm.bench.config import BenchConfig, algorithm_config, arms
from astarpo.llm.bench.measure import PeakRSS
from astarpo.llm.bench.one_pass import REUSED
from astarpo.llm.bench.report import summarize, to_markdown, write
from astarpo.llm.bench.stats import (
    band,
    curve_area,
    select_lr,
    target_levels,
    time_to_target,
    value_at,
)

# ---------------------------------------------------------------- statistics


def test_time_to_target_interpolates_and_reports_not_reached():
    times, accs = [0.0, 10.0, 20.0, 30.0], [0.2, 0.4, 0.8, 0.6]
    assert time_to_target(times, accs, 0.6) == pytest.approx(15.0)  # halfway 0.4 -> 0.8
    assert time_to_target(times, accs, 0.4) == pytest.approx(10.0)
    assert time_to_target(times, accs, 0.1) == 0.0  # already there at the start
    assert time_to_target(times, accs, 0.81) is None
    with pytest.raises(ValueError, match="length"):
        time_to_target([0.0], [0.1, 0.2], 0.5)


def test_t_interval_matches_the_hand_computed_value():
    m, lo, hi = t_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n)
    assert (m, lo, hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    m, lo, hi = t_interval([5.0])
    assert m == 5.0 and math.isnan(lo) and math.isnan(hi)
    assert math.isnan(t_interval([])[0])


def test_paired_ratio_is_the_geometric_mean_and_counts_missing_pairs():
    r = paired_ratio([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    assert r["ratio"] == pytest.approx(0.5) and r["low"] == pytest.approx(0.5)
    assert (r["pairs"], r["missing"]) == (3, 0)
    r = paired_ratio([1.0, None, 3.0], [4.0, 2.0, None])
    assert r["ratio"] == pytest.approx(0.25) and (r["pairs"], r["missing"]) == (1, 2)
    assert math.isnan(r["low"])
    r = paired_ratio([2.0, 8.0], [1.0, 1.0])  # log ratios log 2, log 8: mean log 4
    assert r["ratio"] == pytest.approx(4.0) and r["low"] < 4.0 < r["high"]


def test_curve_area_value_at_and_band():
    assert curve_area([0.0, 10.0], [0.5, 0.5], 10.0) == pytest.approx(0.5)
    assert curve_area([0.0, 10.0], [0.0, 1.0], 10.0) == pytest.approx(0.5)
    assert curve_area([0.0, 10.0], [0.0, 1.0], 20.0) == pytest.approx(0.75)  # held after 10
    assert value_at([0.0, 10.0], [0.0, 1.0], 2.5) == pytest.approx(0.25)
    b = band([([0.0, 10.0], [0.0, 1.0]), ([0.0, 10.0], [0.2, 1.2])], [0.0, 5.0])
    assert b["mean"] == pytest.approx([0.1, 0.6])
    assert b["low"][1] < 0.6 < b["high"][1]
    assert target_levels(0.2, 0.6, [0.25, 0.5]) == pytest.approx({"25%": 0.3, "50%": 0.4})


def test_select_lr_on_a_synthetic_sweep():
    assert select_lr({1e-4: 0.30, 3e-4: 0.52, 1e-3: 0.41}) == 3e-4
    assert select_lr({1e-4: 0.5, 3e-4: 0.5}) == 1e-4  # tie: the smaller
    assert select_lr({1e-4: 0.2, 1e-3: float("nan")}) == 1e-4  # a diverged run never wins
    with pytest.raises(ValueError):
        select_lr({})


# ------------------------------------------------------------------- summary


def fake_run(arm, seed, times, accs, stage1=0.0, mem=10.0, hard=None, spp=1):
    evals = []
    for i, (t, a) in enumerate(zip(times, accs, strict=True)):
        e = {"step": i, "time": t, "stage2_time": t - stage1, "expected_accuracy": a}
        e.update(accuracy=a, sampled_accuracy=a, kl=0.1 * i)
        if hard is not None:
            e.update(hard_accuracy=hard[i], hard_expected_accuracy=hard[i])
        evals.append(e)
    return {
        "arm": arm,
        "algo": "astarpo" if arm.startswith("astarpo") else arm,
        "seed": seed,
        "lr": 1e-3,
        "evals": evals,
        "stage1_s": stage1,
        "train_s": times[-1] - stage1,
        "clock_s": times[-1],
        "steps": 10,
        "prompts": 320,
        "pool": 100,
        "pool_all_wrong": 3,
        "samples_per_prompt": spp,
        "phases": {"stage1": stage1, "generate": 1.0, "update": 2.0},
        "memory": {"rss_before_train_mb": 100.0, "rss_peak_mb": 100.0 + mem},
    }


def fake_result():
    # Reference 0.2, best final 0.6 (A*-PO): targets 25% = 0.3, 50% = 0.4, 75% = 0.5.
    runs = [
        fake_run("astarpo", 0, [5.0, 15.0, 25.0], [0.2, 0.4, 0.6], stage1=5.0, hard=[0, 0, 0.1]),
        fake_run("astarpo", 1, [5.0, 15.0, 25.0], [0.2, 0.4, 0.6], stage1=5.0, hard=[0, 0, 0.3]),
        fake_run("grpo", 0, [0.0, 10.0, 20.0], [0.2, 0.3, 0.4], mem=20.0, spp=8),
        fake_run("grpo", 1, [0.0, 10.0, 20.0], [0.2, 0.25, 0.3], mem=20.0, spp=8),
    ]
    cfg = {**BenchConfig().__dict__, "max_train_seconds": 25.0, "seeds": 2}
    return {
        "config": cfg,
        "reference": {"expected_accuracy": 0.2, "sampled_accuracy": 0.2, "accuracy": 0.2},
        "hard": {"held_out": 7, "of": 50, "n_samples": 8},
        "stage1": {"seconds": 5.0, "prompts": 100, "all_wrong": 3},
        "sweep": {"astarpo": {"scores": {"0.001": 0.4}, "chosen": 1e-3}},
        "runs": runs,
    }


def test_summary_on_synthetic_runs_with_known_answers():
    s = summarize(fake_result())
    assert s["targets"] == pytest.approx({"25%": 0.3, "50%": 0.4, "75%": 0.5})
    a, g, reused = s["arms"]["astarpo"], s["arms"]["grpo"], s["arms"][REUSED]
    # A*-PO crosses 0.3 halfway between 5 s and 15 s; read on Stage 2 time, 5 s earlier.
    assert a["time_to_target"]["25%"]["mean"] == pytest.approx(10.0)
    assert reused["time_to_target"]["25%"]["mean"] == pytest.approx(5.0)
    # GRPO: 0.3 at 10 s (seed 0) and 20 s (seed 1); 0.4 at 20 s once, never in seed 1.
    assert g["time_to_target"]["25%"]["times"] == pytest.approx([10.0, 20.0])
    assert g["time_to_target"]["50%"]["reached"] == 1
    assert g["time_to_target"]["75%"]["reached"] == 0
    r = s["ratios"]["grpo"]
    assert r["25%"]["ratio"] == pytest.approx(math.sqrt(10 / 10 * 10 / 20))
    assert (r["50%"]["pairs"], r["50%"]["missing"]) == (1, 1)
    assert r["50%"]["ratio"] == pytest.approx(15.0 / 20.0)
    assert r["memory"]["ratio"] == pytest.approx(0.5)
    # Final accuracy is read at the 25 s budget (GRPO's last value held after 20 s).
    assert g["final"]["expected_accuracy"]["mean"] == pytest.approx(0.35)
    assert a["final"]["hard_expected_accuracy"]["mean"] == pytest.approx(0.2)
    assert "hard_expected_accuracy" in g["final"] and math.isnan(
        g["final"]["hard_expected_accuracy"]["mean"]
    )


def test_markdown_and_files(tmp_path):
    res = fake_result()
    res["summary"] = summarize(res)
    md = to_markdown(res)
    assert "(0/2)" in md  # GRPO never reached 75%
    assert "| grpo |" in md and REUSED in md
    write(res, tmp_path)
    assert json.loads((tmp_path / "bench.json").read_text())["summary"]["targets"]
    assert (tmp_path / "bench.png").stat().st_size > 1000


def test_peak_rss_sees_a_temporary_allocation():
    with PeakRSS(interval=0.001) as probe:
        big = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
        time.sleep(0.05)
        del big
    assert probe.peak_mb - probe.start_mb > 48


# ------------------------------------------------------------------ the runs


def _spec(tmp_path, tiny_model, arm, seconds, stage1_inside=True):
    from astarpo.llm.toy.problems import addition_task

    ref_path = tmp_path / "ref"
    tiny_model.save_pretrained(ref_path)
    rows = addition_task(12, seed=0)
    cfg = BenchConfig(max_train_seconds=seconds, eval_every_seconds=0.5, batch_size=2)
    cfg = BenchConfig(**{**cfg.__dict__, "max_new_tokens": 3, "n_samples": 2, "eval_size": 4})
    return {
        "arm": arm,
        "seed": 0,
        "lr": 1e-3,
        "seconds": seconds,
        "stage1_inside": stage1_inside,
        "config": cfg.__dict__,
        "reference": str(ref_path),
        "train": rows[:8],
        "eval": rows[8:],
        "hard": [True, False, False, True],
        "out": str(tmp_path / "run"),
    }


def test_clock_excludes_evaluation_and_includes_stage1(
    tokenizer, tiny_model, tmp_path, monkeypatch
):
    """A slow evaluation (0.4 s each) must not shorten the training budget nor move the
    evaluation times; Stage 1 is counted in the run's clock."""
    real = worker.evaluate_policy
    calls = []

    def slow(*a, **k):
        calls.append(1)
        time.sleep(0.4)
        return real(*a, **k)

    monkeypatch.setattr(worker, "evaluate_policy", slow)
    t0 = time.perf_counter()
    res = worker.run_one(_spec(tmp_path, tiny_model, "astarpo", 2.0))
    wall = time.perf_counter() - t0
    assert res["stage1_s"] > 0 and res["clock_s"] == pytest.approx(res["stage1_s"] + res["train_s"])
    assert 2.0 <= res["clock_s"] < 3.0  # the budget, plus at most about a step
    assert wall >= res["clock_s"] + 0.4 * len(calls) - 0.05
    times = [e["time"] for e in res["evals"]]
    assert times[0] == pytest.approx(res["stage1_s"]) and times == sorted(times)
    assert len(calls) == len(res["evals"]) >= 3  # before, on the schedule, after
    gaps = [b - a for a, b in itertools.pairwise(times)][:-1]
    assert all(g < 1.0 for g in gaps)  # every ~0.5 s of training, not of wall time


@pytest.mark.parametrize("arm", ["astarpo_drop", "grpo", "ppo"])
def test_run_one_in_process(tokenizer, tiny_model, tmp_path, arm):
    spec = _spec(tmp_path, tiny_model, arm, 0.5, stage1_inside=False)
    if arm == "astarpo_drop":  # a table where half of the pool was solved at least once
        import numpy as np

        from astarpo.llm.stage1.provenance import data_fingerprint
        from astarpo.llm.stage1.rows import make_row
        from astarpo.llm.stage1.table import ValueTable

        prov = {"data": data_fingerprint(spec["train"])}  # Stage 1 ran on the whole pool
        table = [  # V* = optimal_value of the two rewards, as Stage 1 writes it
            make_row(r["prompt"], np.array([float(i < 4), 0.0]), 0.5, prov, r.get("answer"))
            for i, r in enumerate(spec["train"])
        ]
        spec["values"] = str(tmp_path / "values.jsonl")
        ValueTable(table).save(spec["values"])
    res = worker.run_one(spec)
    assert res["arm"] == arm and res["steps"] >= 1
    ev = res["evals"]
    assert all(math.isfinite(e["kl"]) and 0 <= e["expected_accuracy"] <= 1 for e in ev)
    assert ev[0]["kl"] == pytest.approx(0.0, abs=1e-5)  # policy == reference
    assert "hard_expected_accuracy" in ev[0]
    if arm == "astarpo_drop":  # only prompts the reference solved at least once
        assert res["pool_all_wrong"] == 4 and res["pool"] == 4
    else:
        assert res["stage1_s"] == 0.0 and res["pool"] == 8
    assert res["memory"]["rss_peak_mb"] >= res["memory"]["rss_before_train_mb"]


# -------------------------------------------------------------- config, CLI


def test_bench_config_rejects_bad_values():
    with pytest.raises(ValueError, match="include 'astarpo'"):
        BenchConfig(algos=("grpo",))
    with pytest.raises(ValueError, match="max_train_seconds"):
        BenchConfig(max_train_seconds=0)
    with pytest.raises(ValueError, match="target_fractions"):
        BenchConfig(target_fractions=(1.5,))
    with pytest.raises(ValueError, match="sweep_seed"):
        BenchConfig(sweep_seed=1)
    with pytest.raises(ValueError, match="lr_grid"):
        BenchConfig(lr_grid=())


def test_arms_and_algorithm_config(tmp_path):
    cfg = BenchConfig()
    assert arms(cfg) == ("astarpo", "grpo", "rloo", "ppo", "rebel", "astarpo_drop")
    a = algorithm_config("astarpo_drop", cfg, 1, tmp_path, 3e-4, 42.0)
    assert (a.beta2, a.learning_rate, a.max_train_seconds) == (1e-3, 3e-4, 42.0)
    assert a.allow_v_star_mismatch  # a subset of its Stage 1 table
    assert not algorithm_config("astarpo", cfg, 1, tmp_path, 3e-4, 42.0).allow_v_star_mismatch
    assert a.eval_every_seconds == cfg.eval_every_seconds
    assert algorithm_config("grpo", cfg, 1, tmp_path, 1e-3, 42.0).group_size == 8


def test_bench_cli_maps_flags_to_the_config(monkeypatch, tmp_path):
    import astarpo.llm.bench.run as bench_mod
    from astarpo.cli import main

    seen = {}

    def fake_run_bench(cfg, overwrite=False):
        seen["cfg"], seen["overwrite"] = cfg, overwrite
        (tmp_path / "bench.md").write_text("table\n")
        return {}

    monkeypatch.setattr(bench_mod, "run_bench", fake_run_bench)
    argv = ["bench", "--out", str(tmp_path), "--quick", "--seeds", "3", "--lr-grid", "1e-3,2e-3"]
    argv += ["--reference-target", "0.3", "--overwrite"]
    assert main([*argv, "--algos", "astarpo,ppo", "--max-train-seconds", "7", "--no-drop"]) == 0
    cfg = seen["cfg"]
    assert cfg.reference_target == 0.3 and seen["overwrite"] is True
    assert (cfg.seeds, cfg.lr_grid, cfg.algos) == (3, (1e-3, 2e-3), ("astarpo", "ppo"))
    assert cfg.max_train_seconds == 7 and not cfg.drop_all_wrong
    assert cfg.pool_size == 128 and cfg.eval_every_seconds == 2.0  # --quick sizes kept


def test_an_earlier_benchmark_is_refused_or_cleared(tmp_path):
    from astarpo.llm.bench.manifest import MANIFEST, clear_output, record

    clear_output(tmp_path, overwrite=False)  # an empty or new directory is fine
    record(tmp_path, "runs/astarpo-seed0")
    record(tmp_path, "bench.json")
    (tmp_path / "runs" / "astarpo-seed0").mkdir(parents=True)
    (tmp_path / "bench.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"earlier benchmark \(2 paths.*--overwrite"):
        clear_output(tmp_path, overwrite=False)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir()  # nothing deleted
    clear_output(tmp_path, overwrite=True)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "bench.json").exists()
    assert not (tmp_path / MANIFEST).exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_never_deletes_what_the_benchmark_did_not_write(tmp_path, overwrite):
    """The repro of the report: a user's run folder and bench.md survive --overwrite."""
    from astarpo.llm.bench.manifest import clear_output, record

    (tmp_path / "runs" / "my_experiment").mkdir(parents=True)
    (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").write_text("x\n")
    (tmp_path / "bench.md").write_text("n\n")
    with pytest.raises(FileExistsError, match="did not write") as err:
        clear_output(tmp_path, overwrite=overwrite)
    assert "earlier benchmark" not in str(err.value)
    assert "runs/my_experiment" in str(err.value) and "bench.md" in str(err.value)
    assert (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").read_text() == "x\n"
    assert (tmp_path / "bench.md").read_text() == "n\n"
    # Beside a benchmark of ours, a foreign run folder still blocks and survives.
    (tmp_path / "bench.md").unlink()
    record(tmp_path, "runs/astarpo-seed0")
    (tmp_path / "runs" / "astarpo-seed0").mkdir()
    with pytest.raises(FileExistsError, match="runs/my_experiment"):
        clear_output(tmp_path, overwrite=True)
    assert (tmp_path / "runs" / "astarpo-seed0").is_dir()
    assert (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").exists()


def test_cli_overwrite_keeps_a_users_files(tmp_path, capsys):
    from astarpo.cli import main

    (tmp_path / "runs" / "my_experiment").mkdir(parents=True)
    (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").write_text("x\n")
    (tmp_path / "bench.md").write_text("n\n")
    assert main(["bench", "--quick", "--out", str(tmp_path), "--overwrite"]) != 0
    assert "did not write" in capsys.readouterr().err
    assert (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").read_text() == "x\n"
    assert (tmp_path / "bench.md").read_text() == "n\n"


# ------------------------------------------------------------- the scratchpad task, mechanism


def test_interval_of_an_accuracy_stays_in_0_1():
    """Two seeds far apart: Student-t (t = 12.7) would reach below 0 and above 1."""
    _, lo, hi = t_interval([0.1, 0.9])
    assert lo < 0 and hi > 1  # unclipped
    m2, lo2, hi2 = t_interval([0.1, 0.9], bounds=(0.0, 1.0))
    assert (m2, lo2, hi2) == (pytest.approx(0.5), 0.0, 1.0)
    b = band([([0, 1], [0.1, 0.1]), ([0, 1], [0.9, 0.9])], [0.0, 0.5], bounds=(0.0, 1.0))
    assert min(b["low"]) >= 0.0 and max(b["high"]) <= 1.0
    s = summarize({**fake_result(), "runs": [
        fake_run("astarpo", 0, [0.0, 10.0], [0.05, 0.05]),
        fake_run("astarpo", 1, [0.0, 10.0], [0.95, 0.95]),
    ]})  # fmt: skip
    fin = s["arms"]["astarpo"]["final"]["expected_accuracy"]
    assert fin["low"] == 0.0 and fin["high"] == 1.0


def test_mechanism_on_synthetic_runs_with_known_answers():
    from astarpo.llm.bench.mechanism import cost_model, markdown_lines, summarize_mechanism

    res = fake_result()  # every run: 10 steps, generate 1 s, update 2 s, pool 100, batch 32
    m = summarize_mechanism(res)
    a, g = m["phases"]["astarpo"], m["phases"]["grpo"]
    assert a["share"]["generate"] == pytest.approx(1 / 3) and a["step_s"] == pytest.approx(0.3)
    assert g["generate_share"]["mean"] == pytest.approx(1 / 3)
    assert a["seconds"]["stage1"] == pytest.approx(5.0)
    assert m["revisits"]["astarpo"]["passes"] == pytest.approx(3.2)
    assert m["memory"]["grpo"]["increment"]["ratio"] == pytest.approx(0.5)
    assert m["memory"]["grpo"]["total"]["ratio"] == pytest.approx(110 / 120)
    c = cost_model(res["runs"], res["config"])
    # GRPO: 160 sequences, 2 s of generation and 4 s of update: g = 1/80, u = 1/40 s.
    assert c["units"]["g"] == pytest.approx(1 / 80) and c["units"]["u"] == pytest.approx(1 / 40)
    assert c["predicted_step"] == pytest.approx(1 / 8)
    assert c["measured_step"]["ratio"] == pytest.approx(1.0)
    assert c["predicted_prompt"] == pytest.approx((3.5 / 80 + 1 / 40) / (8 * 3 / 80))
    assert c["measured_prompt"]["ratio"] == pytest.approx(25 / 20)
    text = "\n".join(markdown_lines(m))
    assert "Step ratio predicted 0.125" in text and "| grpo |" in text
    assert cost_model([r for r in res["runs"] if r["arm"] != "grpo"], res["config"]) == {}


def test_scratchpad_config_and_backend_checks(tmp_path):
    from astarpo.llm.bench.run import check_backend, splits

    with pytest.raises(ValueError, match="task must be one of"):
        BenchConfig(task="nosuch")
    with pytest.raises(ValueError, match="cannot hold the scratchpad task's gold"):
        BenchConfig(task="scratchpad")  # the addition budget of 5 tokens
    with pytest.raises(ValueError, match="peers run on the addition task only"):
        BenchConfig(task="scratchpad", max_new_tokens=78, peers=("trl",))
    with pytest.raises(ValueError, match="backend must be"):
        BenchConfig(backend="sglang")
    with pytest.raises(ValueError, match="micro_batch_size"):
        BenchConfig(micro_batch_size=-1)
    cfg = BenchConfig(task="scratchpad", max_new_tokens=78, micro_batch_size=16, pool_size=64)
    assert algorithm_config("grpo", cfg, 0, tmp_path, 1e-3, 10.0).micro_batch_size == 16
    rows = splits(cfg)
    assert rows["pool"][0]["answer"].endswith(rows["pool"][0]["sum"])
    assert len(rows["pool"]) == 64 and "ans=" in rows["held_out"][0]["answer"]
    if __import__("importlib").util.find_spec("vllm") is None:
        with pytest.raises(RuntimeError, match=r"needs vLLM.*--backend hf"):
            check_backend("vllm")
    check_backend("hf")


def test_bench_cli_task_and_backend_flags(monkeypatch, tmp_path):
    import astarpo.llm.bench.run as bench_mod
    from astarpo.cli import main
    from astarpo.commands.bench import QUICK_TASK

    seen = {}

    def fake_run_bench(cfg, overwrite=False):
        seen["cfg"] = cfg
        (tmp_path / "bench.md").write_text("table\n")
        return {}

    monkeypatch.setattr(bench_mod, "run_bench", fake_run_bench)
    argv = ["bench", "--out", str(tmp_path), "--task", "scratchpad", "--quick"]
    assert main([*argv, "--micro-batch-size", "32"]) == 0
    cfg = seen["cfg"]
    assert cfg.task == "scratchpad" and cfg.max_new_tokens == 78 and cfg.micro_batch_size == 32
    assert cfg.max_train_seconds == QUICK_TASK["scratchpad"]["max_train_seconds"]
    assert cfg.backend == "hf" and cfg.sft_lr == 3e-3
    assert main(["bench", "--out", str(tmp_path), "--backend", "vllm"]) == 0
    assert seen["cfg"].backend == "vllm" and seen["cfg"].task == "addition"


@pytest.mark.slow
def test_quick_protocol_on_the_scratchpad_task(tmp_path):
    """The whole bench on the scratchpad task, shrunk (a tiny model, 1 SFT step, 1 seed):
    long responses flow through the reference, Stage 1, the runs and the report."""
    from toy_setup import TINY

    from astarpo.llm.bench.run import run_bench

    cfg = BenchConfig(
        out_dir=str(tmp_path / "b"), task="scratchpad", max_new_tokens=78,
        algos=("astarpo", "grpo"), drop_all_wrong=False, seeds=1, max_train_seconds=3.0,
        eval_every_seconds=1.0, lr_grid=(1e-3,), batch_size=2, pool_size=4, eval_size=4,
        val_size=4, n_samples=2, group_size=2, sft_steps=1, model_overrides=TINY,
        cache_dir=str(tmp_path / "cache"),
    )  # fmt: skip
    res = run_bench(cfg, progress=False)
    assert {r["arm"] for r in res["runs"]} == {"astarpo", "grpo"}
    assert all(r["backend"] == "hf" and r["response_tokens_mean"] > 1 for r in res["runs"])
    m = res["summary"]["mechanism"]
    assert m["task"] == "scratchpad" and m["reference_response_tokens"]["p90"] >= 1
    assert 0 <= m["phases"]["grpo"]["share"]["generate"] <= 1
    assert "Where the time goes" in (tmp_path / "b" / "bench.md").read_text()
    assert json.loads((tmp_path / "b" / "bench_manifest.json").read_text())


def test_figures_are_drawn_for_the_page(tmp_path):
    """>= 150 dpi, about 9.4 inches wide (the page shows 900 px), fonts >= 9 pt, legends of
    at most 8 entries (a 9th run name starts a second row of panels)."""
    from PIL import Image

    from astarpo.llm.bench import figures

    assert figures.DPI >= 150 and figures.FONT_PT >= 9
    res = fake_result()
    res["summary"] = summarize(res)
    write(res, tmp_path)
    figures.summary(res["summary"], tmp_path / "summary.png", "synthetic")
    for name in ("bench.png", "summary.png"):
        im = Image.open(tmp_path / name)
        dpi = im.info["dpi"][0]
        assert dpi >= 150 and im.size[0] / dpi <= 10.0
    curve = ([0.0, 1.0], [0.1, 0.2])
    panels = {"expected_accuracy": {f"run{i}": [curve] for i in range(9)}}
    figures.curves(panels, {}, {}, 1, 1.0, tmp_path / "nine.png")
    im = Image.open(tmp_path / "nine.png")
    assert im.size[1] > im.size[0] * 0.5  # two rows of panels


def test_stage1_and_runs_use_the_configured_backend(tokenizer, tiny_model, tmp_path, monkeypatch):
    """--backend vllm reaches Stage 1 (build_generator) and every run's trainer config; the
    HF generator stands in for vLLM here (the real engine is in the vllm-marked tests)."""
    from astarpo.llm.rollout.hf import HFGenerator

    seen = []

    def fake_build(backend, model, tok, **kw):
        seen.append((backend, kw["workdir"].name))
        return HFGenerator(model, tok, kw["batch_size"])

    monkeypatch.setattr(worker, "build_generator", fake_build)
    cfg = BenchConfig(backend="vllm", max_new_tokens=3, n_samples=2)
    rows = [{"prompt": "1+2=", "answer": "3"}, {"prompt": "2+2=", "answer": "4"}]
    table, seconds = worker.stage1(tiny_model, tokenizer, rows, cfg, tmp_path / "v.jsonl", 0)
    assert seen == [("vllm", "vllm_v")] and len(table) == 2 and seconds > 0
    assert algorithm_config("grpo", cfg, 0, tmp_path, 1e-3, 5.0).backend == "vllm"


def test_reference_response_length_is_measured_on_the_scratchpad(tokenizer, monkeypatch):
    """evaluate_policy's length figures on a stand-in reference that writes the gold worked
    solution (70 tokens with EOS) for 6 of 10 prompts and stops early (3 tokens) or runs to
    the budget without EOS for the others: median, p90 and truncation, scored exactly."""
    from astarpo.llm.bench import measure
    from astarpo.llm.models.toy import make_toy_model
    from astarpo.llm.rollout.base import Rollout
    from astarpo.llm.toy.problems import scratchpad_task
    from astarpo.llm.toy.tasks import get_task

    rows = scratchpad_task(10, seed=3, digits=4)
    eos = int(tokenizer.eos_token_id)
    budget = get_task("scratchpad").max_new_tokens

    class Reference:
        def __init__(self, *a, **k):
            pass

        def generate(self, prompts, n, sampling, seed):
            resp, text, cut = [], [], []
            for i, r in enumerate(rows):
                ids = tokenizer(r["answer"], add_special_tokens=False)["input_ids"]
                if i < 6:
                    resp.append([*ids, eos]), text.append(r["answer"]), cut.append(False)
                elif i < 8:
                    resp.append([*ids[:2], eos]), text.append(r["answer"][:2]), cut.append(False)
                else:
                    resp.append(ids[:budget]), text.append(r["answer"]), cut.append(True)
            prompt_ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
            return Rollout(list(prompts), prompt_ids, resp, text, cut, 1)

    monkeypatch.setattr(measure, "HFGenerator", Reference)
    model = make_toy_model(tokenizer, seed=0, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=1, max_position_embeddings=256)  # fmt: skip
    cfg = BenchConfig(task="scratchpad", max_new_tokens=budget)
    res = measure.evaluate_policy(model, model, tokenizer, rows, cfg, 0)
    assert res["response_tokens_p50"] == 70.0  # 6 of 10 at 70, then 69 (no EOS) and 3
    assert res["response_tokens_p90"] == 70.0
    assert res["truncated_rate"] == pytest.approx(0.2)
    # Only the six complete worked solutions score; the truncated ones match the text but
    # never emitted EOS.
    assert res["sampled_accuracy"] == pytest.approx(0.6) and res["accuracy"] == 0.6
