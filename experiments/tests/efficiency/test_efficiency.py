"""The efficiency study: the summary on synthetic runs with known answers, the report and its
figures, the clock (evaluation excluded, Stage 1 inside), one in-process run per kind, the
config, the CLI (``python -m experiments.efficiency`` and ``python -m experiments.efficiency``)."""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest
from study_fakes import fake_result, fake_run, run_spec

from experiments.efficiency import worker
from experiments.efficiency.config import EfficiencyConfig, arms
from experiments.efficiency.report import plot_summary, to_markdown, write
from experiments.efficiency.summary import REUSED, summarize
from experiments.harness.output import OutputDir

# ------------------------------------------------------------------- summary


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
    assert math.isnan(g["final"]["hard_expected_accuracy"]["mean"])
    # A*-PO minus GRPO at the budget, paired by seed; not against A*-PO's own runs (REUSED).
    d = s["differences"]["grpo"]
    finals = [a["final"]["expected_accuracy"]["mean"], g["final"]["expected_accuracy"]["mean"]]
    assert d["diff"] == pytest.approx(finals[0] - finals[1]) and REUSED not in s["differences"]
    # One Holm family over every ratio and difference: adjusted >= raw, and the smallest raw
    # p is multiplied by the family's size (NaN p-values: one-pair ratios, left out).
    tests = [r for rs in s["ratios"].values() for r in rs.values()] + [d]
    usable = [t for t in tests if not math.isnan(t["p"])]
    assert all(t["p_holm"] >= t["p"] for t in usable)
    first = min(usable, key=lambda t: t["p"])
    assert first["p_holm"] == pytest.approx(min(1.0, len(usable) * first["p"]))


def test_times_read_on_the_cpu_clock_with_their_own_holm_family():
    """Each evaluation's ``cpu_time`` is a second clock: where GRPO's process got half a core
    (CPU time = wall / 2) its CPU-time ratios double against the wall ones; results without
    ``cpu_time`` give no CPU reading; the CPU family carries ``p_holm_cpu``."""
    res = fake_result()
    assert summarize(res)["cpu_ratios"] == {}  # recorded before the CPU clock
    for run in res["runs"]:
        for e in run["evals"]:
            e["cpu_time"] = e["time"] / (2.0 if run["arm"] == "grpo" else 1.0)
    s = summarize(res)
    wall, cpu = s["ratios"]["grpo"], s["cpu_ratios"]["grpo"]
    assert cpu["25%"]["ratio"] == pytest.approx(2 * wall["25%"]["ratio"])
    assert cpu["50%"]["ratio"] == pytest.approx(2 * wall["50%"]["ratio"])
    assert REUSED not in s["cpu_ratios"] and cpu["memory"]["ratio"] == wall["memory"]["ratio"]
    d = s["differences"]["grpo"]
    assert d["p_holm_cpu"] >= d["p"] and all(
        r["p_holm_cpu"] >= r["p"] for r in cpu.values() if not math.isnan(r["p"])
    )
    assert "read on the process CPU clock" in to_markdown({**res, "summary": s})


def test_report_names_each_algorithms_swept_prompts_per_step():
    res = fake_result()
    res["config"]["algos"] = ("astarpo", "grpo")
    res["sweep_batch"] = {n: {"scores": {}, "chosen": b, "extended": []} for n, b in
                          (("astarpo", 64), ("grpo", 16), ("astarpo_drop", 64))}  # fmt: skip
    text = to_markdown({**res, "summary": summarize(res)})
    assert "prompts per step per algorithm (astarpo 64, grpo 16)" in text
    assert "32 prompts per step" not in text
    res["sweep_batch"]["grpo"] = {"scores": {}, "chosen": 32, "extended": []}  # one value
    text = to_markdown({**res, "summary": summarize(res)})
    assert "grpo: 32 (one value, not swept)" in text


def test_intervals_stay_in_the_range_of_their_quantity():
    """Two seeds far apart: Student-t (t = 12.7) would leave [0, 1] for an accuracy and go
    below 0 for a KL divergence; both are clipped."""
    runs = [
        fake_run("astarpo", 0, [0.0, 10.0], [0.05, 0.05]),
        fake_run("astarpo", 1, [0.0, 10.0], [0.95, 0.95]),
    ]
    runs[1]["evals"][-1]["kl"] = 1.2
    s = summarize({**fake_result(), "runs": runs})
    fin = s["arms"]["astarpo"]["final"]
    assert (fin["expected_accuracy"]["low"], fin["expected_accuracy"]["high"]) == (0.0, 1.0)
    assert fin["kl"]["mean"] == pytest.approx(0.65) and fin["kl"]["low"] == 0.0


