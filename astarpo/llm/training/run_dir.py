"""The run directory of Stage 2: refuse to mix two runs, and refuse a resume that would not
reproduce the uninterrupted run.

A fresh run refuses an ``output_dir`` that holds an earlier run unless
``overwrite_output_dir`` (``astarpo train --overwrite``), which first removes the previous
run's files (checkpoints, ``metrics.jsonl``, ``tb/``, ``final/``, ``run_config.json``). It then
writes ``run_config.json``: the resolved config, the algorithm and its settings as it ran
(:func:`algorithm_settings`), the reward functions' dotted
paths, fingerprints of the training rows and of the V* values, and the settings of the
trainer's extensions (:meth:`~astarpo.llm.training.extensions.TrainerExtension.settings`, e.g.
the refresh rule of the reference). A resume compares the current
run with that file and refuses every difference that changes the result, naming each field;
:data:`RESUMABLE_FIELDS` may change.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from astarpo import __version__
from astarpo.llm.rewards.scoring import reward_path
from astarpo.llm.training.refresh import REFRESH_DIR

__all__ = [
    "RESUMABLE_FIELDS",
    "RUN_CONFIG",
    "RunDirError",
    "announce_resume",
    "check_resume",
    "discard_fresh_run",
    "fingerprint",
    "prepare_fresh_run",
    "run_record",
    "start_run",
    "write_json_atomic",
]

RUN_CONFIG = "run_config.json"

logger = logging.getLogger(__name__)

RESUMABLE_FIELDS = frozenset(
    {
        "max_steps",
        "max_train_seconds",
        "eval_steps",
        "eval_every_seconds",
        "save_steps",
        "save_total_limit",
        "progress",
        "report_to",
        "output_dir",
        "overwrite_output_dir",
        "reward_timeout",
        "dist_timeout",
        "gpu_memory_utilization",
        "micro_batch_size",
        "parallel",
    }
)
"""Config fields a resume may change: they stop, log, evaluate or save, or (``micro_batch_size``,
``parallel``) only change how a step is laid out in memory, like the world size, so every step's
result stays that of the uninterrupted run (up to float rounding for the last two)."""


class RunDirError(ValueError):
    """The run directory holds another run, or a resume differs from the run it continues."""


def fingerprint(obj: Any) -> str:
    """SHA-256 of ``obj`` as canonical JSON (keys sorted; numpy arrays as lists)."""

    def default(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            return x.tolist()
        return repr(x)

    text = json.dumps(obj, sort_keys=True, default=default, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def algorithm_settings(algorithm: Any) -> dict[str, Any]:
    """The settings of the algorithm object that runs: its ``config`` dataclass when it has one
    (the baselines), else its public scalar attributes (``AStarPO.beta2``). Recorded in
    ``run_config.json``, so an ``algorithm=`` passed to the Trainer is recorded as it ran."""
    cfg = getattr(algorithm, "config", None)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    return {
        k: v
        for k, v in vars(algorithm).items()
        if not k.startswith("_") and isinstance(v, (bool, int, float, str))
    }


def run_record(
    config: Any,
    algorithm: Any,
    rows: Sequence[Mapping[str, Any]],
    reward_funcs: Sequence[Callable[..., Any]],
    v_star: np.ndarray | None,
    extensions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``run_config.json`` holds for this run (see the module docstring); ``algorithm``
    is the algorithm object that runs (its ``name`` and :func:`algorithm_settings`),
    ``extensions`` the settings of the trainer's extensions by name (``None``: none)."""
    return {
        "astarpo_version": __version__,
        "algorithm": algorithm.name,
        "config_class": type(config).__qualname__,
        "config": dataclasses.asdict(config),
        "rewards": [reward_path(f) for f in reward_funcs],
        "data": {"rows": len(rows), "sha256": fingerprint([dict(r) for r in rows])},
        "v_star": None if v_star is None else fingerprint(np.asarray(v_star, np.float64)),
        "algorithm_settings": algorithm_settings(algorithm),
        "extensions": extensions,
    }


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as standard JSON (no NaN/Infinity) to ``path``: temp file, fsync, rename.

    Raises:
        OSError: ``errno.ENOSPC`` naming ``path`` when the disk is full (the previous file, if
            any, is intact).
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(json.dumps(obj, indent=1, sort_keys=True, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise OSError(
                errno.ENOSPC,
                f"no space left on device while writing {path}; the previous file (if any) is "
                "intact. Free space and rerun.",
            ) from e
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _run_files(out: Path) -> list[Path]:
    """What a run writes in ``out``: checkpoints, metrics, TensorBoard, final model, config,
    refreshed references."""
    if not out.is_dir():
        return []
    names = {"metrics.jsonl", "tb", "final", RUN_CONFIG, REFRESH_DIR}
    return [
        p
        for p in out.iterdir()
        if p.name in names or p.name.startswith(("checkpoint-", ".tmp-checkpoint-"))
    ]


def prepare_fresh_run(output_dir: str | Path, overwrite: bool, record: dict[str, Any]) -> None:
    """Check that ``output_dir`` holds no earlier run (or remove it with ``overwrite``), then
    write ``run_config.json``. Call on the main process only.

    An earlier run is any of ``metrics.jsonl``, ``checkpoint-*``, ``tb/``, ``final/`` or
    ``run_config.json``; other files (notes, a benchmark's spec) are left alone.

    Raises:
        RunDirError: ``output_dir`` holds an earlier run and ``overwrite`` is off, or it cannot
            be created.
    """
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"output_dir {str(out)!r} is a file; give a directory.")
    entries = sorted(p.name for p in _run_files(out))
    if entries and not overwrite:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise RunDirError(
            f"output_dir {str(out)!r} holds an earlier run ({shown}); a new run there would mix "
            "with it. Continue it with --resume (resume=True), start over with --overwrite "
            "(overwrite_output_dir=True, which deletes its checkpoints and metrics), or pick "
            "another --out."
        )
    for p in _run_files(out):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # e.g. under /proc, or a read-only disk: name the path, not an errno
        raise RunDirError(
            f"output_dir {str(out)!r} cannot be created ({e.strerror or e}); choose a writable "
            "folder (--out)."
        ) from e
    write_json_atomic(out / RUN_CONFIG, record)


def discard_fresh_run(output_dir: str | Path) -> None:
    """Remove the run files (``run_config.json``, ``metrics.jsonl``, ``tb/``, ...) of a fresh
    run that failed to start, so that the retry is not refused as an earlier run. Call on the
    main process only, after :func:`prepare_fresh_run` (which left no earlier run there)."""
    for p in _run_files(Path(output_dir)):
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def _differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    diffs = []
    keys = ("algorithm", "algorithm_settings", "config_class", "rewards", "data", "v_star")
    for key in (*keys, "extensions"):
        if saved.get(key) != json.loads(json.dumps(now.get(key))):
            diffs.append(f"{key}: {saved.get(key)!r} -> {now.get(key)!r}")
    old, new = saved.get("config", {}), json.loads(json.dumps(now["config"]))
    for name in sorted(set(old) | set(new)):
        if name not in RESUMABLE_FIELDS and old.get(name) != new.get(name):
            diffs.append(f"{name}: {old.get(name)!r} -> {new.get(name)!r}")
    return diffs


def check_resume(output_dir: str | Path, record: dict[str, Any]) -> list[str]:
    """Compare this run with the ``run_config.json`` of the run it resumes.

    Returns:
        Warnings (a run directory made before run configs were stored is not checked).

    Raises:
        RunDirError: naming each field that differs and would change the result.
    """
    path = Path(output_dir) / RUN_CONFIG
    if not path.is_file():
        return [f"{path} is missing (an older run?); the resume is not checked against it."]
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: corrupt run config ({e}).") from e
    diffs = _differences(saved, record)
    if diffs:
        raise RunDirError(
            f"cannot resume {str(output_dir)!r}: the run would differ from the one it continues "
            f"({'; '.join(diffs)}). Use the same settings (only "
            f"{', '.join(sorted(RESUMABLE_FIELDS))} may change), or start a new run in "
            "another --out."
        )
    return []


def start_run(
    output_dir: str | Path, record: dict[str, Any], resume: bool, overwrite: bool, is_main: bool
) -> None:
    """Before training: a fresh run checks (and on the main process prepares) ``output_dir``
    (:func:`prepare_fresh_run`); a resume is checked against the stored run
    (:func:`check_resume`, its warnings logged).

    Raises:
        RunDirError: see :func:`prepare_fresh_run` and :func:`check_resume`.
    """
    if resume and overwrite:
        raise RunDirError("resume and overwrite_output_dir exclude each other; choose one.")
    if resume:
        for warning in check_resume(output_dir, record):
            logger.warning(warning)
    elif is_main:
        prepare_fresh_run(output_dir, overwrite, record)


def announce_resume(output_dir: str | Path, step: int, max_steps: int, is_main: bool) -> None:
    """Print ``resuming DIR from step N (N of M steps done)`` to stderr on the main process."""
    if is_main:
        print(
            f"resuming {output_dir} from step {step} ({step} of {max_steps} steps done)",
            file=sys.stderr,
            flush=True,
        )
