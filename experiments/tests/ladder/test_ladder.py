"""The ladder study: its v_ref values are the reference's teacher-forced gold probabilities
(recomputed from the saved reference), its sampled pass@64 = 0 counts agree with them, its
prompt file has its fields and disjoint splits, and bad settings are refused by name."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from astarpo.llm import SCRATCHPAD_DIGITS, get_task, make_char_tokenizer, scratchpad_solution
from astarpo.llm.rewards.scratchpad import parse_problem
from experiments.harness.ladder_build import agreement, poisson_binomial
from experiments.harness.ladder_sets import (
    FIELDS,
    LadderConfig,
    bin_label,
    draw_candidates,
    load_reference,
    parse_bin,
    read_prompts,
    zero_rich,
)
from experiments.harness.measure import gold_logprobs
from experiments.harness.protocol import HELD, REF_SEED, SFT
from experiments.ladder.run import run

#: A tiny ladder: two graded bins and the zero-pass regime, a few prompts each.
TINY = dict(bins=("-1:-2", "-2:-4", "-30:-inf"), train=6, test=6, candidates=3000)
TINY.update(long_candidates=16)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny ladder, run once into a folder."""
    out = tmp_path_factory.mktemp("ladder")
    cfg = LadderConfig.from_dict(dict(**TINY))
    result = run(cfg, out, progress=False)
    rows = read_prompts(out / "ladder_prompts.jsonl")
    return {"cfg": cfg, "out": out, "result": result, "rows": rows}


