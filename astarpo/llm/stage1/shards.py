"""Sharded Stage 1: shard specs, the part files of a shard and their merge.

``astarpo value --shard i/k`` (or one process per rank under ``torchrun``) writes the prompts of
shard ``i`` (:func:`in_shard`: by prompt key, so the partition does not depend on the data's
order) to :func:`part_path`; :func:`merge_shards` joins the ``k`` parts into the table, checked
(every part present, made with the same settings, agreeing on shared prompts) and written
atomically (:meth:`~astarpo.llm.stage1.table.ValueTable.save`), so an interrupted merge leaves
either no table or a whole one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.data.prompts import prompt_key
from astarpo.llm.stage1.provenance import MATCHING
from astarpo.llm.stage1.rows import ValueRow, ValueTableError
from astarpo.llm.stage1.table import ValueTable

__all__ = ["in_shard", "merge_shards", "parse_shard", "part_path"]


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """``"i/k"`` -> ``(i, k)``; ``"auto"`` reads ``RANK``/``WORLD_SIZE``; ``None`` -> ``None``."""
    if spec is None:
        return None
    if spec == "auto":
        k = int(os.environ.get("WORLD_SIZE", "1"))
        return None if k == 1 else (int(os.environ.get("RANK", "0")), k)
    try:
        i_s, k_s = spec.split("/")
        i, k = int(i_s), int(k_s)
    except ValueError:
        raise ValueError(f"shard must be 'i/k' (e.g. 0/4) or 'auto', got {spec!r}.") from None
    if not (k >= 1 and 0 <= i < k):
        raise ValueError(f"shard {spec!r}: need 0 <= i < k.")
    return i, k


def part_path(out_path: str | os.PathLike[str], i: int, k: int) -> Path:
    """File of shard ``i`` of ``k``: ``values.jsonl`` -> ``values.part-i-of-k.jsonl``."""
    p = Path(out_path)
    stem = p.stem if p.suffix == ".jsonl" else p.name
    return p.with_name(f"{stem}.part-{i}-of-{k}.jsonl")


def in_shard(key: str, shard: tuple[int, int] | None) -> bool:
    """Whether the prompt key ``key`` belongs to ``shard = (i, k)`` (every key when None)."""
    return shard is None or int(key[:16], 16) % shard[1] == shard[0]


def merge_shards(
    out_path: str | os.PathLike[str], k: int, rows: Sequence[dict[str, Any]] | None = None
) -> ValueTable:
    """Merge the ``k`` part files of ``out_path`` into one table written at ``out_path``.

    Args:
        out_path: The final table (the parts are :func:`part_path` ``(out_path, i, k)``).
        k: Number of shards.
        rows: The dataset; when given, every prompt must be in the merged table, and the
            merged rows follow the dataset's order (else the parts' order).

    Raises:
        ValueTableError: if a part is missing, parts disagree on settings or on a prompt, or
            (with ``rows``) prompts are missing.
    """
    merged: dict[str, ValueRow] = {}
    ref: dict[str, Any] | None = None
    for i in range(k):
        p = part_path(out_path, i, k)
        if not p.is_file():
            raise ValueTableError(f"part {i} of {k} is missing: {p}. Run `--shard {i}/{k}`.")
        for r in ValueTable.load(p):
            sig = {f: r.provenance.get(f) for f in MATCHING}
            if ref is None:
                ref = sig
            elif sig != ref:
                raise ValueTableError(f"{p}: made with other settings than part 0.")
            if r.key in merged and merged[r.key] != r:
                raise ValueTableError(f"{p}: prompt {r.prompt[:60]!r} differs between parts.")
            merged[r.key] = r
    if rows is not None:
        missing = [r["prompt"] for r in rows if prompt_key(r["prompt"]) not in merged]
        if missing:
            raise ValueTableError(
                f"merged table lacks {len(missing)} prompts (first: {missing[0][:60]!r}); "
                "a shard did not finish: rerun it (it resumes)."
            )
        order = list(dict.fromkeys(prompt_key(r["prompt"]) for r in rows))
        merged = {k: merged[k] for k in order} | merged  # dataset order first
    table = ValueTable(merged.values())
    table.save(out_path)
    return table
