r"""The V* table: one row per prompt with its N reference rewards and :math:`\hat V^*`.

Written by Stage 1 (:func:`astarpo.llm.stage1.estimate.estimate_values`), read by Stage 2 through
:meth:`ValueTable.v_star`. File format (JSONL, one object per line and per prompt)::

    {"key": sha256 of the prompt text, "prompt": text, "answer": gold or null,
     "rewards": [r_1, ..., r_N], "v_star": float, "pass_rate": fraction of r_i > 0,
     "provenance": {"model", "n_samples", "beta1", "sampling", "reward", "seed",
                    "batch_size", "astarpo_version", ...}}

Provenance is repeated in every row, so a row is self-describing and part files merge without
a header. A truncated last line (a kill during a write) is dropped with a warning; corruption
anywhere else is a :class:`ValueTableError` naming the file and line. ``.parquet`` tables hold
the same columns (provenance as a JSON string).
"""

from __future__ import annotations

import errno
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from astarpo import __version__
from astarpo.llm.data.files import disk_full
from astarpo.llm.data.prompts import prompt_key, read_records
from astarpo.llm.stage1.exported import read_exported, write_exported
from astarpo.llm.stage1.rows import ValueRow, ValueTableError, make_row, read_table_rows

__all__ = ["MissingPromptError", "ValueTable", "jsonl_bytes", "lookup_v_star"]

logger = logging.getLogger(__name__)


