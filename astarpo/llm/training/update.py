"""The updates of the Stage 2 loop: minibatches of whole prompt groups, one optimizer step each.

:func:`rollout_updates` runs ``update_epochs`` passes over a step's rollout batch; pass ``e``
visits the prompt groups in the order :func:`minibatch_order` ``(seed, t, e, groups)``
(``torch.randperm`` seeded by ``derive_seed(seed, "minibatch", t, e)``, the same on every rank)
and splits them into ``minibatches`` equal minibatches, each rank taking its block of rows.

:func:`optimizer_step` is one of them: the minibatch is split into micro-batches (gradient
accumulation); each runs the policy forward with gradient, the algorithm's loss and the entropy
bonus, and backward. Then the gradients of extra modules are averaged over ranks, clipped by
global norm together with the policy's, and AdamW steps. Returns the minibatch's metrics
(row-weighted means over the micro-batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from astarpo.llm.algorithms.base import Algorithm, RolloutBatch
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import sequence_logprobs
from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.training.data_parallel import DataParallel
from astarpo.llm.training.guards import check_update

__all__ = [
    "autocast_factory",
    "build_optimizer",
    "minibatch_order",
    "optimizer_step",
    "rollout_updates",
    "trainable_parameters",
]


def trainable_parameters(
    model: torch.nn.Module, modules: Sequence[torch.nn.Module]
) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates and the clipping covers: the policy's and the
    algorithm's extra ``modules``' that require gradients.

    Raises:
        ValueError: there are none (``requires_grad`` is off everywhere).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    params += [p for m in modules for p in m.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the policy has no trainable parameters (requires_grad is off).")
    return params


def autocast_factory(
    mixed_precision: str, device: torch.device
) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """``autocast()``: the context of every forward, bf16 autocast when ``mixed_precision`` is
    ``"bf16"`` (on CPU too, opt-in) or ``"auto"`` on CUDA, else a no-op."""
    bf16 = mixed_precision == "bf16" or (mixed_precision == "auto" and device.type == "cuda")

    def autocast() -> contextlib.AbstractContextManager[Any]:
        if bf16:
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    return autocast


def build_optimizer(
    params: Sequence[torch.nn.Parameter], args: TrainConfig, device: torch.device, sharded: bool
) -> torch.optim.AdamW:
    """AdamW over ``params`` with ``args.learning_rate`` and ``args.weight_decay``.

    On CPU the fused kernel (one pass over each tensor: on the toy model's ~60 small tensors
    about 3x faster than the foreach kernel, which is slower there than the per-tensor loop);
    elsewhere, and for FSDP2's sharded parameters, the foreach kernel. The kernels differ only
    in float rounding (about 1 ulp per step).
    """
    fused = device.type == "cpu" and not sharded and all(p.is_floating_point() for p in params)
    return torch.optim.AdamW(
        params,
        lr=args.learning_rate,
        weight_decay=args.weight_decay,
        foreach=None if fused else True,
        fused=True if fused else None,
    )


def _clip_grad_norm(params: Sequence[torch.nn.Parameter], max_norm: float) -> float:
    """``clip_grad_norm_(params, max_norm)`` (no clipping when ``max_norm`` is 0), returning
    the norm; the gradients are multiplied only when the coefficient, computed as torch does, is
    below 1 (a multiplication by 1 changes no bit; on the toy it saves ~0.3 ms a step)."""
    utils = torch.nn.utils
    if not hasattr(utils, "get_total_norm"):  # torch < 2.6: in one call
        return float(utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf")))
    norm = utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if max_norm > 0 and bool(max_norm / (norm + 1e-6) < 1.0):
        utils.clip_grads_with_norm_(params, max_norm, norm)
    return float(norm)


def optimizer_step(
    train_model: Any,
    algorithm: Algorithm,
    mb: RolloutBatch,
    optimizer: torch.optim.Optimizer,
    params: Sequence[torch.nn.Parameter],
    modules: Sequence[torch.nn.Module],
    dp: DataParallel,
    args: TrainConfig,
    autocast: Callable[[], contextlib.AbstractContextManager[Any]],
) -> dict[str, float]:
    """One optimizer step on ``mb`` (see the module docstring).

    Args:
        train_model: The policy to run with gradient (DDP/FSDP2-wrapped under torchrun).
        algorithm: Gives the loss of each micro-batch.
        mb: The minibatch (rows of whole prompt groups).
        optimizer: AdamW over ``params``.
        params: Every trainable parameter (policy and ``modules``), clipped together.
        modules: The algorithm's extra modules (their gradients are averaged over ranks here).
        dp: The data-parallel hooks.
        args: ``micro_batch_size``, ``entropy_coef``, ``max_grad_norm``.
        autocast: Returns the autocast context of the forward (bf16 on CUDA, or none).

    Returns:
        ``loss``, ``kl``, ``grad_norm``, the algorithm's metrics and, when ``entropy_coef > 0``,
        ``entropy``.

    Raises:
        NonFiniteError: the loss or the gradient norm is NaN or infinite (on any rank); the
            optimizer has not stepped.
    """
    optimizer.zero_grad(set_to_none=True)
    stats: dict[str, float] = {}
    size = args.micro_batch_size or len(mb)
    for s in range(0, len(mb), size):
        micro = mb.select(torch.arange(s, min(s + size, len(mb))))
        w = len(micro) / len(mb)
        last = s + size >= len(mb)  # gradients are all-reduced on the last micro-batch only
        with dp.gradient_sync(train_model, last), autocast():
            # No entropy work at weight 0: the [B, T, V] entropy is built only for the bonus.
            bonus = args.entropy_coef > 0
            out = sequence_logprobs(train_model, micro.packed, entropy=bonus)
            loss, metrics = algorithm.loss(out, micro)
            total = loss - args.entropy_coef * out.entropy_mean() if bonus else loss
            (total * w).backward()
        kl = 0.0
        if micro.logp_ref is not None:
            kl = float((out.logp.detach() - micro.logp_ref).mean())
        parts = {"loss": float(loss.detach()), "kl": kl}
        if bonus:
            parts["entropy"] = float(out.entropy_mean().detach())
        parts.update(metrics)
        for k, v in parts.items():
            stats[k] = stats.get(k, 0.0) + w * v
    dp.average_gradients([p for m in modules for p in m.parameters()])
    stats["grad_norm"] = _clip_grad_norm(params, args.max_grad_norm)
    # Raise before a non-finite update reaches the weights (on every rank alike).
    check_update(dp.reduce({k: stats[k] for k in ("loss", "grad_norm")}))
    optimizer.step()
    return stats


def minibatch_order(seed: int, step: int, epoch: int, groups: int) -> torch.Tensor:
    """The order in which update epoch ``epoch`` of step ``step`` visits the step's ``groups``
    prompt groups (split into minibatches in this order): a permutation ``[groups]`` (int64)
    seeded by ``derive_seed(seed, "minibatch", step, epoch)``, the same on every rank and in a
    resumed run."""
    gen = torch.Generator().manual_seed(derive_seed(seed, "minibatch", step, epoch))
    return torch.randperm(groups, generator=gen)


def rollout_updates(
    batch: RolloutBatch,
    groups: int,
    n: int,
    step: int,
    args: TrainConfig,
    dp: DataParallel,
    update: Callable[[RolloutBatch], dict[str, float]],
) -> dict[str, float]:
    """``update_epochs x minibatches`` calls of ``update`` (one optimizer step each) over the
    minibatches of a step's rollout batch (see the module docstring).

    Args:
        batch: The step's global rollout batch, ``groups x n`` rows, prompt-major.
        groups: Prompts in it.
        n: Samples per prompt.
        step: The step (seeds the shuffles).
        args: ``seed``, ``update_epochs``, ``minibatches``.
        dp: This rank's block of each minibatch (:meth:`DataParallel.shard`) and the metrics'
            mean over ranks (:meth:`DataParallel.reduce`).
        update: One optimizer step on a minibatch (:func:`optimizer_step`); returns its metrics.

    Returns:
        The mean over the updates of each metric (each first averaged over ranks).
    """
    sums: dict[str, float] = {}
    per_mb = groups // args.minibatches
    for epoch in range(args.update_epochs):
        order = minibatch_order(args.seed, step, epoch, groups)
        for m in range(args.minibatches):
            chosen = order[m * per_mb : (m + 1) * per_mb].sort().values
            rows = (chosen.unsqueeze(1) * n + torch.arange(n)).flatten()
            rows = rows[dp.shard(len(rows))]  # this rank's block of the minibatch
            for k, v in dp.reduce(update(batch.select(rows))).items():
                sums[k] = sums.get(k, 0.0) + v
    n_updates = args.update_epochs * args.minibatches
    return {k: v / n_updates for k, v in sums.items()}
