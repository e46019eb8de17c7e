"""What ``astarpo demo`` may replace in its output directory (:func:`claim_output`).

The demo recognizes its own output by :data:`MARKER`, written before any work; it regenerates
only a directory with that mark holding nothing but :data:`OUTPUTS`. Anything else (a user's
files, a ``train/`` run without the mark) is refused before the SFT unless ``overwrite``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from astarpo import __version__

__all__ = ["MARKER", "OUTPUTS", "claim_output", "top_name"]

#: Marks a directory as the demo's output; written before any work (``astarpo demo``).
MARKER = "astarpo_demo.json"

#: What the demo writes in its output directory (``train/`` is the A*-PO run directory).
OUTPUTS = (
    MARKER,
    "v_star.jsonl",
    "v_star.jsonl.lock",
    "train",
    "report.json",
    "report.md",
    "accuracy_vs_time.png",
)


def claim_output(out_dir: str | Path, overwrite: bool = False, keep: tuple[str, ...] = ()) -> None:
    """Make ``out_dir`` the demo's before any work: refuse a directory it did not write, remove
    its own earlier results, write :data:`MARKER`.

    The demo recognizes its own output by :data:`MARKER`. A missing or empty directory, or one
    with the marker that holds only :data:`OUTPUTS`, is the demo's to regenerate. Anything else
    is refused unless ``overwrite``: entries outside :data:`OUTPUTS` (a user's files), or
    demo-named entries without the marker (``train/`` holding a training run the demo did not
    write). With ``overwrite`` the demo writes its files beside the others and deletes none of
    them (``train/``'s earlier run files are replaced by the new run).

    Args:
        out_dir: The demo's output directory.
        overwrite: Write there even when the demo did not write it.
        keep: Top-level names that are neither the demo's nor foreign (the SFT cache, when
            ``cache_dir`` lies inside ``out_dir``).

    Raises:
        FileExistsError: ``out_dir`` is a file, or holds what the demo did not write (without
            ``overwrite``); nothing was changed.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"demo output {str(out)!r} is a file; give a folder (--out).")
    entries = sorted(p.name for p in out.iterdir() if p.name not in keep) if out.is_dir() else []
    foreign = [name for name in entries if name not in OUTPUTS]
    if entries and not overwrite:
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise FileExistsError(
                f"{out} holds files the demo did not write ({shown}); nothing was changed. "
                "Choose another --out, or pass --overwrite (overwrite=True) to write the demo's "
                "files beside them."
            )
        if not (out / MARKER).is_file():
            raise FileExistsError(
                f"{out} holds {', '.join(entries)} but no {MARKER}, so the demo did not write them "
                "(train/ may be a training run of yours); nothing was changed. Choose another "
                "--out, or pass --overwrite (overwrite=True) to replace them."
            )
    for name in OUTPUTS[1:]:  # the earlier results; train/'s run files go with the new run
        p = out / name
        if name != "train" and (p.is_file() or p.is_symlink()):
            p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    marker = {"written_by": "astarpo demo", "astarpo_version": __version__}
    (out / MARKER).write_text(json.dumps(marker) + "\n")


def top_name(out_dir: str | Path, inner: str | Path | None) -> tuple[str, ...]:
    """The top-level name under ``out_dir`` of the path ``inner`` lies in (none if outside)."""
    if inner is None:
        return ()
    rel = os.path.relpath(Path(inner).resolve(), Path(out_dir).resolve())
    return () if rel == "." or rel.startswith("..") else (Path(rel).parts[0],)
