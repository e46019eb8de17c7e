"""The scratchpad addition format and its reward (built-in reward name ``scratchpad``).

A problem is two zero-padded operands of the same width, ``"0123+4567="``. The worked solution
writes one step per digit, least significant first, each with its index, the two digits, the
carry in, their sum and the carry out, then the final answer::

    d0:3+7+0=10 c1,d1:2+6+1=09 c0,d2:1+5+0=06 c0,d3:0+4+0=04 c0,ans=04690

With ``d`` digits per operand that is ``15 d + d + 5`` characters (69 for ``d = 4``; the
character tokenizer of :mod:`astarpo.llm.models.toy` makes one token of each, plus EOS). The
reward is exact: a response scores 1 only when it is the worked solution of its prompt, its
final answer equals the gold answer, and it ended with EOS; any malformed, wrong or truncated
scratchpad scores 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from astarpo.llm.rewards.builtin import RewardReport, completion_text

__all__ = ["final_answer", "parse_problem", "scratchpad_reward", "scratchpad_solution"]

_PROBLEM_RE = re.compile(r"^\s*([0-9]+)\+([0-9]+)=\s*$")
_ANS_RE = re.compile(r"ans=([0-9]+)$")


def scratchpad_solution(a: int, b: int, digits: int) -> str:
    """The worked solution of ``a + b`` with ``digits``-digit operands (see the module doc).

    Args:
        a, b: Operands, each in ``[0, 10**digits)``.
        digits: Operand width.

    Returns:
        The steps ``d{i}:{a_i}+{b_i}+{c_i}={s:02d} c{s // 10},`` for ``i = 0 .. digits-1``
        (``s = a_i + b_i + c_i``, ``c_0 = 0``), then ``ans=`` and ``a + b`` zero-padded to
        ``digits + 1`` digits.

    Raises:
        ValueError: an operand is negative or has more than ``digits`` digits.
    """
    if digits < 1 or not (0 <= a < 10**digits and 0 <= b < 10**digits):
        raise ValueError(f"operands must be in [0, 10**{digits}), got {a} and {b}.")
    steps, carry = [], 0
    for i in range(digits):
        ai, bi = (a // 10**i) % 10, (b // 10**i) % 10
        s = ai + bi + carry
        steps.append(f"d{i}:{ai}+{bi}+{carry}={s:02d} c{s // 10},")
        carry = s // 10
    return "".join(steps) + f"ans={a + b:0{digits + 1}d}"


def parse_problem(prompt: str) -> tuple[int, int, int] | None:
    """``(a, b, digits)`` of a prompt ``"0123+4567="``, or None when it is not one (operands of
    different widths included)."""
    m = _PROBLEM_RE.match(prompt)
    if m is None or len(m.group(1)) != len(m.group(2)):
        return None
    return int(m.group(1)), int(m.group(2)), len(m.group(1))


def final_answer(text: str) -> int | None:
    """The number after the final ``ans=`` of a worked solution, or of a bare number; None when
    there is neither."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    m = _ANS_RE.search(text)
    return int(m.group(1)) if m else None


def scratchpad_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    answer: Sequence[Any],
    truncated: Sequence[bool] | None = None,
    report: RewardReport | None = None,
    **columns: Any,
) -> list[float | None]:
    """Exact scratchpad correctness: 1.0 iff the response is its prompt's worked solution
    (:func:`scratchpad_solution`, character for character), its final answer equals the gold,
    and it ended with EOS (``truncated`` false); else 0.0.

    The gold ``answer`` may be the worked solution or the bare sum (``"4690"`` or
    ``"04690"``). A prompt that is not ``"<a>+<b>="`` with operands of one width, or a gold
    without a number, scores None (reasons ``"unparsable_prompt"``, ``"unparsable_gold"``).

    Args:
        prompts: ``[B]`` prompts.
        completions: ``[B]`` decoded responses (without special tokens).
        answer: ``[B]`` gold answers.
        truncated: ``[B]`` whether each response hit the token budget without EOS (required).
        report: Optional :class:`~astarpo.llm.rewards.builtin.RewardReport` for the reasons.

    Returns:
        1.0, 0.0 or None per completion, ``[B]``.

    Raises:
        ValueError: ``truncated`` is missing, or the lengths differ.
    """
    if truncated is None:
        raise ValueError(
            "scratchpad_reward needs truncated=[...] (one bool per completion: no EOS within "
            "the budget); the trainer, Stage 1 and eval pass it."
        )
    if not len(prompts) == len(completions) == len(answer) == len(truncated):
        raise ValueError(
            f"prompts ({len(prompts)}), completions ({len(completions)}), answer "
            f"({len(answer)}) and truncated ({len(truncated)}) must have one entry each."
        )
    scores: list[float | None] = []
    for prompt, completion, gold, cut in zip(prompts, completions, answer, truncated, strict=True):
        problem, want = parse_problem(prompt), final_answer(str(gold))
        if problem is None or want is None:
            scores.append(None)
            if report is not None:
                report.add("unparsable_prompt" if problem is None else "unparsable_gold")
            continue
        a, b, digits = problem
        ok = completion_text(completion) == scratchpad_solution(a, b, digits)
        scores.append(1.0 if ok and a + b == want and not cut else 0.0)
    return scores