class MissingPromptError(KeyError):
    """A prompt has no row in the V* table (the message names the prompt and the table)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "prompt not in V* table"


class ValueTable:
    """The Stage 1 result: V* and rewards of each prompt, looked up by prompt text.

    Args:
        rows: The rows, one per prompt.
        path: Where the table came from (named in errors).

    Raises:
        ValueTableError: two rows have the same prompt.
    """

    def __init__(self, rows: Iterable[ValueRow], path: str | os.PathLike[str] | None = None):
        self.path = None if path is None else str(path)
        self.rows: dict[str, ValueRow] = {}
        for r in rows:
            if r.key in self.rows:
                raise ValueTableError(
                    f"V* table {self.path or '(in memory)'}: prompt {r.prompt[:60]!r} appears "
                    "twice; a table holds one row per prompt (deduplicate the prompts)."
                )
            self.rows[r.key] = r

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[ValueRow]:
        return iter(self.rows.values())

    def __contains__(self, prompt: object) -> bool:
        return isinstance(prompt, str) and prompt_key(prompt) in self.rows

    def __repr__(self) -> str:
        return f"ValueTable({len(self)} prompts, path={self.path!r})"

    @classmethod
    def load(cls, path: str | os.PathLike[str], drop_all_wrong: bool = False) -> ValueTable:
        """Read a ``.jsonl`` or ``.parquet`` table, or a ``datasets`` folder written by
        :meth:`export`.

        Args:
            path: The table file, or an exported folder.
            drop_all_wrong: Leave out prompts whose N rewards are all <= 0 (``pass_rate == 0``).
                Default False (the paper keeps them).

        Raises:
            ValueTableError: if the file is missing, empty of rows, or corrupt (file and line),
                or ``drop_all_wrong`` leaves no row.
        """
        p = Path(path)
        if p.is_dir():
            rows = read_exported(p)
            cls(rows, p)  # duplicates are an error
        elif not p.is_file():
            raise ValueTableError(
                f"V* table {str(p)!r} does not exist; create it with `astarpo value` (Stage 1)."
            )
        elif p.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            try:
                records = pq.read_table(p).to_pylist()
            except Exception as e:
                raise ValueTableError(f"{p}: cannot read Parquet V* table ({e}).") from e
            rows = [ValueRow.from_json(r, f"{p}:row {i}") for i, r in enumerate(records)]
            cls(rows, p)  # duplicates are an error
        else:
            rows, _ = read_table_rows(p)
        if not rows:
            raise ValueTableError(
                f"V* table {str(p)!r} has no rows; make it again with `astarpo value` (Stage 1)."
            )
        if drop_all_wrong:
            kept = [r for r in rows if r.pass_rate > 0]
            if not kept:
                raise ValueTableError(
                    f"V* table {str(p)!r}: drop_all_wrong leaves no row (all {len(rows)} prompts "
                    "have pass rate 0); keep them (drop_all_wrong=False, --filter-all-wrong "
                    "false) or use a stronger reference."
                )
            rows = kept
        return cls(rows, p)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the table (``.parquet`` or JSONL) atomically: a temporary file (fsynced), then
        rename; a failed write leaves the previous file and no temporary file.

        Raises:
            OSError: ``errno.ENOSPC`` naming ``path`` when the disk is full.
        """
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            if p.suffix.lower() == ".parquet":
                import pyarrow as pa  # the parquet extra
                import pyarrow.parquet as pq

                recs = [r.to_json() for r in self]
                for rec in recs:
                    rec["provenance"] = json.dumps(rec["provenance"], sort_keys=True)
                pq.write_table(pa.Table.from_pylist(recs), tmp)
            else:
                with tmp.open("w", encoding="utf-8") as f:
                    for r in self:
                        f.write(json.dumps(r.to_json(), ensure_ascii=False, allow_nan=False))
                        f.write("\n")
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, p)
        except OSError as e:
            if disk_full(e, p.parent):
                raise OSError(
                    errno.ENOSPC,
                    f"no space left on device while writing the V* table {p}; the previous file "
                    "(if any) is intact and no partial file was left. Free space and rerun.",
                ) from e
            raise
        finally:
            tmp.unlink(missing_ok=True)  # a failed write leaves the previous table, no debris
        self.path = str(p)

    def export(self, path: str | os.PathLike[str]) -> None:
        """Write the table as a ``datasets`` folder (``Dataset.save_to_disk``): one row per
        prompt with the columns ``prompt``, ``answer``, ``v_star``, ``pass_rate``, ``rewards``
        (the N reference rewards), ``key`` and ``provenance`` (JSON text).

        That is the training data with its Stage 1 columns, the form the official A*-PO
        training scripts and the TRL forks read (``load_from_disk(path)``); :meth:`load` and
        ``astarpo train --v-star`` read it back.

        The folder is written under a temporary sibling name (``.NAME.tmp-PID``) and renamed to
        ``path`` once whole: a failed export (a full disk, a kill) leaves nothing at ``path``,
        so the rerun is not blocked.

        Raises:
            ValueTableError: ``path`` exists already, or the table has no rows.
            OSError: ``errno.ENOSPC`` naming ``path`` when the disk is full (nothing left).
        """
        p = Path(path)
        if p.exists():
            raise ValueTableError(f"{p} exists; choose a new folder for the exported table.")
        if not len(self):
            raise ValueTableError(
                f"the V* table {self.path or '(in memory)'} has no rows; nothing to export to {p}."
            )
        write_exported(list(self), p)

    def get(self, prompt: str) -> ValueRow:
        """The row of ``prompt``; raises :class:`MissingPromptError` naming it and the table."""
        row = self.rows.get(prompt_key(prompt))
        if row is None:
            short = prompt if len(prompt) <= 80 else prompt[:77] + "..."
            raise MissingPromptError(
                f"prompt {short!r} is not in the V* table {self.path or '(in memory)'} "
                f"({len(self)} prompts). Run `astarpo value` on this data with the same template "
                "and chat template, or drop the prompt."
            )
        return row

    def v_star(self, prompts: Sequence[str]) -> np.ndarray:
        """V* of each prompt, float64 ``[B]``; :class:`MissingPromptError` if one is absent."""
        return np.array([self.get(p).v_star for p in prompts], dtype=np.float64)

    def select(self, rows: Sequence[dict[str, Any]], field: str = "prompt") -> list[dict[str, Any]]:
        """The dataset rows whose ``row[field]`` prompt is in the table (e.g. after a filter)."""
        return [r for r in rows if r[field] in self]

    @classmethod
    def from_official(
        cls,
        source: str | os.PathLike[str] | Sequence[dict[str, Any]],
        beta1: float,
        prompt_column: str = "prompt",
        tokenizer: Any = None,
        chat_template: bool = False,
    ) -> ValueTable:
        """Import an official A*-PO Stage 1 dataset (columns ``eval_0`` .. ``eval_{N-1}``).

        The prompt column may be text or a list of chat messages; messages become the text of
        their last user message (what the official generation script fed the model), or the
        chat-formatted text with ``tokenizer.apply_chat_template`` when ``chat_template``.
        The gold answer is read from ``reward_model.ground_truth`` or ``answer`` when present.

        Args:
            source: A ``.parquet``/``.jsonl`` file or a list of row dicts.
            beta1: KL strength of V* (the paper uses 0.5).
            prompt_column: Column of the prompt. Default ``"prompt"``.
            tokenizer: Needed with ``chat_template``.
            chat_template: Key prompts by their chat-formatted text. Default False.

        Raises:
            ValueTableError: if there are no ``eval_i`` columns or they are not ``0..N-1``.
        """

        name = str(source) if isinstance(source, (str, os.PathLike)) else "(rows)"
        records = read_records(source) if isinstance(source, (str, os.PathLike)) else source
        if not records:
            raise ValueTableError(f"{name}: no rows to import.")
        idx = sorted(int(k[5:]) for k in records[0] if k.startswith("eval_") and k[5:].isdigit())
        if not idx or idx != list(range(len(idx))):
            raise ValueTableError(
                f"{name}: expected columns eval_0 .. eval_{{N-1}}, found eval indices {idx}."
            )
        n = len(idx)
        prov = {"source": "official", "file": name, "n_samples": n, "beta1": float(beta1)}
        prov["astarpo_version"] = __version__
        out = []
        for i, rec in enumerate(records):
            value = rec[prompt_column]
            if isinstance(value, list):
                if chat_template:
                    if tokenizer is None:
                        raise ValueError("chat_template=True needs a tokenizer=...")
                    text = tokenizer.apply_chat_template(
                        value, tokenize=False, add_generation_prompt=True
                    )
                else:
                    users = [m for m in value if m.get("role", "user") == "user"] or value
                    text = str(users[-1]["content"])
            else:
                text = str(value)
            try:
                rewards = np.array([float(rec[f"eval_{j}"]) for j in idx], dtype=np.float64)
            except (KeyError, TypeError, ValueError) as e:
                raise ValueTableError(f"{name}: row {i}: bad eval_i value ({e}).") from e
            rm = rec.get("reward_model")
            answer = rm.get("ground_truth") if isinstance(rm, dict) else rec.get("answer")
            out.append(make_row(text, rewards, beta1, prov, answer))
        return cls(out, None)


