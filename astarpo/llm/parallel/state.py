"""The state of a policy and its optimizer under DDP, FSDP2 or one process: full, or sharded
with ``torch.distributed.checkpoint`` (DCP).

Checkpoints (:mod:`astarpo.llm.training.checkpoint`) use the parameter names of the unwrapped
model, so a run resumes with any world size and strategy. Under FSDP2 they are DCP directories
(:func:`save_sharded`): each rank writes its own shards, nothing is gathered on one rank, and
:func:`load_sharded` reshards them into any world size (one process included). One process and
DDP keep one full ``state_dict`` file (:func:`full_state_dict`). The full-state functions are
collectives under FSDP2 (every rank must call them). Imports only :mod:`torch` and
:mod:`astarpo.llm.parallel.dist`.

Safety: DCP reads its ``.metadata`` file with plain ``pickle`` and its non-tensor entries with
``torch.load(weights_only=False)``; :func:`load_sharded` reads the first with an unpickler that
accepts DCP's own metadata classes only and the second with ``weights_only=True``, so a crafted
checkpoint cannot run code.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.stateful import Stateful

from astarpo.llm.parallel.dist import unwrap_model

__all__ = [
    "full_optimizer_state",
    "full_state_dict",
    "hf_weights",
    "index_to_fqn",
    "is_fsdp",
    "load_full_state",
    "load_sharded",
    "save_sharded",
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


class PolicyState(Stateful):
    """The policy and its optimizer as one DCP app state: sharded ``DTensor`` entries under
    FSDP2, plain tensors otherwise, keyed by the unwrapped model's parameter names (what
    ``torch.distributed.checkpoint.state_dict.get_state_dict`` returns).

    Args:
        model: The policy (plain, DDP or FSDP2).
        optimizer: Its optimizer.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = unwrap_model(model), optimizer

    def state_dict(self) -> dict[str, Any]:
        """``{"model": ..., "optimizer": ...}`` of this rank (its shards under FSDP2)."""
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optimizer": optim_state}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load what :meth:`state_dict` returned (after DCP filled it from the files)."""
        from torch.distributed.checkpoint.state_dict import set_state_dict

        model_state, optim_state = state_dict["model"], state_dict["optimizer"]
        set_state_dict(self.model, self.optimizer, model_state_dict=model_state,
                       optim_state_dict=optim_state)  # fmt: skip


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP metadata only: the classes of ``torch.distributed.checkpoint.metadata``,
    its storage info, ``torch.Size``, torch dtypes and layouts, paths."""

    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name) if module in _SAFE_MODULES else None
        safe = (module, name) in _SAFE_GLOBALS or (
            module == "torch.distributed.checkpoint.metadata" and isinstance(found, type)
        )
        if module == "torch" and isinstance(getattr(torch, name, None), _TORCH_CONSTANTS):
            safe = True
        if not safe:
            raise pickle.UnpicklingError(f"{module}.{name} is not checkpoint metadata")
        return super().find_class(module, name)


_SAFE_MODULES = {"torch.distributed.checkpoint.metadata"}
_TORCH_CONSTANTS = (torch.dtype, torch.layout, torch.memory_format)
_SAFE_GLOBALS = {
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("collections", "OrderedDict"),
}


class _SafeReader(FileSystemReader):
    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        with open(Path(self.path) / ".metadata", "rb") as f:
            metadata: Metadata = _MetadataUnpickler(f).load()
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id  # type: ignore[union-attr]
        return metadata


class _SafePlanner(DefaultLoadPlanner):
    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        torch.load(value, weights_only=True)  # refuses anything but tensors and containers
        value.seek(0)
        super().load_bytes(read_item, value)  # now known to hold no code


def save_sharded(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Write the policy and optimizer to the DCP directory ``path``, each rank its own shards
    (a collective when distributed: every rank must call it)."""
    import torch.distributed.checkpoint as dcp

    dcp.save({"policy": PolicyState(model, optimizer)}, checkpoint_id=str(path))


def load_sharded(path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Load a :func:`save_sharded` directory written with any world size into ``model`` and
    ``optimizer`` of any wrapping and world size (a collective when distributed).

    Raises:
        pickle.UnpicklingError: the metadata holds objects other than DCP's metadata.
        RuntimeError: a file is missing or corrupt, or the model does not match.
    """
    import torch.distributed.checkpoint as dcp

    state = {"policy": PolicyState(model, optimizer)}
    dcp.load(state, storage_reader=_SafeReader(str(path)), planner=_SafePlanner())
