"""Callbacks of the Stage 2 loop and the schedule that decides when to evaluate and stop.

A callback is any object with some of these methods (a :class:`typing.Protocol`; every hook is
optional but one must be there, TRL's ``TrainerCallback`` idea with astarpo's records; the
trainer refuses at construction, with :func:`check_callbacks`, a callback none of whose hooks
would ever be called: a plain function, ``object()``, a hook that does not take one argument,
or a ``transformers`` ``TrainerCallback``, whose hooks take ``(args, state, control)``):

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
and checkpointing are excluded. The trainer's ``eval_fn`` (:data:`EvalFn`) runs on that schedule;
:func:`eval_values` checks what it returns.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "HOOKS",
    "Callback",
    "EvalFn",
    "Schedule",
    "call_hook",
    "check_callbacks",
    "eval_values",
    "evaluate",
]

EvalFn = Callable[[Any], Mapping[str, float]]
"""``eval_fn(model) -> {name: value}``: an evaluation run between training steps (its result is
checked by :func:`eval_values`)."""

HOOKS: dict[str, str] = {
    "on_train_begin": "trainer",
    "on_step_end": "record",
    "on_evaluate": "record",
    "on_train_end": "history",
}
"""The hooks a callback may define, each called with one argument (named here)."""


@runtime_checkable
class Callback(Protocol):
    """The hook that can stop training; see the module docstring for the others."""

    def on_step_end(self, record: dict[str, Any]) -> bool | None:
        """Called after every step; return ``True`` to stop training."""
        ...


def check_callbacks(callbacks: Any) -> list[Any]:
    """The callbacks as a list, each checked: an object defining at least one of :data:`HOOKS`,
    each hook callable with its one argument.

    ``transformers``/TRL ``TrainerCallback`` objects are refused: their hooks take
    ``(args, state, control, **kwargs)`` of the ``transformers.Trainer``, which this loop does
    not have; the message says how to write the astarpo equivalent.

    Raises:
        TypeError: naming the callback and what to give instead.
    """
    if callbacks is None:
        return []
    single = any(hasattr(callbacks, h) for h in HOOKS) or not hasattr(callbacks, "__iter__")
    callbacks = [callbacks] if single else list(callbacks)
    example = "class StopAt: def on_step_end(self, record): return record['step'] >= 10"
    for i, cb in enumerate(callbacks):
        what = f"callbacks[{i}] ({type(cb).__name__})"
        if any(
            c.__name__ == "TrainerCallback" and c.__module__.startswith("transformers")
            for c in type(cb).__mro__
        ):
            raise TypeError(
                f"{what} is a transformers/TRL TrainerCallback; its hooks take (args, state, "
                "control) of a transformers.Trainer, which astarpo's loop does not have. Give an "
                f"object with some of {list(HOOKS)}, each taking one argument, e.g. {example}"
            )
        hooks = [h for h in HOOKS if getattr(cb, h, None) is not None]
        if not hooks:
            kind = "a function" if inspect.isroutine(cb) else "an object"
            raise TypeError(
                f"{what} is {kind} without any of the hooks {list(HOOKS)}, so it would never "
                f"be called. Give an object with them, e.g. {example}"
            )
        for h in hooks:
            fn = getattr(cb, h)
            try:
                inspect.signature(fn).bind(None)
            except TypeError:
                raise TypeError(
                    f"{what}.{h} must be callable with one argument ({h}({HOOKS[h]})); its "
                    f"signature is {_signature(fn)}."
                ) from None
            except ValueError:  # no signature to read (a builtin): trust it
                pass
    return callbacks


def _signature(fn: Any) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return f"not callable ({type(fn).__name__})"


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

    @classmethod
    def from_config(cls, args: Any, train_time: float = 0.0) -> Schedule:
        """The schedule of a training config's ``max_steps``, ``max_train_seconds``,
        ``eval_steps`` and ``eval_every_seconds``, ``train_time`` already spent."""
        return cls(
            args.max_steps,
            args.max_train_seconds,
            args.eval_steps,
            args.eval_every_seconds,
            train_time,
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


def eval_values(result: Any) -> dict[str, float]:
    """``eval_fn``'s result as ``{name: float}``.

    Raises:
        TypeError: naming what it returned, unless a mapping of names to numbers (a text
            ``"0.5"`` is not a number).
    """
    if not isinstance(result, Mapping):
        raise TypeError(
            f"eval_fn returned {result!r:.60} ({type(result).__name__}); it must return a "
            "mapping of names to numbers, e.g. {'accuracy': 0.5}."
        )
    for k, v in result.items():
        if not hasattr(type(v), "__float__"):
            raise TypeError(
                f"eval_fn returned {v!r:.60} ({type(v).__name__}) for {k!r}; values must be "
                "numbers, e.g. {'accuracy': 0.5}."
            )
    return {str(k): float(v) for k, v in result.items()}


def evaluate(trainer: Any, logger: Any) -> None:
    """One evaluation of ``trainer``'s policy by its ``eval_fn`` (none: nothing): the policy back
    in train mode after, the ``eval/`` record (with ``step`` and ``time/train_total``) logged,
    appended to ``trainer.history`` and passed to the callbacks' ``on_evaluate``."""
    if trainer.eval_fn is None:
        return
    result = trainer.eval_fn(trainer.model)
    trainer.model.train()  # eval_fn may have switched it to eval mode
    rec = {"step": trainer.step_count, "time/train_total": trainer.train_time}
    rec.update({f"eval/{k}": v for k, v in eval_values(result).items()})
    logger.log(rec)
    trainer.history.append(rec)
    call_hook(trainer.callbacks, "on_evaluate", rec)
