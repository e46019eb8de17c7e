"""Shared fixtures of the LLM tests: the char tokenizer and a very small toy model."""

from __future__ import annotations

import pytest
from fakes import TINY

pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def tokenizer():
    from astarpo.llm.models.toy import make_char_tokenizer

    return make_char_tokenizer()


@pytest.fixture
def tiny_model(tokenizer):
    from astarpo.llm.models.toy import make_toy_model

    return make_toy_model(tokenizer, seed=0, **TINY)
