"""Checkpoints of the Stage 2 loop: model, optimizer, extra modules, RNG states, data position.

Layout: ``<output_dir>/checkpoint-<step>/`` with ``model.pt`` (the policy's ``state_dict``) and
``trainer_state.pt`` (optimizer, algorithm modules, python/numpy/torch RNG states, step, data
position, elapsed training time). Loading one and continuing gives the same losses as a run that
was never interrupted (the data order and every sampling seed derive from ``(seed, step)``).
Checkpoints hold the full state with unwrapped parameter names, written by rank 0 only, so they
resume with any world size and strategy (DDP, FSDP2 or one process).
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.parallel.dist import barrier, dist_info_from_env, is_main_process, unwrap_model
from astarpo.llm.parallel.state import (
    full_optimizer_state,
    full_state_dict,
    hf_weights,
    index_to_fqn,
    is_fsdp,
    load_full_state,
)

__all__ = [
    "capture_rng",
    "latest_checkpoint",
    "load_checkpoint",
    "restore_rng",
    "save_checkpoint",
    "save_final_model",
]

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
    """Write ``checkpoint-<step>`` atomically (to a temporary name, then renamed), once.

    Every rank must call it under ``torchrun``; rank 0 writes. Model weights are the full,
    unprefixed ``state_dict`` (DDP unwrapped, FSDP2 shards gathered); under FSDP2 the optimizer
    state is the full state keyed by parameter name (``optimizer_format: "fqn"``), which
    :func:`load_checkpoint` reads with any strategy and world size.

    Returns:
        The checkpoint directory.
    """
    final = Path(output_dir) / f"checkpoint-{step}"
    state = {**trainer_state, "world_size": dist_info_from_env().world_size}
    if is_fsdp(model):
        model_state: dict[str, Any] = full_state_dict(model)
        optim_state = full_optimizer_state(model, optimizer)
        state["optimizer_format"] = "fqn"
    else:
        model_state = unwrap_model(model).state_dict()
        optim_state = optimizer.state_dict()
    if is_main_process():
        tmp = Path(output_dir) / f".tmp-checkpoint-{step}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        torch.save(model_state, tmp / "model.pt")
        torch.save(
            {
                "step": step,
                "optimizer": optim_state,
                "modules": [m.state_dict() for m in modules],
                "rng": capture_rng(),
                **state,
            },
            tmp / "trainer_state.pt",
        )
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    barrier()
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
    """Load a checkpoint written with any world size and strategy into ``model`` (plain, DDP or
    FSDP2), ``optimizer`` and ``modules``; restore the RNG states. Every rank reads it.

    Returns:
        The trainer state dict (``step``, data position, ...).

    Raises:
        FileNotFoundError: if ``path`` is not a checkpoint directory.
        ValueError: the checkpoint holds another number of algorithm modules.
    """
    p = Path(path)
    if not (p / "trainer_state.pt").exists():
        raise FileNotFoundError(
            f"{p} is not a checkpoint (no trainer_state.pt); pass a checkpoint-<step> directory "
            "or an output_dir that holds one."
        )
    state = torch.load(p / "trainer_state.pt", map_location="cpu", weights_only=False)
    if len(state["modules"]) != len(modules):
        raise ValueError(
            f"checkpoint has {len(state['modules'])} algorithm modules, the algorithm "
            f"{len(modules)}; resume with the same algorithm."
        )
    inner = unwrap_model(model)
    if not is_fsdp(model) and state.get("optimizer_format") != "fqn":
        device = next(inner.parameters()).device
        inner.load_state_dict(torch.load(p / "model.pt", map_location=device, weights_only=True))
        optimizer.load_state_dict(state["optimizer"])
    else:
        model_state = torch.load(p / "model.pt", map_location="cpu", weights_only=True)
        optim_state = state["optimizer"]
        if state.get("optimizer_format") != "fqn":
            optim_state = index_to_fqn(inner, optimizer, optim_state)
        load_full_state(inner, optimizer, model_state, optim_state)
    for m, sd in zip(modules, state["modules"], strict=True):
        m.load_state_dict(sd)
    restore_rng(state["rng"])
    return dict(state)


def save_final_model(model: torch.nn.Module, tokenizer: Any, path: str | Path) -> Path:
    """Save the trained policy as a plain Hugging Face model directory, once (rank 0).

    Works for a plain, DDP, FSDP2 (shards gathered: every rank must call it) or LoRA policy
    (adapters merged into the weights, so ``AutoModelForCausalLM.from_pretrained(path)`` loads
    the trained policy without peft).

    Returns:
        ``path``.
    """
    path = Path(path)
    state = {name: t.detach().cpu().clone() for name, t in hf_weights(model)}
    if is_main_process():
        inner: Any = unwrap_model(model)
        base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
        base.save_pretrained(path, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
    barrier()
    return path
