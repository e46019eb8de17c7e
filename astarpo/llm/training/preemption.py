"""SIGTERM/SIGINT during Stage 2: the trainer stops after a step, with a checkpoint.

Inside ``with TrainingSignals(dp, max_steps) as signals:`` the first SIGTERM or SIGINT is only
recorded (:class:`~astarpo.llm.parallel.signals.StopSignals`). After every step
:meth:`TrainingSignals.after_step` agrees on it across ranks (one small all-reduce under
``torchrun``, on every rank and every step, so all ranks stop after the same step), writes a
checkpoint unless the step just wrote one, and raises
:class:`~astarpo.llm.parallel.signals.Interrupted` naming the step, the checkpoint and how to
resume (the command line exits 143 or 130).
"""

from __future__ import annotations

from collections.abc import Callable
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