def test_mechanism_on_synthetic_runs_with_known_answers():
    from experiments.efficiency.mechanism import cost_model, markdown_lines, summarize_mechanism

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


def test_markdown_and_files(tmp_path):
    res = fake_result()
    res["summary"] = summarize(res)
    md = to_markdown(res)
    assert "(0/2)" in md  # GRPO never reached 75%
    assert "| grpo |" in md and REUSED in md and "Where the time goes" in md
    write(OutputDir(tmp_path, "bench"), res)
    assert json.loads((tmp_path / "bench.json").read_text())["summary"]["targets"]
    assert (tmp_path / "bench.png").stat().st_size > 1000


def test_figures_are_drawn_for_the_page(tmp_path):
    """>= 150 dpi, at most 7.5 inches wide (analysis.figures' strict check), legends of at most
    8 entries: a 9th run name starts a second row of panels; a result whose runs kept no
    curves is drawn from its summary."""
    from PIL import Image

    res = fake_result()
    res["summary"] = summarize(res)
    write(OutputDir(tmp_path, "bench"), res)
    curveless = {**res, "runs": [{k: v for k, v in r.items() if k != "evals"} for r in res["runs"]]}
    plot_summary(curveless, tmp_path / "summary.png")
    for name in ("bench.png", "summary.png"):
        with Image.open(tmp_path / name) as im:
            assert im.info["dpi"][0] >= 150 and im.size[0] / im.info["dpi"][0] <= 7.6
    nine = [fake_run(f"run{i}", 0, [0.0, 1.0], [0.1, 0.2]) for i in range(9)]
    res = {**res, "runs": nine, "summary": {**res["summary"], "targets": {}}}
    write(OutputDir(tmp_path / "nine", "bench"), res)
    with Image.open(tmp_path / "nine" / "bench.png") as im:
        assert im.size[1] > im.size[0] * 0.8  # two rows of panels


# ------------------------------------------------------------------ the runs


def test_clock_excludes_evaluation_and_includes_stage1(tiny_model, tmp_path, monkeypatch):
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
    res = worker.run_one(run_spec(tmp_path, tiny_model, "astarpo", 2.0))
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
def test_run_one_in_process(tiny_model, tmp_path, arm):
    spec = run_spec(tmp_path, tiny_model, arm, 0.5, stage1_inside=False)
    if arm == "astarpo_drop":  # a table where half of the pool was solved at least once
        import numpy as np

        from astarpo.llm import ValueTable
        from astarpo.llm.stage1.provenance import data_fingerprint
        from astarpo.llm.stage1.rows import make_row

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


