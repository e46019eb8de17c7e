"""Scoring a batch: reward functions loaded by name or dotted path, called with TRL's
signature and summed (:func:`compute_rewards`).

The built-in reward functions and the :class:`~astarpo.llm.rewards.builtin.RewardReport` side
channel are in :mod:`astarpo.llm.rewards.builtin`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from astarpo.llm.rewards.builtin import RewardFunc, RewardReport

__all__ = [
    "BUILTIN_REWARDS",
    "RewardTimeoutError",
    "accepted_kwargs",
    "as_reward_funcs",
    "compute_rewards",
    "load_reward",
    "reward_name",
    "reward_path",
]


BUILTIN_REWARDS: dict[str, str] = {
    "math_verify": "astarpo.llm.rewards.math_verify:math_verify_reward",
    "gsm8k": "astarpo.llm.rewards.builtin:gsm8k_reward",
    "exact_match": "astarpo.llm.rewards.builtin:exact_match_reward",
    "scratchpad": "astarpo.llm.rewards.scratchpad:scratchpad_reward",
}


def load_reward(spec: str) -> RewardFunc:
    """The reward function named by ``"package.module:function"`` (or a built-in short name).

    Short names: ``math_verify``, ``gsm8k``, ``exact_match``, ``scratchpad``.

    Raises:
        ValueError: if ``spec`` has no ``:`` or the attribute is not callable.
        ImportError: if the module cannot be imported (the cause is chained).
        AttributeError: if the module has no such function.
    """
    spec = BUILTIN_REWARDS.get(spec, spec)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(
            f"reward {spec!r} must be 'package.module:function' or one of "
            f"{sorted(BUILTIN_REWARDS)}."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(
            f"cannot import module {module_name!r} of reward {spec!r}: {e}. Is it on PYTHONPATH?"
        ) from e
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise AttributeError(f"module {module_name!r} has no {attr!r} (reward {spec!r}).")
        fn = getattr(fn, part)
    if not callable(fn):
        raise ValueError(f"reward {spec!r} is not callable (got {type(fn).__name__}).")
    return fn


def as_reward_funcs(reward_funcs: Any) -> list[Callable[..., Any]]:
    """``reward_funcs`` as a list: one callable or name, or a list of them (names resolved
    with :func:`load_reward`).

    Raises:
        TypeError: if an entry is neither callable nor a name.
    """
    items = (
        [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else reward_funcs
    )
    out = []
    for i, f in enumerate(list(items)):
        if isinstance(f, str):
            f = load_reward(f)
        if not callable(f):
            raise TypeError(f"reward_funcs[{i}] is a {type(f).__name__}, not a callable.")
        out.append(f)
    return out


def reward_name(fn: RewardFunc) -> str:
    """The name used in metrics: the function's ``__name__`` (of the wrapped function for a
    ``functools.partial``), or its class name."""
    inner = getattr(fn, "func", fn) if isinstance(fn, functools.partial) else fn
    return str(getattr(inner, "__name__", type(inner).__name__))


class RewardTimeoutError(TimeoutError):
    """A reward function did not return within its deadline (``reward_timeout``)."""


class _DeadlineWorker:
    """A daemon thread that runs reward calls handed to it with a :class:`Future`, reused from
    call to call (starting a thread per call cost 1 to 2.5 ms per training step on a shared CPU).

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit, so one hung reward
    would keep the process from exiting. A worker is reused only after its call returned in
    time: one past its deadline is abandoned (it may never return).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child has none of its parent's threads
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="reward deadline worker", daemon=True).start()

    def _run(self) -> None:
        while True:
            call, future = self.jobs.get()
            try:
                future.set_result(call())
            except BaseException as e:  # re-raised in the caller's thread by result()
                future.set_exception(e)
            del call, future  # keep no reference to the finished call's data


_idle_workers: list[_DeadlineWorker] = []
_idle_lock = threading.Lock()


