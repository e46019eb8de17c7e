"""The efficiency study on the paper's protocol (``--protocol paper``): equal steps in the paper's
shape for every algorithm, the plateau rule, the table's ratios and differences with Holm's
adjustment, the mechanism check, the report and its figure."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from study_fakes import fake_result, run_spec

from astarpo.analysis import holm
from experiments.efficiency import worker
from experiments.efficiency.config import PAPER_QUICK, EfficiencyConfig, presets
from experiments.efficiency.paper import plot_paper, summarize_all
from experiments.efficiency.plateau import (
    PLATEAU_BOUND,
    PLATEAU_GAIN,
    PLATEAU_STEPS,
    by_horizon,
    plateau,
)
from experiments.efficiency.report import to_markdown
from experiments.harness.protocol import PAPER_SHAPE


def paper_run(arm, seed, steps, accs, clock, stage1=0.0, mem=10.0, cpu=None, spp=1):
    """A run on the step clock: ``accs`` at ``steps``, evaluated at times proportional to the
    step, ``clock`` seconds in all (``stage1`` of them Stage 1)."""
    last = steps[-1]
    evals = [
        {"step": s, "time": stage1 + (clock - stage1) * s / last, "expected_accuracy": a}
        | {"accuracy": a, "sampled_accuracy": a, "kl": 0.01 * s}
        for s, a in zip(steps, accs, strict=True)
    ]
    for e in evals:
        e.update(stage2_time=e["time"] - stage1, responses=e["step"] * 32 * spp)
        e["tokens"] = 4.0 * e["responses"]
    evals[-1]["cpu_time"] = cpu if cpu is not None else clock
    return {
        "arm": arm,
        "algo": arm,
        "seed": seed,
        "lr": 1e-3,
        "evals": evals,
        "stage1_s": stage1,
        "train_s": clock - stage1,
        "clock_s": clock,
        "steps": last,
        "pool": 100,
        "samples_per_prompt": spp,
        "phases": {"stage1": stage1, "generate": 1.0, "update": 2.0},
        "memory": {"rss_before_train_mb": 100.0, "rss_peak_mb": 100.0 + mem},
    }


def paper_result():
    """A*-PO: 8 steps in 12 s (4 s of Stage 1), reaching 0.6; GRPO: 8 steps in 16 s, reaching
    0.4 at step 8 (A*-PO reaches 0.4 at step 4: half the steps, half GRPO's cost per step)."""
    steps = [0, 2, 4, 6, 8]
    runs = []
    for seed, wiggle in ((0, 0.0), (1, 0.01)):
        runs.append(
            paper_run(
                "astarpo",
                seed,
                steps,
                [0.2, 0.3, 0.4 + wiggle, 0.595, 0.6],
                12.0,
                stage1=4.0,
                cpu=5.0,
            )
        )
        runs.append(
            paper_run("grpo", seed, steps, [0.2, 0.25, 0.3, 0.35, 0.4], 16.0, mem=20.0, spp=8)
        )
    cfg = {
        **EfficiencyConfig.from_dict(dict(protocol="paper", steps=8, eval_every_steps=2)).to_dict(),
        "seeds": 2,
    }
    return {**fake_result(), "config": cfg, "runs": runs}


def test_paper_summary_on_synthetic_runs_with_known_answers():
    result = paper_result()
    s = summarize_all(result)
    p = s["paper"]
    grpo = p["ratios"]["grpo"]
    assert grpo["time"]["ratio"] == pytest.approx(12 / 16)
    assert grpo["time_without_stage1"]["ratio"] == pytest.approx(8 / 16)
    assert grpo["cpu_time"]["ratio"] == pytest.approx(5 / 16)
    assert grpo["memory_increment"]["ratio"] == pytest.approx(10 / 20)
    assert grpo["memory_total"]["ratio"] == pytest.approx(110 / 120)
    d = p["differences"]["grpo"]["expected_accuracy"]
    assert d["diff"] == pytest.approx(0.2) and d["pairs"] == 2
    assert p["differences"]["grpo"]["kl"]["diff"] == pytest.approx(0.0)
    raw = {f"grpo/{k}": float(v["p"]) for k, v in {**grpo, **p["differences"]["grpo"]}.items()}
    assert p["holm"] == holm(raw)  # one family: every comparison of the table
    # final accuracy at the last step (not at the clock budget)
    assert s["arms"]["astarpo"]["final"]["expected_accuracy"]["mean"] == pytest.approx(0.6)
    # targets from 0.2 to 0.6: 50% = 0.4, A*-PO at step 4 (seed 0) and ~3.9 (seed 1), GRPO at 8
    m = p["mechanism"]["50%"]
    assert m["steps"]["ratio"] == pytest.approx(math.sqrt(4 / 8 * (2 + 2 * 0.1 / 0.11) / 8))
    assert m["step_cost"]["ratio"] == pytest.approx((8 / 8) / (16 / 8))
    assert m["product"] == pytest.approx(m["steps"]["ratio"] * m["step_cost"]["ratio"])
    assert p["arms"]["grpo"]["steps_to_target"]["50%"]["mean"] == pytest.approx(8.0)
    # A*-PO gains 0.005 from (4, 6] to (6, 8]: a slope of 2.5 per 1,000 steps, no plateau
    assert p["plateau"]["best"] == "astarpo" and not p["plateau"]["plateaued"]
    assert p["plateau"]["rate"]["diff"] == pytest.approx(0.005 * 1000 / 2)


def test_plateau_rule_reads_window_means_of_the_two_last_quarters_as_a_rate():
    # T = 1,000: windows (500, 750] and (750, 1000], one evaluation each; the rate per 1,000
    # steps is 4 times the window gain
    ev = [0, 750, 1000]
    flat = [paper_run("a", i, ev, [0.2, 0.5, 0.5 + 0.004 * (i + 1)], 8.0) for i in range(3)]
    rising = [paper_run("a", i, ev, [0.2, 0.4, 0.45 + 0.01 * i], 8.0) for i in range(3)]
    got = plateau(flat, 1000)  # gains 0.004, 0.008, 0.012: mean 0.008, upper end 0.018
    high = 0.008 + 4.302653 * 0.004 / math.sqrt(3)
    assert got["window"]["diff"] == pytest.approx(0.008)
    assert got["window"]["high"] == pytest.approx(high)
    assert got["rate"]["diff"] == pytest.approx(0.032) and got["rate"]["high"] == pytest.approx(
        4 * high
    )
    assert got["plateaued"] and got["rule"] == {
        "gain": PLATEAU_GAIN,
        "bound": PLATEAU_BOUND,
        "per_steps": PLATEAU_STEPS,
    }
    got = plateau(rising, 1000)  # 0.06 a quarter, 0.24 per 1,000 steps: above the gain
    assert got["rate"]["diff"] == pytest.approx(0.24) and not got["plateaued"]
    # a mean below the gain whose interval does not rule out PLATEAU_BOUND: not a plateau
    noisy = [
        paper_run("a", i, ev, [0.2, 0.5, 0.5 + d], 8.0) for i, d in enumerate((-0.06, 0.0, 0.09))
    ]
    got = plateau(noisy, 1000)
    assert got["rate"]["diff"] < PLATEAU_GAIN < PLATEAU_BOUND < got["rate"]["high"]
    assert not got["plateaued"]
    # the same gains over the quarter of an 8-step run: a slope 125 times steeper
    short = [paper_run("a", i, [0, 6, 8], [0.2, 0.5, 0.5 + 0.004 * (i + 1)], 8.0) for i in range(3)]
    got = plateau(short, 8)
    assert got["window"]["diff"] == pytest.approx(0.008) and not got["plateaued"]
    assert got["rate"]["diff"] == pytest.approx(0.008 * 500)
    # one seed: no interval, no plateau however flat
    got = plateau([flat[0]], 1000)
    assert got["window"]["pairs"] == 1 and math.isnan(got["window"]["high"])
    assert not got["plateaued"]


def test_plateau_rule_averages_every_evaluation_and_prints_two_readings_beside():
    # two readings (steps 750 and 1000) see a dip at step 750 as a gain of 0.1; the windows
    # (500, 750] and (750, 1000] average two evaluations each: a gain of about 0.05
    steps = [125 * i for i in range(9)]
    runs = [
        paper_run("a", i, steps, [0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.5, 0.6, 0.6 + 0.002 * i], 8.0)
        for i in range(3)
    ]
    got = plateau(runs, 1000)
    assert got["gain"]["diff"] == pytest.approx(0.102)
    assert got["window"]["diff"] == pytest.approx(0.6 + 0.0005 * 2 - 0.55)
    assert got["window"]["pairs"] == 3 and not got["plateaued"]
    # level from step 500 on, swinging by 0.1 around 0.6: the two readings (0.5 at step 750,
    # 0.7 at step 1000) say a gain of 0.2, the windows (0.6 and 0.6) none
    swing = [0.2, 0.4, 0.5, 0.6, 0.6, 0.7, 0.5, 0.5, 0.7]
    runs = [paper_run("a", i, steps, [*swing[:-1], swing[-1] + 0.001 * i], 8.0) for i in range(3)]
    got = plateau(runs, 1000)
    assert got["gain"]["diff"] == pytest.approx(0.201) and got["plateaued"]
    assert got["window"]["diff"] == pytest.approx(0.0005)
    # a run whose evaluations leave a window empty is left out of the rule
    sparse = [paper_run("a", 0, [0, 1000], [0.2, 0.6], 8.0)]
    got = plateau(sparse, 1000)
    assert got["window"]["pairs"] == 0 and got["window"]["missing"] == 1
    assert not got["plateaued"]


def test_paper_report_and_figure(tmp_path):
    result = paper_result()
    result["summary"] = summarize_all(result)
    md = to_markdown(result)
    assert "# A*-PO against the baselines (paper protocol)" in md
    shape = "(minibatches 2, entropy_coef 0.001, max_grad_norm 1;"  # PAPER_SHAPE, stated
    assert f"Every run: 8 steps over the same prompt order {shape}" in md
    assert "## The paper's protocol: 8 steps for every run" in md
    assert "| paper: grpo | 0.46 / 0.48 / 0.55 |" in md  # the paper's row under ours
    assert "(2 seeds): 2.5 [2.5, 2.5] per 1,000 steps. A run has plateaued when" in md
    assert "It has NOT plateaued: give the runs more steps." in md
    # the rule at T/2, 3T/4 and T: A*-PO best at each, its accuracy at step 4 the mean of 0.4
    # and 0.41
    assert [h["steps"] for h in result["summary"]["paper"]["horizons"]] == [4, 6, 8]
    assert "| 4 | astarpo | 0.405 |" in md and "| 8 | astarpo | 0.6 |" in md
    sparse = paper_result()  # evaluations at steps 0 and 8 only: both windows empty
    for r in sparse["runs"]:
        r["evals"] = [r["evals"][0], r["evals"][-1]]
    sparse["summary"] = summarize_all(sparse)
    assert "Plateau rule: not read. No seed of the best run" in to_markdown(sparse)
    assert "0.75 [" in md or "0.75 (" in md  # the total-time ratio
    assert (
        "Learning-rate sweep (score: average of the validation expected accuracy over 8 steps" in md
    )
    result["sweep"] = {"astarpo": {"scores": {}, "chosen": 1e-4, "extended": []}}
    assert "Learning rates (given, no sweep): astarpo 0.0001" in to_markdown(result)
    swept = {"scores": {"0.0001": 0.4, "0.001": 0.5}, "chosen": 1e-3, "extended": []}
    given = {"scores": {}, "chosen": 3e-5, "extended": [], "given": True}
    result["sweep"] = {"astarpo": given, "grpo": swept}
    md = to_markdown(result)
    assert "astarpo: 3e-05 given, not swept; grpo: 0.0001 -> 0.400" in md
    out = plot_paper(result, tmp_path / "paper.png")  # check_figure: width, fonts, legends
    assert Path(out).stat().st_size > 10_000


def test_config_and_presets_of_the_paper_protocol():
    with pytest.raises(ValueError, match="wall-clock settings"):
        EfficiencyConfig.from_dict(dict(protocol="paper", peers=("trl",)))
    with pytest.raises(ValueError, match="wall-clock settings"):
        EfficiencyConfig.from_dict(dict(protocol="paper", one_pass=True))
    with pytest.raises(ValueError, match="protocol must be one of"):
        EfficiencyConfig.from_dict(dict(protocol="steps"))
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        EfficiencyConfig.from_dict(dict(steps=0))
    got = presets({"protocol": "paper", "task": "scratchpad"}, quick=True)
    assert got["one_pass"] is False and all(got[k] == v for k, v in PAPER_QUICK.items())
    assert presets({"task": "scratchpad"}, quick=False)["one_pass"] is True  # clock: unchanged
    EfficiencyConfig.from_dict(
        dict(**{**presets({"protocol": "paper", "task": "scratchpad"}, False)})
    )


@pytest.mark.parametrize("arm", ["astarpo", "grpo", "rebel"])
def test_every_algorithm_trains_the_same_steps_in_the_papers_shape(tiny_model, tmp_path, arm):
    config = dict(protocol="paper", steps=3, eval_every_steps=2, group_size=2)
    res = worker.run_one(run_spec(tmp_path, tiny_model, arm, 0.01, **config))  # clock ignored
    assert res["steps"] == 3 and [e["step"] for e in res["evals"]] == [0, 2, 3]
    assert (res["stage1_s"] > 0) == (arm == "astarpo")  # Stage 1 timed, beside the steps
    assert res["clock_s"] == pytest.approx(res["stage1_s"] + res["train_s"])
    saved = json.loads((tmp_path / "run" / "run_config.json").read_text())
    args = saved["config"]
    assert all(args[k] == v for k, v in PAPER_SHAPE.items())
    assert args["max_steps"] == 3 and args["max_train_seconds"] == 0.0
    per_step = 2 * res["samples_per_prompt"]  # batch_size 2
    responses = [e["responses"] for e in res["evals"]]
    assert responses == [0, 2 * per_step, 3 * per_step]
    tokens = [e["tokens"] for e in res["evals"]]  # 1 to max_new_tokens = 3 per response
    assert all(n <= t <= 3 * n for n, t in zip(responses, tokens, strict=True))
    # the two clocks of Stage 1 and training, evaluation excluded
    assert res["wall_seconds"] == res["clock_s"] and res["algo"] == arm and res["seed"] == 0
    assert 0 < res["cpu_seconds"] == res["evals"][-1]["cpu_time"]


def test_plateau_by_horizon_reads_each_prefix_as_a_shorter_run():
    # "a" rises to step 1000 and then stays level; "b" is below it until step 1000, above after
    ev = [125 * i for i in range(17)]
    a = [0.2 + 0.05 * min(i, 8) + 0.001 * s for s in range(3) for i in range(17)]
    b = [0.1 + 0.04 * i + 0.001 * s for s in range(3) for i in range(17)]
    runs = [paper_run("a", s, ev, a[17 * s : 17 * s + 17], 8.0) for s in range(3)]
    runs += [paper_run("b", s, ev, b[17 * s : 17 * s + 17], 8.0) for s in range(3)]
    rows = by_horizon(runs, [1000, 2000])
    assert [r["best"] for r in rows] == ["a", "b"]
    assert rows[0]["accuracy"]["a"] == pytest.approx(0.6 + 0.001)
    # at 1,000 steps "a" still rises (0.1 from (500, 750] to (750, 1000]): no plateau; the
    # reading is the rule on the runs' first 1,000 steps, evaluations after them unread
    cut = [paper_run("a", s, ev[:9], a[17 * s : 17 * s + 9], 8.0) for s in range(3)]
    assert rows[0]["window"] == plateau(cut, 1000)["window"]
    assert rows[0]["window"]["diff"] == pytest.approx(0.1) and not rows[0]["plateaued"]
    # at 2,000 steps "b" is best, rising 0.04 per evaluation: 0.16 a quarter, 0.32 per 1,000
    assert rows[1]["rate"]["diff"] == pytest.approx(0.32) and not rows[1]["plateaued"]
    # "a" alone at 2,000 steps: level from step 1,000, a plateau
    assert by_horizon(runs[:3], [2000])[0]["plateaued"]


@pytest.mark.pages
def test_plateau_horizons_script_prints_the_pilot_table_on_the_page():
    root = Path(__file__).resolve().parents[3]
    script = [sys.executable, "-m", "experiments.benchmarks.plateau_horizons"]
    run = functools.partial(subprocess.run, cwd=root, capture_output=True, text=True)
    pilot = str(root / "docs" / "figures" / "paper_plateau_pilot.json")
    out = run([*script, pilot], check=True).stdout
    assert out in (root / "docs" / "baselines.md").read_text()  # the page's table, verbatim
    assert "| 1200 | grpo | 0.895 |" in out and out.count("| yes |") == 3
    long = str(root / "docs" / "figures" / "paper_1000.json")  # the 1,000-step run: no plateau
    out = run([*script, long], check=True).stdout
    assert out in (root / "docs" / "baselines.md").read_text()
    assert "| 1000 | rloo | 0.903 |" in out and "| yes |" not in out
    clock = str(root / "docs" / "figures" / "bench_addition_trl_fair.json")
    got = run([*script, clock])
    assert got.returncode == 1 and "a clock-protocol study" in got.stderr
