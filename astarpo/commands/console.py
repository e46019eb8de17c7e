"""What the verbs print that is not a library result: the evaluation table of ``astarpo eval``
(:func:`format_table`) and a value in an error message (:func:`shown`).

The library returns data (:func:`astarpo.llm.eval.evaluate_benchmarks` returns a mapping); how
it looks on a terminal is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["format_table", "shown"]


def format_table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table, one row per benchmark (accuracy in %), and their average."""
    lines = [
        "| benchmark | metric | prompts | accuracy (%) | pass@k (%) | unscored |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    accs = []
    for name, r in results.items():
        unscored = int(sum(v for key, v in r["unscored"].items() if key.endswith("/none")))
        accs.append(r["accuracy"])
        lines.append(
            f"| {r.get('title', name)} | {r['metric']} | {r['n_prompts']} | "
            f"{100 * r['accuracy']:.1f} | {100 * r['pass_at_k']:.1f} | {unscored} |"
        )
    if len(accs) > 1:
        lines.append(f"| average | | | {100 * float(np.mean(accs)):.1f} | | |")
    return "\n".join(lines)


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error message, cut to at most ``limit`` characters (``...`` marks
    a cut).

    Only as much of a list or mapping is visited as is shown, so a huge structure (or one that
    YAML aliases share exponentially) costs no more than a small one.
    """
    out: list[str] = []
    room = limit + 1  # one more than shown: a longer text is cut

    def emit(text: str) -> bool:
        nonlocal room
        out.append(text[: max(room, 0)])
        room -= len(text)
        return room > 0

    def render(v: Any) -> bool:  # False once the room is spent
        if isinstance(v, Mapping):
            if not emit("{"):
                return False
            for i, (k, x) in enumerate(v.items()):
                if (i and not emit(", ")) or not render(k) or not emit(": ") or not render(x):
                    return False
            return emit("}")
        if isinstance(v, (list, tuple)):
            if not emit("[" if isinstance(v, list) else "("):
                return False
            for i, x in enumerate(v):
                if (i and not emit(", ")) or not render(x):
                    return False
            return emit("]" if isinstance(v, list) else ")")
        if isinstance(v, (str, bytes)):
            return emit(repr(v[: max(room, 0)]))  # never the repr of a long text
        return emit(repr(v))

    render(value)
    text = "".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."
