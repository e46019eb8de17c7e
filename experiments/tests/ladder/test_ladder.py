"""The ladder study: its v_ref values are the reference's teacher-forced gold probabilities
(recomputed from the saved reference), its sampled pass@64 = 0 counts agree with them, its
prompt file has its fields and disjoint splits, and bad settings are refused by name."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from astarpo.llm import (
    SCRATCHPAD_DIGITS,
    get_task,
    make_char_tokenizer,
    parse_problem,
    scratchpad_solution,
)
from experiments.harness.ladder_build import agreement, poisson_binomial
from experiments.harness.ladder_sets import (
    FIELDS,
    LadderConfig,
    bin_label,
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


def test_neighbours_are_every_one_digit_change_of_the_same_width() -> None:
    """``2 d * 9`` distinct problems, each one character of one operand away, with their
    worked solutions; a prompt that is no scratchpad problem is refused by value."""
    from experiments.harness.ladder_search import neighbours

    for prompt in ("0123+4567=", "07+90="):
        d = parse_problem(prompt)[2]
        near = neighbours(prompt)
        assert len(near) == len({r["prompt"] for r in near}) == 2 * d * 9
        for r in near:
            assert len(r["prompt"]) == len(prompt)
            assert sum(x != y for x, y in zip(r["prompt"], prompt, strict=True)) == 1
            x, y, width = parse_problem(r["prompt"])
            assert width == d and r["answer"] == scratchpad_solution(x, y, d)
    with pytest.raises(ValueError, match="not a scratchpad problem"):
        neighbours("12+345=")


def fake_log10_v_ref(prompt: str) -> float:
    """A reference under which no 4-digit problem lies below -2.4 (0.3 per zero digit) and a
    shorter one lies at -12 + 1.5 per digit 9: [-4,-6) holds only short problems with five
    nines (-4.5), reached from the random short seeds by the search alone."""
    a, b, d = parse_problem(prompt)
    text = f"{a:0{d}d}{b:0{d}d}"
    if d == SCRATCHPAD_DIGITS:
        return -0.3 * text.count("0")
    if d == SCRATCHPAD_DIGITS + 1:
        return -40.0
    return -12.0 + 1.5 * text.count("9")


def test_the_search_fills_a_bin_no_draw_reaches_and_keeps_the_drawn_bins(monkeypatch) -> None:
    """With ``top_ups`` the search walks from the short operands up into a bin no 4-digit
    problem reaches; the bins the draw filled keep the same prompts; every candidate is new and
    outside the SFT region; without top-ups the bin is refused by name with the fix."""
    import experiments.harness.ladder_build as build
    from experiments.harness.ladder_sets import excluded_prompts, fill_bins, short_bins

    def fake(model, tokenizer, rows, batch=256):
        return np.array([fake_log10_v_ref(r["prompt"]) * math.log(10.0) for r in rows])

    monkeypatch.setattr(build, "gold_logprobs", fake)
    base = dict(bins=("0:-1", "-1:-2", "-4:-6", "-30:-inf"), train=4, test=4, candidates=400)
    base.update(long_candidates=10)
    plain = LadderConfig.from_dict(dict(base))
    said: list[str] = []
    rows0, logp0 = build.draw_for(plain, None, None, said.append)
    assert short_bins(logp0, plain) == ["[-4,-6)"] and not said
    with pytest.raises(RuntimeError, match=r"bin \[-4,-6\) holds 0 .*--top-ups"):
        fill_bins(rows0, logp0, plain)
    cfg = LadderConfig.from_dict(dict(base, top_ups=6))
    rows, logp = build.draw_for(cfg, None, None, said.append)
    assert rows[: len(rows0)] == rows0 and said and "search round 1" in said[0]
    assert short_bins(logp, cfg) == []
    prompts = [r["prompt"] for r in rows]
    assert len(set(prompts)) == len(prompts) and not set(prompts) & excluded_prompts(cfg)
    kept = fill_bins(rows, logp, cfg)[0]
    kept0 = [r for r in kept if r["bin"] != "[-4,-6)"]
    assert kept0 == [r for r in fill_bins(rows0, logp0, replace_bins(plain))[0]]
    hard = [r for r in kept if r["bin"] == "[-4,-6)"]
    assert len(hard) == 8 and all(parse_problem(r["prompt"])[2] < SCRATCHPAD_DIGITS for r in hard)
    assert all(math.isclose(math.log10(r["v_ref"]), -4.5) for r in hard)


def replace_bins(cfg: LadderConfig) -> LadderConfig:
    """``cfg`` without its bin [-4,-6)."""
    from dataclasses import replace

    return replace(cfg, bins=tuple(b for b in cfg.bins if b != "-4:-6"))


def test_the_search_runs_at_most_top_ups_rounds_and_stops_when_nothing_is_new(
    monkeypatch,
) -> None:
    """A bin nothing reaches stays short after exactly ``top_ups`` rounds; a round that finds
    no new candidate ends the search."""
    import experiments.harness.ladder_build as build
    import experiments.harness.ladder_search as search
    import experiments.harness.ladder_sets as sets

    monkeypatch.setattr(build, "gold_logprobs", lambda m, t, rows, batch=256: np.zeros(len(rows)))
    monkeypatch.setattr(search, "SHORT_SEEDS", 20)
    bins = dict(bins=("0:-1", "-2:-3"), train=2, test=2, candidates=30, long_candidates=1)
    said: list[str] = []
    cfg = LadderConfig.from_dict(dict(bins, top_ups=3))
    _, logp = build.draw_for(cfg, None, None, said.append)
    assert sets.short_bins(logp, cfg) == ["[-2,-3)"] and len(said) == 3
    monkeypatch.setattr(search, "SHORT_SEEDS", 0)
    monkeypatch.setattr(search, "neighbours", lambda prompt: [])
    said.clear()
    _, logp = build.draw_for(
        LadderConfig.from_dict(dict(bins, top_ups=50)), None, None, said.append
    )
    assert sets.short_bins(logp, cfg) == ["[-2,-3)"] and said == []
