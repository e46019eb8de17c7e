"""A pool of killable worker processes: run a function on items with a hard per-item deadline.

Why: math-verify's own timeouts use ``signal.alarm``, which only works on the main thread and
cannot interrupt a long C-level computation (``\\boxed{9^{9^{9^{9^{9}}}}}`` runs for minutes
inside one big-integer power). A reward that may hang a trainer needs a deadline that is
enforced from outside: the only reliable one is to run the work in another process and kill
that process when the deadline passes.

Design:

* Each worker is a fresh interpreter started with :class:`subprocess.Popen` (fork + exec, so it
  is safe while torch or CUDA threads run in the parent and it never re-imports the caller's
  ``__main__``). It imports ``module:function`` once, answers ``ready`` and then serves one item
  at a time over its stdin/stdout pipes, one JSON line per message. Anything the function prints
  goes to the worker's stderr, never into the protocol.
* :meth:`KillablePool.map` hands items to free workers and waits on their pipes with
  :func:`select.select`; a worker still busy at its item's deadline is killed (``SIGKILL``), the
  item is reported as ``"timeout"`` and a fresh worker takes the slot. Nothing uses signals in
  the calling process, so ``map`` works from any thread; several threads may call it at once
  (each checks out its own workers).
* Workers are kept between calls (start-up, about a second, is paid once per worker) and are
  killed by :meth:`KillablePool.close`, when the pool is garbage collected, or at interpreter
  exit. A worker whose parent died without that cleanup exits at end of input or within a
  second by its watchdog thread (after its current C-level computation, which holds the GIL,
  returns). ``PR_SET_PDEATHSIG`` is not used: Linux sends it when the *thread* that started
  the worker ends, which would kill workers started from short-lived threads.
* Workers ignore SIGINT and SIGTERM: a Ctrl-C or a preemption that reaches the whole process
  group lets the parent finish its step with them (:mod:`astarpo.llm.parallel.signals`).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Literal

__all__ = ["KillablePool", "TaskResult"]

# Worker start-up: put the package root on sys.path; with argv[3] == "1" register ``astarpo`` as a
# bare namespace so that its __init__ (which imports torch, seconds of start-up) is not run.
_BOOT = """
import os, sys, types
sys.path.insert(0, sys.argv[1])
if sys.argv[3] == "1":
    pkg = types.ModuleType("astarpo")
    pkg.__path__ = [os.path.join(sys.argv[1], "astarpo")]
    sys.modules["astarpo"] = pkg
from astarpo.llm.data.pool import worker_main
worker_main(sys.argv[2])
"""
_PACKAGE_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


@dataclass(frozen=True)
class TaskResult:
    """Outcome of one item.

    Attributes:
        status: ``"ok"`` (``value`` holds the function's result), ``"timeout"`` (the worker was
            killed at the deadline) or ``"error"`` (the function raised or the worker died;
            ``error`` says why).
        value: The function's JSON-decoded return value when ``status == "ok"``.
        error: A one-line description when ``status == "error"``.
    """

    status: Literal["ok", "timeout", "error"]
    value: Any = None
    error: str = ""


class _Worker:
    """One worker process and its line buffer (used only by the thread that checked it out)."""

    def __init__(self, target: str, light: bool) -> None:
        self.target = target
        self.light = light
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.buffer = b""
        self.ready = False

    def start(self) -> None:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("MKL_NUM_THREADS", "1")
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, _PACKAGE_ROOT, self.target, "1" if self.light else "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            close_fds=True,
        )
        self.buffer = b""
        self.ready = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def fileno(self) -> int:
        assert self.proc is not None and self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, item: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"item": item}).encode() + b"\n")
        self.proc.stdin.flush()

    def read_lines(self) -> tuple[list[bytes], bool]:
        """Read what is available; return complete lines and whether the pipe hit EOF."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            return [], True
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return lines, False

    def stderr_tail(self, n: int = 2000) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - n))
        return self.stderr.read().decode(errors="replace").strip()

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
        if self.stderr is not None:
            self.stderr.close()
        self.proc, self.stderr, self.buffer, self.ready = None, None, b"", False


def _kill_all(workers: list[_Worker], owner_pid: int) -> None:
    if os.getpid() != owner_pid:  # a forked child never kills its parent's workers
        return
    for w in workers:
        w.kill()


