"""The zero-pass study: its hard set really has pass@k = 0, V* = 0 exactly there, its verdicts
follow their rule, and ``python -m experiments.zero_pass`` maps its flags."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from astarpo import optimal_value
from astarpo.llm import (
    SCRATCHPAD_DIGITS,
    ValueTable,
    lookup_v_star,
    make_char_tokenizer,
    parse_problem,
)
from experiments.harness.measure import SuccessCounter, gold_logprobs, timed_stage1
from experiments.harness.output import OutputDir
from experiments.harness.protocol import make_reference
from experiments.harness.runner import Runner
from experiments.zero_pass.config import QUICK, ZeroPassConfig, seeds_of
from experiments.zero_pass.report import cell, summarize, to_markdown, verdict
from experiments.zero_pass.run import build_hard_set, pass_bounds


def test_pass_bounds_closed_forms() -> None:
    b = pass_bounds(64, 400)
    assert b["per_prompt"] == pytest.approx(1 - 0.05 ** (1 / 64))
    assert b["per_prompt"] == pytest.approx(0.04573, abs=1e-5)
    assert b["mean"] == pytest.approx(1 - 0.05 ** (1 / 25600))
    # the bound is what it says: 0 successes in k draws at that rate has probability 5%
    assert (1 - b["per_prompt"]) ** 64 == pytest.approx(0.05)
    assert pass_bounds(1, 1)["per_prompt"] == pytest.approx(0.95)


def test_seeds_and_config_checks() -> None:
    cfg = ZeroPassConfig()
    assert cfg.hard_train >= 200 and cfg.hard_eval >= 200 and cfg.k == 64
    assert seeds_of(cfg, "hard", "astarpo") == seeds_of(cfg, "mixed", "grpo") == 5
    assert seeds_of(cfg, "easy", "astarpo") == seeds_of(cfg, "hard", "ppo") == 3
    assert cfg.hard_digits == SCRATCHPAD_DIGITS + 1
    # the budget holds the hard prompts' gold responses with EOS (16 d + 6 tokens)
    assert cfg.protocol.train.max_new_tokens >= 16 * cfg.hard_digits + 6
    with pytest.raises(ValueError, match="hard_train must be an integer >= 1"):
        ZeroPassConfig.from_dict(dict(hard_train=0))
    with pytest.raises(ValueError, match="seconds must be a finite number"):
        ZeroPassConfig.from_dict(dict(seconds=float("nan")))
    with pytest.raises(ValueError, match="margin must be an integer >= 0"):
        ZeroPassConfig.from_dict(dict(margin=-1))


def test_success_counter_counts_by_prompt_kind() -> None:
    def reward(prompts, completions, answer, truncated=None, report=None):
        return [1.0 if c == a else 0.0 for c, a in zip(completions, answer, strict=True)]

    counter = SuccessCounter(reward, ["h1", "h2"])
    out = counter(["h1", "h2", "e1", "e2"], ["x", "y", "z", "q"], ["x", "n", "z", "n"])
    assert out == [1.0, 0.0, 1.0, 0.0]
    assert counter.samples == {"hard": 2, "easy": 2}
    assert counter.successes == {"hard": 1, "easy": 1}
    assert counter.__name__ == "reward"


def test_gold_logprobs_is_the_log_of_the_librarys_answer_probability(tokenizer, tiny_model):
    from astarpo.llm import addition_task, answer_probability

    rows = addition_task(5, seed=0)
    lp = gold_logprobs(tiny_model.eval(), tokenizer, rows, batch=2)
    assert lp.dtype == np.float64 and lp.shape == (5,)
    prob = answer_probability(tiny_model, tokenizer, rows).double().numpy()
    assert np.exp(lp) == pytest.approx(prob, rel=1e-4)


def test_verdict_rule_and_cells() -> None:
    assert verdict({"n": 5, "mean": 0.02, "low": 0.01, "high": 0.03}) == "improves"
    assert verdict({"n": 5, "mean": 0.003, "low": 0.001, "high": 0.005}) == "stagnates"  # < 0.5 pt
    assert verdict({"n": 5, "mean": 0.02, "low": -0.01, "high": 0.05}) == "stagnates"
    assert verdict({"n": 5, "mean": -0.02, "low": -0.03, "high": -0.01}) == "worsens"
    assert verdict({"n": 1, "mean": 0.5, "low": math.nan, "high": math.nan}).startswith("n/a")
    assert "bounded by v_ref > 0" in cell("stagnates", "improves")
    assert "all stagnate" in cell("stagnates", "stagnates")


@pytest.fixture(scope="module")
def quick_set(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The quick zero-pass set (a few prompts) from the cached scratchpad reference."""
    out = tmp_path_factory.mktemp("zero_pass")
    cfg = ZeroPassConfig.from_dict(dict(**{**QUICK, "hard_train": 4, "hard_eval": 4, "margin": 2}))
    ref, _ = make_reference(cfg.protocol, out)
    runner = Runner(OutputDir(out, "zero_pass"), say=lambda *a: None)
    train, held, hard = build_hard_set(ref, cfg, out, runner)
    return {"cfg": cfg, "out": out, "ref": ref, "train": train, "held": held, "info": hard}


