"""Checkpoints of the Stage 2 loop: model, optimizer, extra modules, RNG states, data position.

Layout: ``<output_dir>/checkpoint-<step>/`` with ``model.pt`` (the policy's ``state_dict``) and
``trainer_state.pt`` (optimizer, algorithm modules, python/numpy/torch RNG states, step, data
position, elapsed training time). Loading one and continuing gives the same losses as a run that
was never interrupted (the data order and every sampling seed derive from ``(seed, step)``).
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["capture_rng", "latest_checkpoint", "load_checkpoint", "restore_rng", "save_checkpoint"]

_NAME = re.compile(r"^checkpoint-(\d+)$")


def capture_rng() -> dict[str, Any]:
    """The python, numpy and torch (CPU and CUDA) global RNG states."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),  # noqa: NPY002 (user code may use it)
        "torch": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Restore states captured by :func:`capture_rng`."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])  # noqa: NPY002
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
    """Write ``checkpoint-<step>`` atomically (to a temporary name, then renamed).

    Returns:
        The checkpoint directory.
    """
    final = Path(output_dir) / f"checkpoint-{step}"
    tmp = Path(output_dir) / f".tmp-checkpoint-{step}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    torch.save(model.state_dict(), tmp / "model.pt")
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "modules": [m.state_dict() for m in modules],
            "rng": capture_rng(),
            **trainer_state,
        },
        tmp / "trainer_state.pt",
    )
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The ``checkpoint-<step>`` directory with the largest step, or ``None``."""
    d = Path(output_dir)
    if not d.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)) and p.is_dir()]
    return max(found)[1] if found else None


def load_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    modules: list[torch.nn.Module],
) -> dict[str, Any]:
    """Load a checkpoint into ``model``, ``optimizer`` and ``modules``; restore the RNG states.

    Returns:
        The trainer state dict (``step``, data position, ...).

    Raises:
        FileNotFoundError: if ``path`` is not a checkpoint directory.
    """
    p = Path(path)
    if not (p / "trainer_state.pt").exists():
        raise FileNotFoundError(
            f"{p} is not a checkpoint (no trainer_state.pt); pass a checkpoint-<step> directory "
            "or an output_dir that holds one."
        )
    device = next(model.parameters()).device
    model.load_state_dict(torch.load(p / "model.pt", map_location=device, weights_only=True))
    state = torch.load(p / "trainer_state.pt", map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    if len(state["modules"]) != len(modules):
        raise ValueError(
            f"checkpoint has {len(state['modules'])} algorithm modules, the algorithm "
            f"{len(modules)}; resume with the same algorithm."
        )
    for m, sd in zip(modules, state["modules"], strict=True):
        m.load_state_dict(sd)
    restore_rng(state["rng"])
    return dict(state)