def test_bins_parse_and_label() -> None:
    assert parse_bin("-1:-2") == (-1.0, -2.0) and bin_label("-1:-2") == "[-1,-2)"
    assert parse_bin("-30:-inf") == (-30.0, -math.inf) and bin_label("-30:-inf") == "<=-30"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(train=0), "train must be an integer >= 1"),
        (dict(test=-1), "test must be an integer >= 1"),
        (dict(candidates=0), "candidates must be an integer >= 1"),
        (dict(k=4), "k must be an integer >= 8"),
        (dict(bins=()), "bins must be a non-empty tuple"),
        (dict(bins=("-1-2",)), "a bin is 'HI:LO'"),
        (dict(bins=("-2:-1",)), "needs 0 >= HI > LO"),
        (dict(bins=("1:-1",)), "needs 0 >= HI > LO"),
        (dict(bins=("-1:-3", "-2:-4")), "bins must not overlap"),
        (dict(zero_low=0.9, zero_high=0.5), "zero_low <= zero_high < 1"),
        (dict(zero_high=1.0), "zero_low <= zero_high < 1"),
        (dict(seed=-1), "seed must be an integer >= 0"),
    ],
)
def test_bad_config_values_raise_value_errors(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LadderConfig.from_dict(dict(**fields))


def test_defaults_are_the_full_ladder() -> None:
    cfg = LadderConfig()
    labels = [bin_label(b) for b in cfg.bins]
    assert labels == ["[-1,-2)", "[-2,-3)", "[-3,-4)", "[-4,-6)", "<=-30"]
    assert cfg.train >= 200 and cfg.test >= 200 and cfg.k == 64
    assert cfg.protocol.train.max_new_tokens >= 16 * cfg.long_digits + 6


def test_zero_rich_problems_are_worked_solutions_with_many_zeros() -> None:
    rows = zero_rich(200, 4, 0.9, 0.9, seed=0)
    zeros = []
    for r in rows:
        a, b, d = parse_problem(r["prompt"])
        assert d == 4 and r["answer"] == scratchpad_solution(a, b, 4)
        zeros.append(r["prompt"][:-1].replace("+", "").count("0") / 8)
    assert 0.85 < np.mean(zeros) < 0.95
    assert zero_rich(5, 4, 0.5, 0.9, seed=3) == zero_rich(5, 4, 0.5, 0.9, seed=3)


def test_poisson_binomial_is_exact() -> None:
    q = np.array([0.1, 0.5, 0.9])
    pmf = poisson_binomial(q)
    assert pmf.sum() == pytest.approx(1.0)
    assert pmf[0] == pytest.approx(0.9 * 0.5 * 0.1) and pmf[3] == pytest.approx(0.1 * 0.5 * 0.9)
    assert (np.arange(4) * pmf).sum() == pytest.approx(q.sum())
    assert agreement(np.ones(5), 5)["p_value"] == 1.0
    assert agreement(np.full(50, 0.5), 0)["p_value"] < 1e-10


@pytest.mark.e2e
def test_prompt_file_fields_bins_and_disjoint_splits(tiny: dict) -> None:
    cfg, rows = tiny["cfg"], tiny["rows"]
    lines = (tiny["out"] / "ladder_prompts.jsonl").read_text().splitlines()
    assert len(lines) == len(rows) == len(cfg.bins) * (cfg.train + cfg.test)
    for r in rows:
        assert tuple(r) == FIELDS
        assert r["split"] in ("train", "test") and r["gold_response"] == r["answer"]
        hi, lo = parse_bin(next(b for b in cfg.bins if bin_label(b) == r["bin"]))
        assert lo < math.log10(r["v_ref"]) <= hi
    for label in map(bin_label, cfg.bins):
        split = {s: [r["prompt"] for r in rows if r["bin"] == label and r["split"] == s]
                 for s in ("train", "test")}  # fmt: skip
        assert len(split["train"]) == cfg.train and len(split["test"]) == cfg.test
    prompts = [r["prompt"] for r in rows]
    assert len(set(prompts)) == len(prompts)  # no prompt in two bins or two splits
    sft = {r["prompt"] for r in get_task("scratchpad").rows(HELD + SFT, REF_SEED)}
    assert not sft & set(prompts)
    long = [r for r in rows if r["bin"] == "<=-30"]
    assert all(parse_problem(r["prompt"])[2] == SCRATCHPAD_DIGITS + 1 for r in long)


@pytest.mark.e2e
def test_v_ref_recomputed_from_the_saved_reference(tiny: dict) -> None:
    """As a reader would: the folder's paths as strings, the library's teacher forcing."""
    assert read_prompts(str(tiny["out"] / "ladder_prompts.jsonl")) == tiny["rows"]
    model, tok = load_reference(str(tiny["out"] / "reference"))
    text = "".join(r["prompt"] + r["gold_response"] for r in tiny["rows"][:3])
    ids = make_char_tokenizer()(text, add_special_tokens=False)["input_ids"]
    assert tok(text, add_special_tokens=False)["input_ids"] == ids  # one id per character
    rows = tiny["rows"][::3]
    again = gold_logprobs(model, tok, [{"prompt": r["prompt"], "answer": r["gold_response"]}
                                       for r in rows], batch=5)  # fmt: skip
    stored = np.log([r["v_ref"] for r in rows])
    np.testing.assert_allclose(again, stored, rtol=1e-5)


@pytest.mark.e2e
def test_sampled_pass64_agrees_with_v_ref(tiny: dict) -> None:
    """Per bin, the count of prompts with pass@64 = 0 is Poisson-binomial with chances
    (1 - v_ref)^64: the observed count lies inside its two-sided 0.1% bounds."""
    samples = read_prompts(tiny["out"] / "ladder_samples.jsonl")
    v_ref = {r["prompt"]: r["v_ref"] for r in tiny["rows"]}
    assert {s["prompt"] for s in samples} == set(v_ref)
    for label in map(bin_label, tiny["cfg"].bins):
        part = [s for s in samples if s["bin"] == label]
        assert all(s["k"] == 64 and len(s["solved"]) == 64 for s in part)
        q = np.array([(1.0 - v_ref[s["prompt"]]) ** 64 for s in part])
        zero = sum("1" not in s["solved"] for s in part)
        assert agreement(q, zero)["p_value"] > 1e-3, (label, zero, q.sum())
        info = tiny["result"]["bins"][label]
        assert info["pass64_zero"] == pytest.approx(zero / len(part))
        assert info["pass8_zero"] >= info["pass64_zero"]


@pytest.mark.e2e
def test_the_report_is_written(tiny: dict) -> None:
    out: Path = tiny["out"]
    for name in ("ladder.json", "ladder.md", "ladder.png", "ladder_manifest.json"):
        assert (out / name).exists()
    text = (out / "ladder.md").read_text()
    assert "[-1,-2)" in text and "<=-30" in text


def test_the_study_command_maps_its_flags(tmp_path: Path, monkeypatch) -> None:
    import experiments.ladder.run as run_mod
    from experiments.tests.lab_setup import run_cli as main

    seen = {}

    def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
        seen["cfg"] = cfg
        (tmp_path / "ladder.md").write_text("x\n")
        return {}

    monkeypatch.setattr(run_mod, "run", fake_run)
    args = ["ladder", "--quick", "--out", str(tmp_path), "--bins=-1:-2,-30:-inf"]
    assert main([*args, "--train", "5"]) == 0
    cfg = seen["cfg"]
    from experiments.harness.ladder_sets import QUICK

    assert cfg.bins == ("-1:-2", "-30:-inf") and cfg.train == 5 and cfg.test == QUICK["test"]
    assert cfg.top_ups == QUICK["top_ups"] > 0


def test_a_top_up_draws_new_zero_rich_candidates_and_short_bins_names_the_short() -> None:
    """A top-up draws ``candidates`` more zero-rich problems of another seed, none already
    drawn, no long ones; ``short_bins`` names the bins with fewer than train + test."""
    from experiments.harness.ladder_sets import short_bins

    cfg = LadderConfig.from_dict(
        dict(bins=("-1:-2", "-2:-4"), train=2, test=2, candidates=300, long_candidates=5)
    )
    first = draw_candidates(cfg)
    more = draw_candidates(cfg, top_up=1, drawn=first)
    assert more and not {r["prompt"] for r in more} & {r["prompt"] for r in first}
    digits = {parse_problem(r["prompt"])[2] for r in more}
    assert digits == {cfg.digits}  # zero-rich only: the long ones come once
    logp = np.log(10.0) * np.array([-1.5] * 4 + [-3.0] * 3)  # 4 in [-1,-2), 3 in [-2,-4)
    assert short_bins(logp, cfg) == ["[-2,-4)"]
    assert short_bins(np.log(10.0) * np.array([-1.5] * 4 + [-3.0] * 4), cfg) == []
