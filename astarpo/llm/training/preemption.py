"""SIGTERM/SIGINT during Stage 2: the trainer stops after a step, with a checkpoint.

Inside ``with TrainingSignals(dp, max_steps) as signals:`` the first SIGTERM or SIGINT is only
recorded (:class:`~astarpo.llm.parallel.signals.StopSignals`). After every step
:meth:`TrainingSignals.after_step` agrees on it across ranks (one small all-reduce under
``torchrun``, on every rank and every step, so all ranks stop after the same step), writes a
checkpoint unless the step just wrote one, and raises
:class:`~astarpo.llm.parallel.signals.Interrupted` naming the step, the checkpoint and how to
resume (the command line exits 143 or 130).

A signal may also stop work inside a step: a trainer extension's Stage 1 (the streamed Stage 1,
a reference refresh) stops after its current batch and raises
:class:`~astarpo.llm.parallel.signals.Interrupted` before the step has changed anything.
:meth:`TrainingSignals.in_step` then writes a checkpoint of the last finished step
(step 0, the starting state, when none has finished), unless it has one already, and raises
:class:`~astarpo.llm.parallel.signals.Interrupted` naming it, so that a resume continues with
the step that was stopped and matches an uninterrupted run. (The extensions that run Stage 1
refuse ``torchrun``, so one process stops alone.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from astarpo.llm.parallel.signals import Interrupted, StopSignals
from astarpo.llm.training.data_parallel import DataParallel

__all__ = ["TrainingSignals"]


class TrainingSignals(StopSignals):
    """The Stage 2 loop's :class:`~astarpo.llm.parallel.signals.StopSignals` (a context
    manager): a signal stops training after the current step and a checkpoint.

    Args:
        dp: The trainer's data-parallel hooks (the ranks agree on a signal through them).
        max_steps: The run's ``max_steps`` (named in the message).
    """

    def __init__(self, dp: DataParallel, max_steps: int) -> None:
        super().__init__("the current step and a checkpoint")
        self.dp = dp
        self.max_steps = max_steps

    def __enter__(self) -> TrainingSignals:
        super().__enter__()
        return self

    def after_step(
        self, step: int, stop: bool, save: Callable[[], Path], saved: Path | None
    ) -> None:
        """Call on every rank after every step: stop here if any rank received a signal.

        Args:
            step: The step just finished.
            stop: Training stops after this step anyway (its own final checkpoint follows).
            save: Writes a checkpoint of this step (every rank calls it) and returns its path.
            saved: The checkpoint this step already wrote (``save_steps``), if any.

        Raises:
            Interrupted: a rank received SIGTERM/SIGINT and training was not stopping anyway;
                the step's checkpoint is written.
        """
        received = self.dp.agree_signal(self.received)  # all ranks stop together
        if received and not stop:
            saved = saved or save()
            raise Interrupted(
                received,
                f"{self.name(received)} after step {step} of {self.max_steps}: checkpoint "
                f"{saved} written; continue with --resume (train(resume=True)).",
            )

    @contextlib.contextmanager
    def in_step(self, step: int, save: Callable[[], Path], saved: Path | None) -> Iterator[None]:
        """Run step ``step`` inside: when a signal stops work inside it
        (:class:`~astarpo.llm.parallel.signals.Interrupted` raised by its Stage 1, before the
        step changed anything), checkpoint step ``step - 1`` and stop.

        Args:
            step: The step run inside (a stopped one is not kept, and is redone on resume).
            save: Writes a checkpoint of step ``step - 1`` and returns its path.
            saved: The checkpoint of step ``step - 1`` written or resumed from, if any.

        Raises:
            Interrupted: with the signal of the one raised inside, naming the checkpoint and
                the resume.
        """
        try:
            yield
        except Interrupted as error:
            path = saved or save()
            what = str(error).rstrip(".")
            raise Interrupted(
                error.signum,
                f"{what} (step {step} of {self.max_steps} was stopped before its update and "
                f"will be redone); the finished steps are in checkpoint {path} (step "
                f"{step - 1}); continue with --resume (train(resume=True)).",
            ) from error
