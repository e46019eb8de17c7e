"""The sweep of a setting (a learning rate, a batch size): each value of a grid scored by one
run, the best chosen by :func:`select`, a choice on the grid's edge extended beyond it
(:func:`extend_grid`); :func:`sweep` for one name, :func:`sweep_all` for several side by side."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["extend_grid", "select", "sweep", "sweep_all"]


def select(scores: Mapping[float, float]) -> float:
    """The rule of a sweep: the value with the highest score, the smaller one on a tie (within
    1e-9); NaN scores (a diverged run) never win."""
    if not scores:
        raise ValueError("select needs at least one (value, score) pair.")
    best_x, best = None, -math.inf
    for x in sorted(scores):
        if not math.isnan(scores[x]) and scores[x] > best + 1e-9:
            best_x, best = x, scores[x]
    return best_x if best_x is not None else min(scores)


def extend_grid(scores: Mapping[float, float], integer: bool = False) -> float | None:
    """The value to try when :func:`select`'s choice is an edge of two or more values tried (None
    otherwise): one grid ratio beyond it (3.33e-5 below 1e-4, 3e-4, ...), to 3 significant
    digits, or rounded to an integer >= 1 (``integer``: a batch size)."""
    xs = sorted(scores)
    if len(xs) < 2 or select(scores) not in (xs[0], xs[-1]):
        return None
    beyond = xs[0] ** 2 / xs[1] if select(scores) == xs[0] else xs[-1] ** 2 / xs[-2]
    return float(max(1, round(beyond))) if integer else float(f"{beyond:.3g}")


def sweep(
    score: Callable[[float], float],
    grid: Sequence[float],
    extensions: int = 0,
    integer: bool = False,
    say: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """``{"scores": {value: score}, "chosen": value, "extended": [values added]}``: ``score``
    (one run) of every value of ``grid``, the choice by :func:`select`, a choice at an edge
    extended (:func:`extend_grid`) up to ``extensions`` times. One value: that one, unscored."""
    points = lambda todo: [score(x) for _, x in todo]  # noqa: E731
    return sweep_all(points, ("",), grid, extensions, integer, say)[""]


def sweep_all(
    score_all: Callable[[list[tuple[str, float]]], list[float]],
    names: Sequence[str],
    grid: Sequence[float],
    extensions: int = 0,
    integer: bool = False,
    say: Callable[[str], Any] = lambda *a: None,
) -> dict[str, dict[str, Any]]:
    """:func:`sweep` of every name of ``names`` over one ``grid``, in rounds: ``score_all``
    scores a list of ``(name, value)`` points in one call (so that their runs can go side by
    side), first every name's grid, then each round of the edge choices' extensions.

    Returns:
        ``{name: {"scores", "chosen", "extended"}}``, as :func:`sweep` per name.
    """
    if len(grid) <= 1 or not names:
        return {n: {"scores": {}, "chosen": grid[0], "extended": []} for n in names}
    scores: dict[str, dict[float, float]] = {n: {} for n in names}
    added: dict[str, list[float]] = {n: [] for n in names}
    todo = [(n, float(x)) for n in names for x in grid]
    for round_ in range(extensions + 1):
        for (n, x), got in zip(todo, score_all(todo), strict=True):
            scores[n][x] = got
            added[n] += [x] if round_ else []
        beyond = {n: extend_grid(scores[n], integer) for n in names}
        todo = [(n, x) for n, x in beyond.items() if x is not None and x not in scores[n]]
        if not todo or round_ == extensions:
            break
        tried = ", ".join(f"{n} {x:g}".strip() for n, x in todo)
        say(f"  a choice on the grid's edge; trying {tried}")
    return {
        n: {
            "scores": {f"{k:g}": v for k, v in sorted(scores[n].items())},
            "chosen": select(scores[n]),
            "extended": added[n],
        }
        for n in names
    }
