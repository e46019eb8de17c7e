"""Short arithmetic word problems, generated from a seed: a task a small pretrained model can
learn from.

A 135M-parameter instruct model solves few GSM8K problems (multi-step, numbers in the hundreds);
these problems take one or two operations on small numbers ("Mia has 14 pencils. She gives 5 to
Leo. How many pencils does Mia have left?"), where such a model is right some of the time, so
that its pass rate is measurable but low and RL has something to sharpen. The gold answer is a
whole number (``"9"``), scored by math-verify (``--reward math_verify``) like any math answer.

* :func:`word_problems`: ``n`` distinct problems from a seed (rows ``problem``, ``answer``,
  ``kind``); slicing one call gives disjoint training and held-out sets.
* :func:`write_word_problems`: a training file and a held-out file (JSONL) in a folder.
* ``python -m astarpo.llm.data.word_problems --out DIR`` writes them from the command line.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["KINDS", "word_problems", "write_word_problems"]

_NAMES = (
    "Mia", "Leo", "Ava", "Sam", "Zoe", "Ben", "Lily", "Omar", "Nora", "Jack",
    "Emma", "Ravi", "Ella", "Max", "Ivy", "Noah", "Lucy", "Finn", "Maya", "Theo",
)  # fmt: skip
_HE_SHE = {"Mia": "She", "Ava": "She", "Zoe": "She", "Lily": "She", "Nora": "She", "Emma": "She",
           "Ella": "She", "Ivy": "She", "Lucy": "She", "Maya": "She"}  # fmt: skip
_ITEMS = (
    "apples", "pencils", "stickers", "marbles", "cookies", "books", "stamps", "shells",
    "cards", "balloons", "oranges", "crayons", "coins", "buttons", "flowers", "eggs",
)  # fmt: skip
_CONTAINERS = ("boxes", "bags", "packs", "jars", "baskets", "trays")

# A problem kind: (rng, name, pronoun, other name, item, container) -> (problem, answer).
_Kind = Callable[[np.random.Generator, str, str, str, str, str], tuple[str, int]]


def _draw(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A whole number in ``[lo, hi]``."""
    return int(rng.integers(lo, hi + 1))


def _add(rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str) -> tuple[str, int]:
    x, y = _draw(rng, 3, 40), _draw(rng, 2, 30)
    return (
        f"{a} has {x} {item}. {b} gives {a} {y} more {item}. How many {item} does {a} have now?",
        x + y,
    )


def _sub(rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str) -> tuple[str, int]:
    x = _draw(rng, 8, 50)
    y = _draw(rng, 2, x - 1)
    return (
        f"{a} has {x} {item}. {he} gives {y} of them to {b}. How many {item} does {a} have left?",
        x - y,
    )


def _mul(rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str) -> tuple[str, int]:
    x, y = _draw(rng, 2, 9), _draw(rng, 2, 12)
    return (
        f"{a} buys {x} {box} of {item}. Each of the {box} holds {y} {item}. How many {item} "
        f"does {a} buy?",
        x * y,
    )


def _div(rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str) -> tuple[str, int]:
    x, y = _draw(rng, 2, 9), _draw(rng, 2, 12)
    return (
        f"{a} has {x * y} {item} and shares them equally among {x} friends. How many {item} "
        "does each friend get?",
        y,
    )


def _add_sub(
    rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str
) -> tuple[str, int]:
    x, y = _draw(rng, 5, 30), _draw(rng, 2, 20)
    z = _draw(rng, 2, x + y - 1)
    return (
        f"{a} has {x} {item}. {he} finds {y} more, then gives {z} to {b}. How many {item} does "
        f"{a} have now?",
        x + y - z,
    )


def _mul_sub(
    rng: np.random.Generator, a: str, he: str, b: str, item: str, box: str
) -> tuple[str, int]:
    x, y = _draw(rng, 2, 6), _draw(rng, 2, 10)
    z = _draw(rng, 2, x * y - 1)
    return (
        f"{a} buys {x} {box} with {y} {item} in each. {he} gives {z} {item} to {b}. How many "
        f"{item} does {a} have left?",
        x * y - z,
    )


