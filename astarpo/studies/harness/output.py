"""A study's output folder: what it wrote there, so that ``--overwrite`` deletes only that.

:class:`OutputDir` records each path (relative to the folder) in ``NAME_manifest.json`` before
the study writes it. :meth:`OutputDir.clear` refuses a folder holding files the study would
write but did not (a user's ``runs/`` of training runs, a ``NAME.md`` of their own), and with
``overwrite`` deletes exactly the recorded paths (and a recorded file's ``.lock``); anything else
in the folder is never touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

__all__ = ["OutputDir"]


class OutputDir:
    """The output folder of one study.

    Args:
        path: The folder.
        stem: The study's file stem: it writes ``stem.json``, ``stem.md``, ``stem.png`` and
            records them in ``stem_manifest.json``.
        outputs: The other top-level names the study writes; ``runs`` holds one folder per
            run, each counted on its own.
    """

    def __init__(self, path: str | Path, stem: str, outputs: tuple[str, ...] = ()) -> None:
        self.path, self.stem = Path(path), stem
        self.outputs = (*outputs, "runs", f"{stem}.json", f"{stem}.md", f"{stem}.png")
        self.manifest = self.path / f"{stem}_manifest.json"

    def recorded(self) -> list[str]:
        """The paths the manifest lists (relative; empty without a manifest).

        Raises:
            ValueError: the manifest is not a JSON list of relative paths inside the folder.
        """
        if not self.manifest.exists():
            return []
        try:
            paths = json.loads(self.manifest.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{self.manifest} is not a study manifest ({e}); move it away.") from e
        if not isinstance(paths, list) or not all(
            isinstance(p, str) and p and not Path(p).is_absolute() and ".." not in Path(p).parts
            for p in paths
        ):
            raise ValueError(f"{self.manifest} is not a list of relative paths; move it away.")
        return paths

    def record(self, rel: str) -> Path:
        """Add ``rel`` to the manifest (before it is written); returns its full path."""
        paths = self.recorded()
        if rel not in paths:
            self.path.mkdir(parents=True, exist_ok=True)
            self.manifest.write_text(json.dumps([*paths, rel], indent=0))
        return self.path / rel

    def foreign(self) -> list[str]:
        """The paths under the folder that the study would write but its manifest does not list."""
        ours, found = set(self.recorded()), []
        for name in self.outputs:
            p = self.path / name
            if name == "runs" and p.is_dir():
                found += [
                    f"runs/{c.name}" for c in sorted(p.iterdir()) if f"runs/{c.name}" not in ours
                ]
            elif name != "runs" and p.exists() and name not in ours:
                found.append(name)
        return found

    def clear(self, overwrite: bool) -> None:
        """Make the folder ready for a new run of the study.

        Raises:
            FileExistsError: the folder holds files the study would write that its manifest does
                not list (nothing is deleted), or an earlier run of the study and not
                ``overwrite`` (with it, exactly the manifest's paths are deleted).
        """
        foreign = self.foreign()
        if foreign:
            more = f" and {len(foreign) - 6} more" if len(foreign) > 6 else ""
            raise FileExistsError(
                f"{self.path} holds files that this study did not write ({', '.join(foreign[:6])}"
                f"{more}; no {self.manifest.name} lists them); nothing was deleted. Choose "
                "another --out, or move them."
            )
        ours = self.recorded()
        present = [p for p in ours if (self.path / p).exists()]
        if present and not overwrite:
            raise FileExistsError(
                f"{self.path} holds an earlier run of this study ({len(present)} paths in its "
                f"{self.manifest.name}); pass --overwrite (overwrite=True) to delete exactly "
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
        runs = self.path / "runs"
        if runs.is_dir() and not any(runs.iterdir()):
            runs.rmdir()
