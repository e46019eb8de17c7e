"""The V* table as a ``datasets`` folder (``astarpo value --export``), written and read back.

:func:`write_exported` saves the rows with ``Dataset.save_to_disk`` under a temporary sibling
name (``.NAME.tmp-PID``) and renames the folder into place once whole, so a failed export (a
full disk, a kill) leaves nothing at the path that would block the rerun; a full disk is named
with the path. :func:`read_exported` reads such a folder back, naming the folder in every error
(an empty export included, on which ``datasets`` itself fails with "list index out of range").
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from astarpo.llm.data.files import disk_full
from astarpo.llm.data.prompts import prompt_key
from astarpo.llm.stage1.rows import ValueRow, ValueTableError

__all__ = ["read_exported", "write_exported"]


def write_exported(rows: Sequence[ValueRow], path: Path) -> None:
    """Write ``rows`` as a ``datasets`` folder at ``path`` (which must not exist), whole or not
    at all: one row per prompt, ``provenance`` as JSON text.

    Raises:
        OSError: ``errno.ENOSPC`` naming ``path`` when the disk is full (nothing left there).
    """
    from datasets import Dataset  # the llm extra

    records = [r.to_json() for r in rows]
    for rec in records:
        rec["provenance"] = json.dumps(rec["provenance"], sort_keys=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        Dataset.from_list(records).save_to_disk(str(tmp))
        tmp.rename(path)
    except BaseException as e:
        # asked before the partial copy is removed (it holds the space that is missing)
        full = isinstance(e, Exception) and disk_full(e, path.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        if full:
            raise OSError(
                errno.ENOSPC,
                f"no space left on device while exporting the V* table to {path}; the partial "
                "copy was removed and nothing is left there. Free space and rerun (Stage 1 "
                "resumes from its table file, so only the export is redone).",
            ) from e
        raise


def _saved_files(state: Path) -> Any:
    """The ``_data_files`` a dataset folder's ``state.json`` lists (None when unreadable)."""
    try:
        return json.loads(state.read_text(encoding="utf-8")).get("_data_files")
    except (OSError, ValueError, AttributeError):
        return None


def read_exported(p: Path) -> list[ValueRow]:
    """The rows of a folder written by :func:`write_exported` (``ValueTable.export``).

    Raises:
        ValueTableError: ``p`` is not a saved dataset, holds no rows, lacks a column, or cannot
            be read (naming ``p``).
    """
    if not (p / "dataset_info.json").is_file() and not (p / "state.json").is_file():
        raise ValueTableError(
            f"V* table {str(p)!r} is a folder but not a saved dataset (no state.json); give a "
            "table file (.jsonl/.parquet) or a folder from `astarpo value --export`."
        )
    from datasets import load_from_disk  # the llm extra

    if _saved_files(p / "state.json") == []:
        raise ValueTableError(  # datasets itself fails on it with "list index out of range"
            f"V* table {str(p)!r} is an exported folder with no rows (an empty export); export "
            "the table again with `astarpo value --export` (Stage 1)."
        )
    try:
        records = load_from_disk(str(p)).to_list()
    except Exception as e:
        raise ValueTableError(f"{p}: cannot read the exported V* table ({e}).") from e
    need = {"prompt", "v_star", "pass_rate", "rewards"}
    missing = sorted(need - set(records[0])) if records else []
    if missing:
        raise ValueTableError(
            f"{p}: an exported V* table needs the columns {sorted(need)}; missing {missing}."
        )
    for rec in records:  # ValueRow.from_json reads the provenance's JSON text
        rec.setdefault("key", prompt_key(str(rec["prompt"])))
    return [ValueRow.from_json(r, f"{p}:row {i}") for i, r in enumerate(records)]
