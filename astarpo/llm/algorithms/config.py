"""The value checks of the training configs.

Every config (``TrainConfig`` in :mod:`astarpo.llm.algorithms.train_config`, each algorithm's
config beside its algorithm, ``Stage1Config``) is frozen and validated on construction; an
invalid value raises ``ValueError`` saying which field is wrong and what is allowed. Their
fields are declared with :func:`astarpo.config.doc_field`.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_choice", "check_nonneg", "check_positive_fields"]


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