def test_quick_hard_set_has_pass_at_k_zero(quick_set: dict) -> None:
    cfg, info = quick_set["cfg"], quick_set["info"]
    rows = quick_set["train"] + quick_set["held"]
    assert len(quick_set["train"]) == 4 and len(quick_set["held"]) == 4
    assert not {r["prompt"] for r in quick_set["train"]} & {r["prompt"] for r in quick_set["held"]}
    # longer operands than any SFT example: a rule the SFT data never shows
    parsed = [parse_problem(r["prompt"]) for r in rows]
    assert all(p is not None and p[2] == SCRATCHPAD_DIGITS + 1 for p in parsed)
    table = ValueTable.load(quick_set["out"] / "hard_pass64.jsonl")
    for r in rows:  # k reference samples each, every one wrong
        row = table.get(r["prompt"])
        assert len(row.rewards) == cfg.k == 64 and max(row.rewards) == 0.0 and row.pass_rate == 0
    assert info["upper95"]["per_prompt"] == pytest.approx(1 - 0.05 ** (1 / 64))
    # and exactly: the reference's probability of the gold response is below that bound
    tok = make_char_tokenizer()
    gold = gold_logprobs(quick_set["ref"], tok, rows)
    assert np.all(gold < math.log(info["upper95"]["per_prompt"]))


@pytest.mark.slow
def test_the_hard_check_in_shards_keeps_the_same_set(
    quick_set: dict, tmp_path: Path, monkeypatch
) -> None:
    """From SHARD_DRAWS draws on, the hard check runs in ``workers`` processes (pass_shard):
    the same table, prompts and counts as in one process."""
    import shutil

    from experiments.zero_pass import run as run_mod

    monkeypatch.setattr(run_mod, "SHARD_DRAWS", 0)
    shutil.copytree(quick_set["out"] / "reference", tmp_path / "reference")
    cfg = dataclasses.replace(quick_set["cfg"], workers=2)
    runner = Runner(OutputDir(tmp_path, "zero_pass"), workers=2, say=lambda *a: None)
    train, held, info = build_hard_set(quick_set["ref"], cfg, tmp_path, runner)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["hard-check-0", "hard-check-1"]
    assert (train, held) == (quick_set["train"], quick_set["held"])
    assert {**info, "seconds": 0} == {**quick_set["info"], "seconds": 0}
    one = ValueTable.load(quick_set["out"] / "hard_pass64.jsonl")
    sharded = ValueTable.load(tmp_path / "hard_pass64.jsonl")
    assert [(r.prompt, r.rewards) for r in sharded] == [(r.prompt, r.rewards) for r in one]


def test_stage1_v_star_is_exactly_zero_on_the_hard_prompts(quick_set: dict, tmp_path: Path) -> None:
    bench = quick_set["cfg"].protocol
    table, _ = timed_stage1(quick_set["ref"], make_char_tokenizer(), quick_set["train"], bench,
                            tmp_path / "values.jsonl", seed=0)  # fmt: skip
    prompts = [r["prompt"] for r in quick_set["train"]]
    v = lookup_v_star(table, prompts)
    # all N rewards 0: V* = beta1 log mean exp(0 / beta1) = beta1 log 1 = 0, exactly
    assert v.tolist() == [0.0] * len(prompts)
    assert all(table.get(p).rewards == (0.0,) * bench.stage1.n_samples for p in prompts)
    assert float(optimal_value(np.zeros(bench.stage1.n_samples), bench.stage1.beta1)) == 0.0
    reloaded = ValueTable.load(tmp_path / "values.jsonl")
    assert lookup_v_star(reloaded, prompts).tolist() == [0.0] * len(prompts)
    assert bench.to_dict()["task"] == "scratchpad"


def _run(arm: str, seed: int, hard_gain: float, set_name: str = "hard") -> dict:
    ref = {"hard_expected_accuracy": 0.0, "hard_log10_gold": -50.0, "easy_expected_accuracy": 0.4}
    last = {
        "hard_expected_accuracy": hard_gain,
        "hard_log10_gold": -50.0 + 10 * hard_gain,
        "easy_expected_accuracy": 0.4,
        "stage2_time": 10.0,
        "step": 3,
    }
    group = {"n": 2, "n_successes": 0, "failures": {"count": 2, "beta2_log_ratio": 0.01,
                                                    "target": 0.0}}  # fmt: skip
    return {
        "arm": arm,
        "set": set_name,
        "seed": seed,
        "evals": [{**ref, "stage2_time": 0.0, "step": 0}, last],
        "steps": 3,
        "samples": {"hard": 96, "easy": 0},
        "successes": {"hard": int(hard_gain > 0), "easy": 0},
        "samples_per_prompt": 8 if arm == "grpo" else 1,
        "log_ratio": {"hard": group, "easy": group},
    }


