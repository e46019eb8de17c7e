"""A verl-style scorer for the reward wrapper's tests (``score_fn="verl_scorer:score"``)."""

from __future__ import annotations

from typing import Any


def score(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
) -> dict[str, Any]:
    """1 when the response is the gold answer, as a dict with an extra key verl would log."""
    match = solution_str == ground_truth
    return {"score": float(match), "match": match}
