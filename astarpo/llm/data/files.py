"""Reading data files with where each row is: ``.jsonl`` (file and line), ``.json`` and
``.parquet`` (file and row), and datasets saved with ``save_to_disk`` or named ``hf:NAME:SPLIT``
(row). Every error names the file and the line or row: a byte that is not
UTF-8, a line that is not JSON, a value that is not an object.

Log-like files (the V* table, ``metrics.jsonl``) are read back by :func:`read_jsonl_log`: a torn
last line (a kill during a write) is dropped with a warning, a corrupt line before it is an error
naming the file and line. They are appended whole or not at all
(:func:`append_bytes`): it writes through the file descriptor, bypassing Python's buffer, and on
a failed write (a full disk) cuts the file back to its length before the call: the lines written
before stay intact, no torn line is left, and a rerun or ``--resume`` continues after them. A
full disk is reported as ``no space left on device while appending to PATH`` with what to do.
:func:`disk_full` tells a full disk from another failed write, for the writers whose libraries
word it vaguely (``torch.save``, ``safetensors``, ``datasets``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import IO, Any

from astarpo.llm.data.hub import is_saved_dataset, read_hf_dataset

__all__ = [
    "FULL_BELOW",
    "append_bytes",
    "disk_full",
    "read_jsonl_log",
    "read_located_records",
    "standard_json",
]

logger = logging.getLogger(__name__)

#: A failed write with fewer free bytes than this left on its disk is taken for a full disk.
FULL_BELOW = 1 << 20


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{where}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}); "
            "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)."
        ) from None


def read_located_records(path: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]]:
    """:func:`read_records` with where each row is: ``"file:line"`` (JSONL) or ``"file: row i"``.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_records`.
    """
    if str(path).startswith("hf:") or is_saved_dataset(Path(path)):
        return [(f"{path}: row {i}", r) for i, r in enumerate(read_hf_dataset(str(path)))]
    p = Path(path)
    if p.is_dir():
        inside = sorted(
            f.name for f in p.iterdir() if f.suffix.lower() in (".jsonl", ".json", ".parquet")
        )
        hint = (
            f" It holds {inside[:5]}: pass one of them, e.g. {str(p / inside[0])!r}."
            if inside
            else ""
        )
        raise ValueError(
            f"data {str(p)!r} is a folder but not a dataset saved with Dataset.save_to_disk (no "
            f"dataset_info.json, state.json or dataset_dict.json); give a .jsonl/.json/.parquet "
            f"file.{hint}"
        )
    if not p.is_file():
        raise FileNotFoundError(
            f"data file {str(p)!r} does not exist (give a .jsonl/.json/.parquet file, a folder "
            "saved with Dataset.save_to_disk, or hf:NAME[:CONFIG]:SPLIT for a hub dataset)."
        )
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return [(f"{p}: row {i}", r) for i, r in enumerate(pq.read_table(p).to_pylist())]
    if suffix == ".json":
        raw = p.read_bytes()
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            bad = raw[: e.start].count(b"\n") + 1
            _decode(raw.split(b"\n")[bad - 1], f"{p}:{bad}")
            raise
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}:{e.lineno}: not valid JSON ({e.msg}).") from e
        if not isinstance(data, list):
            raise ValueError(f"{p}: a .json data file must hold a list of objects.")
        return [(f"{p}: row {i}", r) for i, r in enumerate(data)]
    if suffix != ".jsonl":
        raise ValueError(f"{p}: unknown data format {suffix!r}; use .jsonl, .json or .parquet.")
    rows = []
    for lineno, raw_line in enumerate(p.read_bytes().split(b"\n"), 1):
        line = _decode(raw_line, f"{p}:{lineno}")
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}:{lineno}: not valid JSON ({e}).") from e
        if not isinstance(row, dict):
            raise ValueError(f"{p}:{lineno}: expected a JSON object, got {type(row).__name__}.")
        rows.append((f"{p}:{lineno}", row))
    return rows


def read_jsonl_log(
    path: str | os.PathLike[str], error: type[Exception] = ValueError, what: str = "line"
) -> tuple[list[tuple[int, Any]], int]:
    """The JSON values of an append-only JSONL file (the V* table, ``metrics.jsonl``), with a
    torn last line dropped.

    A kill during a write can leave the last non-blank line cut short: it is dropped with a
    warning (``PATH:LINE: dropping a truncated last line``) and left out of the valid length,
    so a writer that resumes cuts the file there. A line that is not JSON before it is corrupt.

    Args:
        path: The file (named in errors and the warning).
        error: The exception type raised for a corrupt line (a subclass of ``ValueError``).
        what: How the error calls a line (``"line"``, ``"metrics line"``).

    Returns:
        ``(values, good)``: ``(line number, value)`` of every non-blank line in order (numbers
        from 1), and the byte length of the file's valid part (the torn line excluded).

    Raises:
        error: ``"PATH:LINE: corrupt WHAT (...)"`` for a line that is not JSON (or not UTF-8)
            before the last non-blank one.
    """
    lines = Path(path).read_bytes().split(b"\n")
    nonblank = [i for i, raw in enumerate(lines) if raw.strip()]
    last = nonblank[-1] if nonblank else -1
    values: list[tuple[int, Any]] = []
    pos = 0
    for i, raw in enumerate(lines):
        if raw.strip():
            try:
                values.append((i + 1, json.loads(raw)))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                if i != last:
                    raise error(f"{path}:{i + 1}: corrupt {what} ({e}).") from e
                logger.warning("%s:%d: dropping a truncated last line (%s).", path, i + 1, e)
                break
        pos += len(raw) + (1 if i < len(lines) - 1 else 0)
    return values, pos


def standard_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by ``None`` (nested dicts, lists and
    tuples too), so ``json.dumps(..., allow_nan=False)`` writes standard JSON (no ``NaN`` or
    ``Infinity``, which strict parsers reject)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: standard_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [standard_json(v) for v in obj]
    return obj


def append_bytes(
    path: str | os.PathLike[str], data: bytes, file: IO[bytes] | None = None, then: str = ""
) -> None:
    """Append ``data`` to ``path`` (created if missing), whole or not at all.

    Args:
        path: The file (named in errors).
        data: What to append (whole lines).
        file: ``path`` opened in binary mode, to write through its descriptor after flushing
            its buffer (default: open and close ``path`` here).
        then: What the user does after freeing space (appended to the disk-full message).

    Raises:
        OSError: ``errno.ENOSPC``, "no space left on device while appending to PATH ...";
            other write errors as raised. In both cases ``path`` is as it was before the call.
    """
    own = file is None
    if file is None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    else:
        file.flush()  # what the file object holds goes first
        fd = file.fileno()
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)  # no torn line: the file as it was
            if e.errno == errno.ENOSPC:
                raise OSError(
                    errno.ENOSPC,
                    f"no space left on device while appending to {path}; the lines written "
                    "before are intact and this write was undone. Free space, then "
                    + (then or "rerun."),
                ) from e
            raise
    finally:
        if own:
            os.close(fd)


def disk_full(error: BaseException, folder: str | os.PathLike[str]) -> bool:
    """Whether ``error``, raised by a write under ``folder``, is a full disk.

    ``ENOSPC`` (or a quota), the texts of the libraries that wrap it ("No space left", "os
    error 28", torch's "iostream error"), or, since ``torch.save`` on a full disk may say only
    "unexpected pos", fewer than :data:`FULL_BELOW` bytes free on ``folder``'s disk. Call it
    before removing the partial files (they hold the space that is missing).
    """
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error)
    if any(s in text for s in ("No space left", "os error 28", "iostream error")):
        return True
    try:
        return shutil.disk_usage(folder).free < FULL_BELOW
    except OSError:
        return False