@pytest.mark.parametrize(
    ("arm", "mean", "allocation"),
    [
        ("astarpo_adaptive", 4, "adaptive"),
        ("astarpo_adaptive_half", 2, "adaptive"),
        ("astarpo_half", 2, "fixed"),
    ],
)
def test_stage1_arms_spend_their_budget(tiny_model, tmp_path, arm, mean, allocation):
    """A run of ``STAGE1_ARMS`` draws its Stage 1 under its own rule, inside its clock: on
    average ``mean`` samples per prompt (adaptive: varying by prompt, between the pilot and
    the cap), at A*-PO's algorithm."""
    from astarpo.llm import ValueTable
    from experiments.efficiency.config import EfficiencyConfig, arms
    from experiments.harness.protocol import STAGE1_ARMS, arm_algorithm

    spec = run_spec(tmp_path, tiny_model, arm, 5.0, n_samples=4)
    cfg = EfficiencyConfig.from_dict(dict(n_samples=4))
    stage1 = cfg.stage1_config(0, arm)
    assert (stage1.allocation, stage1.n_samples) == (allocation, mean)
    assert stage1.pilot_samples == max(1, mean // 2) and stage1.max_samples == 16
    assert cfg.stage1_config(0).allocation == "fixed" and cfg.stage1_config(0).n_samples == 4
    assert arm_algorithm(arm) == "astarpo"
    assert set(STAGE1_ARMS) <= set(arms(EfficiencyConfig.from_dict(dict(adaptive_n=True))))
    assert not set(STAGE1_ARMS) & set(arms(cfg))
    res = worker.run_one(spec)
    assert res["algo"] == "astarpo" and res["stage1_s"] > 0 and res["steps"] >= 1
    drawn = [len(r.rewards) for r in ValueTable.load(tmp_path / "run" / "values.jsonl")]
    assert sum(drawn) == mean * len(drawn)  # the budget, spent in full (one call of 8 prompts)
    assert res["stage1_samples"] == sum(drawn)  # the responses axis of the paper figure
    if allocation == "adaptive":
        assert min(drawn) >= stage1.pilot_samples and max(drawn) <= stage1.max_samples
    else:
        assert set(drawn) == {mean}


# -------------------------------------------------------------- config, CLI


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="include 'astarpo'"):
        EfficiencyConfig.from_dict(dict(algos=("grpo",)))
    with pytest.raises(ValueError, match="max_train_seconds"):
        EfficiencyConfig.from_dict(dict(max_train_seconds=0))
    with pytest.raises(ValueError, match="target_fractions"):
        EfficiencyConfig.from_dict(dict(target_fractions=(1.5,)))
    with pytest.raises(ValueError, match="sweep_seed"):
        EfficiencyConfig.from_dict(dict(sweep_seed=1))
    with pytest.raises(ValueError, match="lr_grid"):
        EfficiencyConfig.from_dict(dict(lr_grid=()))
    with pytest.raises(ValueError, match="grid_extensions must be an integer >= 0"):
        EfficiencyConfig.from_dict(dict(grid_extensions=-1))
    with pytest.raises(ValueError, match="peers run on the addition task only"):
        EfficiencyConfig.from_dict(dict(task="scratchpad", max_new_tokens=78, peers=("trl",)))
    assert arms(EfficiencyConfig()) == ("astarpo", "grpo", "rloo", "ppo", "rebel", "astarpo_drop")


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """The config and overwrite flag ``python -m experiments.efficiency`` (or ``study efficiency``)
    ran with."""
    import experiments.efficiency.run as run_mod

    got = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        got["cfg"], got["overwrite"] = cfg, overwrite
        (tmp_path / "bench.md").write_text("table\n")
        return {}

    monkeypatch.setattr(run_mod, "run", fake_run)
    return got


def test_cli_maps_flags_to_the_config(seen, tmp_path, capsys):
    from experiments.tests.lab_setup import run_cli as main

    argv = [
        "efficiency",
        "--out",
        str(tmp_path),
        "--quick",
        "--seeds",
        "3",
        "--lr-grid",
        "1e-3,2e-3",
    ]
    argv += ["--reference-target", "0.3", "--overwrite", "--no-drop-all-wrong"]
    assert main([*argv, "--algos", "astarpo,ppo", "--max-train-seconds", "7"]) == 0
    cfg = seen["cfg"]
    assert cfg.sft.target_accuracy == 0.3 and seen["overwrite"] is True
    assert (cfg.seeds, cfg.lr_grid, cfg.algos) == (3, (1e-3, 2e-3), ("astarpo", "ppo"))
    assert cfg.train.max_train_seconds == 7 and not cfg.drop_all_wrong
    assert cfg.pool_size == 128 and cfg.train.eval_every_seconds == 2.0  # --quick sizes kept
    assert "table" in capsys.readouterr().out  # the report is printed
    argv = ["efficiency", "--out", str(tmp_path), "--peers", "trl"]
    assert main([*argv, "--model-overrides", '{"hidden_size": 48}']) == 0
    assert seen["cfg"].model_overrides == {"hidden_size": 48} and seen["cfg"].peers == ("trl",)
    rates = ["--learning-rates", '{"astarpo": 3.33e-5, "grpo": 1e-4}', "--workers", "2"]
    assert main(["efficiency", "--out", str(tmp_path), *rates]) == 0
    assert seen["cfg"].learning_rates == {"astarpo": 3.33e-5, "grpo": 1e-4}
    assert seen["cfg"].workers == 2
    assert main(["efficiency", "--out", str(tmp_path), "--max-train-seconds", "0"]) == 2
    assert "--max-train-seconds must be a finite number > 0" in capsys.readouterr().err


