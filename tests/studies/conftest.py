"""The studies' tests need transformers (the fixtures are in ``tests/conftest.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
