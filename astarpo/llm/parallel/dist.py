"""Processes and devices on :mod:`torch.distributed`: setup, sharding, collectives, wrapping.

The same command runs on one process or under ``torchrun``::

    astarpo train ...                                   # one process
    torchrun --nproc_per_node 8 -m astarpo train ...    # 8 processes, one per GPU

Under ``torchrun`` every process reads ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` from its
environment (:func:`init_distributed`), takes a contiguous block of each global batch of prompts
(:func:`shard_indices`), and trains a replica wrapped in DDP (gradients all-reduced) or, for
models that do not fit one device, sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``)
(:func:`wrap_model`). Metrics are averaged over ranks (:func:`all_reduce_metrics`) and row
tensors gathered in rank order (:func:`gather_rows`). The full (unsharded) state of a wrapped
model, used by checkpoints, is in :mod:`astarpo.llm.parallel.state`.

Why the result does not depend on the world size: with a global batch of ``B`` examples split
into ``W`` equal blocks, each rank minimises the mean loss of its ``B / W`` examples and DDP
averages the ``W`` gradients, which is the gradient of the mean loss over all ``B`` examples:

.. math::

    \\frac{1}{W} \\sum_{r=1}^{W} \\nabla \\frac{W}{B} \\sum_{i \\in \\mathrm{block}_r} \\ell_i
    = \\nabla \\frac{1}{B} \\sum_{i=1}^{B} \\ell_i .
"""

from __future__ import annotations

import atexit
import datetime
import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "DEFAULT_DIST_TIMEOUT",
    "DistInfo",
    "Strategy",
    "all_gather_objects",
    "all_reduce_metrics",
    "barrier",
    "cleanup_distributed",
    "dist_info_from_env",
    "gather_rows",
    "init_distributed",
    "is_main_process",
    "resolve_device",
    "shard_indices",
    "unwrap_model",
    "wrap_model",
]

Strategy = Literal["none", "ddp", "fsdp"]


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job.

    Args:
        rank: Global rank in ``[0, world_size)``. Default 0.
        world_size: Number of processes. Default 1 (no distribution).
        local_rank: Rank on this node; selects the CUDA device. Default 0.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}.")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {self.rank}.")
        if self.local_rank < 0:
            raise ValueError(f"local_rank must be >= 0, got {self.local_rank}.")

    @property
    def distributed(self) -> bool:
        """True when more than one process takes part."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the process that writes files and logs)."""
        return self.rank == 0


def dist_info_from_env(env: Mapping[str, str] | None = None) -> DistInfo:
    """Read ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (set by ``torchrun``); defaults 0, 1, 0.

    Raises:
        ValueError: A variable is not an integer or the values are inconsistent.
    """
    env = os.environ if env is None else env

    def read(name: str, default: int) -> int:
        raw = env.get(name, "")
        if raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"environment variable {name}={raw!r} is not an integer.") from None

    return DistInfo(read("RANK", 0), read("WORLD_SIZE", 1), read("LOCAL_RANK", 0))


DEFAULT_DIST_TIMEOUT = 900.0
"""Default ``dist_timeout`` in seconds: the longest a phase of a step may run on one rank
(:class:`~astarpo.llm.parallel.watchdog.Watchdog`); collectives wait twice as long."""


