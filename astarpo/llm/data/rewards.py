"""Rule-based rewards with TRL's signature (math-verify, GSM8K, exact match).

Every reward function here has the signature of TRL's ``reward_funcs``::

    fn(prompts: list[str], completions: list[str], **columns) -> list[float | None]

where ``columns`` are the dataset's other columns, one value per completion (``answer`` holds the
gold answer). A completion may also be a list of chat messages (TRL's conversational format);
its last message's content is scored. ``None`` means "could not be scored" (no answer found,
a timeout, an error): :func:`~astarpo.llm.data.scoring.compute_rewards` scores it 0 and
counts it.

Why an item was not scored travels through an explicit side channel: a function that declares a
keyword parameter ``report`` receives a fresh :class:`RewardReport` from ``compute_rewards``
and counts reasons in it (``"timeout"``, ``"unparsable"``, ...). There is no global counter: two
threads scoring at once each get their own report.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from pebble import ProcessPool

_WORKER_MODULE = "astarpo.llm.data.math_verify_worker"

__all__ = [
    "MathVerifyReward",
    "RewardFunc",
    "RewardReport",
    "completion_text",
    "exact_match_reward",
    "gsm8k_reward",
    "math_verify_reward",
]

RewardFunc = Callable[..., list[Any]]


@dataclass
class RewardReport:
    """Counts of why items were not scored, filled by a reward function during one call.

    Attributes:
        counts: Reason -> number of items, e.g. ``{"timeout": 1, "unparsable": 3}``.
    """

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str, n: int = 1) -> None:
        """Count ``n`` items for ``reason``."""
        self.counts[reason] = self.counts.get(reason, 0) + n


def completion_text(completion: Any) -> str:
    """Text of a completion: a string, or the last message's content of a conversational
    completion (TRL passes ``[{"role": "assistant", "content": ...}]`` for chat datasets)."""
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def _check_batch(prompts: Sequence[str], completions: Sequence[str], answer: Sequence[Any]) -> None:
    if len(completions) != len(answer) or len(prompts) != len(completions):
        raise ValueError(
            f"prompts ({len(prompts)}), completions ({len(completions)}) and answer "
            f"({len(answer)}) must have one entry per completion."
        )


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
        _check_batch(prompts, completions, answer)
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
    from astarpo.llm.data.math_verify_worker import score

    return score(item)


math_verify_reward = MathVerifyReward()
"""The default :class:`MathVerifyReward` (5 s timeout); its pool starts on first use."""

_GSM8K_RE = re.compile(r"####\s*\$?\s*(-?[0-9][0-9,]*(?:\.[0-9]+)?|-?\.[0-9]+)")


def _gsm8k_number(text: str) -> float | None:
    matches = _GSM8K_RE.findall(text)
    if not matches:
        return None
    try:
        return float(matches[-1].replace(",", ""))
    except ValueError:
        return None


def gsm8k_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    answer: Sequence[Any],
    report: RewardReport | None = None,
    **columns: Any,
) -> list[float | None]:
    """GSM8K correctness: the last ``#### number`` of the completion equals the gold number.

    Commas are stripped (``#### 1,000`` is 1000) and numbers are compared as floats
    (``#### 18.0`` matches ``18``). The gold may be a bare number or a full GSM8K solution
    ending in ``#### n``. A completion without ``#### number`` scores ``None`` (reason
    ``"unparsable"``); an unreadable gold gives ``None`` (``"unparsable_gold"``).

    Args:
        prompts: Prompt of each completion, ``[B]`` (unused).
        completions: Model responses, ``[B]``.
        answer: Gold answers, ``[B]``.
        report: Optional :class:`RewardReport` that receives the reasons.

    Returns:
        1.0, 0.0 or None per completion, ``[B]``.
    """
    _check_batch(prompts, completions, answer)
    scores: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        gold_s = str(gold)
        g = _gsm8k_number(gold_s) if "####" in gold_s else _gsm8k_number("#### " + gold_s.strip())
        p = _gsm8k_number(completion_text(completion))
        if g is None or p is None:
            scores.append(None)
            if report is not None:
                report.add("unparsable_gold" if g is None else "unparsable")
            continue
        scores.append(1.0 if math.isclose(p, g, rel_tol=1e-9, abs_tol=1e-9) else 0.0)
    return scores


def exact_match_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    answer: Sequence[Any],
    truncated: Sequence[bool] | None = None,
    require_eos: bool = False,
    **columns: Any,
) -> list[float | None]:
    """Exact match after stripping whitespace: ``completion.strip() == answer.strip()``.

    The reward of the toy addition task (``"12+34="`` -> ``"46"``), where the completion is the
    decoded response without special tokens. With ``require_eos=True`` a response that never
    emitted EOS (``truncated``) scores 0 even when its text matches, so a policy cannot earn the
    reward by running to the token budget; bind it with
    ``functools.partial(exact_match_reward, require_eos=True)``.

    Returns:
        1.0 or 0.0 per completion, ``[B]``.

    Raises:
        ValueError: if ``require_eos`` is set and ``truncated`` is not given.
    """
    _check_batch(prompts, completions, answer)
    if require_eos and truncated is None:
        raise ValueError("exact_match_reward(require_eos=True) needs truncated=[...] per item.")
    cut = [False] * len(completions) if not require_eos or truncated is None else truncated
    return [
        1.0 if completion_text(c).strip() == str(a).strip() and not t else 0.0
        for c, a, t in zip(completions, answer, cut, strict=True)
    ]
