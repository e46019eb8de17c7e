"""Scoring a batch: reward functions loaded by name or dotted path, called with TRL's
signature and summed (:func:`compute_rewards`).

The built-in reward functions and the :class:`~astarpo.llm.data.rewards.RewardReport` side
channel are in :mod:`astarpo.llm.data.rewards`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from astarpo.llm.data.rewards import RewardFunc, RewardReport

__all__ = ["BUILTIN_REWARDS", "compute_rewards", "load_reward", "reward_name"]


BUILTIN_REWARDS: dict[str, str] = {
    "math_verify": "astarpo.llm.data.rewards:math_verify_reward",
    "gsm8k": "astarpo.llm.data.rewards:gsm8k_reward",
    "exact_match": "astarpo.llm.data.rewards:exact_match_reward",
}


def load_reward(spec: str) -> RewardFunc:
    """The reward function named by ``"package.module:function"`` (or a built-in short name).

    Short names: ``math_verify``, ``gsm8k``, ``exact_match``.

    Raises:
        ValueError: if ``spec`` has no ``:`` or the attribute is not callable.
        ImportError: if the module cannot be imported (the cause is chained).
        AttributeError: if the module has no such function.
    """
    spec = BUILTIN_REWARDS.get(spec, spec)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"reward {spec!r} must be 'package.module:function' or one of "
            f"{sorted(BUILTIN_REWARDS)}."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(
            f"cannot import module {module_name!r} of reward {spec!r}: {e}. Is it on PYTHONPATH?"
        ) from e
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise AttributeError(f"module {module_name!r} has no {attr!r} (reward {spec!r}).")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ValueError(f"reward {spec!r} is not callable (got {type(fn).__name__}).")
    return fn  # type: ignore[return-value]


def reward_name(fn: RewardFunc) -> str:
    """The name used in metrics: the function's ``__name__`` (or its class name)."""
    return str(getattr(fn, "__name__", type(fn).__name__))


def _accepts_report(fn: RewardFunc) -> bool:
    try:
        return "report" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def compute_rewards(
    reward_funcs: Sequence[RewardFunc],
    prompts: Sequence[str],
    completions: Sequence[str],
    columns: Mapping[str, Sequence[Any]],
    weights: Sequence[float] | None = None,
) -> tuple[np.ndarray, dict[str, float]]:
    """Sum of the reward functions over a batch, with ``None`` scored as 0 and counted.

    .. math:: r_b = \\sum_f w_f \\, r_f(x_b, y_b), \\qquad r_f = 0 \\text{ where it is None}

    Each function is called as ``fn(prompts=..., completions=..., **columns)``, plus
    ``report=RewardReport()`` when it declares a ``report`` parameter.

    Args:
        reward_funcs: Reward functions (TRL signature).
        prompts: ``[B]`` prompt texts.
        completions: ``[B]`` completion texts.
        columns: Other columns, each ``[B]`` (e.g. ``{"answer": [...]}``).
        weights: Weight of each function (default all 1).

    Returns:
        ``(rewards, metrics)``: rewards float64 ``[B]``; metrics ``reward/mean``, ``reward/std``
        and per function ``rewards/<name>/mean``, ``rewards/<name>/none`` (count of unscored
        items) and ``rewards/<name>/<reason>`` (counts from its report: ``timeout``,
        ``unparsable``, ...).

    Raises:
        ValueError: on length mismatches, no functions, or a function returning the wrong
            number of values or a non-finite value.
    """
    b = len(completions)
    if not reward_funcs:
        raise ValueError("reward_funcs is empty; give at least one reward function.")
    if len(prompts) != b:
        raise ValueError(f"prompts has {len(prompts)} entries but completions has {b}.")
    for name, col in columns.items():
        if len(col) != b:
            raise ValueError(f"column {name!r} has {len(col)} entries, expected {b}.")
    w = [1.0] * len(reward_funcs) if weights is None else [float(x) for x in weights]
    if len(w) != len(reward_funcs):
        raise ValueError(f"{len(w)} weights for {len(reward_funcs)} reward functions.")
    total = np.zeros(b, dtype=np.float64)
    metrics: dict[str, float] = {}
    for fn, wf in zip(reward_funcs, w, strict=True):
        name = reward_name(fn)
        kwargs: dict[str, Any] = dict(columns)
        report = RewardReport()
        if _accepts_report(fn):
            kwargs["report"] = report
        out = list(fn(prompts=list(prompts), completions=list(completions), **kwargs))
        if len(out) != b:
            raise ValueError(f"reward {name!r} returned {len(out)} values for {b} completions.")
        values = np.array([0.0 if v is None else float(v) for v in out], dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValueError(f"reward {name!r} returned NaN or infinite values.")
        total += wf * values
        metrics[f"rewards/{name}/mean"] = float(values.mean()) if b else 0.0
        metrics[f"rewards/{name}/none"] = float(sum(v is None for v in out))
        for reason, count in report.counts.items():
            metrics[f"rewards/{name}/{reason}"] = float(count)
    metrics["reward/mean"] = float(total.mean()) if b else 0.0
    metrics["reward/std"] = float(total.std()) if b else 0.0
    return total, metrics
