"""The output paths of the verbs, checked before any work starts.

Every path a verb will write (``value --out`` and ``--export``, ``train --out``, ``eval
--out``, ``demo --out`` and ``--cache-dir``, ``bench --out`` and ``--cache-dir``, ``theory
--out``) goes through :func:`check_output` first, so that a path that cannot be written is
refused in a second, not after minutes of sampling or training: a folder given where a file is
written, a file where a folder is, a parent that is a file, a place that is not writable, and
(``new=True``) a path that exists already. Whether a folder is writable is tried, not read from
its permission bits (which say yes to root, and on a read-only or virtual file system such as
``/proc``): a probe folder is made in it and removed at once; nothing else is created here.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_output"]


def check_output(
    path: str | os.PathLike[str] | None, flag: str, *, folder: bool, new: bool = False
) -> None:
    """Refuse, before any work, an output path the verb could not write.

    Args:
        path: The path of the flag (``None`` or empty: the flag is not given, nothing to check).
        flag: The flag, named in the error (``"--out"``).
        folder: The verb writes a folder there (else a file).
        new: The path must not exist yet (an export folder).

    Raises:
        SystemExit: an ``error: FLAG PATH ...`` usage error saying what is wrong and the fix.
    """
    if path is None or not os.fspath(path):
        return
    p = Path(path).expanduser()
    where = f"{flag} {os.fspath(path)}"
    if p.exists():
        if folder and not p.is_dir():
            raise SystemExit(f"error: {where} is a file; give a folder (a new or existing one).")
        if not folder and p.is_dir():
            raise SystemExit(f"error: {where} is a folder; give a file name in it.")
        if new:
            kind = "folder" if folder else "file"
            raise SystemExit(f"error: {where} exists; choose a new {kind}.")
        why = _cannot_write(p if folder else p.parent)
        if why or not os.access(p, os.W_OK | (os.X_OK if folder else 0)):
            reason = f" ({why})" if why else ""
            raise SystemExit(f"error: {where} is not writable{reason}; choose a writable path.")
        return
    # The nearest existing folder above: every level on the way must be a folder, writable.
    above = p.absolute().parent
    while not above.exists() and not above.is_symlink():
        above = above.parent
    if not above.is_dir():
        raise SystemExit(
            f"error: {where}: {above} is a file, not a folder, so nothing can be written under "
            "it; choose a path whose parents are folders."
        )
    why = _cannot_write(above)
    if why:
        raise SystemExit(
            f"error: {where}: nothing can be created in the folder {above} ({why}); choose a "
            "writable path."
        )


def _cannot_write(folder: Path) -> str | None:
    """Why nothing can be created in ``folder`` (the system's reason), or ``None`` when a probe
    folder could be made there (and was removed)."""
    try:
        probe = tempfile.mkdtemp(prefix=".astarpo-write-probe-", dir=folder)
    except OSError as e:
        return e.strerror or str(e)
    os.rmdir(probe)
    return None