def test_cli_task_defaults_run_the_full_protocol(seen, tmp_path):
    """``--task scratchpad`` runs every algorithm, the drop arm and the one-pass setting;
    ``--quick`` and ``--no-one-pass`` turn the latter off; scratchpad2 runs A*-PO and GRPO."""
    from experiments.efficiency.config import TASK_PRESETS
    from experiments.tests.lab_setup import run_cli as main

    out = ["efficiency", "--out", str(tmp_path), "--task"]
    assert main([*out, "scratchpad"]) == 0
    cfg = seen["cfg"]
    assert cfg.algos == ("astarpo", "grpo", "rloo", "ppo", "rebel") and cfg.drop_all_wrong
    assert cfg.one_pass and cfg.seeds == 5 and cfg.grid_extensions == 2
    assert cfg.sft.learning_rate == 3e-3
    assert main([*out, "scratchpad", "--no-one-pass", "--grid-extensions", "0"]) == 0
    assert not seen["cfg"].one_pass and seen["cfg"].grid_extensions == 0
    assert main([*out, "scratchpad", "--quick", "--micro-batch-size", "32"]) == 0
    assert not seen["cfg"].one_pass and seen["cfg"].algos == ("astarpo", "grpo")
    assert seen["cfg"].train.max_train_seconds == TASK_PRESETS["scratchpad"][1]["max_train_seconds"]
    assert seen["cfg"].train.micro_batch_size == 32 and seen["cfg"].train.max_new_tokens == 78
    assert main([*out, "scratchpad2"]) == 0
    assert seen["cfg"].algos == ("astarpo", "grpo") and seen["cfg"].train.max_new_tokens == 46
    assert main(["efficiency", "--out", str(tmp_path), "--backend", "vllm"]) == 0
    assert seen["cfg"].train.backend == "vllm" and seen["cfg"].task == "addition"


def test_cli_overwrite_keeps_a_users_files(tmp_path, capsys):
    from experiments.tests.lab_setup import run_cli as main

    (tmp_path / "runs" / "my_experiment").mkdir(parents=True)
    (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").write_text("x\n")
    (tmp_path / "bench.md").write_text("n\n")
    assert main(["efficiency", "--quick", "--out", str(tmp_path), "--overwrite"]) != 0
    assert "did not write" in capsys.readouterr().err
    assert (tmp_path / "runs" / "my_experiment" / "metrics.jsonl").read_text() == "x\n"
    assert (tmp_path / "bench.md").read_text() == "n\n"


def test_report_only_redraws_from_the_json(tmp_path, capsys):
    from experiments.tests.lab_setup import run_cli as main

    res = fake_result()
    res["summary"] = summarize(res)
    (tmp_path / "bench.json").write_text(json.dumps(res))
    assert main(["efficiency", "--out", str(tmp_path), "--report-only"]) == 0
    assert "| grpo |" in capsys.readouterr().out and (tmp_path / "bench.png").exists()
    assert json.loads((tmp_path / "bench.json").read_text()) == json.loads(json.dumps(res))


@pytest.mark.slow
def test_quick_protocol_on_the_scratchpad_task(tmp_path):
    """The whole study on the scratchpad task, shrunk (a tiny model, 1 SFT step, 1 seed):
    long responses flow through the reference, Stage 1, the runs and the report."""
    from experiments.efficiency.run import run
    from experiments.tests.lab_setup import TINY

    cfg = EfficiencyConfig.from_dict(dict(
        task="scratchpad", max_new_tokens=78, algos=("astarpo", "grpo"), drop_all_wrong=False,
        seeds=1, max_train_seconds=3.0, eval_every_seconds=1.0, lr_grid=(1e-3,), batch_size=2,
        pool_size=4, eval_size=4, val_size=4, n_samples=2, group_size=2, sft_steps=1,
        model_overrides=TINY, cache_dir=str(tmp_path / "cache"),
    ))  # fmt: skip
    res = run(cfg, tmp_path / "b", progress=False)
    assert {r["arm"] for r in res["runs"]} == {"astarpo", "grpo"}
    assert all(r["backend"] == "hf" and r["response_tokens_mean"] > 1 for r in res["runs"])
    assert all(r["process"]["cpu_s"] > 0 and "slow" in r["process"] for r in res["runs"])
    m = res["summary"]["mechanism"]
    assert m["task"] == "scratchpad" and m["reference_response_tokens"]["p90"] >= 1
    assert 0 <= m["phases"]["grpo"]["share"]["generate"] <= 1
    assert "Where the time goes" in (tmp_path / "b" / "bench.md").read_text()
    assert json.loads((tmp_path / "b" / "bench_manifest.json").read_text())


def test_given_learning_rates_skip_the_sweep_and_reach_the_runs():
    """``learning_rates`` fixes a run's rate (no sweep run for it); the others are swept;
    the measured runs take the chosen rates, ``workers`` at a time through ``run_all``."""
    from experiments.efficiency.run import seed_runs, sweep_rates

    class NoRuns:
        def run(self, name, spec):
            raise AssertionError(f"a sweep run of a given rate: {name}")

        def run_all(self, runs):
            self.seen = runs
            return [{"name": n} for n, _ in runs]

        say = staticmethod(lambda *a: None)

    given = {"astarpo": 5e-5, "grpo": 1e-4}
    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), lr_grid=(1e-3, 2e-3),
                                          learning_rates=given, seeds=2, workers=2))  # fmt: skip
    runner = NoRuns()
    lrs = sweep_rates(runner, cfg, {})
    assert {k: v["chosen"] for k, v in lrs.items()} == {**given, "astarpo_drop": 5e-5}
    assert all(v["given"] and v["scores"] == {} for v in lrs.values())
    runs = seed_runs(runner, cfg, {}, ("astarpo", "grpo"), lrs)
    assert len(runs) == 4 and {(s["arm"], s["lr"]) for _, s in runner.seen} == set(given.items())
    with pytest.raises(ValueError, match="learning_rates must map runs of algos"):
        EfficiencyConfig.from_dict(dict(algos=("astarpo",), learning_rates={"grpo": 1e-4}))
    with pytest.raises(ValueError, match="learning_rates must be numbers > 0"):
        EfficiencyConfig.from_dict(dict(learning_rates={"astarpo": 0.0}))
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        EfficiencyConfig.from_dict(dict(workers=0))


