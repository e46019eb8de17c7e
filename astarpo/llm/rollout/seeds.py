"""The one seed derivation of astarpo: every sampling seed is a hash of named parts.

Stage 1 seeds each batch from its prompts' keys (so a resumed table is byte-identical), the
Stage 2 trainer seeds step ``t`` from ``(seed, t)`` and each minibatch shuffle from
``(seed, t, epoch, 1)``, evaluation seeds batch ``b`` from ``("eval", seed, b)``, and the
vLLM backend and data-parallel generation seed each prompt from ``(seed, global index)``
(:func:`prompt_seeds`), so a prompt's samples do not depend on the rank that draws them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["derive_seed", "prompt_seeds"]


def derive_seed(*parts: int | str) -> int:
    """A 31-bit seed determined by ``parts`` (integers and strings, in order).

    The parts are joined with a separator that cannot occur in their ``repr`` and hashed with
    SHA-256, so different part lists give independent seeds and the same list the same seed on
    every machine and Python version. 31 bits fit every backend's seed argument (torch, numpy,
    vLLM).

    Args:
        *parts: Integers or strings (at least one).

    Returns:
        An integer in ``[0, 2**31)``.

    Raises:
        TypeError: a part is neither ``int`` nor ``str`` (``bool`` is refused too).
    """
    if not parts:
        raise TypeError("derive_seed needs at least one part.")
    for p in parts:
        if isinstance(p, bool) or not isinstance(p, (int, str)):
            raise TypeError(f"seed parts must be int or str, got {p!r} ({type(p).__name__}).")
    text = "\x1f".join(repr(p) for p in parts)
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def prompt_seeds(seed: int, indices: Sequence[int]) -> list[int]:
    """One seed per prompt, from the call's ``seed`` and each prompt's *global* index.

    Seeding per prompt (not per rank or per batch) makes a prompt's samples the same whichever
    rank generates it and whatever else is in its batch.

    Args:
        seed: The call's seed.
        indices: Global index of each prompt (e.g. its position in the step's global batch).

    Returns:
        ``[derive_seed(seed, i) for i in indices]``, each in ``[0, 2**31)``.
    """
    return [derive_seed(int(seed), int(i)) for i in indices]
