"""math-verify correctness scored in a pool of killable worker processes (built-in reward
``math_verify``).

:class:`MathVerifyReward` runs each item in a ``pebble`` worker under a hard deadline; the
workers run :mod:`astarpo.llm.rewards.math_verify_worker`, the only module that imports
math-verify.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pebble import ProcessPool

from astarpo.llm.rewards.builtin import RewardReport, check_batch, completion_text

_WORKER_MODULE = "astarpo.llm.rewards.math_verify_worker"

__all__ = ["MathVerifyReward", "math_verify_reward"]


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
    the call works from any thread. The workers are forked from a ``forkserver`` process (a
    clean interpreter that has imported math-verify once, not the caller with its torch or CUDA
    threads). The pool starts on the first call, is reused by later calls, and is stopped by
    :meth:`close` or at interpreter exit.

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
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}.")
        self.timeout = float(timeout)
        self.n_workers = n_workers or min(4, os.cpu_count() or 1)
        self.options = {
            "float_rounding": float_rounding,
            "numeric_precision": numeric_precision,
            "strict": strict,
        }
        self._pool: ProcessPool | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def _get_pool(self) -> ProcessPool:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():  # a forked child starts its own
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload([_WORKER_MODULE])  # if it is not running yet
                self._pool = ProcessPool(
                    max_workers=self.n_workers, context=context, initializer=_ignore_interrupts
                )
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
        """Stop the worker processes (a later call starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.stop()
            pool.join()

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
        pool = self._get_pool()
        futures = [pool.schedule(_score, (item,), timeout=self.timeout) for item in items]
        scores: list[float | None] = []
        for future in futures:
            try:
                value = future.result()
            except FutureTimeout:  # the worker was killed at the deadline
                value = {"reason": "timeout"}
            except Exception:  # raised in the worker, or the worker died
                value = {"reason": "error"}
            scores.append(float(value["score"]) if "score" in value else None)
            if "score" not in value:
                report.add(value["reason"])
        return scores


def _ignore_interrupts() -> None:
    """Initializer of each pool worker: ignore SIGINT, so that a Ctrl-C reaching the whole
    process group lets the parent finish its step with its workers
    (:mod:`astarpo.llm.parallel.signals`). SIGTERM keeps its default: the pool stops a
    timed-out worker with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _score(item: dict[str, Any]) -> dict[str, Any]:
    """Score one item in a pool worker (math-verify is imported there only, never here)."""
    from astarpo.llm.rewards.math_verify_worker import score

    return score(item)


math_verify_reward = MathVerifyReward()
"""The default :class:`MathVerifyReward` (5 s timeout); its pool starts on first use."""
