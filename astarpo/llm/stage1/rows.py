r"""Rows of a V* table: :class:`ValueRow` (parsed and checked), :func:`make_row` and
:func:`read_table_rows` (a JSONL table file, a torn last line dropped). The file format and the
table are in :mod:`astarpo.llm.stage1.table`.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock, Timeout

from astarpo import optimal_value
from astarpo.llm.data.files import read_jsonl_log
from astarpo.llm.data.prompts import prompt_key

__all__ = [
    "ValueRow",
    "ValueTableError",
    "make_row",
    "open_locked",
    "read_table_rows",
    "resume_rows",
]


class ValueTableError(ValueError):
    """A V* table file is missing, corrupt, or inconsistent with the run."""


@dataclass(frozen=True)
class ValueRow:
    """One prompt of a V* table.

    Attributes:
        key: :func:`~astarpo.llm.data.prompt_key` of ``prompt``.
        prompt: The exact prompt text.
        rewards: The N rewards of the reference samples, ``[N]``.
        v_star: :math:`\\hat V^*` of the prompt (``optimal_value(rewards, beta1)``).
        pass_rate: Fraction of the N rewards that are > 0.
        provenance: How the row was made (model, N, beta1, sampling, reward, version, ...).
        answer: The gold answer, when known.
    """

    key: str
    prompt: str
    rewards: tuple[float, ...]
    v_star: float
    pass_rate: float
    provenance: dict[str, Any] = field(default_factory=dict, compare=True)
    answer: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (the file format above)."""
        return {
            "key": self.key,
            "prompt": self.prompt,
            "answer": self.answer,
            "rewards": list(self.rewards),
            "v_star": self.v_star,
            "pass_rate": self.pass_rate,
            "provenance": self.provenance,
        }

    @classmethod
    def from_json(cls, d: Any, where: str) -> ValueRow:
        """Parse and check one row; ``where`` ("file:line") is named in errors."""
        if not isinstance(d, dict):
            raise ValueTableError(f"{where}: expected a JSON object, got {type(d).__name__}.")
        missing = [k for k in ("key", "prompt", "rewards", "v_star", "pass_rate") if k not in d]
        if missing:
            raise ValueTableError(f"{where}: V* row lacks {missing}.")
        rewards = d["rewards"]
        if not isinstance(rewards, list) or not rewards:
            raise ValueTableError(f"{where}: 'rewards' must be a non-empty list.")
        texts = [x for x in (*rewards, d["v_star"], d["pass_rate"]) if isinstance(x, str)]
        if texts:  # float("0.5") would pass: a table holds numbers, never text
            raise ValueTableError(
                f"{where}: non-numeric rewards/v_star/pass_rate (the string {texts[0]!r}; a V* "
                'table holds JSON numbers: 0.5, not "0.5"). Recompute it with `astarpo value`.'
            )
        try:
            vals = tuple(float(r) for r in rewards)
            v_star, pass_rate = float(d["v_star"]), float(d["pass_rate"])
        except (TypeError, ValueError) as e:
            raise ValueTableError(f"{where}: non-numeric rewards/v_star/pass_rate ({e}).") from e
        if not all(math.isfinite(x) for x in (*vals, v_star, pass_rate)):
            raise ValueTableError(f"{where}: non-finite rewards/v_star/pass_rate.")
        lo, hi = min(vals), max(vals)
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        if not lo - tol <= v_star <= hi + tol:
            raise ValueTableError(
                f"{where}: v_star {v_star!r} lies outside [min reward, max reward] = [{lo!r}, "
                f"{hi!r}] of its {len(vals)} rewards, which no beta1 gives; the row was edited "
                "or corrupted. Recompute it with `astarpo value`."
            )
        if d["key"] != prompt_key(str(d["prompt"])):
            raise ValueTableError(f"{where}: 'key' is not the sha256 of 'prompt'.")
        prov = d.get("provenance") or {}
        fix = "regenerate the table with `astarpo value`, or restore the file from a copy"
        if isinstance(prov, str):  # a .parquet table or an exported folder holds JSON text
            try:
                prov = json.loads(prov)
            except json.JSONDecodeError as e:
                raise ValueTableError(
                    f"{where}: the row's provenance is not valid JSON ({e.msg} at line "
                    f"{e.lineno} column {e.colno}); {fix}."
                ) from e
        if not isinstance(prov, dict):
            raise ValueTableError(
                f"{where}: the row's provenance must be a JSON object, got "
                f"{type(prov).__name__}; {fix}."
            )
        answer = d.get("answer")
        return cls(
            d["key"],
            d["prompt"],
            vals,
            v_star,
            pass_rate,
            prov,
            None if answer is None else str(answer),
        )


