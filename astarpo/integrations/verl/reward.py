r"""A*-PO's reward in verl: any verl ``compute_score`` turned into :math:`A = r - V^*`.

verl scores a response with ``compute_score(data_source, solution_str, ground_truth,
extra_info, **kwargs)`` and puts the score on its last token. :func:`optimal_advantage_score`
wraps such a function so that it returns the optimal advantage
:func:`astarpo.optimal_advantage` ``(r, V*)``, V* read from the row's
``extra_info["v_star"]`` (written by ``astarpo value --export-verl``); a row without it is
refused by name. :func:`compute_score` is the ready-made function for verl's command line::

    reward.custom_reward_function.path=pkg://astarpo.integrations.verl.reward
    reward.custom_reward_function.name=compute_score

which wraps verl's own ``default_compute_score``, or the scorer named by
``+reward.custom_reward_function.reward_kwargs.score_fn=...``: ``package.module:function`` (a
verl-style scorer) or ``astarpo:NAME``, an astarpo reward as ``astarpo value --reward NAME``
names it (``math_verify``, ``gsm8k``, ``exact_match``, ``scratchpad`` or
``package.module:function``), so that verl scores responses as Stage 1 scored the reference's.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from astarpo.llm.rewards.scoring import accepted_kwargs, load_reward
from astarpo.llm.stage1.verl_export import V_STAR_FIELD
from astarpo.objective import optimal_advantage

__all__ = [
    "ASTARPO_REWARD",
    "astarpo_score",
    "compute_score",
    "optimal_advantage_score",
    "row_v_star",
]

ASTARPO_REWARD = "astarpo:"
"""The prefix of a ``score_fn`` naming an astarpo reward (``astarpo:math_verify``)."""

ScoreFn = Callable[..., Any]


def row_v_star(extra_info: Any, data_source: Any = None, ground_truth: Any = None) -> float:
    """V* of a verl row: ``extra_info["v_star"]``, a finite number.

    Args:
        extra_info: The row's ``extra_info`` (a dict).
        data_source: Named in the error.
        ground_truth: Named in the error.

    Raises:
        KeyError: the row has no ``extra_info["v_star"]`` (the message names the row and how to
            write a training file that has it).
        ValueError: the value is not a finite number (a string ``"0.5"`` included).
    """
    where = f"verl row (data_source={data_source!r}, ground_truth={str(ground_truth)[:40]!r})"
    if not isinstance(extra_info, Mapping) or extra_info.get(V_STAR_FIELD) is None:
        raise KeyError(
            f"{where} has no extra_info[{V_STAR_FIELD!r}]: A*-PO's reward is r - V*, with V* of "
            "the prompt from Stage 1. Write the training parquet with `astarpo value "
            "--export-verl` (docs/at_scale.md), or add the column to every row."
        )
    value = extra_info[V_STAR_FIELD]
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{where}: extra_info[{V_STAR_FIELD!r}] is {value!r}, not a number.")
    if not math.isfinite(float(value)):
        raise ValueError(f"{where}: extra_info[{V_STAR_FIELD!r}] is {value!r}, not finite.")
    return float(value)


def optimal_advantage_score(score_fn: ScoreFn) -> ScoreFn:
    """Wrap a verl ``compute_score`` so that it returns A*-PO's reward ``r - V*``.

    Args:
        score_fn: ``score_fn(data_source, solution_str, ground_truth, extra_info, **kwargs)``
            returning the reward ``r`` (a number, or a dict whose ``"score"`` is ``r``).

    Returns:
        A function of the same arguments returning a dict: ``score`` =
        :func:`astarpo.optimal_advantage` ``(r, V*)`` (what verl puts on the last token),
        ``raw_score`` = ``r``, ``v_star`` = V*, and the other keys of ``score_fn``'s dict
        (verl logs them all).

    Raises:
        KeyError: from the returned function, for a row without ``extra_info["v_star"]``
            (:func:`row_v_star`; checked before ``score_fn`` runs).
    """

    @functools.wraps(score_fn)
    def score(
        data_source: Any,
        solution_str: str,
        ground_truth: Any,
        extra_info: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        v_star = row_v_star(extra_info, data_source, ground_truth)
        result = score_fn(
            data_source=data_source,
            solution_str=solution_str,
            ground_truth=ground_truth,
            extra_info=extra_info,
            **kwargs,
        )
        extra = dict(result) if isinstance(result, Mapping) else {}
        reward = float(extra["score"] if isinstance(result, Mapping) else result)
        advantage = float(optimal_advantage(np.asarray(reward, float), np.asarray(v_star, float)))
        return {**extra, "score": advantage, "raw_score": reward, V_STAR_FIELD: v_star}

    return score


def astarpo_score(spec: str) -> ScoreFn:
    """A verl-style scorer running the astarpo reward ``spec`` (``--reward``'s names) on one
    response: ``reward(prompts=[""], completions=[solution_str], answer=[ground_truth])[0]``
    (verl does not hand the prompt to a scorer; a reward reading it sees ``""``).

    Raises:
        ValueError: ``spec`` names no reward.
    """
    reward = load_reward(spec)

    def score(
        data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any = None, **_: Any
    ) -> float:
        columns = {"prompts": [""], "completions": [solution_str], "answer": [ground_truth]}
        return float(reward(**accepted_kwargs(reward, columns))[0])

    score.__name__ = f"astarpo_score[{spec}]"
    return score


@functools.lru_cache(maxsize=8)
def _score_fn(path: str | None) -> ScoreFn:
    """The scorer of ``score_fn`` (see the module docstring), or verl's
    ``default_compute_score``."""
    if path is not None and path.startswith(ASTARPO_REWARD):
        return astarpo_score(path[len(ASTARPO_REWARD) :])
    if path is None:
        from verl.utils.reward_score import default_compute_score

        return default_compute_score
    module, sep, name = path.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"score_fn must be 'package.module:function', got {path!r}.")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"score_fn {path!r}: {module} has no function {name!r}.")
    return fn


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Any = None,
    score_fn: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's ``compute_score`` for A*-PO: ``r - V*`` with ``r`` from verl's
    ``default_compute_score`` or the function ``score_fn`` names.

    Args:
        data_source: The row's ``data_source`` (verl's default scorer dispatches on it).
        solution_str: The decoded response.
        ground_truth: The row's ``reward_model.ground_truth``.
        extra_info: The row's ``extra_info``, holding ``v_star``.
        score_fn: ``package.module:function`` of another verl-style scorer, or
            ``astarpo:NAME`` (:func:`astarpo_score`), set with
            ``+reward.custom_reward_function.reward_kwargs.score_fn=...``; None: verl's.
        **kwargs: Passed on to the scorer.

    Returns:
        The dict of :func:`optimal_advantage_score`.

    Raises:
        KeyError: the row has no ``extra_info["v_star"]``.
    """
    wrapped = optimal_advantage_score(_score_fn(score_fn))
    return wrapped(data_source, solution_str, ground_truth, extra_info, **kwargs)
