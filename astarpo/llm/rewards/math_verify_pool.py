"""The helper process that runs the worker pool of
:class:`~astarpo.llm.rewards.math_verify.MathVerifyReward`.

The reward starts it as ``python -m astarpo.llm.rewards.math_verify_pool --timeout T
--workers N`` and talks to it over its stdin and stdout. Because this module is the helper's
``__main__`` (run by name), the pool's worker processes import it, never the caller's script:
a reward called from a plain ``python script.py`` without ``if __name__ == "__main__":`` does
not re-run that script in its workers.

The helper runs a ``pebble.ProcessPool`` whose workers are forked from a ``multiprocessing``
forkserver that has imported :mod:`astarpo.llm.rewards.math_verify_worker` (the only module
that imports math-verify) once; each item runs under a hard wall-clock ``timeout``, and a worker
still busy at the deadline is killed and replaced. The helper itself never runs math-verify, so
it always sees the end of its stdin: when the caller closes it, exits or dies, the helper stops
its workers and exits.

Protocol (:func:`write_frame`, :func:`read_frame`): the caller sends lists of
``(key, item)`` pairs, an item as :func:`~astarpo.llm.rewards.math_verify_worker.score` takes
it; the helper answers each item with one ``(key, result)``, the result as ``score`` returns it
or ``{"reason": "timeout"}`` (killed at the deadline) or ``{"reason": "error"}`` (raised in
the worker, or the worker died).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import IO, Any

__all__ = ["WORKER_MODULE", "main", "read_frame", "write_frame"]

WORKER_MODULE = "astarpo.llm.rewards.math_verify_worker"
"""The module the pool's forkserver imports once (its workers start warm)."""

_HEADER = struct.Struct("<Q")  # the byte length of the pickle that follows


def write_frame(stream: IO[bytes], obj: Any) -> None:
    """Write ``obj`` to ``stream`` as one frame (its pickle's length, then the pickle) and flush.

    Args:
        stream: A binary stream, e.g. a pipe.
        obj: Any picklable object.
    """
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any | None:
    """Read one frame written by :func:`write_frame`.

    Args:
        stream: A binary stream, e.g. a pipe.

    Returns:
        The unpickled object, or ``None`` at the end of the stream.

    Raises:
        EOFError: The stream ended inside a frame (its writer died while writing).
    """
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise EOFError("the stream ended inside a frame header")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError(f"the stream ended inside a frame ({len(data)} of {size} bytes)")
    return pickle.loads(data)


def main(argv: list[str] | None = None) -> None:
    """Run the helper: score the items read from stdin until it ends, then stop the pool.

    Args:
        argv: ``["--timeout", T, "--workers", N]`` (default: ``sys.argv[1:]``).
    """
    from pebble import ProcessPool

    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name if __spec__ else __name__}")
    parser.add_argument("--timeout", type=float, required=True, help="per-item deadline (s)")
    parser.add_argument("--workers", type=int, required=True, help="worker processes")
    args = parser.parse_args(argv)
    # Ctrl-C is the caller's to handle (it finishes its step with these workers); the caller
    # also starts the helper in its own session, so a terminal's SIGINT does not reach it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")  # the protocol's stream, not inherited
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to stderr, not to it
    requests = sys.stdin.buffer
    lock = threading.Lock()

    def send(key: int, value: dict[str, Any]) -> None:
        with lock:
            try:
                write_frame(replies, (key, value))
            except (OSError, ValueError):  # the caller is gone: the end of stdin follows
                pass

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([WORKER_MODULE])
    pool = ProcessPool(max_workers=args.workers, context=context, initializer=_ignore_interrupts)
    try:
        while (batch := read_frame(requests)) is not None:
            for key, item in batch:
                future = pool.schedule(_score, (item,), timeout=args.timeout)
                future.add_done_callback(functools.partial(_reply, send, key))
    finally:
        pool.stop()
        pool.join()


def _reply(send: Callable[[int, dict[str, Any]], None], key: int, future: Future[Any]) -> None:
    """Send one item's result when its future is done (in the pool's thread)."""
    try:
        value = future.result()
    except FutureTimeout:  # the worker was killed at the deadline
        value = {"reason": "timeout"}
    except Exception:  # raised in the worker, the worker died, or the pool stopped
        value = {"reason": "error"}
    send(key, value)


def _ignore_interrupts() -> None:
    """Initializer of each pool worker: ignore SIGINT, so that a Ctrl-C reaching the worker
    lets the caller finish its step with its workers (:mod:`astarpo.llm.parallel.signals`).
    SIGTERM keeps pebble's handler: the pool stops a timed-out worker with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _score(item: dict[str, Any]) -> dict[str, Any]:
    """Score one item in a pool worker (math-verify is imported there only, never here)."""
    from astarpo.llm.rewards.math_verify_worker import score

    return score(item)


if __name__ == "__main__":
    main()
