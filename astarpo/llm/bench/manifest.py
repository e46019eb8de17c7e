"""What a benchmark wrote into its output directory, so ``--overwrite`` deletes only that.

:func:`record` adds a path (relative to the output directory) to ``bench_manifest.json``
before the benchmark writes it; :func:`clear_output` refuses a directory that holds files the
benchmark would write but did not (a user's ``runs/`` of training runs, a ``bench.md`` of
their own), and with ``overwrite`` deletes exactly the recorded paths.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["MANIFEST", "OUTPUTS", "clear_output", "record", "recorded"]

#: The manifest's file name inside the output directory.
MANIFEST = "bench_manifest.json"

#: Top-level names a benchmark writes (``runs/`` holds one folder per run).
OUTPUTS = (
    "reference",
    "held_out_pass.jsonl",
    "values.jsonl",
    "runs",
    "bench.json",
    "bench.md",
    "bench.png",
)


def recorded(out: Path) -> list[str]:
    """The paths ``out``'s manifest lists (relative to ``out``; empty without a manifest).

    Raises:
        ValueError: the manifest is not a JSON list of relative paths inside ``out``.
    """
    path = out / MANIFEST
    if not path.exists():
        return []
    try:
        paths = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not a benchmark manifest ({e}); move it away.") from e
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and p and not Path(p).is_absolute() and ".." not in Path(p).parts
        for p in paths
    ):
        raise ValueError(f"{path} is not a list of relative paths inside {out}; move it away.")
    return paths


def record(out: Path, rel: str) -> None:
    """Add ``rel`` (a path relative to ``out``) to the manifest, before it is written."""
    paths = recorded(out)
    if rel not in paths:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST).write_text(json.dumps([*paths, rel], indent=0))


def _foreign(out: Path, ours: set[str]) -> list[str]:
    """Paths under ``out`` a benchmark would write that its manifest does not list."""
    found = []
    for name in OUTPUTS:
        p = out / name
        if name == "runs" and p.is_dir():
            found += [f"runs/{c.name}" for c in sorted(p.iterdir()) if f"runs/{c.name}" not in ours]
        elif p.exists() and name not in ours:
            found.append(name)
    return found


def clear_output(out: Path, overwrite: bool) -> None:
    """Make ``out`` ready for a new benchmark.

    * Files a benchmark would write (:data:`OUTPUTS`, every entry of ``runs/``) that the
      manifest does not list are never deleted: the directory is refused.
    * An earlier benchmark (its manifest) is refused without ``overwrite``, and with it exactly
      the manifest's paths are deleted (then the manifest, and ``runs/`` if left empty).

    Raises:
        FileExistsError: foreign files, or an earlier benchmark without ``overwrite``.
    """
    ours = recorded(out)
    foreign = _foreign(out, set(ours))
    if foreign:
        shown = ", ".join(foreign[:6]) + (
            f" and {len(foreign) - 6} more" if len(foreign) > 6 else ""
        )
        raise FileExistsError(
            f"{out} holds files that astarpo bench did not write ({shown}; no benchmark "
            f"manifest lists them); nothing was deleted. Choose another --out, or move them."
        )
    present = [p for p in ours if (out / p).exists()]
    if present and not overwrite:
        raise FileExistsError(
            f"{out} holds an earlier benchmark ({len(present)} paths in its {MANIFEST}); pass "
            "--overwrite (overwrite=True) to delete exactly those and start over, or choose "
            "another --out."
        )
    for rel in ours:
        p = out / rel
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    runs = out / "runs"
    if runs.is_dir() and not any(runs.iterdir()):
        runs.rmdir()
