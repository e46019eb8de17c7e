"""A per-rank watchdog: a rank stuck in one phase of a step stops the job, and says so.

Under ``torchrun`` a rank that stalls (a ``generate`` call that never returns, a hung device)
leaves the other ranks waiting in their next collective. Without a watchdog they wait for the
collective timeout and then fail with a message that does not say which rank stalled.

:class:`Watchdog` times the phases that each rank runs on its own (generation, rewards,
reference log-probs, the update, a checkpoint): when one phase runs past ``timeout_s``, a
background thread prints ``error: rank R stalled: PHASE of step T has run for N s, past
dist_timeout=...`` with the stack of the rank's main thread, writes the same to ``torchrun``'s
error file (so its failure summary names the root cause) and ends the process with exit code
:data:`STALL_EXIT_CODE`. ``torchrun`` then stops the other ranks (and a gloo collective waiting
for the dead rank fails at once). A collective is not timed by the watchdog but by the process
group's timeout, which :func:`~astarpo.llm.parallel.dist.init_distributed` sets to twice
``dist_timeout``: the stalled rank's own watchdog fires first, and names it.

In one process the watchdog does nothing (there is no other rank to wait).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator

__all__ = [
    "STALL_EXIT_CODE",
    "StallError",
    "Watchdog",
    "is_peer_failure",
    "outlive_failed_peer",
    "record_for_launcher",
]

STALL_EXIT_CODE = 1
"""Exit code of a rank stopped by its watchdog (that of any runtime error of the CLI)."""


class StallError(RuntimeError):
    """A rank's phase ran past ``dist_timeout`` (the message names the rank, phase and step)."""


def record_for_launcher(error: BaseException) -> None:
    """Write ``error`` (with the traceback being handled) to ``torchrun``'s error file.

    ``torchrun`` sets ``TORCHELASTIC_ERROR_FILE`` for each worker and prints the file of the
    first failed worker as the root cause of a failed job; outside ``torchrun`` this does
    nothing. Call it inside an ``except`` block.
    """
    if not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return
    from torch.distributed.elastic.multiprocessing.errors import get_error_handler

    with contextlib.suppress(OSError):
        get_error_handler().record_exception(error)


#: Phrases of a collective that failed because another rank's process is gone (gloo, NCCL).
_PEER_GONE = (
    "closed by peer",
    "reset by peer",
    "Broken pipe",
    "remote process exited",
    "communicator was aborted",
)


def is_peer_failure(error: BaseException) -> bool:
    """True when ``error`` is a collective that failed because another rank exited.

    Such a failure is the consequence of the other rank's, not a root cause: gloo says
    ``Connection closed by peer`` or ``Connection reset by peer``, NCCL that the remote
    process exited or the communicator was aborted.
    """
    return isinstance(error, RuntimeError) and any(p in str(error) for p in _PEER_GONE)


def outlive_failed_peer(error: BaseException, seconds: float = 10.0) -> None:
    """Under ``torchrun``, after a peer failure, wait up to ``seconds`` for the launcher.

    ``torchrun`` names as root cause the failure with the smallest timestamp, in whole seconds,
    and on a tie the one it saw first (it polls every 0.1 s). A rank that exits at once on its
    peer's exit often lands in the same poll and second as the peer, and is then named instead
    of it. Waiting lets ``torchrun`` see the peer's failure first and stop this rank (SIGTERM).
    Does nothing outside ``torchrun`` or for any other error (see :func:`is_peer_failure`).
    """
    if os.environ.get("TORCHELASTIC_ERROR_FILE") and is_peer_failure(error):
        time.sleep(seconds)


class Watchdog:
    """Stop this process when a phase runs past ``timeout_s`` (see the module docstring).

    Args:
        timeout_s: Longest allowed duration of one phase, in seconds (``dist_timeout``).
        rank: This process's rank (named in the message).
        enabled: False (one process) makes :meth:`phase` a no-op.
        poll_s: How often the thread checks (default: ``timeout_s / 20``, at most 5 s).
    """

    def __init__(
        self, timeout_s: float, rank: int, enabled: bool = True, poll_s: float | None = None
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}.")
        self.timeout_s = float(timeout_s)
        self.rank = rank
        self.enabled = enabled
        self.poll_s = poll_s if poll_s is not None else min(5.0, self.timeout_s / 20)
        self._current: tuple[str, int, float] | None = None
        self._thread: threading.Thread | None = None
        self._main = threading.main_thread().ident

    @contextlib.contextmanager
    def phase(self, name: str, step: int) -> Iterator[None]:
        """Time the block as phase ``name`` of step ``step``."""
        if not self.enabled:
            yield
            return
        if self._thread is None:
            self._main = threading.get_ident()
            self._thread = threading.Thread(target=self._watch, name="astarpo-watchdog")
            self._thread.daemon = True
            self._thread.start()
        self._current = (name, step, time.monotonic())
        try:
            yield
        finally:
            self._current = None

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll_s)
            current = self._current
            if current is not None and time.monotonic() - current[2] > self.timeout_s:
                self._stop(*current)

    def _stop(self, name: str, step: int, start: float) -> None:
        elapsed = time.monotonic() - start
        frame = sys._current_frames().get(self._main or 0)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        message = (
            f"rank {self.rank} stalled: {name} of step {step} has run for {elapsed:.1f} s, past "
            f"dist_timeout={self.timeout_s:g} s; stopping this rank so that the job stops (the "
            "other ranks wait for it). If the phase is just slow, raise --dist-timeout; "
            "continue with --resume."
        )
        print(f"error: {message}", file=sys.stderr, flush=True)
        if stack:
            print(f"rank {self.rank} was here:\n{stack}", file=sys.stderr, flush=True)
        try:
            raise StallError(f"{message}\nThe stalled rank's main thread:\n{stack}")
        except StallError as e:
            record_for_launcher(e)
        os._exit(STALL_EXIT_CODE)