def _call_with_deadline(fn: RewardFunc, kwargs: dict[str, Any], timeout: float) -> Any:
    """``fn(**kwargs)``, in a (reused) daemon thread when ``timeout > 0``: a call past the
    deadline raises :class:`RewardTimeoutError` (the thread is abandoned; a process exits past
    it)."""
    if timeout <= 0 or getattr(fn, "has_own_timeout", False):
        return fn(**kwargs)
    with _idle_lock:
        mine = [w for w in _idle_workers if w.pid == os.getpid()]
        _idle_workers[:] = mine[:-1]
    worker = mine[-1] if mine else _DeadlineWorker()
    future: Future[Any] = Future()
    worker.jobs.put((functools.partial(fn, **kwargs), future))
    try:
        return future.result(timeout)
    except FutureTimeout:
        if future.done():  # the reward itself raised a TimeoutError: its own error
            raise
        raise RewardTimeoutError(
            f"reward {reward_path(fn)} did not return within {timeout:g} s on a batch of "
            f"{len(kwargs.get('completions', ()))} completions (reward_timeout); the run is "
            "stopped. Fix the function (does it wait on a lock, a server, input?) or raise "
            "reward_timeout."
        ) from None
    finally:
        if future.done():
            with _idle_lock:
                _idle_workers.append(worker)


def _reward_values(out: Any, name: str, b: int) -> list[Any]:
    """The ``b`` values a reward returned for a batch, as a list (a list, tuple or array).

    Raises:
        ValueError: naming the reward, when it returned ``None``, a single number, a string or
            another non-sequence, or a sequence of the wrong length.
    """
    try:
        if isinstance(out, (str, bytes, Mapping)):
            raise TypeError
        values = list(out)
    except TypeError:  # None, a single number, a 0-d array, ...
        raise ValueError(
            f"reward {name!r} returned {out!r:.60} ({type(out).__name__}) for a batch of {b} "
            f"completions; it must return a list of {b} numbers, one per completion (None in "
            "the list marks an unscored item). Fix the function's return statement."
        ) from None
    if len(values) != b:
        raise ValueError(f"reward {name!r} returned {len(values)} values for {b} completions.")
    return values


def _to_float(v: Any, name: str, i: int) -> float:
    if v is None:
        return 0.0
    if isinstance(v, (str, bytes)):  # float("1") would pass: a text is never a reward
        raise ValueError(
            f"reward {name!r} returned {v!r} ({type(v).__name__}) for completion {i}; a reward "
            "must return numbers, not text: return float(...) (or None for an unscored item)."
        )
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(
            f"reward {name!r} returned {v!r} ({type(v).__name__}) for completion {i}; a reward "
            "must return a list of numbers (or None for unscored items)."
        ) from None
    return x


def reward_path(fn: RewardFunc) -> str:
    """The full dotted path of a reward, ``package.module:qualname``: what a V* table's
    provenance and a run's config record, so two rewards with the same ``__name__`` are told
    apart. A callable object with a ``__name__`` (e.g. ``MathVerifyReward``) is named by its
    class's module and that name; ``functools.partial`` by its function."""
    inner = getattr(fn, "func", None)
    if inner is not None and callable(inner) and type(fn).__name__ == "partial":
        return reward_path(inner) + "(partial)"
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{module}:{qual or type(fn).__qualname__}"


