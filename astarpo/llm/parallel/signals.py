"""Preemption: SIGTERM and SIGINT stop a run at the next safe point instead of at once.

Clusters preempt jobs with SIGTERM (``torchrun`` forwards it to every worker and kills them 30 s
later); a user stops a run with Ctrl-C (SIGINT). Inside :class:`StopSignals` the first of these
signals only sets :attr:`StopSignals.received`; the loop finishes its current unit of work
(a Stage 2 step, then a checkpoint; a Stage 1 batch, then a flush of its rows) and raises
:class:`Interrupted`, which the command line turns into the exit code ``128 + signal``
(143 for SIGTERM, 130 for SIGINT). A second signal acts as it would without the handler
(SIGINT raises ``KeyboardInterrupt`` at once, SIGTERM ends the process).

Contexts nest: a signal received inside an inner context is recorded by it and by every
enclosing one, and the handlers from before the outermost come back, so that a second signal
still acts at once. A Python handler runs only between bytecodes: a process blocked in a
collective sees its signal when the collective returns or fails (:meth:`StopSignals.wait`).

Outside the main thread (where Python cannot install handlers) :class:`StopSignals` does
nothing.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from types import FrameType
from typing import Any, NoReturn

__all__ = ["Interrupted", "StopSignals"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """The run stopped at a safe point after SIGTERM or SIGINT (not an error).

    A subclass of ``KeyboardInterrupt``, so that ``except Exception`` does not swallow it.

    Attributes:
        signum: The signal received.
        exit_code: ``128 + signum`` (143 for SIGTERM, 130 for SIGINT), the command's exit code.
    """

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class StopSignals:
    """Context manager: the first SIGTERM/SIGINT is recorded in :attr:`received`, not acted on.

    Args:
        what: What the process finishes before stopping (printed when the signal arrives).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._outer: StopSignals | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for s in _SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
                owner = getattr(self._previous[s], "__self__", None)
                self._outer = owner if isinstance(owner, StopSignals) else self._outer
        return self

    def __exit__(self, *exc: object) -> None:
        if self.received is None:  # after a signal the outermost's handlers are back already
            for s, handler in self._previous.items():
                signal.signal(s, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        ctx: StopSignals | None = self
        outermost = self
        while ctx is not None:  # this context and every enclosing one record it
            ctx.received = signum
            outermost, ctx = ctx, ctx._outer
        for s, handler in outermost._previous.items():  # a second signal acts at once
            signal.signal(s, handler)
        name = signal.Signals(signum).name
        print(
            f"received {name}: finishing {self.what} first (send it again to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for a signal; return :attr:`received`.

        For a rank whose collective failed because a peer stopped: under ``torchrun`` the
        preempting signal reaches every rank at once, but this rank's handler runs only now
        that it is back in Python, so a peer that stopped on it is told from a real failure
        by waiting briefly rather than by reading :attr:`received` at once.
        """
        deadline = time.monotonic() + timeout
        while self.received is None and time.monotonic() < deadline:
            time.sleep(0.01)  # a pending handler runs between these sleeps
        return self.received

    def stop(self, what: str) -> NoReturn:
        """Raise :class:`Interrupted` for the signal received: ``"SIGTERM " + what``."""
        signum = self.received or signal.SIGINT
        raise Interrupted(signum, f"{self.name(signum)} {what}")

    @staticmethod
    def name(signum: int) -> str:
        """``"SIGTERM"`` for 15, and so on."""
        return signal.Signals(signum).name
