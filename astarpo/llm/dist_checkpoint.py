"""Checkpoints of data-parallel training: the full (unsharded) state, written by rank 0 only.

The files hold the *full* model (and optimizer) state with the parameter names of the unwrapped
model, so they can be resumed with any world size and strategy (DDP, FSDP2 or one process).
The process-group helpers (:func:`~astarpo.llm.distributed.unwrap_model`,
:func:`~astarpo.llm.distributed.barrier`, ...) are in :mod:`astarpo.llm.distributed`, which
re-exports :func:`full_state_dict`, :func:`save_full_checkpoint` and
:func:`load_full_checkpoint`. They are imported inside the functions because
:mod:`astarpo.llm.distributed` imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["full_state_dict", "load_full_checkpoint", "save_full_checkpoint"]


def _is_fsdp(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def full_state_dict(model: nn.Module) -> dict[str, Any]:
    """The full (unsharded) parameters and buffers on CPU, the same under DDP, FSDP2 or none.

    Under FSDP2 this is a collective: every rank must call it.
    """
    from astarpo.llm.distributed import unwrap_model

    model = unwrap_model(model)
    if _is_fsdp(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state: dict[str, Any] = get_model_state_dict(model, options=options)
        return state
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
    )

    from astarpo.llm.distributed import unwrap_model

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(unwrap_model(model), optimizer, options=options)


def save_full_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write the full model (and optimizer) state to one ``torch.save`` file, from rank 0 only.

    Every rank must call it (FSDP2 gathers shards; all ranks wait at a barrier until the file is
    complete). The file is written to ``path + ".tmp"`` and renamed, so a crash never leaves a
    half-written checkpoint. Parameter names are those of the unwrapped model (no ``module.``
    prefix), so the file loads with any world size and strategy.

    Args:
        path: Destination file.
        model: The trained module (wrapped or not).
        optimizer: Its optimizer, or ``None``.
        extra: Other picklable state (step counter, OGD state, RNG state...).
    """
    from astarpo.llm.distributed import barrier, is_main_process

    model_state = full_state_dict(model)
    optim_state = None if optimizer is None else _full_optimizer_state(model, optimizer)
    if is_main_process():
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        payload = {"model": model_state, "optimizer": optim_state, "extra": dict(extra or {})}
        torch.save(payload, tmp)
        os.replace(tmp, path)
    barrier()


def load_full_checkpoint(
    path: str | Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, Any]:
    """Load a file of :func:`save_full_checkpoint` into a model of any world size and strategy.

    Every rank reads the file (``map_location="cpu"``). Call it after
    :func:`~astarpo.llm.distributed.wrap_model` and after creating the optimizer.

    Args:
        path: A checkpoint file.
        model: The module to restore (wrapped or not).
        optimizer: Its optimizer, restored when the file has an optimizer state.

    Returns:
        The ``extra`` dictionary that was saved.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    from astarpo.llm.distributed import unwrap_model

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist.")
    payload = torch.load(path, map_location="cpu", weights_only=False)
    inner = unwrap_model(model)
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    if _is_fsdp(inner):
        set_model_state_dict(inner, payload["model"], options=options)
    else:
        inner.load_state_dict(payload["model"])
    if optimizer is not None and payload.get("optimizer") is not None:
        set_optimizer_state_dict(inner, optimizer, payload["optimizer"], options=options)
    return dict(payload.get("extra") or {})
