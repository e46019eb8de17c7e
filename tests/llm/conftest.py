"""The LLM tests need transformers (the fixtures are in ``tests/conftest.py``); this folder
also holds the helpers that subprocesses import (``faults``, ``fault_main``, ``vllm_helpers``)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
