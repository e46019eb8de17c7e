"""The toy tasks' problems, built in code: 2-digit addition and the scratchpad addition.

* :func:`addition_task`: distinct 2-digit addition problems ``"12+34="`` with answers ``"46"``.
* :func:`scratchpad_task`: the same problems with longer operands whose answer is a worked
  solution, a step per digit (:mod:`astarpo.llm.rewards.scratchpad`): long responses.

The model they are made for is :mod:`astarpo.llm.models.toy`.
"""

from __future__ import annotations

import numpy as np

from astarpo.llm.rewards.scratchpad import scratchpad_solution

__all__ = ["SCRATCHPAD_POSITIONS", "addition_task", "scratchpad_task"]

#: ``max_position_embeddings`` of a toy model for :func:`scratchpad_task`: prompt
#: (``2 d + 2`` tokens) plus worked solution and EOS (``16 d + 6``) fit for operands of up to
#: 13 digits.
SCRATCHPAD_POSITIONS: int = 256


def addition_task(
    n: int, seed: int = 0, digits: int = 2, zero_pad: bool = False
) -> list[dict[str, str]]:
    """``n`` distinct addition problems with operands below ``10**digits``.

    Problems are drawn without replacement, so slicing one call (``rows[:k]``, ``rows[k:]``)
    gives disjoint train and held-out sets.

    With ``zero_pad=True`` operands have exactly ``digits`` digits and the answer
    ``digits + 1`` (``"07+34="`` -> ``"041"``): every digit sits at a fixed position, which a
    tiny model learns several times faster (the demo uses it; in a pilot, 600 SFT steps gave
    0.54 sampled accuracy padded against 0.05 unpadded).

    Args:
        n: Number of problems, at most ``100**digits``.
        seed: Seed of the draw.
        digits: Digits of each operand (2: operands 0..99).
        zero_pad: Fixed-width operands and answer.

    Returns:
        Rows ``{"problem": "12+34=", "answer": "46", "prompt": "12+34="}`` (``prompt`` is the
        text fed to the model, equal to ``problem``).

    Raises:
        ValueError: if ``n`` is negative or exceeds the number of distinct problems.
    """
    hi = 10**digits
    if not 0 <= n <= hi * hi:
        raise ValueError(f"n must be in [0, {hi * hi}] for {digits}-digit operands, got {n}.")
    rng = np.random.default_rng(seed)
    codes = rng.choice(hi * hi, size=n, replace=False)
    rows = []
    for c in codes.tolist():
        a, b = divmod(int(c), hi)
        if zero_pad:
            problem, answer = f"{a:0{digits}d}+{b:0{digits}d}=", f"{a + b:0{digits + 1}d}"
        else:
            problem, answer = f"{a}+{b}=", str(a + b)
        rows.append({"problem": problem, "answer": answer, "prompt": problem})
    return rows


def scratchpad_task(n: int, seed: int = 0, digits: int = 4) -> list[dict[str, str]]:
    """``n`` distinct zero-padded addition problems whose answer is the worked solution.

    The prompt is ``"0123+4567="``; the answer is
    :func:`~astarpo.llm.rewards.scratchpad.scratchpad_solution` (a step per digit with its carry,
    then ``ans=04690``): ``16 * digits + 5`` characters, 69 for 4 digits. Score it with
    :func:`~astarpo.llm.rewards.scratchpad.scratchpad_reward` (built-in reward ``scratchpad``),
    which also requires EOS. A model for it needs :data:`SCRATCHPAD_POSITIONS` positions
    (``make_toy_model(tok, max_position_embeddings=SCRATCHPAD_POSITIONS)``).

    Problems are drawn without replacement, as in :func:`addition_task` (slices of one call
    are disjoint), so rows with more ``digits`` than a model was fine-tuned on are a set it
    has never seen solved.

    Args:
        n: Number of problems, at most ``100**digits``.
        seed: Seed of the draw.
        digits: Digits of each operand (4: ``"0000+0000="`` .. ``"9999+9999="``).

    Returns:
        Rows ``{"problem", "prompt", "answer", "sum"}``: ``prompt == problem``, ``answer`` the
        worked solution, ``sum`` the bare zero-padded sum (``"04690"``).

    Raises:
        ValueError: ``digits < 1``, or ``n`` negative or above the number of problems.
    """
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}.")
    hi = 10**digits
    if not 0 <= n <= hi * hi:
        raise ValueError(f"n must be in [0, {hi * hi}] for {digits}-digit operands, got {n}.")
    rng = np.random.default_rng(seed)
    codes = rng.choice(hi * hi, size=n, replace=False) if hi * hi <= 10**6 else _codes(rng, n, hi)
    rows = []
    for c in codes.tolist():
        a, b = divmod(int(c), hi)
        problem = f"{a:0{digits}d}+{b:0{digits}d}="
        rows.append({"problem": problem, "prompt": problem,
                     "answer": scratchpad_solution(a, b, digits),
                     "sum": f"{a + b:0{digits + 1}d}"})  # fmt: skip
    return rows


def _codes(rng: np.random.Generator, n: int, hi: int) -> np.ndarray:
    """``n`` distinct integers below ``hi * hi`` (beyond what ``choice`` can permute)."""
    seen: dict[int, None] = {}
    while len(seen) < n:
        for c in rng.integers(0, hi * hi, size=n, dtype=np.int64).tolist():
            seen.setdefault(int(c), None)
    return np.array(list(seen)[:n], dtype=np.int64)
