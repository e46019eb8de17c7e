"""Appending to a log-like file (the V* table, ``metrics.jsonl``) whole or not at all.

:func:`append_bytes` writes through the file descriptor, bypassing Python's buffer, and on a
failed write (a full disk) cuts the file back to its length before the call: the lines written
before stay intact, no torn line is left, and a rerun or ``--resume`` continues after them. A
full disk is reported as ``no space left on device while appending to PATH`` with what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import IO

__all__ = ["append_bytes"]


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
