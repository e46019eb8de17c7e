"""TRL's calling conventions: a model path, one reward callable reading ``completion_ids``, a
``datasets.Dataset``, a V* table from one ``estimate_values`` call, callbacks, a wall-clock
budget, ``processing_class``, conversational prompts, ``save_model`` and its reload."""

from __future__ import annotations

import contextlib
import functools

import pytest
import torch
from toy_setup import make_tiny_model, quick_config, toy_trainer

from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.rewards.builtin import exact_match_reward
from astarpo.llm.rewards.scoring import compute_rewards
from astarpo.llm.stage1.config import Stage1Config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.toy.problems import addition_task
from astarpo.llm.training.trainers import AStarPOTrainer

datasets = pytest.importorskip("datasets")
ROWS = addition_task(8, seed=3)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A local model directory, as a user has after ``save_pretrained``."""
    path = tmp_path_factory.mktemp("model")
    tok = make_char_tokenizer()
    make_tiny_model(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


class StopAt:
    """Stops training after step ``stop`` and records the steps it saw."""

    def __init__(self, stop: int) -> None:
        self.stop, self.steps = stop, []

    def on_step_end(self, record):
        self.steps.append(record["step"])
        return record["step"] >= self.stop


def _args(tmp_path, **kw):
    cfg = dict(max_steps=3, batch_size=4, max_new_tokens=4, max_train_seconds=600.0, seed=0)
    return quick_config(tmp_path / "run", **{**cfg, **kw})


def test_trl_shape_trains_stops_and_saves(model_dir, tmp_path):
    eos = make_char_tokenizer().eos_token_id
    seen: list[list[list[int]]] = []

    def ends_with_eos(completions, completion_ids, answer):
        """Reads completion_ids only (no **kwargs): 1 when the response emitted EOS."""
        seen.append(completion_ids)
        return [1.0 if ids and ids[-1] == eos else 0.0 for ids in completion_ids]

    dataset = datasets.Dataset.from_list(ROWS)
    table = estimate_values(
        model=str(model_dir),
        rows=dataset,
        reward_funcs=ends_with_eos,
        config=Stage1Config(n_samples=2, beta1=0.5, max_new_tokens=4, progress=False),
        out_path=None,
    )
    assert len(table) == len(ROWS) and table.path is None
    assert list(tmp_path.iterdir()) == []  # nothing written
    stop = StopAt(2)
    trainer = AStarPOTrainer(
        model=str(model_dir),
        reward_funcs=ends_with_eos,
        args=_args(tmp_path),
        train_dataset=dataset,
        v_star_table=table,
        callbacks=[stop],
    )
    assert trainer.model.training and not trainer.ref_model.training
    history = trainer.train()
    assert stop.steps == [1, 2] and trainer.step_count == 2  # max_steps=3, stopped at 2
    assert [r["step"] for r in history if "loss" in r] == [1, 2]
    assert all(isinstance(ids, list) for batch in seen for ids in batch)
    assert all(eos not in ids[:-1] for batch in seen for ids in batch)  # cut at the first EOS
    # A budget already spent stops after the first step.
    budget = AStarPOTrainer(
        model=str(model_dir),
        reward_funcs=ends_with_eos,
        args=_args(tmp_path, output_dir=str(tmp_path / "budget"), max_train_seconds=1e-6),
        train_dataset=dataset,
        v_star_table=table,
        callbacks=[StopAt(99)],
    )
    budget.train()
    assert budget.step_count == 1


def test_save_model_reloads_with_from_pretrained(model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = make_char_tokenizer()
    trainer = AStarPOTrainer(
        model=str(model_dir),
        reward_funcs=[exact_match_reward],
        args=_args(tmp_path, max_steps=1),
        train_dataset=ROWS,
        v_star_table={r["prompt"]: 0.0 for r in ROWS},
        processing_class=tok,
    )
    assert trainer.tokenizer is tok
    trainer.train()
    assert (tmp_path / "run" / "final" / "config.json").is_file()  # train() saved OUT/final
    out = trainer.save_model(tmp_path / "saved")
    reloaded = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    assert (
        AutoTokenizer.from_pretrained(out, local_files_only=True)("1+2=")["input_ids"]
        == (tok("1+2=")["input_ids"])
    )
    for (name, a), b in zip(
        trainer.model.state_dict().items(), reloaded.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)


def test_conversational_prompts_use_the_chat_template(model_dir, tmp_path):
    tok = make_char_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    rows = [
        {"prompt": [{"role": "user", "content": r["prompt"]}], "answer": r["answer"]} for r in ROWS
    ]
    rendered = [f"user: {r['prompt']} assistant: " for r in ROWS]
    trainer = AStarPOTrainer(
        model=str(model_dir),
        reward_funcs=exact_match_reward,
        args=_args(tmp_path, max_steps=1),
        train_dataset=rows,
        v_star_table=dict.fromkeys(rendered, 0.0),
        processing_class=tok,
    )
    assert [r["prompt"] for r in trainer.rows] == rendered
    assert trainer.rows[0]["prompt_messages"] == rows[0]["prompt"]
    with pytest.raises(ValueError, match=r"cannot encode the characters '\\n'"):
        tok.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
        AStarPOTrainer(
            model=str(model_dir),
            reward_funcs=exact_match_reward,
            args=_args(tmp_path, max_steps=1),
            train_dataset=rows,
            v_star_table={},
            processing_class=tok,
        )


def test_reward_kwargs_follow_the_signature():
    calls = {}

    def only_completions(completions):
        calls["only"] = True
        return [0.0] * len(completions)

    def everything(prompts, completions, **kwargs):
        calls["kwargs"] = sorted(kwargs)
        return [1.0] * len(completions)

    rewards, _ = compute_rewards(
        [only_completions, everything],
        ["p", "q"],
        ["a", "b"],
        {"answer": ["a", "x"]},
        completion_ids=[[5, 1, 7], [6]],
        truncated=[False, True],
        eos_token_ids=[1],
    )
    assert rewards.tolist() == [1.0, 1.0] and calls["only"]
    assert calls["kwargs"] == ["answer", "completion_ids", "report", "truncated"]
    strict = functools.partial(exact_match_reward, require_eos=True)
    out, metrics = compute_rewards(
        [strict], ["p", "q"], ["a", "b"], {"answer": ["a", "b"]}, truncated=[False, True]
    )
    assert out.tolist() == [1.0, 0.0]  # the second matches but never emitted EOS
    assert "rewards/exact_match_reward/mean" in metrics
    with pytest.raises(ValueError, match="truncated"):
        compute_rewards([strict], ["p"], ["a"], {"answer": ["a"]})


def test_toy_refuses_data_it_cannot_read(tmp_path):
    tok = make_char_tokenizer()

    for rows, error in (
        ([{"prompt": "What is ABC?", "answer": "1"}], r"cannot encode the characters 'ABCW'"),
        ([{"prompt": "1+1=", "answer": "Two"}], r"cannot encode .* of its answer"),
        # 64 tokens + max_new_tokens 4 > 64
        ([{"prompt": "1+1=" * 16, "answer": "2"}], r"1 of 1 prompts do not fit .* 64 positions"),
        ([{"prompt": "1+1=" * 15, "answer": "2"}], None),  # 60 + 4 tokens fit
    ):
        table = dict.fromkeys((r["prompt"] for r in rows), 0.0)
        with pytest.raises(ValueError, match=error) if error else contextlib.nullcontext():
            toy_trainer(tok, tmp_path / "run", rows=rows, table=table,
                        rewards=[exact_match_reward], max_new_tokens=4)  # fmt: skip


def test_a_reward_in_ref_models_place_is_refused(model_dir, tmp_path):
    """TRL's second positional argument is reward_funcs, astarpo's is ref_model: say so."""
    with pytest.raises(TypeError, match="reward_funcs="):
        AStarPOTrainer(str(model_dir), exact_match_reward, args=_args(tmp_path))


def test_cli_value_refuses_toy_on_data_it_cannot_tokenize(tmp_path, capsys):
    import json

    from astarpo.cli import main

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"problem": "What is 2+2?", "answer": "4"}) + "\n")
    cmd = ["value", "--model", "toy", "--data", str(data), "--out", str(tmp_path / "v.jsonl")]
    code = main([*cmd, "--template", "none", "--reward", "exact_match", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith(f"error: {data} row 0: ")
    assert "cannot encode the characters 'W'" in err[0]
    assert not (tmp_path / "v.jsonl").exists()
