"""What the verbs print that is not a library result: the evaluation table of ``astarpo eval``.

The library returns data (:func:`astarpo.llm.eval.evaluate_benchmarks` returns a mapping); how
it looks on a terminal is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["format_table"]


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
