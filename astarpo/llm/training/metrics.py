"""Step metrics: a JSONL logger that also reports to the trackers of ``report_to``
(TensorBoard, Trackio, Weights & Biases), phase timers and peak memory.

Every record is one JSON object per line in ``metrics.jsonl`` (keys like ``reward/mean``,
``time/generate``, ``memory/rss_peak_mb``); each tracker receives the same numeric scalars at
the same ``step``: TensorBoard under ``tb/``, Trackio in its local database (``TRACKIO_DIR``,
project ``TRACKIO_PROJECT`` or ``astarpo``, the run named after the output directory), W&B
under ``wandb/`` (project ``WANDB_PROJECT`` or ``astarpo``; ``WANDB_MODE=offline`` keeps it
local). Trackio and W&B come from the ``trackio`` and ``wandb`` extras.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from astarpo.llm.data.files import append_bytes, read_jsonl_log

__all__ = ["MetricsLogger", "peak_memory", "read_metrics", "response_metrics", "timed"]

logger = logging.getLogger(__name__)

RESUME_HINT = "continue from the last checkpoint with --resume (train(resume=True))."


def peak_memory(device: torch.device) -> dict[str, float]:
    """Peak memory so far: process RSS on CPU, torch peak allocated/reserved on CUDA.

    Returns:
        ``{"memory/rss_peak_mb": ...}`` always, plus ``memory/cuda_peak_allocated_mb`` and
        ``memory/cuda_peak_reserved_mb`` on a CUDA device.
    """
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_mb = rss / 2**20 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB else
    out = {"memory/rss_peak_mb": float(rss_mb)}
    if device.type == "cuda":
        out["memory/cuda_peak_allocated_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        out["memory/cuda_peak_reserved_mb"] = torch.cuda.max_memory_reserved(device) / 2**20
    return out


def response_metrics(lengths: torch.Tensor, truncated: torch.Tensor) -> dict[str, float]:
    """``response_length/mean``, ``response_length/max`` and ``truncation_rate`` of a step's
    responses, from their token counts ``[B]`` and truncation flags ``[B]``."""
    lengths = lengths.float()
    return {
        "response_length/mean": float(lengths.mean()),
        "response_length/max": float(lengths.max()),
        "truncation_rate": float(truncated.float().mean()),
    }


@contextmanager
def timed(times: dict[str, float], name: str, device: torch.device | None = None) -> Iterator[None]:
    """Add the wall time of the block to ``times["time/" + name]`` (synchronizing CUDA)."""
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)
        key = f"time/{name}"
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (empty list when it does not exist).

    A torn last line (a kill during a write) is dropped with a warning, as in the V* table
    (:func:`~astarpo.llm.data.files.read_jsonl_log`).

    Raises:
        ValueError: a corrupt line elsewhere (file and line named).
    """
    if not Path(path).exists():
        return []
    values, _ = read_jsonl_log(path, what="metrics line")
    return [record for _, record in values]


Tracker = tuple[Callable[[dict[str, float], int], None], Callable[[], None]]
"""A tracker's ``(log(scalars, step), close())``."""


def open_tracker(name: str, out_dir: Path, resume_step: int | None) -> Tracker:
    """Start the tracker ``name`` (``"tensorboard"``, ``"trackio"`` or ``"wandb"``) for a run
    in ``out_dir``; a resumed run (``resume_step``) continues TensorBoard's file past that step
    and Trackio's run of the same name, and starts a new W&B run.

    Raises:
        ImportError: the tracker's package is not installed (its extra named).
        RuntimeError: the tracker failed to start (its error, and how to run without it).
    """
    if name == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        purge = None if resume_step is None else resume_step + 1
        writer = SummaryWriter(str(out_dir / "tb"), purge_step=purge)

        def tb_log(scalars: dict[str, float], step: int) -> None:
            for k, v in scalars.items():
                writer.add_scalar(k, v, step)

        return tb_log, writer.close
    try:
        module = __import__(name)
    except ImportError as e:
        raise ImportError(
            f"report_to={name!r} needs the {name} package: pip install 'astarpo[{name}]'."
        ) from e
    project = os.environ.get(f"{name.upper()}_PROJECT", "astarpo")
    try:
        if name == "trackio":
            resume = "never" if resume_step is None else "allow"
            run = module.init(project=project, name=out_dir.resolve().name, resume=resume)
            return run.log, module.finish
        run = module.init(project=project, name=out_dir.resolve().name, dir=str(out_dir))
    except Exception as e:  # a login, network or settings problem of the tracker
        raise RuntimeError(
            f"report_to={name!r}: {name} failed to start ({type(e).__name__}: {e}); fix its "
            f"settings (e.g. {name.upper()}_MODE=offline for wandb, a login), or leave it out of "
            "report_to (--report-to tensorboard, or none). Nothing of the run was kept."
        ) from e
    return run.log, run.finish


class MetricsLogger:
    """Append step records to ``out_dir/metrics.jsonl`` and report them to ``report_to``.

    The trackers start before ``metrics.jsonl`` is touched: one that fails to start leaves
    that file as it was (and the trackers started before it are closed).

    Args:
        out_dir: Output directory (created).
        report_to: Trackers (``"tensorboard"``, ``"trackio"``, ``"wandb"``); empty for none.
        resume_step: When resuming, records with ``step > resume_step`` (written after the
            checkpoint by the interrupted run) are dropped so the file matches an uninterrupted
            run.

    Raises:
        ImportError, RuntimeError: a tracker is not installed or fails to start
            (:func:`open_tracker`).
    """

    def __init__(
        self,
        out_dir: str | Path,
        report_to: Sequence[str] = ("tensorboard",),
        resume_step: int | None = None,
    ) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "metrics.jsonl"
        self.trackers: list[Tracker] = []
        try:
            for name in report_to:
                self.trackers.append(open_tracker(name, self.dir, resume_step))
        except BaseException:
            self.close()
            raise
        if resume_step is None:
            self.path.write_text("")
        else:
            kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= resume_step]
            self.path.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in kept))

    def log(self, record: dict[str, Any]) -> None:
        """Write one record (must hold ``step``); non-finite floats are written as null.

        Raises:
            OSError: the disk is full ("no space left on device while appending to
                .../metrics.jsonl"); the records before are intact.
        """
        step = int(record["step"])
        clean = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in record.items()
        }
        line = json.dumps(clean, allow_nan=False) + "\n"  # whole, or undone on a full disk
        append_bytes(self.path, line.encode("utf-8"), then=RESUME_HINT)
        scalars = {
            k: v
            for k, v in record.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        for tracker_log, _ in self.trackers:
            tracker_log(scalars, step)

    def close(self) -> None:
        """Flush and close the trackers."""
        trackers, self.trackers = self.trackers, []
        for _, close in trackers:
            close()
