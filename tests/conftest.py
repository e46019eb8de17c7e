"""Fixtures shared by the test tree: the toy tokenizer, the tiny model and a quick trainer config
(built by :mod:`toy_setup`; transformers is imported only by the tests that use them)."""

from __future__ import annotations

import pytest
from toy_setup import make_tiny_model, quick_config


@pytest.fixture(scope="session")
def tokenizer():
    pytest.importorskip("transformers")
    from astarpo.llm.models.toy import make_char_tokenizer

    return make_char_tokenizer()


@pytest.fixture
def tiny_model(tokenizer):
    return make_tiny_model(tokenizer)


@pytest.fixture
def train_config(tmp_path):
    """``train_config(cls=None, **fields)``: :func:`toy_setup.quick_config` in ``tmp_path``."""
    return lambda cls=None, **fields: quick_config(tmp_path, cls, **fields)
