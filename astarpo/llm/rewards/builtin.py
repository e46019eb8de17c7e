"""Rule-based rewards with TRL's signature (math-verify, GSM8K, exact match).

Every reward function here has the signature of TRL's ``reward_funcs``::

    fn(prompts: list[str], completions: list[str], **columns) -> list[float | None]

where ``columns`` are the dataset's other columns, one value per completion (``answer`` holds the
gold answer). A completion may also be a list of chat messages (TRL's conversational format);
its last message's content is scored. ``None`` means "could not be scored" (no answer found,
a timeout, an error): :func:`~astarpo.llm.rewards.scoring.compute_rewards` scores it 0 and
counts it.

Why an item was not scored travels through an explicit side channel: a function that declares a
keyword parameter ``report`` receives a fresh :class:`RewardReport` from ``compute_rewards``
and counts reasons in it (``"timeout"``, ``"unparsable"``, ...). There is no global counter: two
threads scoring at once each get their own report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "RewardFunc",
    "RewardReport",
    "check_batch",
    "completion_text",
    "exact_match_reward",
    "gsm8k_reward",
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


def check_batch(prompts: Sequence[str], completions: Sequence[str], answer: Sequence[Any]) -> None:
    """Raise ``ValueError`` unless ``prompts``, ``completions`` and ``answer`` match in length."""
    if len(completions) != len(answer) or len(prompts) != len(completions):
        raise ValueError(
            f"prompts ({len(prompts)}), completions ({len(completions)}) and answer "
            f"({len(answer)}) must have one entry per completion."
        )


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
    check_batch(prompts, completions, answer)
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
    check_batch(prompts, completions, answer)
    if require_eos and truncated is None:
        raise ValueError("exact_match_reward(require_eos=True) needs truncated=[...] per item.")
    cut = [False] * len(completions) if not require_eos or truncated is None else truncated
    return [
        1.0 if completion_text(c).strip() == str(a).strip() and not t else 0.0
        for c, a, t in zip(completions, answer, cut, strict=True)
    ]
