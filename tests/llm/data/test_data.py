"""Prompt loading: the packaged files as they are, templates, chat template, length filter."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from astarpo.llm.data.prompts import (
    TEMPLATES,
    apply_template,
    benchmark_path,
    extract_gsm8k_answer,
    filter_prompt_length,
    load_prompts,
    prompt_key,
    read_records,
)

# Rows and a field of each packaged file, as in its README (the copies given to the project).
PACKAGED = {
    "math500.jsonl": (500, "problem"),
    "minervamath.jsonl": (272, "problem"),
    "olympiadbench.jsonl": (674, "problem"),
    "amc2023.jsonl": (40, "problem"),
    "aime24.jsonl": (30, "problem"),
    "aime25.jsonl": (30, "problem"),
    "hmmt25_feb.jsonl": (30, "problem"),
    "hmmt25_nov.jsonl": (30, "problem"),
    "gsm8k_test.jsonl": (1319, "question"),
}


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "hi", "there", "what", "is", "1+1", "?", "<user>", "<assistant>"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")
    hf.chat_template = (
        "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<assistant> {% endif %}"
    )
    return hf


def test_prompt_key_is_sha256_of_exact_text():
    assert prompt_key("1+1=") == hashlib.sha256(b"1+1=").hexdigest()
    assert prompt_key("1+1=") != prompt_key("1+1= ")
    assert len(prompt_key("é")) == 64


def test_math500_as_is():
    rows = load_prompts(benchmark_path("math500.jsonl"))
    raw = read_records(benchmark_path("math500.jsonl"))
    assert len(rows) == 500
    # The problems already carry an instruction: "auto" leaves them unchanged.
    assert rows[0]["prompt"] == raw[0]["problem"]
    assert rows[0]["answer"] == raw[0]["answer"] == r"\left( 3, \frac{\pi}{2} \right)"


def test_gsm8k_answers_extracted_and_template():
    rows = load_prompts(benchmark_path("gsm8k_test.jsonl"), limit=3)
    assert rows[0]["answer"] == "18"
    assert rows[0]["solution"].endswith("#### 18")
    assert rows[0]["prompt"] == (
        rows[0]["problem"] + ' Let\'s think step by step and output the final answer after "####".'
    )
    assert extract_gsm8k_answer("a\n#### 1,234") == "1234"
    assert extract_gsm8k_answer("no marker") is None


def test_math_template_custom_and_errors(tmp_path):
    f = _write_jsonl(tmp_path / "d.jsonl", [{"question": "What is 1+1?", "final_answer": "2"}])
    rows = load_prompts(f)
    assert rows == [
        {
            "problem": "What is 1+1?",
            "answer": "2",
            "prompt": "What is 1+1? Let's think step by step and output the final answer "
            "within \\boxed{}.",
        }
    ]
    assert load_prompts(f, template="none")[0]["prompt"] == "What is 1+1?"
    assert (
        load_prompts(f, template="Q: {problem}\nA: {x}")[0]["prompt"] == "Q: What is 1+1?\nA: {x}"
    )
    with pytest.raises(ValueError, match="problem"):
        apply_template("x", "no placeholder")
    with pytest.raises(KeyError, match="answer column 'nope'"):
        load_prompts(f, answer_key="nope")
    g = _write_jsonl(tmp_path / "e.jsonl", [{"text": "x", "label": "1"}])
    with pytest.raises(KeyError, match="no problem column"):
        load_prompts(g)
    assert load_prompts(g, problem_key="text", answer_key="label")[0]["answer"] == "1"
    assert set(TEMPLATES) == {"math", "gsm8k", "none"}


def test_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_prompts(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "a", "answer": "1"}\n{"problem": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        load_prompts(bad)
    with pytest.raises(ValueError, match="unknown data format"):
        (tmp_path / "x.csv").write_text("a,b\n")
        read_records(tmp_path / "x.csv")


def test_parquet_and_official_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    question = "What is 1+1? Let's think step by step and output the final answer within \\boxed{}."
    table = pa.Table.from_pylist(
        [
            {
                "prompt": [{"role": "user", "content": question}],
                "reward_model": {"style": "rule", "ground_truth": "2"},
                "eval_0": 1.0,
            }
        ]
    )
    pq.write_table(table, tmp_path / "off.parquet")
    rows = load_prompts(tmp_path / "off.parquet")
    assert rows == [{"problem": question, "answer": "2", "prompt": question}]


def test_chat_template_and_length_filter(tmp_path):
    tok = _tokenizer()
    f = _write_jsonl(
        tmp_path / "d.jsonl",
        [{"problem": "what is 1+1 ?", "answer": "2"}, {"problem": "hi", "answer": "x"}],
    )
    rows = load_prompts(f, template="none", tokenizer=tok, chat_template=True, system_prompt="hi")
    assert rows[1]["prompt"] == "<system> hi <user> hi <assistant> "
    kept, dropped = filter_prompt_length(rows, tok, max_prompt_tokens=5)
    assert dropped == 1 and [r["answer"] for r in kept] == ["x"]
    assert len(load_prompts(f, template="none", tokenizer=tok, max_prompt_tokens=3)) == 1
    with pytest.raises(ValueError, match="tokenizer"):
        load_prompts(f, chat_template=True)


def test_packaged_benchmarks_read_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing beside the working directory
    folder = benchmark_path("math500.jsonl").parent
    assert sorted(p.name for p in folder.glob("*.jsonl")) == sorted(PACKAGED)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for name, (n, field) in PACKAGED.items():
        rows = read_records(benchmark_path(name))
        assert len(rows) == n, name
        assert all(isinstance(r[field], str) and r["answer"] for r in rows), name
        assert f"`{name}`" in readme, f"{name} has no provenance line in the README"
    assert "MIT" in (folder / "LICENSE-gsm8k").read_text(encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"math500\.jsonl"):
        benchmark_path("nope.jsonl")


def test_saved_hf_dataset_is_a_data_source(tmp_path):
    """A folder written by `Dataset.save_to_disk` loads offline like a file (`--data DIR`)."""
    datasets = pytest.importorskip("datasets")
    rows = [{"question": "1+1?", "answer": "a\n#### 2"}, {"question": "2+2?", "answer": "#### 4"}]
    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(tmp_path / "ds"))
    loaded = load_prompts(tmp_path / "ds")
    assert [r["answer"] for r in loaded] == ["2", "4"]
    assert loaded[0]["prompt"].startswith("1+1? Let's think")  # gsm8k template, as for a file
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ValueError, match="splits"):
        read_records(tmp_path / "dd")
    assert len(read_records(tmp_path / "dd" / "train")) == 2
    with pytest.raises(FileNotFoundError, match="save_to_disk"):
        read_records(tmp_path / "missing")


def test_hub_dataset_names_are_parsed_without_contacting_the_hub(monkeypatch):
    datasets = pytest.importorskip("datasets")
    import astarpo.llm.data.hub as hub

    calls = []

    def fake_load_dataset(name, config, split):
        calls.append((name, config, split))
        return [{"question": "1+1?", "answer": "#### 2"}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    monkeypatch.setattr(hub, "hub_reachable", lambda endpoint: True)  # no probe of the network
    assert load_prompts("hf:openai/gsm8k:main:train")[0]["answer"] == "2"
    read_records("hf:openai/gsm8k:test")
    read_records("hf:some/set")
    assert calls == [
        ("openai/gsm8k", "main", "train"),
        ("openai/gsm8k", None, "test"),
        ("some/set", None, "train"),
    ]
