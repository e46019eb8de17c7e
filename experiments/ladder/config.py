"""The ladder study's settings: :class:`~experiments.harness.ladder_sets.LadderConfig` (the
ladder every study that reads one builds with), and what ``--quick`` sets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.harness.ladder_sets import QUICK

__all__ = ["presets"]


def presets(given: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The fields ``--quick`` sets (:data:`~experiments.harness.ladder_sets.QUICK`)."""
    return dict(QUICK) if quick else {}
