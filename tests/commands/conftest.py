"""The command-line tests drive the LLM verbs: they need transformers (the fixtures are in
``tests/conftest.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