def jsonl_bytes(rows: Iterable[ValueRow]) -> bytes:
    """``rows`` in the JSONL file format (one JSON object a line), UTF-8."""
    lines = (json.dumps(r.to_json(), ensure_ascii=False, allow_nan=False) + "\n" for r in rows)
    return "".join(lines).encode("utf-8")


def lookup_v_star(table: Any, prompts: Sequence[str]) -> np.ndarray:
    """V* of each prompt ``[B]`` from a :class:`ValueTable` or a ``{prompt: v_star}`` mapping.

    Raises:
        MissingPromptError: naming the first prompt missing from the table.
        ValueError: a mapping holds a NaN or infinite V*, or a value that is not a number
            (a string ``"0.5"`` included).
        TypeError: ``table`` is neither.
    """
    if isinstance(table, ValueTable):
        return np.asarray(table.v_star(list(prompts)), dtype=np.float64)
    if isinstance(table, Mapping):
        for p in prompts:
            short = p if len(p) <= 80 else p[:77] + "..."
            if p not in table:
                raise MissingPromptError(
                    f"prompt {short!r} is missing from the V* mapping; run Stage 1 (astarpo "
                    "value) on the same prompts (same template) as training."
                )
            v = table[p]
            if not hasattr(type(v), "__float__"):  # a text "0.5" is not a number
                raise ValueError(
                    f"the V* mapping holds {v!r} ({type(v).__name__}) for prompt {short!r}; V* "
                    "values must be numbers (write 0.5, not '0.5')."
                )
        values = np.array([float(table[p]) for p in prompts], dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            p = prompts[int(bad[0])]
            short = p if len(p) <= 80 else p[:77] + "..."
            raise ValueError(
                f"the V* mapping holds {bad.size} non-finite values (first: {values[bad[0]]} for "
                f"prompt {short!r}); V* must be finite (Stage 1 gives beta1 log mean exp(r/beta1))."
            )
        return values
    raise TypeError(
        f"v_star_table must be a ValueTable or a {{prompt: v_star}} mapping, got {type(table)}."
    )
