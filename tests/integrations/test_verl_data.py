"""``astarpo value --export-verl``: a finished V* table written as verl's training parquet
(``extra_info.v_star``), refused when it was made for another reference, other sampling or other
prompts, as ``astarpo train`` refuses it. Needs no verl (pyarrow writes the file); the verl
tests (``make test-verl``) read such a file with verl's own dataset and reward."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from toy_setup import make_tiny_model

from astarpo.cli import main
from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.stage1.table import ValueTable
from astarpo.llm.stage1.verl_export import V_STAR_FIELD, verl_records
from astarpo.llm.toy.problems import addition_task

pq = pytest.importorskip("pyarrow.parquet")

# A chat template over the toy characters (verl renders every prompt with one).
CHAT = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}a: {% endif %}"
)
ROWS = addition_task(6, seed=0)
STAGE1 = ["--n-samples", "2", "--max-new-tokens", "3", "--template", "none", "--chat-template"]
REWARD = ["--reward", "toy_setup:spread_reward"]


def _model_dir(path: Path) -> Path:
    tok = make_char_tokenizer()
    tok.chat_template = CHAT
    make_tiny_model(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def stage1(tmp_path_factory):
    """A model folder, the prompt file and the V* table of one Stage 1 run on them."""
    root = tmp_path_factory.mktemp("verl_data")
    model = _model_dir(root / "model")
    data = root / "add.jsonl"
    data.write_text(
        "".join(json.dumps({"problem": r["problem"], "answer": r["answer"]}) + "\n" for r in ROWS)
    )
    table = root / "values.jsonl"
    args = ["value", "--model", str(model), "--data", str(data), "--out", str(table)]
    assert main([*args, *STAGE1, *REWARD, "--no-progress"]) == 0
    return model, data, table


def _export(stage1, out: Path, *extra: str, data: Path | None = None, model=None) -> int:
    m, d, table = stage1
    args = ["value", "--model", str(model or m), "--data", str(data or d), "--out", str(table)]
    return main([*args, *STAGE1, *REWARD, "--export-verl", str(out), *extra])


def _error(capsys) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_export_writes_verls_layout_with_each_prompts_v_star(stage1, tmp_path):
    _, _, table_path = stage1
    out = tmp_path / "train.parquet"
    assert _export(stage1, out, "--data-source", "openai/gsm8k") == 0
    records = pq.read_table(out).to_pylist()
    table = ValueTable.load(table_path)
    tok = make_char_tokenizer()
    tok.chat_template = CHAT
    assert len(records) == len(ROWS)
    for i, (rec, row) in enumerate(zip(records, ROWS, strict=True)):
        assert set(rec) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        assert rec["data_source"] == "openai/gsm8k"
        assert rec["prompt"] == [{"role": "user", "content": row["problem"]}]
        assert rec["reward_model"] == {"style": "rule", "ground_truth": row["answer"]}
        # The text verl renders from the messages is the prompt Stage 1 sampled on.
        text = tok.apply_chat_template(rec["prompt"], tokenize=False, add_generation_prompt=True)
        found = table.get(text)
        info = rec["extra_info"]
        assert info[V_STAR_FIELD] == found.v_star and info["pass_rate"] == found.pass_rate
        assert info["index"] == i and info["v_star_key"] == found.key
        assert json.loads(info["provenance"]) == found.provenance
    assert {r["extra_info"][V_STAR_FIELD] for r in records} != {records[0]["extra_info"]["v_star"]}


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-new-tokens", "5"], "sampling max_new_tokens: table 3, training 5"),
        (["--temperature", "0.7"], "sampling temperature"),
        (["--reward", "exact_match"], "reward_path"),
    ],
)
def test_export_refuses_a_table_made_for_other_sampling_or_rewards(
    stage1, tmp_path, capsys, flags, named
):
    out = tmp_path / "train.parquet"
    if flags[0] == "--reward":  # the flags replace the run's reward
        m, d, t = stage1
        args = ["value", "--model", str(m), "--data", str(d), "--out", str(t), *STAGE1]
        assert main([*args, *flags, "--export-verl", str(out)]) == 2
    else:
        assert _export(stage1, out, *flags) == 2
    error = _error(capsys)
    assert "was made for another run" in error and named in error, error
    assert not out.exists()


def test_export_refuses_a_table_of_another_reference_unless_accepted(stage1, tmp_path, capsys):
    other = shutil.copytree(stage1[0], tmp_path / "other_model")
    out = tmp_path / "train.parquet"
    assert _export(stage1, out, model=other) == 2
    error = _error(capsys)
    assert "model: table" in error and str(other) in error, error
    assert not out.exists()
    assert _export(stage1, out, "--allow-v-star-mismatch", "true", model=other) == 0
    assert "mismatch accepted: model" in capsys.readouterr().out
    assert len(pq.read_table(out)) == len(ROWS)


def test_export_refuses_a_prompt_the_table_lacks_and_prompts_without_the_chat_template(
    stage1, tmp_path, capsys
):
    more = tmp_path / "more.jsonl"
    more.write_text(stage1[1].read_text() + json.dumps({"problem": "1+1=", "answer": "2"}) + "\n")
    assert _export(stage1, tmp_path / "a.parquet", data=more) == 2
    assert "'user: 1+1= a: ' is not in the V* table" in _error(capsys)
    m, d, t = stage1
    plain = [x for x in STAGE1 if x != "--chat-template"]
    args = ["value", "--model", str(m), "--data", str(d), "--out", str(t), *plain, *REWARD]
    assert main([*args, "--export-verl", str(tmp_path / "b.parquet")]) == 2
    assert "needs --chat-template: verl renders every prompt" in _error(capsys)
    assert not (tmp_path / "a.parquet").exists() and not (tmp_path / "b.parquet").exists()


def test_the_papers_filter_drops_prompts_whose_reference_samples_all_failed(stage1, tmp_path):
    table = ValueTable.load(stage1[2])
    rows = list(table)
    zero = dataclasses.replace(rows[0], rewards=(0.0, 0.0), v_star=0.0, pass_rate=0.0)
    edited = tmp_path / "values.jsonl"
    ValueTable([zero, *rows[1:]]).save(edited)
    out = tmp_path / "train.parquet"
    assert _export((stage1[0], stage1[1], edited), out, "--filter-all-wrong", "true") == 0
    kept = pq.read_table(out).to_pylist()
    assert len(kept) == len(ROWS) - 1
    assert all(r["extra_info"]["v_star_key"] != zero.key for r in kept)


def test_verl_records_refuses_when_the_filter_leaves_nothing(stage1):
    table = ValueTable.load(stage1[2])
    row = next(iter(table))
    zero = dataclasses.replace(row, rewards=(0.0, 0.0), v_star=0.0, pass_rate=0.0)
    one = [{"prompt": zero.prompt, "messages": [{"role": "user", "content": "x"}], "answer": "1"}]
    assert len(verl_records(ValueTable([zero]), one, data_source="s")) == 1
    with pytest.raises(ValueError, match="no training row left for verl"):
        verl_records(ValueTable([zero]), one, data_source="s", drop_all_wrong=True)


def test_the_prompt_length_limit_counts_the_chat_formatted_text_as_stage1_does(stage1, tmp_path):
    """``--max-prompt-tokens`` drops the prompts whose chat-formatted text is longer, as Stage 1
    dropped them (the user text alone is shorter)."""
    out = tmp_path / "train.parquet"
    longest = max(len(f"user: {r['problem']} a: ") for r in ROWS)
    assert _export(stage1, out, "--max-prompt-tokens", str(longest - 1)) == 0
    kept = pq.read_table(out).to_pylist()
    assert 0 < len(kept) < len(ROWS)
    assert all(len(f"user: {r['prompt'][0]['content']} a: ") < longest for r in kept)
