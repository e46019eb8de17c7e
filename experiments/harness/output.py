"""A study's output folder (:class:`OutputDir`): a lock, so that one study at a time writes it;
a manifest, ``STEM_manifest.json``, of every path the study writes (recorded before it is
written) and of every file in a folder it finished writing (sealed), so that ``--overwrite``
deletes exactly those, file by file, and keeps (and names) anything else; and the study's
settings, so that ``--resume`` refuses other settings by name."""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["LOCK", "RUN_NEUTRAL", "OutputDir", "open_output"]

_LOCK = threading.Lock()  # runs started from threads record their folders one at a time
#: The lock file a study holds in its output folder while it runs.
LOCK = ".study.lock"
_HELD: dict[tuple[int, int], int] = {}  # (device, inode) of a lock file -> its descriptor


class OutputDir:
    """The output folder ``path`` of one study, which writes ``STEM.json/md/png``, ``runs/``
    (one folder per run) and the other top-level names ``outputs``."""

    def __init__(self, path: str | Path, stem: str, outputs: tuple[str, ...] = ()) -> None:
        self.path, self.stem = Path(path), stem
        self.outputs = (*outputs, "runs", f"{stem}.json", f"{stem}.md", f"{stem}.png")
        self.manifest = self.path / f"{stem}_manifest.json"

    def _read(self) -> dict[str, Any]:
        """The manifest: ``paths`` (recorded) and ``files`` (sealed), ``settings``."""
        try:
            data = json.loads(self.manifest.read_text()) if self.manifest.exists() else {}
        except json.JSONDecodeError as e:
            raise ValueError(f"{self.manifest} is not a study manifest ({e}); move it away.") from e
        if isinstance(data, list):  # a manifest of paths alone (written before the seals)
            data = {"paths": data}
        ok = isinstance(data, dict) and (not data or "paths" in data)
        for key in ("paths", "files") if ok else ():
            items = data.setdefault(key, [])
            ok = ok and isinstance(items, list) and all(_relative(p) for p in items)
        if not ok:
            raise ValueError(f"{self.manifest} is not a list of relative paths; move it away.")
        return data

    def _write(self, data: Mapping[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=0))
        os.replace(tmp, self.manifest)

    def recorded(self) -> list[str]:
        """The paths the manifest lists, relative (``ValueError`` for another manifest)."""
        paths: list[str] = self._read()["paths"]
        return paths

    def record(self, rel: str) -> Path:
        """Add ``rel`` to the manifest (before it is written; the manifest replaced whole);
        returns its full path."""
        with _LOCK:
            data = self._read()
            if rel not in data["paths"]:
                self._write({**data, "paths": [*data["paths"], rel]})
        return self.path / rel

    def seal(self, rel: str | None = None) -> None:
        """Record every file now under the recorded folder ``rel`` (every recorded folder by
        default) as the study's: ``--overwrite`` deletes those and keeps any other."""
        with _LOCK:
            data = self._read()
            files = set(data["files"])
            for folder in [rel] if rel else data["paths"]:
                root = self.path / folder
                if root.is_dir() and not root.is_symlink():
                    files |= {str(p.relative_to(self.path)) for p in _files(root)}
            self._write({**data, "files": sorted(files)})

    def settings(self) -> dict[str, Any] | None:
        """The settings an earlier run of the study recorded (None: none recorded)."""
        found: dict[str, Any] | None = self._read().get("settings")
        return found

    def keep_settings(self, settings: Mapping[str, Any]) -> None:
        """Record the study's settings (compared by a later ``--resume``)."""
        with _LOCK:
            self._write({**self._read(), "settings": json.loads(json.dumps(settings))})

    def lock(self) -> None:
        """Hold the folder's lock (:data:`LOCK`) until this process ends; ``RuntimeError``
        naming the process that holds it (another study, or this one started twice)."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        stat = os.fstat(fd)
        key = (stat.st_dev, stat.st_ino)
        if key in _HELD:  # this process holds it already (the folder may have moved since)
            os.close(fd)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RuntimeError(
                f"--out {self.path} is in use by a study that is still running ({holder}); "
                "wait for it to finish (then --resume continues it), or choose another --out."
            ) from None
        os.ftruncate(fd, 0)
        now = datetime.datetime.now().isoformat(timespec="seconds")
        os.write(fd, f"pid {os.getpid()}, {self.stem}, since {now}".encode())
        _HELD[key] = fd

    def clear(self, overwrite: bool, resume: bool = False) -> list[str]:
        """Make the folder ready for a run of the study, under its :meth:`lock`:
        ``FileExistsError`` (nothing deleted) when it holds files the study would write that the
        manifest does not list, or an earlier run and neither ``overwrite`` nor ``resume``; with
        ``overwrite`` the recorded files are deleted (a sealed folder file by file, keeping the
        files the study did not write), with ``resume`` they are kept (the runner reads back
        the finished runs: :meth:`~experiments.harness.runner.Runner.run`). ``ValueError`` for
        both. Returns the files kept (relative paths)."""
        if overwrite and resume:
            raise ValueError(
                "--overwrite deletes the earlier run and --resume continues it; choose one."
            )
        self.lock()
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
            return []
        present = [p for p in ours if (self.path / p).exists()]
        if present and not overwrite:
            raise FileExistsError(
                f"{self.path} holds an earlier run of this study ({len(present)} paths in its "
                f"{self.manifest.name}); continue it with --resume (resume=True: its finished "
                "runs are read back), pass --overwrite (overwrite=True) to delete exactly "
                "those and start over, or choose another --out."
            )
        kept = self._delete(ours, set(self._read()["files"]))
        self.manifest.unlink(missing_ok=True)
        if runs.is_dir() and not any(runs.iterdir()):
            runs.rmdir()
        return kept

    def _delete(self, ours: list[str], sealed: set[str]) -> list[str]:
        """Delete the recorded paths ``ours``: a folder with sealed files file by file (the
        others kept, their folders too), an unsealed one whole (a run the study did not
        finish); returns the files kept."""
        kept: list[str] = []
        for rel in ours:
            p = self.path / rel
            if not p.is_dir() or p.is_symlink():
                p.unlink(missing_ok=True)
                (self.path / f"{rel}.lock").unlink(missing_ok=True)  # a Stage 1 table's lock
                continue
            mine = {s for s in sealed if s.startswith(f"{rel}/")}
            if not mine:
                shutil.rmtree(p)
                continue
            for f in _files(p):
                name = str(f.relative_to(self.path))
                if name in mine or name.endswith(".lock"):
                    f.unlink()
                else:
                    kept.append(name)
            for d in sorted((d for d in p.rglob("*") if d.is_dir()), reverse=True):
                if not any(d.iterdir()):
                    d.rmdir()
            if not any(p.iterdir()):
                p.rmdir()
        return kept


def _relative(p: Any) -> bool:
    """Whether ``p`` is a relative path inside the folder (a manifest's entry)."""
    ok = isinstance(p, str) and bool(p)
    return ok and not Path(p).is_absolute() and ".." not in Path(p).parts


def _files(root: Path) -> list[Path]:
    """Every file (or link) under ``root``."""
    return [p for p in root.rglob("*") if p.is_file() or p.is_symlink()]


#: Settings that do not change what a run computes (how many run at once): a ``--resume`` may
#: change them, and a run's spec is compared without them.
RUN_NEUTRAL = ("workers", "sweep_workers")


def open_output(
    out_dir: str | Path,
    stem: str,
    outputs: tuple[str, ...],
    cfg: Any,
    overwrite: bool,
    resume: bool,
    say: Callable[[str], Any] = print,
) -> OutputDir:
    """A study's :class:`OutputDir`, locked and cleared by the ``--overwrite`` policy (the
    files it kept named), its settings (``cfg.to_dict()``) recorded; with ``resume``,
    ``ValueError`` naming each setting that differs from the earlier run's (nothing deleted)."""
    output = OutputDir(out_dir, stem, outputs)
    kept = output.clear(overwrite, resume)
    if kept:
        shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
        print(
            f"--overwrite: kept {len(kept)} files the study did not write: {shown}",
            file=sys.stderr,
            flush=True,
        )
    settings = {k: v for k, v in cfg.to_dict().items() if k not in RUN_NEUTRAL}
    settings = json.loads(json.dumps(settings))
    earlier = output.settings()
    if resume and earlier is not None and earlier != settings:
        changed = [k for k in sorted({*earlier, *settings}) if earlier.get(k) != settings.get(k)]
        said = "; ".join(
            f"--{k.replace('_', '-')} {_text(earlier.get(k))} then, {_text(settings.get(k))} now"
            for k in changed
        )
        raise ValueError(
            f"--resume continues the earlier run in {output.path} with its settings, but {said}; "
            "resume with the earlier settings, or pass --overwrite to start over (or choose "
            "another --out). Nothing was changed."
        )
    if earlier is None or not resume:
        output.keep_settings(settings)
    return output


def _text(value: Any) -> str:
    """A setting as its flag takes it (a list comma-separated)."""
    if isinstance(value, list):
        return ",".join(map(str, value))
    return "(none)" if value is None else str(value)
