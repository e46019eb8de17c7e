r"""A V* table as verl's training data: a parquet file with V* in each row's ``extra_info``.

verl (0.9) reads RL prompts from parquet files with one row per prompt and the columns

* ``data_source``: the name its reward function dispatches on (``"openai/gsm8k"``,
  ``"lighteval/MATH"``, ...),
* ``prompt``: the chat messages (verl applies the tokenizer's chat template to them),
* ``ability``: a free label (``"math"``),
* ``reward_model``: ``{"style": "rule", "ground_truth": gold answer}``,
* ``extra_info``: a dict handed to the reward function as ``extra_info``.

:func:`verl_records` builds those rows from training rows and a
:class:`~astarpo.llm.stage1.table.ValueTable`; ``extra_info`` carries :data:`V_STAR_FIELD`
(the prompt's :math:`\hat V^*`), ``pass_rate``, ``index``, ``v_star_key`` (the table's key of
the prompt) and ``provenance`` (the table row's provenance as JSON text). The A*-PO reward of
:mod:`astarpo.integrations.verl` returns ``r - extra_info["v_star"]``.
:func:`write_verl_parquet` writes the rows (``astarpo value --export-verl``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.stage1.rows import ValueTableError
from astarpo.llm.stage1.table import ValueTable

__all__ = ["V_STAR_FIELD", "verl_records", "write_verl_parquet"]

V_STAR_FIELD = "v_star"
"""The key of V* in a verl row's ``extra_info``."""


def verl_records(
    table: ValueTable,
    rows: Sequence[Mapping[str, Any]],
    *,
    data_source: str,
    ability: str = "math",
    drop_all_wrong: bool = False,
) -> list[dict[str, Any]]:
    """verl's parquet rows of the training ``rows``, V* looked up in ``table``.

    Args:
        table: The Stage 1 table.
        rows: Training rows with ``prompt`` (the text the reference was sampled on, the
            table's key: the chat-formatted text), ``messages`` (the chat messages verl
            renders into that text) and ``answer`` (the gold answer).
        data_source: The ``data_source`` of every row (verl's reward dispatches on it).
        ability: The ``ability`` label of every row.
        drop_all_wrong: Leave out prompts whose N reference rewards are all <= 0 (the paper's
            filter, ``pass_rate == 0``).

    Returns:
        One dict per kept row, in order (see the module docstring).

    Raises:
        MissingPromptError: a row's prompt is not in the table (named).
        ValueTableError: no row is left.
    """
    out = []
    for i, row in enumerate(rows):
        found = table.get(str(row["prompt"]))
        if drop_all_wrong and found.pass_rate == 0:
            continue
        out.append(
            {
                "data_source": data_source,
                "prompt": [dict(m) for m in row["messages"]],
                "ability": ability,
                "reward_model": {"style": "rule", "ground_truth": str(row["answer"])},
                "extra_info": {
                    "index": i,
                    V_STAR_FIELD: float(found.v_star),
                    "pass_rate": float(found.pass_rate),
                    "v_star_key": found.key,
                    "provenance": json.dumps(found.provenance, sort_keys=True),
                },
            }
        )
    if not out:
        raise ValueTableError(
            f"no training row left for verl from {len(rows)} rows (drop_all_wrong removed every "
            "prompt: all have pass rate 0); keep them or use a stronger reference."
        )
    return out


def write_verl_parquet(records: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Write ``records`` (from :func:`verl_records`) as one parquet file, whole or not at all:
    a temporary sibling file, then a rename.

    Raises:
        ValueTableError: ``path`` exists already, or there are no records.
    """
    import pyarrow as pa  # the llm extra
    import pyarrow.parquet as pq

    p = Path(path)
    if p.exists():
        raise ValueTableError(f"{p} exists; choose a new file for verl's training parquet.")
    if not records:
        raise ValueTableError(f"no rows to write to {p}.")
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(pa.Table.from_pylist([dict(r) for r in records]), tmp)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