def test_batch_sweep_reuses_the_rate_sweeps_runs_at_batch_size_side_by_side():
    """The rate sweep's runs at the chosen rate are the batch sweep's at ``batch_size``: not
    run again; every round's runs reach ``run_all`` together, ``sweep_workers`` at a time."""
    from experiments.efficiency.run import sweep_batches, sweep_rates

    class FakeRunner:
        say = staticmethod(lambda *a: None)

        def __init__(self):
            self.calls = []

        def run_all(self, runs, workers=None, rerun_slow=None):
            self.calls.append(([n for n, _ in runs], workers))
            self.rerun_slow = rerun_slow
            out = []
            for _, spec in runs:
                b, lr = spec["config"]["batch_size"], spec["lr"]
                acc = 0.6 - abs(b - 28) / 200 - abs(math.log10(lr) + 4) / 10
                out.append(fake_run(spec["arm"], spec["seed"], [0.0, 20.0], [acc, acc]))
            return out

    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), lr_grid=(3e-5, 1e-4, 3e-4),
                           batch_grid=(16, 32, 64), batch_size=32, sweep_seeds=3,
                           sweep_workers=2, grid_extensions=1))  # fmt: skip
    runner = FakeRunner()
    base = {"config": cfg.to_dict()}
    lrs = sweep_rates(runner, cfg, base)
    assert [len(n) for n, _ in runner.calls] == [2 * 3 * 3] and runner.calls[0][1] == 2
    assert {a: lrs[a]["chosen"] for a in ("astarpo", "grpo")} == {"astarpo": 1e-4, "grpo": 1e-4}
    assert runner.rerun_slow is None  # the clock protocol's sweep reads the clock: the runner's
    paper = cfg.replace(protocol="paper", steps=20, batch_grid=())
    paper_runner = FakeRunner()
    sweep_rates(paper_runner, paper, {"config": paper.to_dict()})
    assert paper_runner.rerun_slow is False  # equal steps: a slow sweep run is not run again
    got = sweep_batches(runner, cfg, base, lrs)
    names = [n for ns, _ in runner.calls[1:] for n in ns]
    assert len(names) == 2 * 2 * 3 and not any("-b32" in n for n in names)  # 32: reused
    assert got["grpo"]["scores"]["32"] == lrs["grpo"]["scores"]["0.0001"]
    assert got["astarpo"]["chosen"] == 32 and got["astarpo"]["extended"] == []
    with pytest.raises(ValueError, match="sweep_workers must be an integer >= 1"):
        EfficiencyConfig.from_dict(dict(sweep_workers=0))


