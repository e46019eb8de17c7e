"""Shared fixtures of the LLM tests: the char tokenizer and a very small toy model."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def tokenizer():
    from astarpo.llm.toy import make_char_tokenizer

    return make_char_tokenizer()


TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}


@pytest.fixture
def tiny_model(tokenizer):
    from astarpo.llm.toy import make_toy_model

    return make_toy_model(tokenizer, seed=0, **TINY)
