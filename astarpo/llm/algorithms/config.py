"""Helpers of the config dataclasses: fields with their help text, and the value checks.

Every config (``TrainConfig`` in :mod:`astarpo.llm.algorithms.train_config`, each algorithm's
config beside its algorithm, ``Stage1Config``) is frozen and validated on construction; an
invalid value raises ``ValueError`` saying which field is wrong and what is allowed.
:func:`doc_field` declares a field with its help text, :func:`config_fields` lists every field
with its default and help (``astarpo train`` makes one flag per field, and the docs' tables are
checked against it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

__all__ = [
    "check_choice",
    "check_nonneg",
    "check_positive_fields",
    "config_fields",
    "doc_field",
]


def doc_field(default: Any, help_text: str) -> Any:
    """A dataclass field with ``default`` and its ``help`` text in the metadata."""
    return field(default=default, metadata={"help": help_text})


def check_nonneg(cfg: Any, *names: str) -> None:
    """Raise unless each field ``names`` of ``cfg`` is a finite number >= 0."""
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}.")


def check_positive_fields(cfg: Any, *names: str) -> None:
    """Raise unless each field ``names`` of ``cfg`` is a finite number > 0."""
    check_nonneg(cfg, *names)
    for name in names:
        if getattr(cfg, name) == 0:
            raise ValueError(f"{name} must be > 0, got 0.")


def check_choice(cfg: Any, name: str, allowed: tuple[str, ...]) -> None:
    """Raise unless field ``name`` of ``cfg`` is one of ``allowed``."""
    v = getattr(cfg, name)
    if v not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {v!r}.")


def config_fields(cls: type) -> list[tuple[str, Any, str]]:
    """``(name, default, help)`` of every field of a config dataclass, in declaration order."""
    return [(f.name, f.default, f.metadata.get("help", "")) for f in dataclasses.fields(cls)]
