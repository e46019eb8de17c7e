"""The Stage 2 trainer's data-parallel hooks (one object, a no-op in one process).

:class:`~astarpo.llm.trainer.Trainer` calls these at fixed points of its step; in one process
every hook is the identity, so the single-process loop is unchanged. Under ``torchrun``:

1. the step's global batch of prompts (the same on every rank) is split into contiguous blocks
   (:meth:`DataParallel.shard`); each rank generates (rank-invariant seeds,
   :class:`~astarpo.llm.parallel.ChunkSeededGenerator`) and scores its block;
2. rollouts and rewards are gathered, so every rank holds the global batch in the one-process
   order (:meth:`DataParallel.gather_rollout`); reference log-probs are computed on each rank's
   block of rows and gathered (:meth:`DataParallel.gather_rows`);
3. each minibatch (the same shuffle on every rank) is split into blocks of rows; the policy is
   wrapped in DDP (or FSDP2), so the gradients of the per-rank mean losses are averaged: the
   gradient of the global mean loss. Extra algorithm modules (a critic) have their gradients
   averaged by :meth:`DataParallel.average_gradients`;
4. metrics are averaged over ranks, logged by rank 0; checkpoints hold the full state, are
   written by rank 0 and load with any world size (:meth:`DataParallel.save_checkpoint`).

Requirement: ``batch_size`` divisible by ``minibatches * world_size`` (equal blocks). Token-
weighted quantities (the entropy bonus's token mean) are averaged per rank, so with
``entropy_coef > 0`` the runs agree only approximately across world sizes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from astarpo.llm.distributed import (
    DistInfo,
    Strategy,
    all_reduce_metrics,
    barrier,
    full_state_dict,
    init_distributed,
    shard_indices,
    unwrap_model,
    wrap_model,
)
from astarpo.llm.generation import Generator, Rollout, SamplingConfig
from astarpo.llm.parallel import ChunkSeededGenerator, gather_rollout, gather_rows

__all__ = ["DataParallel", "NullLogger", "save_final_model"]


class NullLogger:
    """Stands in for the metrics logger on ranks other than 0."""

    def log(self, record: dict[str, Any]) -> None:
        """Drop the record."""

    def close(self) -> None:
        """Nothing to close."""


class _StateHolder:
    """An object whose ``state_dict()`` is a precomputed (full) state."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state


