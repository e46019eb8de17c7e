"""The full (unsharded) state of a policy under DDP, FSDP2 or one process.

Checkpoints (:mod:`astarpo.llm.training.checkpoint`) hold the full model and optimizer state with
the parameter names of the unwrapped model, so a run resumes with any world size and strategy.
These functions produce and restore that state whatever the wrapping; under FSDP2 each is a
collective (every rank must call it). Imports only :mod:`torch` and
:mod:`astarpo.llm.parallel.dist`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from astarpo.llm.parallel.dist import unwrap_model

__all__ = [
    "full_optimizer_state",
    "full_state_dict",
    "hf_weights",
    "index_to_fqn",
    "is_fsdp",
    "load_full_state",
]


def is_fsdp(model: nn.Module) -> bool:
    """True when ``model`` (or the module inside its DDP wrapper) is an FSDP2 module."""
    from torch.distributed.fsdp import FSDPModule  # torch.distributed.fsdp is slow to import

    return isinstance(unwrap_model(model), FSDPModule)


def full_state_dict(model: nn.Module) -> dict[str, Any]:
    """The full parameters and buffers on CPU, the same under DDP, FSDP2 or none.

    Under FSDP2 this is a collective: every rank must call it.
    """
    inner = unwrap_model(model)
    if is_fsdp(inner):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state: dict[str, Any] = get_model_state_dict(inner, options=options)
        return state
    return {k: v.detach().cpu().clone() for k, v in inner.state_dict().items()}


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's full state keyed by parameter name (a collective under FSDP2)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(unwrap_model(model), optimizer, options=options)


def load_full_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    model_state: dict[str, Any],
    optimizer_state: dict[str, Any],
) -> None:
    """Load a full model state and a name-keyed optimizer state into a model of any wrapping.

    Args:
        model: The policy (plain, DDP or FSDP2).
        optimizer: Its optimizer.
        model_state: Full ``state_dict`` with unwrapped parameter names.
        optimizer_state: Optimizer state keyed by parameter name (see :func:`index_to_fqn`).
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    inner = unwrap_model(model)
    options = StateDictOptions(full_state_dict=True)
    if is_fsdp(inner):
        set_model_state_dict(inner, model_state, options=options)
    else:
        inner.load_state_dict(model_state)
    set_optimizer_state_dict(inner, optimizer, optimizer_state, options=options)


def index_to_fqn(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> dict[str, Any]:
    """A ``torch.optim`` state dict (parameters by index) keyed by parameter name instead.

    Raises:
        ValueError: The optimizer holds parameters outside ``model`` (an algorithm module).
    """
    names = {id(p): n for n, p in unwrap_model(model).named_parameters()}
    order = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            if id(param) not in names:
                raise ValueError(
                    "cannot resume an FSDP2 run whose optimizer holds parameters outside the "
                    "policy (an algorithm module) from a one-process checkpoint."
                )
            order.append(names[id(param)])
    return {
        "state": {order[int(i)]: v for i, v in state["state"].items()},
        "param_groups": [
            {**g, "params": [order[i] for i in g["params"]]} for g in state["param_groups"]
        ],
    }


def hf_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` pairs with the Hugging Face names of the unwrapped model: what vLLM's
    ``load_weights`` expects and what ``save_pretrained`` of the final model writes.

    Unwraps DDP; gathers FSDP2 ``DTensor`` shards (a collective under FSDP2: every rank must
    iterate); for a peft LoRA model merges the adapters into the base weights and yields copies
    of the merged tensors under the base names (``lora_`` tensors are skipped), then unmerges.

    Args:
        model: The policy (plain, DDP, FSDP2 or peft).

    Yields:
        ``(name, tensor)`` for each parameter and buffer.
    """
    inner = unwrap_model(model)
    is_peft = hasattr(inner, "merge_adapter") and hasattr(inner, "unmerge_adapter")
    if is_peft:
        inner.merge_adapter()  # type: ignore[operator]
    try:
        for name, tensor in inner.state_dict().items():
            if is_peft:
                if "lora_" in name or "modules_to_save" in name:
                    continue
                name = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
            value = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            # peft merges and unmerges in place: a merged tensor must be copied before the
            # unmerge below, or the caller would receive the base weights again.
            yield name, value.detach().clone() if is_peft else value.detach()
    finally:
        if is_peft:
            inner.unmerge_adapter()  # type: ignore[operator]
