"""Checkpoints of the Stage 2 loop: model, optimizer, extra modules, RNG states, data position.

Layout: ``<output_dir>/checkpoint-<step>/`` with ``trainer_state.pt`` (algorithm modules,
python/numpy/torch RNG states, step, data position, elapsed training time; written by rank 0)
and the policy with its optimizer state:

* one process or DDP: ``model.pt`` (the policy's full ``state_dict``, written by rank 0) and the
  optimizer's ``state_dict`` inside ``trainer_state.pt``;
* FSDP2: ``sharded/``, a ``torch.distributed.checkpoint`` directory in which every rank writes
  its own shards of the model and the optimizer (nothing is gathered on one rank;
  :func:`~astarpo.llm.parallel.state.save_sharded`).

Either layout resumes with any world size and strategy (DDP, FSDP2 or one process): parameter
names are those of the unwrapped model, and a sharded checkpoint is resharded on load. Loading
one and continuing gives the same losses as a run that was never interrupted (the data order
and every sampling seed derive from ``(seed, step)``).

Safety: the ``.pt`` files are read with ``torch.load(..., weights_only=True)``, which unpickles
only tensors and plain containers (dict, list, tuple, str, numbers), and a sharded checkpoint
with the same restriction (:func:`~astarpo.llm.parallel.state.load_sharded`); a crafted file
that would run code is refused with :class:`CheckpointError`. The RNG states are therefore
stored as lists and tensors, not as numpy arrays.

A failed write (disk full, ...) removes the partial ``.tmp-checkpoint-<step>`` and leaves the
previous checkpoints as they were (the error names the checkpoint, says when the disk is full,
and names the previous checkpoint, intact); a checkpoint only ever replaces another once it is
whole. ``save_total_limit`` keeps the newest checkpoints only (:func:`rotate_checkpoints`).
The final model (a plain Hugging Face folder) is written by
:mod:`astarpo.llm.training.final_model`.
"""

from __future__ import annotations

import logging
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.distributed.checkpoint import CheckpointException

from astarpo.llm.data.files import disk_full
from astarpo.llm.parallel.dist import barrier, dist_info_from_env, is_main_process, unwrap_model
from astarpo.llm.parallel.state import (
    index_to_fqn,
    is_fsdp,
    load_full_state,
    load_sharded,
    save_sharded,
)

