"""Callbacks of the Stage 2 loop and the schedule that decides when to evaluate and stop.

A callback is any object with some of these methods (a :class:`typing.Protocol`; every hook is
optional, TRL's ``TrainerCallback`` idea with astarpo's records):

``on_train_begin(trainer) -> None``
    Once, before the first evaluation.
``on_step_end(record) -> bool | None``
    After every step with its logged record; returning ``True`` stops training after this step
    (the final evaluation and checkpoint still run).
``on_evaluate(record) -> None``
    After every evaluation with its ``eval/`` record.
``on_train_end(history) -> None``
    Once, after the final checkpoint, with every record of the call.

:class:`Schedule` holds the step and wall-clock rules of :class:`~astarpo.llm.training.trainer.
Trainer.train`: evaluate every ``eval_steps`` steps or every ``eval_every_seconds`` of training
time, stop at ``max_steps`` or once training time reaches ``max_train_seconds``. Training time
(``time/train_total``) counts generation, rewards, reference log-probs and updates; evaluation
and checkpointing are excluded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Callback", "Schedule", "call_hook"]


@runtime_checkable
class Callback(Protocol):
    """The one required hook; see the module docstring for the optional ones."""

    def on_step_end(self, record: dict[str, Any]) -> bool | None:
        """Called after every step; return ``True`` to stop training."""
        ...


def call_hook(callbacks: Sequence[Any], hook: str, *args: Any) -> bool:
    """Call ``hook(*args)`` on every callback that defines it; True if any returned True."""
    stop = False
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None and fn(*args) is True:
            stop = True
    return stop


class Schedule:
    """When to evaluate and when to stop, from steps and training seconds.

    Args:
        max_steps: Stop after this step.
        max_train_seconds: Stop once training time reaches it (0: no time limit).
        eval_steps: Evaluate every this many steps (0: off).
        eval_every_seconds: Evaluate every this many seconds of training time (0: off).
        train_time: Training time already spent (a resumed run).
    """

    def __init__(
        self,
        max_steps: int,
        max_train_seconds: float = 0.0,
        eval_steps: int = 0,
        eval_every_seconds: float = 0.0,
        train_time: float = 0.0,
    ) -> None:
        self.max_steps = max_steps
        self.max_train_seconds = max_train_seconds
        self.eval_steps = eval_steps
        self.eval_every_seconds = eval_every_seconds
        self._next_eval_time = (
            (int(train_time // eval_every_seconds) + 1) * eval_every_seconds
            if eval_every_seconds
            else float("inf")
        )

    def out_of_time(self, train_time: float) -> bool:
        """True once the wall-clock budget is spent."""
        return bool(self.max_train_seconds) and train_time >= self.max_train_seconds

    def done(self, step: int, train_time: float) -> bool:
        """True when training must stop after ``step``."""
        return step >= self.max_steps or self.out_of_time(train_time)

    def evaluate_now(self, step: int, train_time: float) -> bool:
        """True when step ``step`` (ending at ``train_time``) is followed by an evaluation."""
        due = bool(self.eval_steps) and step % self.eval_steps == 0
        if train_time >= self._next_eval_time:
            due = True
            while self._next_eval_time <= train_time:
                self._next_eval_time += self.eval_every_seconds
        return due