def read_table_rows(path: Path) -> tuple[list[ValueRow], int]:
    """Rows of a table file and the byte length of its valid part (a torn last line dropped,
    :func:`~astarpo.llm.data.files.read_jsonl_log`).

    Raises:
        ValueTableError: a corrupt line before the last, a bad row, or a duplicated prompt
            (file and line named).
    """
    values, good = read_jsonl_log(path, ValueTableError)
    rows: list[ValueRow] = []
    seen: dict[str, int] = {}
    for line, obj in values:
        row = ValueRow.from_json(obj, f"{path}:{line}")
        if row.key in seen:
            raise ValueTableError(
                f"{path}:{line}: prompt {row.prompt[:60]!r} is already in line "
                f"{seen[row.key]}; a V* table holds one row per prompt (two writers on one "
                "file, or an edit). Remove one of the rows or recompute the table."
            )
        seen[row.key] = line
        rows.append(row)
    return rows, good


def make_row(
    prompt: str, rewards: np.ndarray, beta1: float, prov: dict[str, Any], answer: Any
) -> ValueRow:
    """A table row of ``prompt`` with ``v_star = optimal_value(rewards, beta1)``.

    Args:
        prompt: The prompt text.
        rewards: Rewards of its N reference samples ``[N]``.
        beta1: Stage 1 temperature.
        prov: Provenance fields of the row.
        answer: The gold answer (stored for inspection).
    """
    return ValueRow(
        key=prompt_key(prompt),
        prompt=prompt,
        rewards=tuple(float(r) for r in rewards),
        v_star=float(optimal_value(rewards, beta1)),
        pass_rate=float((rewards > 0).mean()),
        provenance=prov,
        answer=None if answer is None else str(answer),
    )


class _LockedFile(io.BufferedRandom):
    """A file opened for reading and appending that releases its lock when closed."""

    def __init__(self, path: Path, lock: FileLock) -> None:
        super().__init__(io.FileIO(path, "a+"))
        self.lock = lock

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lock.release()


def open_locked(path: Path) -> Any:
    """``path`` opened for reading and appending while this process holds the lock file
    ``<path>.lock`` (one writer); closing the file releases the lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(f"{path}.lock", timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise ValueTableError(
            f"{path} is being written by another Stage 1 process (it holds the file's lock); "
            "wait for it to finish (a rerun then resumes), or write another --out."
        ) from None
    return _LockedFile(path, lock)


def resume_rows(
    fh: Any, path: Path, prov: dict[str, Any], matching: Sequence[str]
) -> dict[str, ValueRow]:
    """The rows already in the locked file ``fh`` of ``path``, checked against the run's
    provenance ``prov`` on the fields ``matching`` (those that must agree for a resumed table
    to equal an uninterrupted one), with a torn last line cut off.

    Raises:
        ValueTableError: a row was made with other settings (the file is closed).
    """
    done: dict[str, ValueRow] = {}
    old, good = read_table_rows(path)
    for vr in old:
        diff = [m for m in matching if vr.provenance.get(m) != json.loads(json.dumps(prov[m]))]
        if diff:
            fh.close()
            raise ValueTableError(
                f"{path} was made with other settings ({', '.join(diff)} differ). Use the "
                "same settings to resume, or another --out."
            )
        done[vr.key] = vr
    fh.truncate(good)
    if good > 0:
        fh.seek(good - 1)
        if fh.read(1) != b"\n":
            fh.write(b"\n")
    return done
