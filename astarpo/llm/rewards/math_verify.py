"""math-verify correctness scored in a pool of killable worker processes (built-in reward
``math_verify``).

:class:`MathVerifyReward` sends the items to a helper process
(:mod:`astarpo.llm.rewards.math_verify_pool`, started as ``python -m``) whose pool runs each
item under a hard deadline; the workers run :mod:`astarpo.llm.rewards.math_verify_worker`, the
only module that imports math-verify.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import queue
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.rewards.builtin import RewardReport, check_batch, completion_text
from astarpo.llm.rewards.math_verify_pool import read_frame, write_frame

__all__ = ["MathVerifyReward", "math_verify_reward"]

logger = logging.getLogger(__name__)

_POOL_MODULE = "astarpo.llm.rewards.math_verify_pool"
# The whole-call deadline: _START_S (starting the helper, its forkserver and workers, and the
# pipes' overhead) plus, per round of n_workers items, the per-item timeout and _KILL_S (pebble
# stops a timed-out worker with SIGTERM, waits 3 s, then SIGKILL, and forks a new one).
_START_S = 60.0
_KILL_S = 5.0
_STOP_S = 10.0  # how long the helper may take to stop its pool before its group is killed


class MathVerifyReward:
    r"""math-verify correctness: 1.0 if the completion's final answer equals the gold, else 0.0.

    The completion's answer is extracted with ``\boxed{}`` first (then "final answer is ..."
    patterns, then plain expressions) and compared with the gold answer by math-verify's
    ``verify`` (symbolic and numeric equality: ``\boxed{1/2}``, ``\boxed{0.5}`` and
    ``\frac{1}{2}`` all match). A bare gold answer is read as LaTeX math (``$...$``).

    Each item runs in a worker process of a ``pebble.ProcessPool`` under a hard wall-clock
    ``timeout`` (math-verify's own ``signal.alarm`` timeouts work on the main thread only and
    cannot stop a long C-level computation such as ``\boxed{9^{9^{9^{9^{9}}}}}``): a worker
    still busy at the deadline is killed and replaced, so no completion can hang the caller, and
    the call works from any thread. The pool lives in a helper process started as
    ``python -m astarpo.llm.rewards.math_verify_pool`` in its own session, so its workers never
    import the caller's main script (a plain script needs no ``if __name__ == "__main__":``);
    the workers are forked from a ``forkserver`` that has imported math-verify once. The helper
    starts on the first call, is reused by later calls, and is stopped by :meth:`close` or at
    interpreter exit; it exits by itself when the caller dies (the end of its stdin). Should
    the helper die or hang, a call still returns by a deadline derived from ``timeout``
    (``60 s + ceil(queued / n_workers) * (timeout + 5 s)``), counting the items not scored as
    ``"error"`` (it died) or ``"timeout"`` (it hung, and is killed), with a logged warning; the
    next call starts a new helper.

    Items not scored return ``None`` and are counted in ``report``: ``"unparsable"`` (no answer
    found in the completion), ``"unparsable_gold"``, ``"timeout"``, ``"error"``.

    Args:
        timeout: Hard per-item deadline in seconds. Default 5.0.
        n_workers: Worker processes (default: ``min(4, os.cpu_count())``).
        float_rounding: Decimal places floats are rounded to before comparing. Default 6.
        numeric_precision: Significant digits for numeric comparison. Default 15.
        strict: math-verify's strict mode (variables must match, sets differ from tuples).
            Default True.
    """

    __name__ = "math_verify_reward"
    has_own_timeout = True  # per-item deadline in killable workers: no call deadline on top

    def __init__(
        self,
        timeout: float = 5.0,
        n_workers: int | None = None,
        float_rounding: int = 6,
        numeric_precision: int = 15,
        strict: bool = True,
    ) -> None:
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}.")
        self.timeout = float(timeout)
        self.n_workers = n_workers or min(4, os.cpu_count() or 1)
        self.options = {
            "float_rounding": float_rounding,
            "numeric_precision": numeric_precision,
            "strict": strict,
        }
        self._pool: _HelperPool | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _get_pool(self) -> _HelperPool:
        with self._lock:
            if self._pool is None or not self._pool.active or self._pid != os.getpid():
                # none yet, the helper died or was killed, or a forked child starts its own
                self._pool = _HelperPool(self.timeout, self.n_workers)
                self._pid = os.getpid()
            return self._pool

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the settings only (a copy starts its own pool)."""
        state = dict(self.__dict__)
        state["_pool"], state["_lock"] = None, None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the helper process and its workers (a later call starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()

    def __call__(
        self,
        prompts: Sequence[str],
        completions: Sequence[str],
        answer: Sequence[Any],
        report: RewardReport | None = None,
        **columns: Any,
    ) -> list[float | None]:
        """Score ``completions`` ``[B]`` against ``answer`` ``[B]``; see the class docstring."""
        check_batch(prompts, completions, answer)
        report = report if report is not None else RewardReport()
        for reason in ("timeout", "unparsable", "error"):
            report.add(reason, 0)
        items = [
            {"completion": completion_text(c), "gold": str(a), **self.options}
            for c, a in zip(completions, answer, strict=True)
        ]
        scores: list[float | None] = []
        for value in self._get_pool().score(items):
            scores.append(float(value["score"]) if "score" in value else None)
            if "score" not in value:
                report.add(value["reason"])
        return scores


class _Call:
    """The results of one call, filled (under the pool's lock) as the helper answers."""

    def __init__(self, n: int) -> None:
        self.results: list[dict[str, Any] | None] = [None] * n
        self.left = n
        self.done = threading.Event()
        if n == 0:
            self.done.set()

    def set(self, index: int, value: dict[str, Any]) -> None:
        if self.results[index] is None:
            self.results[index] = value
            self.left -= 1
            if self.left == 0:
                self.done.set()


class _HelperPool:
    """The caller's end of one helper process: a writer thread sends batches to its stdin, a
    reader thread hands its answers to the waiting calls and, when its stdout ends, counts the
    items still waiting as ``"error"`` and kills the helper's process group (its forkserver and
    workers: no orphans)."""

    def __init__(self, timeout: float, n_workers: int) -> None:
        self.timeout, self.n_workers = timeout, n_workers
        self.owner = os.getpid()
        args = ["--timeout", repr(timeout), "--workers", str(n_workers)]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", _POOL_MODULE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_helper_env(),
            start_new_session=True,  # its own process group: killed as one, no terminal SIGINT
        )
        self.pid = self._proc.pid
        self.active = True
        self._closing = False
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[_Call, int]] = {}
        self._next_key = 0
        self._outbox: queue.SimpleQueue[list[tuple[int, dict[str, Any]]] | None]
        self._outbox = queue.SimpleQueue()
        threading.Thread(target=self._write, name="math-verify-writer", daemon=True).start()
        self._reader = threading.Thread(target=self._read, name="math-verify-reader", daemon=True)
        self._reader.start()
        _LIVE.add(self)

    def score(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Score ``items`` in the helper; each result as the helper answers, or ``"timeout"``
        for those still waiting at the whole-call deadline (the helper is then killed)."""
        call = _Call(len(items))
        with self._lock:
            if not self.active:  # it died since the reward looked; the next call starts anew
                logger.warning(
                    "math_verify_reward: the helper process %d has exited; %d items are "
                    "counted as 'error'.",
                    self.pid,
                    len(items),
                )
                return [{"reason": "error"}] * len(items)
            keys = list(range(self._next_key, self._next_key + len(items)))
            self._next_key += len(items)
            for index, key in enumerate(keys):
                self._pending[key] = (call, index)
            queued = len(self._pending)
        limit = _START_S + math.ceil(queued / self.n_workers) * (self.timeout + _KILL_S)
        try:
            self._outbox.put(list(zip(keys, items, strict=True)))
            if not call.done.wait(limit):
                with self._lock:
                    late = [key for key in keys if key in self._pending]
                    for key in late:
                        self._pending.pop(key)
                        call.set(key - keys[0], {"reason": "timeout"})
                    self._kill_group()
                    self.active = False  # the next call starts a new helper at once
                logger.warning(
                    "math_verify_reward: the helper process %d did not answer %d of %d items "
                    "within the call's deadline of %.0f s (per-item timeout %.1f s); they are "
                    "counted as 'timeout' and the helper is killed (the next call starts a new "
                    "one).",
                    self.pid,
                    len(late),
                    len(items),
                    limit,
                    self.timeout,
                )
        finally:  # interrupted (Ctrl-C): forget the keys still waiting
            with self._lock:
                for key in keys:
                    self._pending.pop(key, None)
        return [value if value is not None else {"reason": "error"} for value in call.results]

    def close(self) -> None:
        """End the helper's stdin (it stops its pool and exits); kill its group if it does not."""
        with self._lock:
            self._closing = True
        self._outbox.put(None)
        self._reader.join(_STOP_S)
        if self._reader.is_alive():
            with self._lock:
                self._kill_group()
            self._reader.join()

    def _write(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            while (batch := self._outbox.get()) is not None:
                write_frame(stdin, batch)
            stdin.close()
        except (OSError, ValueError):  # the helper is gone: the reader counts what is waiting
            pass

    def _read(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            while (frame := read_frame(stdout)) is not None:
                key, value = frame
                with self._lock:
                    entry = self._pending.pop(key, None)
                    if entry is not None:
                        entry[0].set(entry[1], value)
        except Exception as exc:  # a torn frame: the helper died while writing
            logger.warning("math_verify_reward: bad answer from the helper process: %r", exc)
        finally:
            with self._lock:
                self.active = False
                left, self._pending = self._pending, {}
                if left:  # logged before the waiting calls return, so they see it
                    logger.warning(
                        "math_verify_reward: the helper process %d %s with %d items not "
                        "scored; they are counted as 'error' (the next call starts a new "
                        "helper).",
                        self.pid,
                        "was closed" if self._closing else "exited",
                        len(left),
                    )
                for call, index in left.values():
                    call.set(index, {"reason": "error"})
            self._reap()

    def _reap(self) -> None:
        """Wait (a while) for the helper to exit, kill what is left of its group, reap it."""
        deadline = time.monotonic() + _STOP_S
        while time.monotonic() < deadline:
            try:  # WNOWAIT: the exited helper stays a zombie, so its group id is not reused
                if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    break
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored)
                break
            time.sleep(0.05)
        with self._lock:
            self._kill_group()
            self._proc.wait()
        _LIVE.discard(self)

    def _kill_group(self) -> None:
        """SIGKILL the helper's process group unless the helper was reaped (hold the lock)."""
        if self._proc.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _helper_env() -> dict[str, str]:
    """The helper's environment: the caller's, with this ``astarpo``'s directory first on
    ``PYTHONPATH`` so that the helper runs the same code (unless it is installed in the
    interpreter's own site-packages, which the helper finds anyway and which must not come
    before the standard library)."""
    env = dict(os.environ)
    root = str(Path(__file__).parents[3])
    paths = sysconfig.get_paths()
    if root not in (paths["purelib"], paths["platlib"]):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


_LIVE: weakref.WeakSet[_HelperPool] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At interpreter exit, stop this process's helpers (not those of a parent we forked from)."""
    for pool in list(_LIVE):
        if pool.owner == os.getpid():
            pool.close()


math_verify_reward = MathVerifyReward()
"""The default :class:`MathVerifyReward` (5 s timeout); its pool starts on first use."""