__all__ = [
    "CheckpointError",
    "capture_rng",
    "checkpoints",
    "latest_checkpoint",
    "load_checkpoint",
    "load_first_readable",
    "restore_rng",
    "rotate_checkpoints",
    "save_checkpoint",
]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^checkpoint-(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be written or safely read (corrupt, crafted, or the disk is full)."""


def capture_rng() -> dict[str, Any]:
    """The python, numpy and torch (CPU and CUDA) global RNG states, in types that
    ``torch.load(..., weights_only=True)`` accepts (lists, ints, floats, tensors)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()  # noqa: NPY002 (user code)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Restore states captured by :func:`capture_rng`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state(  # noqa: NPY002
        (n["kind"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.random.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    modules: list[torch.nn.Module],
    trainer_state: dict[str, Any],
) -> Path:
    """Write ``checkpoint-<step>`` atomically (to a temporary name, then renamed), once.

    Every rank must call it under ``torchrun``. One process and DDP: rank 0 writes the full,
    unprefixed ``state_dict`` (DDP unwrapped) and the optimizer's. FSDP2: every rank writes its
    own shards of both to ``sharded/`` (no gather), which :func:`load_checkpoint` reshards.

    Returns:
        The checkpoint directory.

    Raises:
        CheckpointError: the write failed (a full disk named as such); the partial files are
            removed and the previous checkpoints are as they were.
    """
    final = Path(output_dir) / f"checkpoint-{step}"
    tmp = Path(output_dir) / f".tmp-checkpoint-{step}"
    sharded = is_fsdp(model)
    state = {**trainer_state, "world_size": dist_info_from_env().world_size, "step": step}
    state["modules"] = [m.state_dict() for m in modules]
    if not sharded:
        state["optimizer"] = optimizer.state_dict()
    try:
        if is_main_process():
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
        barrier()
        if sharded:
            save_sharded(tmp / "sharded", model, optimizer)  # every rank: its own shards
        if is_main_process():
            if not sharded:
                torch.save(unwrap_model(model).state_dict(), tmp / "model.pt")
            torch.save({**state, "rng": capture_rng()}, tmp / "trainer_state.pt")
            _move_into_place(tmp, final)
    except (OSError, RuntimeError) as e:
        full = disk_full(e, tmp.parent)  # before the partial files give their space back
        if is_main_process():
            shutil.rmtree(tmp, ignore_errors=True)  # no debris; earlier checkpoints untouched
        raise _write_error(e, final, full) from e
    barrier()
    return final


def _move_into_place(tmp: Path, final: Path) -> None:
    """Rename the whole checkpoint ``tmp`` to ``final``; a checkpoint already there (the same
    step saved again) is set aside first and deleted only once ``tmp`` has taken its place."""
    if not final.exists():
        tmp.rename(final)
        return
    old = final.with_name(f".tmp-{final.name}-old")  # a run file: --overwrite removes it
    shutil.rmtree(old, ignore_errors=True)
    final.rename(old)
    try:
        tmp.rename(final)
    except OSError:
        old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _write_error(e: BaseException, final: Path, full: bool) -> CheckpointError:
    text = str(e)
    previous = latest_checkpoint(final.parent)
    kept = f"the previous checkpoint, {previous}, is intact" if previous else "none came before"
    if full:  # torch.save says "iostream error" or "unexpected pos" on a full disk
        return CheckpointError(
            f"no space left on device at {final.parent}: checkpoint {final} could not be written "
            f"({text}); its partial files were removed and {kept}. Free space or lower "
            "save_total_limit, then --resume."
        )
    return CheckpointError(
        f"writing checkpoint {final} failed ({text}); its partial files were removed and {kept}."
    )


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-<step>`` directories of ``output_dir``, oldest (smallest step) first."""
    d = Path(output_dir)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)) and p.is_dir()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The ``checkpoint-<step>`` directory with the largest step, or ``None``."""
    found = checkpoints(output_dir)
    return found[-1] if found else None


def rotate_checkpoints(output_dir: str | Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints (``keep=0``: delete none); rank 0 only.

    Returns:
        The deleted directories.
    """
    found = checkpoints(output_dir)
    old = found[:-keep] if keep > 0 and is_main_process() else []
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    return old


def _safe_load(path: Path, device: Any) -> Any:
    """``torch.load(weights_only=True)``: tensors and plain containers only, never code."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        raise CheckpointError(
            f"{path}: refused to load: it holds objects other than tensors and plain containers "
            "(a file from another program, an older astarpo, or crafted to run code); only "
            f"weights_only=True loading is done ({str(e).splitlines()[0]})."
        ) from e
    except (RuntimeError, EOFError, OSError) as e:
        raise CheckpointError(f"{path}: corrupt or unreadable checkpoint file ({e}).") from e


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    modules: list[torch.nn.Module],
) -> dict[str, Any]:
    """Load a checkpoint written with any world size and strategy into ``model`` (plain, DDP or
    FSDP2), ``optimizer`` and ``modules``; restore the RNG states. Every rank reads it.

    Returns:
        The trainer state dict (``step``, data position, ...).

    Raises:
        FileNotFoundError: if ``path`` is not a checkpoint directory.
        CheckpointError: a file is corrupt, or holds objects ``weights_only=True`` refuses.
        ValueError: the checkpoint holds another number of algorithm modules.
    """
    p = Path(path)
    if not (p / "trainer_state.pt").exists():
        raise FileNotFoundError(
            f"{p} is not a checkpoint (no trainer_state.pt); pass a checkpoint-<step> directory "
            "or an output_dir that holds one."
        )
    state = _safe_load(p / "trainer_state.pt", "cpu")
    if len(state["modules"]) != len(modules):
        raise ValueError(
            f"checkpoint has {len(state['modules'])} algorithm modules, the algorithm "
            f"{len(modules)}; resume with the same algorithm."
        )
    inner = unwrap_model(model)
    if (p / "sharded").is_dir():
        try:
            load_sharded(p / "sharded", inner, optimizer)
        except (CheckpointException, pickle.UnpicklingError, RuntimeError, OSError) as e:
            raise CheckpointError(f"{p / 'sharded'}: refused or unreadable ({e}).") from e
    elif not is_fsdp(model):
        device = next(inner.parameters()).device
        inner.load_state_dict(_safe_load(p / "model.pt", device))
        optimizer.load_state_dict(state["optimizer"])
    else:  # a one-process or DDP checkpoint into FSDP2
        optim_state = index_to_fqn(inner, optimizer, state["optimizer"])
        load_full_state(inner, optimizer, _safe_load(p / "model.pt", "cpu"), optim_state)
    for m, sd in zip(modules, state["modules"], strict=True):
        m.load_state_dict(sd)
    restore_rng(state["rng"])
    return dict(state)


def load_first_readable(
    found: list[Path],
    output_dir: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    modules: list[torch.nn.Module],
) -> dict[str, Any]:
    """:func:`load_checkpoint` of the first readable checkpoint of ``found`` (newest first): a
    corrupt one falls back to the next with a warning.

    Raises:
        FileNotFoundError: ``found`` is empty.
        CheckpointError: no checkpoint of ``found`` is readable (the last error).
    """
    if not found:
        raise FileNotFoundError(f"no checkpoint-<step> directory in {output_dir} to resume from.")
    for i, ckpt in enumerate(found):
        try:
            return load_checkpoint(ckpt, model, optimizer, modules)
        except CheckpointError as e:
            if i == len(found) - 1:
                raise
            logger.warning("%s; falling back to %s.", e, found[i + 1].name)
    raise AssertionError("unreachable")
