"""The embedded tasks, by name: ``addition`` (answers of 3 digits and EOS: 4 tokens),
``scratchpad`` (a worked solution of 70 tokens before the answer) and ``scratchpad2`` (the same
with 2-digit operands: 38 tokens), the response lengths at which the benchmark measures time to
target.

A :class:`ToyTask` bundles what a run on a task needs besides its algorithm: the rows, the
reward, the token budget and the toy model's shape. The benchmark (``python -m
experiments.efficiency --task``)
and :func:`astarpo.llm.toy.demo.run_demo`'s data come from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from astarpo.llm.rewards.builtin import RewardFunc, exact_match_reward
from astarpo.llm.rewards.scratchpad import scratchpad_reward
from astarpo.llm.toy.problems import SCRATCHPAD_POSITIONS, addition_task, scratchpad_task

__all__ = ["SCRATCHPAD_DIGITS", "SHORT_SCRATCHPAD_DIGITS", "TASKS", "ToyTask", "get_task"]

#: Operand digits of the ``scratchpad`` task (a worked solution of 69 characters, plus EOS).
SCRATCHPAD_DIGITS = 4

#: Operand digits of the ``scratchpad2`` task (37 characters, plus EOS).
SHORT_SCRATCHPAD_DIGITS = 2


@dataclass(frozen=True)
class ToyTask:
    """One embedded task.

    Args:
        name: Its name (``--task``).
        rows: ``rows(n, seed)``: ``n`` distinct problems (slices of one call are disjoint), each
            ``{"prompt", "answer", ...}`` with ``answer`` the exact gold response.
        reward: The reward function (TRL signature).
        max_new_tokens: Token budget of a response: the gold response with EOS, plus slack.
        response_tokens: Tokens of the longest gold response with EOS: the least budget a
            benchmark may give (None: not enforced).
        model: ``Qwen2Config`` overrides of :func:`~astarpo.llm.models.toy.make_toy_model` for
            this task (positions sized to fit; a smaller model where responses are long).
        sft_lr: Learning rate of its supervised fine-tuning.
    """

    name: str
    rows: Callable[[int, int], list[dict[str, str]]]
    reward: RewardFunc
    max_new_tokens: int
    response_tokens: int | None
    model: dict[str, Any] = field(default_factory=dict)
    sft_lr: float = 2e-3


def _addition(n: int, seed: int) -> list[dict[str, str]]:
    return addition_task(n, seed=seed, zero_pad=True)


def _scratchpad_rows(digits: int) -> Callable[[int, int], list[dict[str, str]]]:
    def rows(n: int, seed: int) -> list[dict[str, str]]:
        return scratchpad_task(n, seed=seed, digits=digits)

    return rows


def _scratchpad(name: str, digits: int) -> ToyTask:
    """The scratchpad task with ``digits``-digit operands: ``16 digits + 5`` characters plus
    EOS, a budget of 8 tokens of slack, and the small model (see :data:`TASKS`)."""
    return ToyTask(
        name,
        _scratchpad_rows(digits),
        scratchpad_reward,
        max_new_tokens=16 * digits + 5 + 1 + 8,
        response_tokens=16 * digits + 5 + 1,
        model={
            "hidden_size": 64,
            "intermediate_size": 256,
            "num_hidden_layers": 3,
            "max_position_embeddings": SCRATCHPAD_POSITIONS,
        },
        sft_lr=3e-3,
    )


#: The tasks by name. ``scratchpad`` and ``scratchpad2`` use a smaller model (hidden 64, 3
#: layers, about 0.19M parameters): the default ~1M model cost 1.8 s per SFT step of 64 worked
#: solutions on a loaded 2-core machine, the smaller one 0.35 s.
TASKS: dict[str, ToyTask] = {
    "addition": ToyTask(
        "addition", _addition, exact_match_reward, max_new_tokens=5, response_tokens=None
    ),
    "scratchpad": _scratchpad("scratchpad", SCRATCHPAD_DIGITS),
    "scratchpad2": _scratchpad("scratchpad2", SHORT_SCRATCHPAD_DIGITS),
}


def get_task(name: str) -> ToyTask:
    """The task called ``name``.

    Raises:
        ValueError: no such task (the known names are listed).
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS)}.")
    return TASKS[name]
