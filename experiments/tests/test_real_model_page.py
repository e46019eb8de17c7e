"""The real-model page's aggregation on a planted run folder: accuracies and their intervals,
changes paired by problem, responses counted with Stage 1 on A*-PO's side, both clocks read
from ``/usr/bin/time -v``, and the greedy comparison's first difference."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments.real_model import read_time, summarize
from experiments.real_model_vllm import first_difference

TIME_REPORT = """\tCommand being timed: "astarpo eval"
\tUser time (seconds): 100.50
\tSystem time (seconds): 4.50
\tPercent of CPU this job got: 10%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
\tMaximum resident set size (kbytes): 2097152
"""


def _eval(path, correct):
    path.write_text(json.dumps({"model": "m", "results": {"test": {"correct": correct}}}))


def _run(folder, batch, group, steps):
    folder.mkdir()
    fields = {"batch_size": batch, "learning_rate": 2e-4, "lora_r": 16, "max_new_tokens": 96}
    config = {"config": fields | ({"group_size": group} if group else {})}
    (folder / "run_config.json").write_text(json.dumps(config))
    lines = [
        {"step": s, "loss": 0.1, "reward/mean": 0.25, "time/generate": 2.0, "time/update": 3.0,
         "time/step": 5.0, "time/train_total": 5.0 * s, "memory/rss_peak_mb": 900.0 + s}
        for s in range(1, steps + 1)
    ]  # fmt: skip
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.fixture
def planted(tmp_path):
    rows = [
        {"key": f"k{i}", "prompt": f"p{i}", "pass_rate": rate, "rewards": [1.0] * 8,
         "provenance": {"n_samples": 8, "model": "/x/SmolLM2.gguf"}}
        for i, rate in enumerate([0.0, 0.125, 0.5, 0.0])
    ]  # fmt: skip
    (tmp_path / "v_star.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = [0, 1, 0, 1, 1, 0, 0, 1, 1, 0]  # 0.5: its t-interval stays inside [0, 1]
    _eval(tmp_path / "eval_before.json", before)
    _eval(tmp_path / "eval_astarpo_s0.json", [1, 1, 0, 1, 1, 0, 0, 0, 1, 1])
    _eval(tmp_path / "eval_grpo_s0.json", [0, 1, 1, 0, 1, 0, 0, 0, 1, 0])
    _run(tmp_path / "astarpo_s0", batch=8, group=None, steps=3)
    _run(tmp_path / "grpo_s0", batch=4, group=8, steps=2)
    (tmp_path / "eval_before.time").write_text(TIME_REPORT)
    return tmp_path


def test_the_time_report_gives_both_clocks_and_peak_memory(tmp_path):
    path = tmp_path / "x.time"
    path.write_text(TIME_REPORT)
    assert read_time(path) == {"wall_s": 3723.5, "cpu_s": 105.0, "max_rss_mb": 2048.0}
    assert read_time(tmp_path / "missing.time") is None
    path.write_text("Command exited with non-zero status 1\n")
    with pytest.raises(ValueError, match="not a /usr/bin/time -v report"):
        read_time(path)


def test_the_summary_of_a_planted_folder(planted):
    out = summarize(planted)
    stage1 = out["stage1"]["word_problems"]
    assert stage1["prompts"] == 4 and stage1["responses"] == 32
    assert stage1["prompts_with_v_star_above_0"] == 2 and stage1["mean_pass_rate"] == 0.15625
    before = out["eval"]["before"]
    assert before["accuracy"] == 0.5 and before["problems"] == 10
    half = 2.2621571627982053 * math.sqrt(0.25 * 10 / 9) / math.sqrt(10)  # t quantile, 9 df
    assert before["ci"] == pytest.approx([0.5 - half, 0.5 + half])
    astarpo = out["eval"]["astarpo"]["0"]
    assert astarpo["accuracy"] == 0.6 and astarpo["change"]["diff"] == pytest.approx(0.1)
    vs = out["astarpo_vs_grpo"]["by_problem"]["0"]
    assert vs["diff"] == pytest.approx(0.2) and vs["pairs"] == 10
    assert math.isnan(out["astarpo_vs_grpo"]["by_seed"]["low"])  # one seed: no interval
    # A*-PO: 32 Stage 1 responses + 3 steps x 8 prompts; GRPO: 2 steps x 4 prompts x 8.
    assert out["responses"] == {"astarpo_s0": 56, "grpo_s0": 64}
    run = out["runs"]["grpo_s0"]
    assert run["phase_wall_s"] == {"generate": 4.0, "update": 6.0}
    assert run["train_wall_s"] == 10.0 and run["rss_peak_mb"] == 902.0
    assert out["times"]["eval_before"]["cpu_s"] == 105.0
    assert np.isfinite(astarpo["ci"]).all()


def test_vllm_against_hf_where_measured(planted):
    assert summarize(planted)["vllm"] == {}  # nothing measured: nothing claimed
    compared = {"prompts": 10, "equal_token_ids": 9, "same_score": 10, "accuracy": {}}
    (planted / "vllm_compare.json").write_text(json.dumps(compared))
    _eval(planted / "eval_before_vllm.json", [0, 1, 0, 1, 1, 0, 0, 1, 1, 1])  # the last differs
    rows = [
        {"key": f"k{i}", "prompt": f"p{i}", "pass_rate": rate, "rewards": [1.0] * 8,
         "provenance": {"n_samples": 8, "model": "/x/smollm2_hf"}}
        for i, rate in enumerate([0.125, 0.125, 0.25, 0.0])
    ]  # fmt: skip
    (planted / "v_star_vllm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    vllm = summarize(planted)["vllm"]
    assert vllm["greedy"] == {"prompts": 10, "equal_token_ids": 9, "same_score": 10}
    assert vllm["eval"]["accuracy"] == 0.6 and vllm["eval"]["problems_scored_differently"] == 1
    paired = vllm["stage1"]["vllm_minus_hf"]  # (0.125 + 0 - 0.25 + 0) / 4
    assert paired["diff"] == pytest.approx(-0.03125) and paired["pairs"] == 4


def test_first_difference():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 7]) == 2


@pytest.mark.pages
def test_the_page_quotes_its_json():
    """docs/real_model.md's accuracy table, its A*-PO - GRPO line and its Stage 1 and vLLM
    figures are those of docs/figures/real_model.json."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "real_model.md").read_text()
    result = json.loads((root / "docs" / "figures" / "real_model.json").read_text())

    for algo, title in (("astarpo", "A\\*-PO"), ("grpo", "GRPO")):
        for seed, acc in result["eval"][algo].items():
            low, high = acc["ci"]
            ch = acc["change"]
            row = (
                f"| {title}, seed {seed} | {acc['accuracy']:.3f} [{low:.3f}, {high:.3f}] | "
                f"{ch['diff']:+.3f} [{ch['low']:.3f}, {ch['high']:.3f}] |"
            )
            assert row in page, row
    by_seed = result["astarpo_vs_grpo"]["by_seed"]
    line = f"{by_seed['diff']:.3f} [{by_seed['low']:.3f}, {by_seed['high']:.3f}]"
    assert f"A\\*-PO minus GRPO at 384 responses: {line}" in page
    assert set(result["responses"].values()) == {384}
    stage1 = result["stage1"]["word_problems"]
    low, high = stage1["mean_pass_rate_ci"]
    assert f"{stage1['mean_pass_rate']:.3f} [{low:.3f}, {high:.3f}]" in page
    assert f"V\\* > 0 on {stage1['prompts_with_v_star_above_0']} of the 32" in page
    vllm = result["vllm"]
    assert vllm["greedy"] == {"prompts": 50, "equal_token_ids": 50, "same_score": 50}
    assert vllm["eval"]["problems_scored_differently"] == 0
    d = vllm["stage1"]["vllm_minus_hf"]
    assert f"{d['diff']:.3f} [{d['low']:.3f}, {d['high']:.3f}]" in page
