"""Evaluation: accuracy definitions, benchmark loading and scoring, the table, the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from astarpo.cli import main
from astarpo.commands.console import format_table
from astarpo.llm.data.prompts import benchmark_path, load_prompts
from astarpo.llm.eval import evaluate, evaluate_benchmarks, resolve_benchmarks
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.rewards.math_verify import MathVerifyReward
from astarpo.llm.rollout.base import SamplingConfig

sys.path.insert(0, str(Path(__file__).parents[1]))
from fakes import FakeGenerator

SAMPLED = SamplingConfig(16, 1.0, 1.0)


@pytest.fixture(scope="module")
def mv():
    reward = MathVerifyReward(timeout=10.0, n_workers=1)
    yield reward
    reward.close()


def _gen_for(rows, **kw):
    return FakeGenerator({r["prompt"]: r["answer"] for r in rows}, **kw)


def test_greedy_pass_at_1_on_real_rows(mv):
    rows = load_prompts(benchmark_path("math500.jsonl"), limit=3)
    res = evaluate(_gen_for(rows), rows, [mv], progress=False)
    assert res["metric"] == "pass@1" and res["n_prompts"] == 3
    assert res["accuracy"] == 1.0 and res["correct"] == [1, 1, 1]


def test_avg_at_k_matches_hand_count():
    rows = [{"prompt": f"{i}+0=", "answer": str(i)} for i in range(5)]
    gen = _gen_for(rows, p_correct=0.5)

    def boxed(prompts, completions, answer, **kw):
        pairs = zip(completions, answer, strict=True)
        return [1.0 if c == f"\\boxed{{{a}}}" else 0.0 for c, a in pairs]

    res = evaluate(gen, rows, [boxed], k=8, sampling=SAMPLED, seed=1, batch_size=2, progress=False)
    c = np.array(res["correct"])
    assert res["metric"] == "avg@8"
    assert res["accuracy"] == pytest.approx((c / 8).mean())
    assert res["pass_at_k"] == pytest.approx((c > 0).mean())
    assert 0 < res["accuracy"] < 1  # p_correct 0.5 over 40 responses
    with pytest.raises(ValueError, match="temperature > 0"):
        evaluate(gen, rows, [boxed], k=4, sampling=SamplingConfig(8, 0.0), progress=False)
    with pytest.raises(ValueError, match="no rows"):
        evaluate(gen, [], [boxed], progress=False)


def test_benchmarks_table(mv):
    names = resolve_benchmarks("math500,amc23")
    assert [b.name for b in names] == ["math500", "amc2023"] and names[1].k == 32
    assert len(resolve_benchmarks("all")) == 8
    with pytest.raises(ValueError, match="unknown benchmark 'gsm'"):
        resolve_benchmarks("gsm")
    rows = load_prompts(benchmark_path("math500.jsonl"), limit=3)
    rows += load_prompts(benchmark_path("amc2023.jsonl"), limit=3)
    gen = _gen_for(rows, p_correct=1.0)
    res = evaluate_benchmarks(gen, names, [mv], k={"amc2023": 2}, limit=3, progress=False)
    assert res["math500"]["metric"] == "pass@1" and res["amc2023"]["metric"] == "avg@2"
    assert res["amc2023"]["accuracy"] == 1.0
    table = format_table(res)
    assert "| MATH500 | pass@1 | 3 | 100.0 |" in table and "| AMC23 | avg@2 | 3 |" in table
    assert "| average |" in table


@pytest.mark.e2e
def test_cli_eval_toy(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "eval", "--model", "toy", "--benchmarks", "aime24", "--limit", "2",
            "--max-new-tokens", "3", "--device", "cpu", "--no-progress", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    assert "| AIME24 | pass@1 | 2 |" in capsys.readouterr().out
    res = json.loads(out.read_text())
    assert res["model"] == "toy" and res["results"]["aime24"]["n_prompts"] == 2


def test_cli_avg_spec():
    from astarpo.commands.eval import parse_avg

    assert parse_avg("8") == (8, {})
    assert parse_avg("amc23=4,aime24=2") == (None, {"amc23": 4, "aime24": 2})
    assert parse_avg(None) == (None, {})
    with pytest.raises(SystemExit, match="name=k"):
        parse_avg("amc23")


def test_cli_eval_errors(tmp_path, capsys):
    def one_error(code, text):
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and text in err[0], err
        return code

    assert one_error(main(["eval", "--model", str(tmp_path), "--data", "x.jsonl"]),
                     "not a local model directory") == 2  # fmt: skip
    assert one_error(main(["eval", "--model", "toy"]), "--data FILE or --benchmarks") == 2
    code = main(["eval", "--model", "toy", "--benchmarks", "math500", "--avg", "gsm=2"])
    assert one_error(code, "unknown benchmark 'gsm'") == 1


def test_exact_match_data_file(tmp_path):
    rows = [{"prompt": "1+1=", "answer": "2"}]
    res = evaluate(_gen_for(rows), rows, [exact_match_reward], progress=False)
    assert res["accuracy"] == 0.0  # the fake answers "\\boxed{2}", not "2"


def test_cli_eval_local_model_dir(tmp_path, capsys, tokenizer, tiny_model):
    model_dir = tmp_path / "model"
    tiny_model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    data = tmp_path / "add.jsonl"
    data.write_text(json.dumps({"problem": "1+2=", "answer": "3"}) + "\n")
    args = ["eval", "--model", str(model_dir), "--data", str(data), "--template", "none"]
    args += ["--reward", "exact_match", "--max-new-tokens", "2", "--avg", "2", "--no-progress"]
    assert main(args) == 0
    assert "| add | avg@2 | 1 |" in capsys.readouterr().out


def test_benchmarks_with_chat_template(mv):
    class Tok:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert not tokenize and add_generation_prompt
            return "<user>" + messages[-1]["content"] + "<assistant>"

    rows = load_prompts(benchmark_path("aime24.jsonl"), limit=2)
    gen = FakeGenerator({f"<user>{r['prompt']}<assistant>": r["answer"] for r in rows})
    res = evaluate_benchmarks(
        gen,
        resolve_benchmarks("aime24"),
        [mv],
        limit=2,
        progress=False,
        prompt_options={"tokenizer": Tok(), "chat_template": True},
    )
    assert res["aime24"]["accuracy"] == 1.0
    assert all(p.startswith("<user>") for p in gen.calls[0][0])


@pytest.mark.e2e
def test_cli_benchmarks_from_another_directory(tmp_path):
    """`astarpo eval --model toy --benchmarks math500 --limit N` with no data flags, run in an
    empty directory outside the checkout: the benchmark comes from the installed package."""
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "astarpo", "eval", "--model", "toy", "--benchmarks", "math500"]
    cmd += ["--limit", "2", "--max-new-tokens", "4", "--no-progress", "--device", "cpu"]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "| MATH500 | pass@1 | 2 |" in out.stdout


@pytest.mark.parametrize("source", ["--benchmarks", "--data"])
def test_eval_reward_timeout_reaches_the_scoring(tmp_path, monkeypatch, source):
    """``astarpo eval --reward-timeout`` is the deadline of every scoring call, on the packaged
    benchmarks as on a data file."""
    import astarpo.llm.rollout.scored as scored_module  # evaluation scores through it

    seen = []

    def spy(funcs, prompts, completions, columns, **kwargs):
        seen.append(kwargs["timeout"])
        return np.zeros(len(completions)), {}

    monkeypatch.setattr(scored_module, "compute_rewards", spy)
    data = tmp_path / "d.jsonl"
    data.write_text('{"problem": "1+1=", "answer": "2"}\n')
    what = "math500" if source == "--benchmarks" else str(data)
    argv = ["eval", "--model", "toy", source, what, "--limit", "1", "--max-new-tokens", "2",
            "--reward", "exact_match", "--reward-timeout", "7.5", "--no-progress",
            "--backend", "hf"]  # fmt: skip
    assert main(argv) == 0
    assert seen == [7.5]


def test_a_users_file_is_a_benchmark_read_as_given(tmp_path):
    from astarpo.llm.eval import BENCHMARKS, Benchmark

    data = tmp_path / "mine.jsonl"
    data.write_text('{"question": "1+1=", "target": "2"}\n{"question": "2+2=", "target": "4"}\n')
    bench = Benchmark.from_file(data)
    assert (bench.name, bench.title, bench.k, bench.packaged) == ("mine", "mine", 1, False)
    assert bench.file == str(data)
    assert BENCHMARKS["math500"].file == benchmark_path("math500.jsonl")
    rows = load_prompts(data, template="none", problem_key="question", answer_key="target")
    res = evaluate_benchmarks(
        _gen_for(rows),
        [bench],
        [exact_match_reward],
        template="none",
        progress=False,
        prompt_options={"problem_key": "question", "answer_key": "target"},
    )
    want = evaluate(_gen_for(rows), rows, [exact_match_reward], progress=False)
    assert res == {"mine": {"title": "mine", **want}}


def test_eval_verb_is_a_thin_caller_of_evaluate_benchmarks(tmp_path, monkeypatch, capsys):
    """``astarpo eval --data`` and ``--benchmarks`` both go through the library's one
    evaluation loop, with the verb's options (k per name, sampling, prompt options, deadline)."""
    import astarpo.commands.eval as eval_command

    calls = []

    def spy(generator, benchmarks, reward_funcs, **kwargs):
        calls.append((list(benchmarks), kwargs))
        return evaluate_benchmarks(generator, benchmarks, reward_funcs, **kwargs)

    monkeypatch.setattr(eval_command, "evaluate_benchmarks", spy)
    data = tmp_path / "d.jsonl"
    data.write_text('{"q": "1+1=", "a": "2"}\n{"q": "2+2=", "a": "4"}\n')
    common = ["eval", "--model", "toy", "--max-new-tokens", "2", "--no-progress", "--backend",
              "hf", "--device", "cpu", "--reward", "exact_match"]  # fmt: skip
    argv = [*common, "--data", str(data), "--problem-key", "q", "--answer-key", "a",
            "--avg", "d=3", "--temperature", "0.7", "--reward-timeout", "9"]  # fmt: skip
    assert main(argv) == 0
    assert main([*common, "--benchmarks", "amc23", "--limit", "1", "--avg", "2"]) == 0
    (files, kw), (packaged, kw2) = calls
    assert [b.name for b in files] == ["d"] and not files[0].packaged
    assert kw["k"] == {"d": 3} and kw["sampled"] == SamplingConfig(2, 0.7, 0.95)  # top_p: paper
    assert kw["greedy"] == SamplingConfig(2, 0.0, 1.0) and kw["reward_timeout"] == 9.0
    assert kw["prompt_options"]["problem_key"] == "q" and kw["prompt_options"]["answer_key"] == "a"
    assert [b.name for b in packaged] == ["amc2023"] and kw2["k"] == {"amc2023": 2}
    assert "problem_key" not in kw2["prompt_options"]  # the packaged files' columns are known
    out = capsys.readouterr().out
    assert "| d | avg@3 | 2 |" in out and "| AMC23 | avg@2 | 1 |" in out