def init_distributed(
    backend: str | None = None, dist_timeout: float = DEFAULT_DIST_TIMEOUT
) -> DistInfo:
    """Join the process group described by the ``torchrun`` environment.

    A single process (no ``WORLD_SIZE`` or ``WORLD_SIZE=1``) gets ``DistInfo()`` and no process
    group. Otherwise the default group is created (once; a second call reuses it) with ``nccl``
    when CUDA is available and ``gloo`` on CPU, the CUDA device is set to ``LOCAL_RANK`` (so
    ``"cuda"`` means this rank's GPU: call this before loading a model), and the group is
    destroyed at interpreter exit.

    Collectives time out after ``2 * dist_timeout`` seconds: a rank stalled inside a phase of a
    step is stopped, and named, by its :class:`~astarpo.llm.parallel.watchdog.Watchdog` after
    ``dist_timeout``, before the ranks waiting for it time out; a stall outside the watched
    phases (start-up, Stage 1) is bounded by the collective timeout.

    Args:
        backend: ``"nccl"``, ``"gloo"`` or ``None`` (choose as above).
        dist_timeout: Seconds (:data:`DEFAULT_DIST_TIMEOUT`, 900: collectives time out after
            1800 s, torch's default).

    Returns:
        This process's :class:`DistInfo`.
    """
    if not (isinstance(dist_timeout, (int, float)) and 0 < dist_timeout < float("inf")):
        raise ValueError(f"dist_timeout must be a number of seconds > 0, got {dist_timeout!r}.")
    info = dist_info_from_env()
    if not info.distributed:
        return info
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(info.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=backend,
            rank=info.rank,
            world_size=info.world_size,
            timeout=datetime.timedelta(seconds=2 * dist_timeout),
        )
        atexit.register(cleanup_distributed)  # a clean exit even if the caller forgets
    return info


def cleanup_distributed() -> None:
    """Destroy the default process group if one exists (call at the end of a run).

    Drop the DDP/FSDP-wrapped models first (``del trainer``): a wrapper still alive here keeps
    the gloo group's worker threads until the interpreter's own teardown, where their
    destruction can abort the process (``terminate called without an active exception``,
    measured on about 1 exit in 6 with gloo on 2 CPU processes). Reference cycles are
    collected here before the group is destroyed.
    """
    if dist.is_available() and dist.is_initialized():
        gc.collect()  # wrappers held only by reference cycles go before their group
        dist.destroy_process_group()


def _active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def is_main_process() -> bool:
    """True on rank 0, and in a run without a process group."""
    return not _active() or dist.get_rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    if _active():
        dist.barrier()