def test_summary_fills_the_reviews_two_by_two_by_its_rule() -> None:
    ref = {"hard_expected_accuracy": 0.0, "hard_log10_gold": -50.0, "easy_expected_accuracy": 0.4}
    runs = [_run("astarpo", s, 0.0) for s in range(3)]
    runs += [_run("grpo", s, g) for s, g in enumerate((0.05, 0.06, 0.07))]
    runs += [{"arm": "astarpo_drop", "set": "hard", "seed": 0, "skipped": "all wrong"}]
    summary = summarize({"reference": {"eval": ref}, "runs": runs})
    hard = summary["sets"]["hard"]
    assert hard["astarpo"]["hard_verdict"] == "stagnates"
    assert hard["grpo"]["hard_verdict"] == "improves"
    assert hard["grpo"]["hard_change"]["mean"] == pytest.approx(0.06)
    assert hard["grpo"]["hard_successes"] == 3 and hard["grpo"]["hard_samples"] == 288
    assert hard["astarpo_drop"] == {"skipped": "all wrong", "seeds": 1}
    assert hard["astarpo"]["log_ratio"]["hard_failures"]["target"] == 0.0
    answer = summary["answer"]["hard"]
    assert (answer["astarpo"], answer["baselines"]) == ("stagnates", "improves")
    assert "bounded by v_ref > 0" in answer["reading"]
    # accuracy intervals stay inside [0, 1]
    assert hard["astarpo"]["hard_final"]["low"] >= 0.0


def _result(runs: list[dict]) -> dict:
    ref = {"hard_expected_accuracy": 0.0, "hard_log10_gold": -50.0, "easy_expected_accuracy": 0.4}
    hard = {"digits": 5, "sft_digits": 4, "k": 64, "candidates": 9, "solved_at_least_once": 1}
    hard["upper95"] = pass_bounds(64, 8)
    return {
        "config": ZeroPassConfig.from_dict(QUICK).to_dict(),
        "reference": {"eval": ref},
        "hard_set": hard,
        "sizes": {"hard_train": 4, "hard_eval": 4},
        "stage1": {"hard": {"seconds": 1.0, "all_wrong": 4, "prompts": 4}},
        "runs": runs,
    }


def test_the_report_and_its_figure(tmp_path: Path) -> None:
    """zero_pass.md gives the 2x2 and every run's changes; zero_pass.png draws each run name's
    curve at its evaluations (markers), one legend entry per run name, under the page's rules."""
    from PIL import Image

    from experiments.zero_pass.report import plot

    runs = [_run("astarpo", s, 0.0) for s in range(2)] + [_run("grpo", s, 0.05) for s in range(2)]
    res = _result(runs)
    res["summary"] = summarize(res)
    md = to_markdown(res)
    assert "| hard | stagnates | improves | A*-PO stagnates" in md and "| hard | grpo | 2 |" in md
    plot(res, tmp_path / "z.png")  # strict: fonts, width, legend entries checked
    with Image.open(tmp_path / "z.png") as im:
        assert im.info["dpi"][0] >= 150 and im.size[0] <= 7.5 * 150 + 1


def test_cli_maps_flags_to_the_config(captured_run, tmp_path: Path, capsys) -> None:
    from experiments.tests.lab_setup import run_cli as main

    seen = captured_run("experiments.zero_pass", "zero_pass", "2x2")
    argv = ["zero-pass", "--quick", "--out", str(tmp_path), "--seconds", "4"]
    assert main([*argv, "--workers", "1", "--rerun-slow"]) == 0
    cfg = seen["cfg"]
    assert cfg.protocol.train.max_train_seconds == 4.0 and cfg.workers == 1
    assert cfg.hard_train == QUICK["hard_train"]
    assert cfg.rerun_slow and "2x2" in capsys.readouterr().out
    (tmp_path / "c.yaml").write_text("study:\n  seeds_main: 3\n")
    argv = ["zero-pass", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path)]
    assert main(argv) == 0
    assert seen["cfg"].seeds_main == 3 and seen["cfg"].hard_train == 200
    assert main(["zero-pass", "--out", str(tmp_path), "--k", "0"]) == 2
    assert "--k must be an integer >= 1" in capsys.readouterr().err