KINDS: dict[str, _Kind] = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "add_sub": _add_sub,
    "mul_sub": _mul_sub,
}
"""The problem kinds: one operation (``add``, ``sub``, ``mul``, ``div``) or two (``add_sub``,
``mul_sub``); every answer is a whole number >= 1."""


def word_problems(
    n: int, seed: int = 0, kinds: Sequence[str] | None = None
) -> list[dict[str, str]]:
    """``n`` distinct arithmetic word problems, the kinds drawn uniformly.

    Problems are distinct (by text), so slicing one call (``rows[:k]``, ``rows[k:]``) gives
    disjoint training and held-out sets. The same ``(n, seed, kinds)`` gives the same rows.

    Args:
        n: Number of problems, ``>= 1``.
        seed: Seed of the draw.
        kinds: Names of :data:`KINDS` to draw from (default: all).

    Returns:
        Rows ``{"problem": "Mia has 14 pencils. ...", "answer": "9", "kind": "sub"}``.

    Raises:
        ValueError: ``n < 1``, or an unknown or empty ``kinds``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}.")
    names = list(KINDS) if kinds is None else list(kinds)
    unknown = [k for k in names if k not in KINDS]
    if unknown or not names:
        raise ValueError(f"kinds must be a non-empty subset of {list(KINDS)}; got {names}.")
    rng = np.random.default_rng(seed)
    rows: dict[str, dict[str, str]] = {}
    tries = 0
    while len(rows) < n:
        tries += 1
        if tries > 100 * n + 1000:
            raise ValueError(f"cannot draw {n} distinct problems of kinds {names}; ask for fewer.")
        kind = names[int(rng.integers(len(names)))]
        a, b = rng.choice(len(_NAMES), size=2, replace=False)
        name, other = _NAMES[int(a)], _NAMES[int(b)]
        item = _ITEMS[int(rng.integers(len(_ITEMS)))]
        box = _CONTAINERS[int(rng.integers(len(_CONTAINERS)))]
        problem, answer = KINDS[kind](rng, name, _HE_SHE.get(name, "He"), other, item, box)
        rows.setdefault(problem, {"problem": problem, "answer": str(answer), "kind": kind})
    return list(rows.values())


def write_word_problems(
    out: str | os.PathLike[str],
    n_train: int = 1024,
    n_test: int = 256,
    seed: int = 0,
    kinds: Sequence[str] | None = None,
) -> tuple[Path, Path]:
    """Write ``out/train.jsonl`` and ``out/test.jsonl``: ``n_train`` and ``n_test`` disjoint
    problems of :func:`word_problems` (one draw of ``n_train + n_test``, split in order).

    Args:
        out: The folder (created when missing).
        n_train: Training problems, ``>= 1``.
        n_test: Held-out problems, ``>= 1``.
        seed: Seed of the draw.
        kinds: Names of :data:`KINDS` (default: all).

    Returns:
        The paths ``(train, test)``.

    Raises:
        ValueError: a size below 1 or unknown ``kinds`` (nothing is written).
    """
    if min(n_train, n_test) < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train} and {n_test}.")
    rows = word_problems(n_train + n_test, seed=seed, kinds=kinds)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "train.jsonl", folder / "test.jsonl"
    for path, part in zip(paths, (rows[:n_train], rows[n_train:]), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m astarpo.llm.data.word_problems --out DIR [--train N] [--test N] [--seed S]``."""
    p = argparse.ArgumentParser(
        prog="python -m astarpo.llm.data.word_problems",
        description="Write DIR/train.jsonl and DIR/test.jsonl: disjoint arithmetic word problems "
        "(columns problem, answer, kind).",
    )
    p.add_argument("--out", required=True, help="the folder to write the two files in")
    p.add_argument("--train", type=int, default=1024, help="training problems (default 1024)")
    p.add_argument("--test", type=int, default=256, help="held-out problems (default 256)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--kinds", help=f"comma-separated subset of {','.join(KINDS)} (default all)")
    args = p.parse_args(argv)
    kinds = args.kinds.split(",") if args.kinds else None
    try:
        train, test = write_word_problems(args.out, args.train, args.test, args.seed, kinds)
    except ValueError as e:
        p.error(str(e))
    print(f"wrote {args.train} problems to {train} and {args.test} to {test} (seed {args.seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