def shard_indices(n: int, rank: int, world_size: int) -> list[int]:
    """The contiguous block of ``range(n)`` that ``rank`` handles.

    Blocks are consecutive and in rank order, so concatenating the blocks of ranks
    ``0 .. world_size - 1`` gives ``range(n)`` exactly: the union of the per-rank batches is the
    one-process global batch, in the same order. When ``n`` is not a multiple of ``world_size``
    the first ``n % world_size`` ranks get one extra item (like ``numpy.array_split``).

    Args:
        n: Number of items (e.g. prompts in the global batch), ``>= 0``.
        rank: This rank, in ``[0, world_size)``.
        world_size: Number of ranks, ``>= 1``.

    Returns:
        The indices of this rank's items, increasing.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}.")
    DistInfo(rank, world_size)  # validates rank and world_size
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    stop = start + base + (1 if rank < extra else 0)
    return list(range(start, stop))


def _device_for_collectives() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def all_reduce_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """Mean of each metric over ranks (the identity without a process group).

    Every rank must pass the same keys (checked). Values are reduced in float64.

    Args:
        metrics: Scalar metrics of this rank.

    Returns:
        ``{key: mean over ranks}`` with keys sorted as given.

    Raises:
        ValueError: Ranks passed different metric names.
    """
    keys = list(metrics)
    if not _active():
        return {k: float(metrics[k]) for k in keys}
    gathered = all_gather_objects(sorted(keys))
    if any(g != gathered[0] for g in gathered):
        raise ValueError(f"ranks logged different metric names: {gathered}.")
    values = torch.tensor(
        [float(metrics[k]) for k in keys], dtype=torch.float64, device=_device_for_collectives()
    )
    dist.all_reduce(values, op=dist.ReduceOp.SUM)
    values /= dist.get_world_size()
    return {k: float(v) for k, v in zip(keys, values.tolist(), strict=True)}


def all_gather_objects(obj: Any) -> list[Any]:
    """Gather one picklable object from every rank, in rank order (``[obj]`` without a group)."""
    if not _active():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def wrap_model(
    model: nn.Module, strategy: Strategy = "ddp", *, info: DistInfo | None = None
) -> nn.Module:
    """Wrap a model for data-parallel training.

    * ``"none"`` or one process: the model itself.
    * ``"ddp"``: :class:`torch.nn.parallel.DistributedDataParallel` (each rank holds the full
      model; gradients are averaged across ranks in ``backward``).
    * ``"fsdp"``: FSDP2, ``torch.distributed.fsdp.fully_shard`` applied to every decoder layer
      (``model.model.layers`` of a Hugging Face causal LM, when present) and then to the root:
      parameters, gradients and optimizer state are sharded across ranks. The module is
      modified in place and returned (its parameters become ``DTensor`` shards), so create the
      optimizer *after* wrapping.

    Args:
        model: The policy, already on this rank's device.
        strategy: ``"ddp"`` (default), ``"fsdp"`` or ``"none"``.
        info: This process's :class:`DistInfo` (default: read from the environment).

    Returns:
        The module to train.

    Raises:
        ValueError: FSDP2 was asked for a peft (LoRA) model (not supported; use DDP).
    """
    info = dist_info_from_env() if info is None else info
    if strategy not in ("none", "ddp", "fsdp"):
        raise ValueError(f"strategy must be 'none', 'ddp' or 'fsdp', got {strategy!r}.")
    if strategy == "none" or not info.distributed:
        return model
    if strategy == "fsdp" and hasattr(model, "get_base_model"):
        raise ValueError(
            "FSDP2 with a LoRA (peft) policy is not supported: use --parallel ddp with LoRA "
            "(the frozen base is shared with the reference, so a replica per GPU is cheap), or "
            "--parallel fsdp without --lora-r."
        )
    if not dist.is_initialized():
        raise RuntimeError("wrap_model needs a process group: call init_distributed() first.")
    if strategy == "ddp":
        device = next(model.parameters()).device
        device_ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    from torch.distributed.fsdp import fully_shard

    layers = getattr(getattr(model, "model", None), "layers", None)
    if isinstance(layers, nn.ModuleList):
        for layer in layers:
            fully_shard(layer)
    fully_shard(model)
    # transformers' generate() then keeps every rank stepping until all ranks are done
    # (``synced_gpus``), which sharded forwards need.
    for module in model.modules():
        if hasattr(module, "generate"):
            module._is_fsdp_managed_module = True  # type: ignore[assignment]
    return model


def unwrap_model(model: nn.Module) -> nn.Module:
    """The user's module inside a DDP wrapper (FSDP2 modules are returned as they are)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate along dim 0 the equal-shaped tensors of all ranks, in rank order.

    The identity without a process group. The tensor must live where the backend communicates
    (CUDA for nccl, CPU for gloo).

    Raises:
        ValueError: Ranks passed different shapes.
    """
    if not _active() or dist.get_world_size() == 1:
        return tensor
    shapes = all_gather_objects(tuple(tensor.shape))
    if any(s != shapes[0] for s in shapes):
        raise ValueError(f"gather_rows needs equal shapes on every rank, got {shapes}.")
    out = [torch.empty_like(tensor) for _ in shapes]
    dist.all_gather(out, tensor.contiguous())
    return torch.cat(out)


def resolve_device(device: str) -> torch.device:
    """``"auto"`` -> CUDA when available, else CPU; other strings as given.

    Raises:
        ValueError: a ``cuda`` device where this torch has no CUDA or sees no GPU (naming which,
            and the fix), instead of torch's bare assertion on first use.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        why = (
            "this torch is a CPU-only build (torch.version.cuda is None)"
            if torch.version.cuda is None
            else "no CUDA GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
        )
        raise ValueError(
            f"device {device!r}: no CUDA: {why}. Use device 'cpu' (or 'auto'), or install a "
            "CUDA build of torch."
        )
    return torch.device(device)