def _is_fsdp(model: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(unwrap_model(model), FSDPModule)


class DataParallel:
    """Data-parallel hooks of the Stage 2 loop.

    Args:
        strategy: ``"ddp"`` (default) or ``"fsdp"`` (FSDP2 ``fully_shard``); ignored in one
            process.
        seed_chunk_size: Prompts per seeded generation chunk (see
            :class:`~astarpo.llm.parallel.ChunkSeededGenerator`); 0 (default) means one seed
            per step in one process (the plain generator) and 1 under ``torchrun``. Give two
            runs the same non-zero value for identical samples whatever their world sizes.
        info: The process's :class:`~astarpo.llm.distributed.DistInfo` (default: join the
            ``torchrun`` process group, :func:`~astarpo.llm.distributed.init_distributed`).
    """

    def __init__(
        self, strategy: str = "ddp", seed_chunk_size: int = 0, info: DistInfo | None = None
    ) -> None:
        if strategy not in ("ddp", "fsdp"):
            raise ValueError(f"parallel must be 'ddp' or 'fsdp', got {strategy!r}.")
        if seed_chunk_size < 0:
            raise ValueError(f"seed_chunk_size must be >= 0, got {seed_chunk_size}.")
        self.info = init_distributed() if info is None else info
        self.strategy: Strategy = "fsdp" if strategy == "fsdp" else "ddp"
        self.chunk = seed_chunk_size or (1 if self.info.distributed else 0)

    @property
    def is_main(self) -> bool:
        """True on rank 0 (writes logs and checkpoints)."""
        return self.info.is_main

    @property
    def world_size(self) -> int:
        """Number of processes."""
        return self.info.world_size

    # ------------------------------------------------------------------ setup
    def device(self, device: torch.device) -> torch.device:
        """``cuda:LOCAL_RANK`` for a CUDA device under ``torchrun``, else ``device``."""
        if self.info.distributed and device.type == "cuda":
            return torch.device("cuda", self.info.local_rank)
        return device

    def check_batch(self, batch_size: int, minibatches: int) -> None:
        """Raise unless every minibatch splits into equal blocks of whole prompts."""
        if batch_size % (minibatches * self.world_size):
            raise ValueError(
                f"batch_size ({batch_size}) must be divisible by minibatches x world_size "
                f"({minibatches} x {self.world_size}) so that every rank trains on the same "
                "number of prompts per minibatch."
            )

    def wrap_policy(self, model: nn.Module) -> nn.Module:
        """The module to run the training forward through (DDP wrapper, FSDP2 or ``model``)."""
        return wrap_model(model, self.strategy, info=self.info)

    def prepare_reference(self, ref_model: Any) -> Any:
        """Shard a separate reference with FSDP2 when training with FSDP2 (else unchanged)."""
        from astarpo.llm.lora import AdapterDisabledReference

        if (
            self.info.distributed
            and self.strategy == "fsdp"
            and isinstance(ref_model, nn.Module)
            and not isinstance(ref_model, AdapterDisabledReference)
        ):
            return wrap_model(ref_model, "fsdp", info=self.info)
        return ref_model

    def wrap_generator(self, generator: Generator) -> Generator:
        """Seed generation per chunk of global positions when ``seed_chunk_size`` asks for it."""
        if self.chunk and not isinstance(generator, ChunkSeededGenerator):
            return ChunkSeededGenerator(generator, self.chunk)
        return generator

    # ------------------------------------------------------------------- step
    def shard(self, n: int) -> list[int]:
        """This rank's contiguous block of ``range(n)``."""
        return shard_indices(n, self.info.rank, self.world_size)

    def generate(
        self,
        generator: Generator,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingConfig,
        seed: int,
        positions: Sequence[int],
    ) -> Rollout:
        """Generate this rank's prompts; ``positions`` are their places in the global batch."""
        if isinstance(generator, ChunkSeededGenerator):
            return generator.generate(prompts, n, sampling, seed, prompt_indices=positions)
        return generator.generate(prompts, n, sampling, seed)

    def gather_rollout(self, rollout: Rollout, rewards: np.ndarray) -> tuple[Rollout, np.ndarray]:
        """The global rollout and rewards, in the one-process order."""
        return gather_rollout(rollout, rewards)

    def gather_rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's equal-shaped rows, in rank order."""
        return gather_rows(tensor)

    def reduce(self, metrics: dict[str, float]) -> dict[str, float]:
        """Mean of each metric over ranks."""
        return all_reduce_metrics(metrics)

    @contextlib.contextmanager
    def gradient_sync(self, model: nn.Module, sync: bool) -> Iterator[None]:
        """Context for one micro-batch's forward and backward: with ``sync=False`` gradients
        accumulate locally (DDP ``no_sync``, FSDP2 ``set_requires_gradient_sync(False)``) and
        are reduced with the last micro-batch's (``sync=True``)."""
        if sync or not self.info.distributed:
            yield
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            with model.no_sync():
                yield
        elif _is_fsdp(model):
            model.set_requires_gradient_sync(False)  # type: ignore[operator]
            try:
                yield
            finally:
                model.set_requires_gradient_sync(True)  # type: ignore[operator]
        else:
            yield

    def average_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Average the gradients of parameters outside the DDP/FSDP module (e.g. a critic)."""
        if not self.info.distributed:
            return
        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
                p.grad /= self.world_size

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(
        self,
        output_dir: str | Path,
        step: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        modules: list[nn.Module],
        trainer_state: dict[str, Any],
    ) -> Path:
        """Write ``checkpoint-<step>`` (the layout of :mod:`astarpo.llm.checkpoint`) once.

        Every rank must call it. Model weights are the full, unprefixed ``state_dict``; under
        FSDP2 the optimizer state is the full state keyed by parameter name
        (``optimizer_format: "fqn"``), which :meth:`load_checkpoint` reads with any strategy.
        """
        from astarpo.llm.checkpoint import save_checkpoint

        path = Path(output_dir) / f"checkpoint-{step}"
        state = {**trainer_state, "world_size": self.world_size}
        if not self.info.distributed:
            return save_checkpoint(output_dir, step, model, optimizer, modules, state)
        model_arg: Any = unwrap_model(model)
        optim_arg: Any = optimizer
        if _is_fsdp(model):
            from astarpo.llm.dist_checkpoint import _full_optimizer_state

            model_arg = _StateHolder(full_state_dict(model))
            optim_arg = _StateHolder(_full_optimizer_state(model, optimizer))
            state["optimizer_format"] = "fqn"
        if self.is_main:
            save_checkpoint(output_dir, step, model_arg, optim_arg, modules, state)
        barrier()
        return path

    def load_checkpoint(
        self,
        path: str | Path,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        modules: list[nn.Module],
    ) -> dict[str, Any]:
        """Load a checkpoint written with any world size and strategy (every rank reads it)."""
        from astarpo.llm.checkpoint import load_checkpoint, restore_rng

        p = Path(path)
        fsdp = _is_fsdp(model)
        if not (p / "trainer_state.pt").exists():
            return load_checkpoint(p, model, optimizer, modules)  # raises the clear error
        state = torch.load(p / "trainer_state.pt", map_location="cpu", weights_only=False)
        if not fsdp and state.get("optimizer_format") != "fqn":
            return load_checkpoint(p, unwrap_model(model), optimizer, modules)
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        inner = unwrap_model(model)
        options = StateDictOptions(full_state_dict=True)
        model_sd = torch.load(p / "model.pt", map_location="cpu", weights_only=True)
        if fsdp:
            set_model_state_dict(inner, model_sd, options=options)
        else:
            inner.load_state_dict(model_sd)
        optim_sd = state["optimizer"]
        if state.get("optimizer_format") != "fqn":
            optim_sd = _index_to_fqn(inner, optimizer, optim_sd)
        set_optimizer_state_dict(inner, optimizer, optim_sd, options=options)
        for m, sd in zip(modules, state["modules"], strict=True):
            m.load_state_dict(sd)
        restore_rng(state["rng"])
        return dict(state)

    def logger(self, output_dir: str, tensorboard: bool, resume_step: int | None) -> Any:
        """The metrics logger on rank 0, a :class:`NullLogger` elsewhere."""
        from astarpo.llm.metrics import MetricsLogger

        if self.is_main:
            return MetricsLogger(output_dir, tensorboard, resume_step)
        return NullLogger()


def save_final_model(model: nn.Module, tokenizer: Any, path: str | Path) -> Path:
    """Save the trained policy as a plain Hugging Face model directory, once (rank 0).

    Works for a plain, DDP, FSDP2 (shards gathered: every rank must call it) or LoRA policy
    (adapters merged into the weights, so ``AutoModelForCausalLM.from_pretrained(path)`` loads
    the trained policy without peft).

    Returns:
        ``path``.
    """
    from astarpo.llm.distributed import is_main_process
    from astarpo.llm.vllm_backend import weights_for_vllm

    path = Path(path)
    state = {name: t.detach().cpu().clone() for name, t in weights_for_vllm(model)}
    if is_main_process():
        inner: Any = unwrap_model(model)
        base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
        base.save_pretrained(path, state_dict=state)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
    barrier()
    return path


def _index_to_fqn(
    model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> dict[str, Any]:
    """A ``torch.optim`` state dict (params by index) keyed by parameter name instead."""
    names = {id(p): n for n, p in model.named_parameters()}
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