class KillablePool:
    """Worker processes that run ``module:function`` on items, each under a hard deadline.

    The function takes one JSON-serializable item and returns a JSON-serializable value. It must
    be importable by name in a fresh interpreter (the ``astarpo`` package root is put on
    ``sys.path``).

    Args:
        target: ``"package.module:function"`` run in the workers.
        n_workers: Worker processes (items run in parallel up to this). Default 2.
        timeout: Default per-item deadline in seconds, measured from when the item is handed to
            a ready worker. Default 5.0.
        start_timeout: Seconds a new worker may take to import the target and answer ready.
            Default 120.
        skip_package_init: Start workers without running ``astarpo/__init__.py`` (which imports
            torch): ``astarpo`` is registered as a bare namespace, so the target may import
            ``astarpo.<submodule>`` but not names re-exported by the package. Saves seconds per
            worker start. Default False.

    Example:
        >>> pool = KillablePool("astarpo.llm.data.math_verify_worker:score", n_workers=2)
        >>> results = pool.map([{"completion": "\\\\boxed{2}", "gold": "2"}])  # doctest: +SKIP
        >>> pool.close()
    """

    def __init__(
        self,
        target: str,
        n_workers: int = 2,
        timeout: float = 5.0,
        start_timeout: float = 120.0,
        skip_package_init: bool = False,
    ) -> None:
        if ":" not in target:
            raise ValueError(f"target must be 'module:function', got {target!r}.")
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}.")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}.")
        self.target = target
        self.n_workers = n_workers
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self._workers = [_Worker(target, skip_package_init) for _ in range(n_workers)]
        self._free: list[_Worker] = list(self._workers)
        self._cond = threading.Condition()
        self._closed = False
        self.owner_pid = os.getpid()
        self._finalizer = weakref.finalize(self, _kill_all, self._workers, self.owner_pid)

    def __enter__(self) -> KillablePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill every worker. Further calls to :meth:`map` raise ``RuntimeError``."""
        with self._cond:
            self._closed = True
        self._finalizer()

    @contextmanager
    def _checkout(self, k: int) -> Iterator[list[_Worker]]:
        with self._cond:
            while not self._free and not self._closed:
                self._cond.wait()
            if self._closed:
                raise RuntimeError("KillablePool is closed; create a new one.")
            taken = self._free[:k]
            del self._free[:k]
        try:
            yield taken
        finally:
            with self._cond:
                self._free.extend(taken)
                self._cond.notify_all()

    def map(
        self,
        items: Sequence[Any],
        timeout: float | None = None,
        on_result: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]:
        """Run the target on every item; each item gets at most ``timeout`` seconds.

        Args:
            items: JSON-serializable items, ``[B]``.
            timeout: Per-item deadline in seconds (default: the pool's ``timeout``).
            on_result: Optional callback ``(index, result)`` called as each item finishes.

        Returns:
            One :class:`TaskResult` per item, in order, ``[B]``.

        Raises:
            RuntimeError: if a worker cannot start (its stderr is quoted), the pool is closed,
                or it is used in a forked child of the process that made it.
        """
        if os.getpid() != self.owner_pid:
            raise RuntimeError(
                "this KillablePool belongs to the parent of a forked process; create a new one."
            )
        limit = self.timeout if timeout is None else float(timeout)
        if not limit > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {limit}.")
        results: list[TaskResult | None] = [None] * len(items)
        if not items:
            return []
        with self._checkout(min(self.n_workers, len(items))) as workers:
            try:
                self._run(workers, items, limit, results, on_result)
            except BaseException:
                # An item may still be in flight (e.g. on KeyboardInterrupt): its late answer must
                # never be read as the answer to a later item, so these workers are replaced.
                for w in workers:
                    w.kill()
                raise
        return [r if r is not None else TaskResult("error", error="lost") for r in results]

    def _run(
        self,
        workers: list[_Worker],
        items: Sequence[Any],
        limit: float,
        results: list[TaskResult | None],
        on_result: Callable[[int, TaskResult], None] | None,
    ) -> None:
        pending = deque(range(len(items)))
        busy: dict[_Worker, tuple[int, float]] = {}
        starting: dict[_Worker, float] = {}

        def finish(i: int, res: TaskResult) -> None:
            results[i] = res
            if on_result is not None:
                on_result(i, res)

        while pending or busy:
            now = time.monotonic()
            for w in workers:
                if w in busy or w in starting or not pending:
                    continue
                if not w.alive:
                    w.kill()
                    w.start()
                if not w.ready:
                    starting[w] = now + self.start_timeout
                    continue
                i = pending.popleft()
                try:
                    w.send(items[i])
                except (BrokenPipeError, OSError):
                    pending.appendleft(i)
                    w.kill()
                    continue
                busy[w] = (i, now + limit)
            waiting = list(busy) + list(starting)
            if not waiting:
                continue
            deadline = min([d for _, d in busy.values()] + list(starting.values()))
            ready, _, _ = select.select(waiting, [], [], max(0.0, deadline - time.monotonic()))
            for w in ready:
                lines, eof = w.read_lines()
                for line in lines:
                    msg = json.loads(line)
                    if w in starting:
                        del starting[w]
                        w.ready = True
                    elif w in busy:
                        i, _ = busy.pop(w)
                        if "value" in msg:
                            finish(i, TaskResult("ok", value=msg["value"]))
                        else:
                            finish(i, TaskResult("error", error=str(msg.get("error"))))
                if eof:
                    if w in starting:
                        err = w.stderr_tail()
                        w.kill()
                        raise RuntimeError(
                            f"A worker for {self.target!r} exited before it was ready:\n{err}"
                        )
                    if w in busy:
                        i, _ = busy.pop(w)
                        code = w.proc.poll() if w.proc else None
                        finish(i, TaskResult("error", error=f"worker exited (code {code})"))
                    w.kill()
            now = time.monotonic()
            for w, (i, d) in list(busy.items()):
                if now >= d:
                    del busy[w]
                    w.kill()
                    finish(i, TaskResult("timeout"))
            for w, d in list(starting.items()):
                if now >= d:
                    w.kill()
                    raise RuntimeError(
                        f"A worker for {self.target!r} did not start within "
                        f"{self.start_timeout:.0f} s."
                    )


def worker_main(target: str) -> None:  # pragma: no cover - runs in the worker process
    """Serve items on stdin, answers on the original stdout; exits at end of input."""
    parent = os.getppid()

    def watchdog() -> None:  # exit when the parent is gone (no PR_SET_PDEATHSIG: it fires
        while True:  # when the *thread* that started us ends, and map() runs in any thread)
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watchdog, daemon=True).start()
    for s in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C or a preemption reaching the whole
        signal.signal(s, signal.SIG_IGN)  # group: the parent finishes its step with us
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the function's prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    module_name, _, fn_name = target.partition(":")
    fn = getattr(importlib.import_module(module_name), fn_name)
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        try:
            value = fn(json.loads(line)["item"])
            out = json.dumps({"value": value})
        except Exception as e:
            out = json.dumps({"error": f"{type(e).__name__}: {e}"[:500]})
        proto.write(out + "\n")
