"""Fixtures shared by the test tree: the toy tokenizer and the tiny model (built by
:mod:`toy_setup`, whose ``toy_trainer`` is the tests' one trainer factory; transformers is
imported only by the tests that use them)."""

from __future__ import annotations

import pytest
from toy_setup import make_tiny_model


@pytest.fixture(scope="session")
def tokenizer():
    pytest.importorskip("transformers")
    from astarpo.llm.models.toy import make_char_tokenizer

    return make_char_tokenizer()


@pytest.fixture
def tiny_model(tokenizer):
    return make_tiny_model(tokenizer)
