"""The Stage 2 trainer's data-parallel hooks (one object, a no-op in one process).

:class:`~astarpo.llm.training.trainer.Trainer` calls these at fixed points of its step; in one
process every hook is the identity, so the single-process loop is unchanged. Under ``torchrun``:

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
4. metrics are averaged over ranks and logged by rank 0; checkpoints hold the full state, are
   written by rank 0 and load with any world size (:mod:`astarpo.llm.training.checkpoint`).

Requirement: ``batch_size`` divisible by ``minibatches * world_size`` (equal blocks). Token-
weighted quantities (the entropy bonus's token mean) are averaged per rank, so with
``entropy_coef > 0`` the runs agree only approximately across world sizes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from astarpo.llm.algorithms.base import RolloutBatch
from astarpo.llm.models.logprobs import SequenceLogprobs, sequence_logprobs
from astarpo.llm.models.lora import AdapterDisabledReference
from astarpo.llm.parallel.dist import (
    DEFAULT_DIST_TIMEOUT,
    DistInfo,
    Strategy,
    all_reduce_metrics,
    gather_rows,
    init_distributed,
    shard_indices,
    wrap_model,
)
from astarpo.llm.parallel.state import is_fsdp
from astarpo.llm.parallel.watchdog import Watchdog
from astarpo.llm.rollout.backend import build_generator
from astarpo.llm.rollout.base import Generator, Rollout, SamplingConfig
from astarpo.llm.rollout.chunked import ChunkSeededGenerator, gather_rollout
from astarpo.llm.training.metrics import MetricsLogger, timed
from astarpo.llm.training.run_dir import discard_fresh_run

__all__ = ["DataParallel", "NullLogger"]


class NullLogger:
    """Stands in for the metrics logger on ranks other than 0."""

    def log(self, record: dict[str, Any]) -> None:
        """Drop the record."""

    def close(self) -> None:
        """Nothing to close."""


class DataParallel:
    """Data-parallel hooks of the Stage 2 loop.

    Args:
        strategy: ``"ddp"`` (default) or ``"fsdp"`` (FSDP2 ``fully_shard``); ignored in one
            process.
        seed_chunk_size: Prompts per seeded generation chunk (see
            :class:`~astarpo.llm.parallel.ChunkSeededGenerator`); 0 (default) means one seed
            per step in one process (the plain generator) and 1 under ``torchrun``. Give two
            runs the same non-zero value for identical samples whatever their world sizes.
        info: The process's :class:`~astarpo.llm.parallel.dist.DistInfo` (default: join the
            ``torchrun`` process group, :func:`~astarpo.llm.parallel.dist.init_distributed`).
        dist_timeout: Seconds a phase of a step may run on one rank under ``torchrun``
            (:class:`~astarpo.llm.parallel.watchdog.Watchdog`; collectives wait twice this).
    """

    def __init__(
        self,
        strategy: str = "ddp",
        seed_chunk_size: int = 0,
        info: DistInfo | None = None,
        dist_timeout: float = DEFAULT_DIST_TIMEOUT,
    ) -> None:
        if strategy not in ("ddp", "fsdp"):
            raise ValueError(f"parallel must be 'ddp' or 'fsdp', got {strategy!r}.")
        if seed_chunk_size < 0:
            raise ValueError(f"seed_chunk_size must be >= 0, got {seed_chunk_size}.")
        self.info = init_distributed(dist_timeout=dist_timeout) if info is None else info
        self.strategy: Strategy = "fsdp" if strategy == "fsdp" else "ddp"
        self.chunk = seed_chunk_size or (1 if self.info.distributed else 0)
        self.watchdog = Watchdog(dist_timeout, self.info.rank, enabled=self.info.distributed)

    def watch(self, phase: str, step: int) -> contextlib.AbstractContextManager[None]:
        """Context of a phase of step ``step`` that this rank runs on its own: past
        ``dist_timeout`` the rank is stopped and named (a no-op in one process)."""
        return self.watchdog.phase(phase, step)

    @contextlib.contextmanager
    def phase(
        self, name: str, step: int, times: dict[str, float], device: torch.device | None = None
    ) -> Iterator[None]:
        """A phase of step ``step``: its wall time added to ``times["time/" + name]``
        (:func:`~astarpo.llm.training.metrics.timed`, CUDA synchronized on ``device``) and, under
        ``torchrun``, watched (:meth:`watch`)."""
        with timed(times, name, device), self.watch(name, step):
            yield

    def agree_signal(self, received: int | None) -> int:
        """The largest stop signal number any rank received (0: none), the same on every rank,
        so that all ranks stop after the same step (one small all-reduce under ``torchrun``)."""
        value = int(received or 0)
        if not self.info.distributed:
            return value
        device = torch.device("cpu")
        if dist.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        flag = torch.tensor([value], dtype=torch.int64, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item())

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
        if (
            self.info.distributed
            and self.strategy == "fsdp"
            and isinstance(ref_model, nn.Module)
            and not isinstance(ref_model, AdapterDisabledReference)
        ):
            return wrap_model(ref_model, "fsdp", info=self.info)
        return ref_model

    def build_generator(self, args: Any, model: Any, tokenizer: Any) -> Generator:
        """The default generator of a training config
        (:func:`~astarpo.llm.rollout.backend.build_generator` of ``args.backend``, with its
        ``generation_batch_size``, ``gpu_memory_utilization`` and ``seed``); the vLLM backend
        saves the model it starts from under ``output_dir/vllm_init/rank<r>``."""
        return build_generator(
            args.backend,
            model,
            tokenizer,
            batch_size=args.generation_batch_size,
            gpu_memory_utilization=args.gpu_memory_utilization,
            seed=args.seed,
            workdir=Path(args.output_dir) / "vllm_init" / f"rank{self.info.rank}",
        )

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

    def logprobs(
        self,
        model: Any,
        batch: RolloutBatch,
        micro: Callable[[int], int],
        autocast: Callable[[], contextlib.AbstractContextManager[Any]],
    ) -> SequenceLogprobs:
        """Log-probs of every row without gradient: this rank computes its block of rows in
        micro-batches of ``micro(rows)``, then the blocks are gathered (the identity in one
        process)."""
        part = batch.select(torch.tensor(self.shard(len(batch)), dtype=torch.long))
        outs = []
        size = micro(len(part))
        with torch.no_grad(), autocast():
            for s in range(0, len(part), size):
                idx = torch.arange(s, min(s + size, len(part)))
                outs.append(sequence_logprobs(model, part.select(idx).packed))
        return SequenceLogprobs(
            self.gather_rows(torch.cat([p.logp for p in outs])),
            self.gather_rows(torch.cat([p.token_logp for p in outs])),
            self.gather_rows(torch.cat([p.mask for p in outs])),
        )

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
        elif is_fsdp(model):
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

    def logger(self, output_dir: str, report_to: Sequence[str], resume_step: int | None) -> Any:
        """The metrics logger on rank 0 (reporting to ``report_to``), a :class:`NullLogger`
        elsewhere. When a tracker fails to start in a fresh run (``resume_step`` None), what
        the run wrote is removed (:func:`~astarpo.llm.training.run_dir.discard_fresh_run`), so
        the retry may start; the error is raised."""
        if not self.is_main:
            return NullLogger()
        try:
            return MetricsLogger(output_dir, report_to, resume_step)
        except BaseException:
            if resume_step is None:
                discard_fresh_run(output_dir)
            raise
