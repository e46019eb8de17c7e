"""The data checks against a model: unknown characters and prompts past its positions, with the
prompts tokenized once, in one batched call."""

from __future__ import annotations

import inspect

import pytest
from fakes import doubling_rows

from astarpo.llm.models import fit
from astarpo.llm.models.fit import (
    check_model_fits,
    check_prompts_fit,
    check_sampling_fits,
    prompt_token_ids,
)


class CountingTokenizer:
    """Wraps a tokenizer and records every call (text or batch)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[int] = []  # how many texts each call got

    def __call__(self, texts, **kw):
        self.calls.append(len(texts) if isinstance(texts, list) else 1)
        return self.inner(texts, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_check_model_fits_has_no_unused_parameter():
    assert list(inspect.signature(check_model_fits).parameters) == [
        "rows", "tokenizer", "what", "prompt_ids"
    ]  # fmt: skip


def test_a_dataset_is_tokenized_in_two_batched_calls_not_one_per_row(tokenizer, tiny_model):
    tok = CountingTokenizer(tokenizer)
    check_sampling_fits(doubling_rows(500), tok, tiny_model, 4, "data")
    assert tok.calls == [500, 500]  # the prompts once (both checks), the answers once


def test_the_first_bad_row_is_named_prompt_before_answer(tokenizer):
    data = doubling_rows(4)
    data[2]["answer"] = "ABC"
    data[3]["prompt"] = "Q?"
    with pytest.raises(ValueError, match=r"^data row 2: .* 'ABC' of its answer"):
        check_model_fits(data, tokenizer, "data")
    data[2]["prompt"] = "W1"
    with pytest.raises(ValueError, match=r"^data row 2: .* 'W' of its prompt"):
        check_model_fits(data, tokenizer, "data")
    data[2] = {"prompt": "1+1=", "answer": 2}  # a number answer is not text: not checked
    with pytest.raises(ValueError, match=r"^data row 3: .*'Q' of its prompt"):
        check_model_fits(data, tokenizer, "data")


def test_given_prompt_ids_are_reused_by_both_checks(tokenizer):
    data = doubling_rows(3)
    ids = prompt_token_ids(data, tokenizer)
    assert ids == [tokenizer(r["prompt"], add_special_tokens=False)["input_ids"] for r in data]
    tok = CountingTokenizer(tokenizer)
    check_prompts_fit(data, tok, 64, 4, "data", prompt_ids=ids)
    check_model_fits(data, tok, "data", prompt_ids=ids)
    assert tok.calls == [3]  # only the answers
    long = [[1] * 61, *ids[1:]]
    with pytest.raises(ValueError, match=r"^data: 1 of 3 prompts do not fit the model"):
        check_prompts_fit(data, tok, 64, 4, "data", prompt_ids=long)


def test_nothing_is_tokenized_when_neither_check_applies(tokenizer):
    class NoLimits:
        config = None

    tok = CountingTokenizer(tokenizer)
    tok.unk_token_id = None  # a tokenizer without an unknown token
    check_sampling_fits(doubling_rows(10), tok, NoLimits(), 4, "data")
    assert tok.calls == []
    assert fit.unknown_token_id(tok) is None and fit.unknown_token_id(tokenizer) == 2


def test_the_trainer_tokenizes_its_prompts_once(tokenizer, tmp_path):
    from toy_setup import make_tiny_model, quick_config

    from astarpo.llm.rewards.builtin import exact_match_reward
    from astarpo.llm.training.trainers import AStarPOTrainer

    data = doubling_rows(64)
    tok = CountingTokenizer(tokenizer)
    AStarPOTrainer(
        make_tiny_model(tokenizer),
        None,
        [exact_match_reward],
        args=quick_config(tmp_path, batch_size=4, max_new_tokens=4),
        train_dataset=data,
        v_star_table={r["prompt"]: 0.0 for r in data},
        processing_class=tok,
    )
    assert tok.calls == [64, 64]