def test_batch_grid_sweeps_prompts_per_step_at_the_chosen_rate():
    """With ``batch_grid`` each algorithm's prompts per step is swept at its chosen rate (the
    runs' config carries the size), a choice on an edge extends the grid to an integer, the
    runs that reuse A*-PO's rate reuse its size, and the measured runs train at their own."""
    from experiments.efficiency.run import seed_runs, sweep_batches

    best = {"astarpo": 16, "grpo": 64}  # grpo's best lies past the grid's top edge (32)

    class FakeRunner:
        say = staticmethod(lambda *a: None)

        def __init__(self):
            self.names = []

        def run(self, name, spec):
            self.names.append(name)
            arm, b = spec["arm"], spec["config"]["batch_size"]
            acc = 0.6 - abs(b - best[arm]) / 200  # peaks at the arm's best size
            return fake_run(arm, spec["seed"], [0.0, 20.0], [acc, acc])

        def run_all(self, runs, workers=None, rerun_slow=None):
            self.seen = runs
            return [self.run(n, s) for n, s in runs]

    cfg = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), batch_grid=(8, 16, 32),
                                          grid_extensions=1, seeds=2))  # fmt: skip
    lrs = {a: {"chosen": lr} for a, lr in (("astarpo", 3e-5), ("grpo", 1e-4))}
    runner = FakeRunner()
    got = sweep_batches(runner, cfg, {"config": cfg.to_dict()}, lrs)
    assert got["astarpo"]["chosen"] == 16 and got["astarpo"]["extended"] == []
    assert got["grpo"]["chosen"] == 64 and got["grpo"]["extended"] == [64.0]  # 32^2 / 16
    assert got["astarpo_drop"] is got["astarpo"]
    assert "sweep-grpo-lr0.0001-b64" in runner.names and len(runner.names) == 7
    runs = seed_runs(runner, cfg, {"config": cfg.to_dict()}, ("astarpo", "grpo"), lrs, batches=got)
    assert len(runs) == 4
    assert {(s["arm"], s["config"]["batch_size"]) for _, s in runner.seen} == {
        ("astarpo", 16),
        ("grpo", 64),
    }
    assert sweep_batches(runner, EfficiencyConfig(), {}, lrs) == {}  # no grid: no sweep
    # a given size skips its sweep; without a grid the others take batch_size
    n = len(runner.names)
    given = EfficiencyConfig.from_dict(dict(algos=("astarpo", "grpo"), batch_sizes={"astarpo": 64}))
    got = sweep_batches(runner, given, {"config": given.to_dict()}, lrs)
    assert (got["astarpo"]["chosen"], got["grpo"]["chosen"]) == (64, 32) and got["astarpo"]["given"]
    assert len(runner.names) == n  # nothing run
    with pytest.raises(ValueError, match="batch_sizes must map runs of algos"):
        EfficiencyConfig.from_dict(dict(algos=("astarpo",), batch_sizes={"grpo": 16}))
    with pytest.raises(ValueError, match="batch_sizes is for protocol='clock' only"):
        EfficiencyConfig.from_dict(dict(batch_sizes={"astarpo": 16}, protocol="paper"))
    with pytest.raises(ValueError, match="batch_grid must hold integers >= 1"):
        EfficiencyConfig.from_dict(dict(batch_grid=(0, 16)))
    with pytest.raises(ValueError, match="for protocol='clock' only"):
        EfficiencyConfig.from_dict(dict(batch_grid=(16, 32), protocol="paper"))


def test_passes_read_each_runs_own_prompts():
    """A run's passes over the pool come from the prompts it saw (its own prompts per step),
    not from the study's batch_size."""
    from experiments.efficiency.mechanism import seen

    run = fake_run("grpo", 0, [0.0, 1.0], [0.2, 0.3])  # 10 steps, 320 prompts
    assert seen(run, 16) == 320 and seen({**run, "prompts": 0}, 16) == 160