def accepted_kwargs(fn: RewardFunc, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``kwargs`` that ``fn`` accepts: all of them when it takes ``**kwargs``
    (or its signature cannot be read), else only its named parameters. So a reward may declare
    just the columns it reads (``def r(completions, completion_ids): ...``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return dict(kwargs)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return dict(kwargs)
    names = {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    return {k: v for k, v in kwargs.items() if k in names}


def _eos_cut(ids: Sequence[int], eos: set[int]) -> list[int]:
    out = []
    for t in ids:
        out.append(int(t))
        if t in eos:
            break
    return out


def compute_rewards(
    reward_funcs: Sequence[RewardFunc],
    prompts: Sequence[str],
    completions: Sequence[str],
    columns: Mapping[str, Sequence[Any]],
    weights: Sequence[float] | None = None,
    *,
    completion_ids: Sequence[Sequence[int]] | None = None,
    truncated: Sequence[bool] | None = None,
    eos_token_ids: Sequence[int] = (),
    timeout: float = 0.0,
) -> tuple[np.ndarray, dict[str, float]]:
    """Sum of the reward functions over a batch, with ``None`` scored as 0 and counted.

    .. math:: r_b = \\sum_f w_f \\, r_f(x_b, y_b), \\qquad r_f = 0 \\text{ where it is None}

    Each function is called with TRL's keyword arguments ``prompts``, ``completions``,
    ``completion_ids`` (token ids up to and including the first EOS), ``truncated`` (no EOS
    within the token budget) and the dataset's other ``columns``, plus ``report=RewardReport()``;
    a function gets only the arguments its signature names unless it takes ``**kwargs``
    (:func:`accepted_kwargs`).

    Args:
        reward_funcs: Reward functions (TRL signature).
        prompts: ``[B]`` prompt texts.
        completions: ``[B]`` completion texts.
        columns: Other columns, each ``[B]`` (e.g. ``{"answer": [...]}``).
        weights: Weight of each function (default all 1).
        completion_ids: ``[B]`` generated token ids (passed only when given).
        truncated: ``[B]`` whether each response hit the token budget (passed only when given).
        eos_token_ids: ``completion_ids`` are cut after the first of these (the stop set).
        timeout: Deadline in seconds of each function's call (0 = none); functions with their
            own per-item timeout (``has_own_timeout``, e.g. math-verify) are called directly.

    Returns:
        ``(rewards, metrics)``: rewards float64 ``[B]``; metrics ``reward/mean``, ``reward/std``
        and per function ``rewards/<name>/mean``, ``rewards/<name>/none`` (count of unscored
        items) and ``rewards/<name>/<reason>`` (counts from its report: ``timeout``,
        ``unparsable``, ...).

    Raises:
        ValueError: on length mismatches, no functions, or a function returning the wrong
            number of values, a non-number (the function and the item named) or a non-finite
            value.
        RewardTimeoutError: a function ran past ``timeout``.
    """
    b = len(completions)
    if not reward_funcs:
        raise ValueError("reward_funcs is empty; give at least one reward function.")
    if len(prompts) != b:
        raise ValueError(f"prompts has {len(prompts)} entries but completions has {b}.")
    for name, col in columns.items():
        if len(col) != b:
            raise ValueError(f"column {name!r} has {len(col)} entries, expected {b}.")
    w = [1.0] * len(reward_funcs) if weights is None else [float(x) for x in weights]
    if len(w) != len(reward_funcs):
        raise ValueError(f"{len(w)} weights for {len(reward_funcs)} reward functions.")
    given: dict[str, Any] = {"prompts": list(prompts), "completions": list(completions)}
    if completion_ids is not None:
        eos = {int(t) for t in eos_token_ids}
        given["completion_ids"] = [_eos_cut(ids, eos) for ids in completion_ids]
    if truncated is not None:
        given["truncated"] = [bool(t) for t in truncated]
    for name, col in given.items():
        if len(col) != b:
            raise ValueError(f"{name} has {len(col)} entries, expected {b}.")
    total = np.zeros(b, dtype=np.float64)
    metrics: dict[str, float] = {}
    for fn, wf in zip(reward_funcs, w, strict=True):
        name = reward_name(fn)
        report = RewardReport()
        kwargs = accepted_kwargs(fn, {**columns, **given, "report": report})
        out = _reward_values(_call_with_deadline(fn, kwargs, timeout), name, b)
        values = np.array([_to_float(v, name, i) for i, v in enumerate(out)], dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValueError(f"reward {name!r} returned NaN or infinite values.")
        total += wf * values
        metrics[f"rewards/{name}/mean"] = float(values.mean()) if b else 0.0
        metrics[f"rewards/{name}/none"] = float(sum(v is None for v in out))
        for reason, count in report.counts.items():
            metrics[f"rewards/{name}/{reason}"] = float(count)
    metrics["reward/mean"] = float(total.mean()) if b else 0.0
    metrics["reward/std"] = float(total.std()) if b else 0.0
    return total, metrics
