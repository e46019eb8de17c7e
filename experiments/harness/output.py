"""A study's output folder: :class:`OutputDir` records each path in ``STEM_manifest.json``
before the study writes it, so that ``--overwrite`` deletes exactly those (nothing else)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

__all__ = ["OutputDir"]

_LOCK = threading.Lock()  # runs started from threads record their folders one at a time


class OutputDir:
    """The output folder ``path`` of one study, which writes ``STEM.json/md/png``, ``runs/``
    (one folder per run) and the other top-level names ``outputs``."""

    def __init__(self, path: str | Path, stem: str, outputs: tuple[str, ...] = ()) -> None:
        self.path, self.stem = Path(path), stem
        self.outputs = (*outputs, "runs", f"{stem}.json", f"{stem}.md", f"{stem}.png")
        self.manifest = self.path / f"{stem}_manifest.json"

    def recorded(self) -> list[str]:
        """The paths the manifest lists, relative (``ValueError`` for another manifest)."""
        try:
            paths = json.loads(self.manifest.read_text()) if self.manifest.exists() else []
        except json.JSONDecodeError as e:
            raise ValueError(f"{self.manifest} is not a study manifest ({e}); move it away.") from e
        if not isinstance(paths, list) or not all(
            isinstance(p, str) and p and not Path(p).is_absolute() and ".." not in Path(p).parts
            for p in paths
        ):
            raise ValueError(f"{self.manifest} is not a list of relative paths; move it away.")
        return paths

    def record(self, rel: str) -> Path:
        """Add ``rel`` to the manifest (before it is written; the manifest replaced whole);
        returns its full path."""
        with _LOCK:
            paths = self.recorded()
            if rel not in paths:
                self.path.mkdir(parents=True, exist_ok=True)
                tmp = self.manifest.with_suffix(".json.tmp")
                tmp.write_text(json.dumps([*paths, rel], indent=0))
                os.replace(tmp, self.manifest)
        return self.path / rel

    def clear(self, overwrite: bool, resume: bool = False) -> None:
        """Make the folder ready for a run of the study: ``FileExistsError`` (nothing deleted)
        when it holds files the study would write that the manifest does not list, or an
        earlier run and neither ``overwrite`` nor ``resume``; with ``overwrite`` the recorded
        paths are deleted, with ``resume`` they are kept (the runner reads back the finished
        runs: :meth:`~experiments.harness.runner.Runner.run`). ``ValueError`` for both."""
        if overwrite and resume:
            raise ValueError(
                "--overwrite deletes the earlier run and --resume continues it; choose one."
            )
        ours = self.recorded()
        runs = self.path / "runs"
        found = [f"runs/{c.name}" for c in sorted(runs.iterdir())] if runs.is_dir() else []
        found += [n for n in self.outputs if n != "runs" and (self.path / n).exists()]
        if foreign := [p for p in found if p not in ours]:
            more = f" and {len(foreign) - 6} more" if len(foreign) > 6 else ""
            raise FileExistsError(
                f"{self.path} holds files that this study did not write ({', '.join(foreign[:6])}"
                f"{more}; no {self.manifest.name} lists them); nothing was deleted. Choose "
                "another --out, or move them."
            )
        if resume:
            return
        present = [p for p in ours if (self.path / p).exists()]
        if present and not overwrite:
            raise FileExistsError(
                f"{self.path} holds an earlier run of this study ({len(present)} paths in its "
                f"{self.manifest.name}); continue it with --resume (resume=True: its finished "
                "runs are read back), pass --overwrite (overwrite=True) to delete exactly "
                "those and start over, or choose another --out."
            )
        for rel in ours:
            p = self.path / rel
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
                (self.path / f"{rel}.lock").unlink(missing_ok=True)  # a Stage 1 table's lock
        self.manifest.unlink(missing_ok=True)
        if runs.is_dir() and not any(runs.iterdir()):
            runs.rmdir()
