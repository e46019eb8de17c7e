"""Planted faults for the multi-process failure tests (tests/llm/parallel/test_failures.py).

``ASTARPO_TEST_FAULT="KIND:RANK:CALL"`` arms one fault on rank RANK at its CALL-th call (1-based)
of a reward or of ``generate``; with ``ASTARPO_TEST_FAULT_MARK=PATH`` it fires only while PATH
does not exist and creates it, so that rerunning the same command runs clean. Kinds:

* in the reward :func:`exact_reward` (used as ``--reward faults:exact_reward``): ``kill``
  (SIGKILL to this process), ``raise``, ``hang`` (sleeps), ``sigterm_parent`` (SIGTERM to the
  parent: ``torchrun``'s agent, which forwards it to every worker; the reward then returns 1 s
  later, so that the forwarded signal lands while this batch or step is running, as the tests
  mean it to: a signal after the last check is tested in tests/llm/parallel/test_interrupts.py),
  ``sigterm`` and ``sigint`` (to itself);
* in ``generate`` (installed by running ``python tests/llm/fault_main.py ...``): ``stall``.

The reward itself is an exact match of the completion with the answer, so a run with a fault
that fired and was resumed must equal a clean run.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

CALLS: dict[str, int] = {}


def armed(where: str, kinds: tuple[str, ...]) -> str | None:
    """The fault kind to fire now at ``where`` (``"reward"`` or ``"generate"``), or None."""
    spec = os.environ.get("ASTARPO_TEST_FAULT", "")
    if not spec:
        return None
    kind, rank, call = spec.split(":")
    if kind not in kinds or int(os.environ.get("RANK", "0")) != int(rank):
        return None
    CALLS[where] = CALLS.get(where, 0) + 1
    if CALLS[where] != int(call):
        return None
    mark = os.environ.get("ASTARPO_TEST_FAULT_MARK")
    if mark:
        if Path(mark).exists():
            return None
        Path(mark).write_text(f"{kind} at {where} call {call} on rank {rank} at {time.time()}\n")
    return kind


def fire(kind: str) -> None:
    """Do what ``kind`` says (see the module docstring)."""
    rank = os.environ.get("RANK", "0")
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "raise":
        raise RuntimeError(f"planted failure on rank {rank}")
    elif kind in ("hang", "stall"):
        time.sleep(10_000)
    elif kind == "sigterm_parent":
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(1.0)  # the forwarded signal arrives before this call returns
    elif kind == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
    elif kind == "sigint":
        os.kill(os.getpid(), signal.SIGINT)


def exact_reward(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the completion equals the answer, else 0.0 (with the planted fault)."""
    kind = armed("reward", ("kill", "raise", "hang", "sigterm_parent", "sigterm", "sigint"))
    if kind:
        fire(kind)
    return [
        1.0 if c.strip() == a.strip() else 0.0 for c, a in zip(completions, answer, strict=True)
    ]


def install_generate_fault() -> None:
    """Make ``HFGenerator.generate`` stall when ``ASTARPO_TEST_FAULT`` says ``stall``."""
    from astarpo.llm.rollout.hf import HFGenerator

    original = HFGenerator.generate

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        kind = armed("generate", ("stall",))
        if kind:
            fire(kind)
        return original(self, *args, **kwargs)

    HFGenerator.generate = generate  # type: ignore[method-assign]
