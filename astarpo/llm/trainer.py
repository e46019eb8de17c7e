"""The Stage 2 training loop (algorithm-agnostic) and :class:`AStarPOTrainer`.

Read :meth:`Trainer.step` top to bottom: it is one iteration of::

    prompts (deterministic order from the seed) -> generate -> rewards -> V* lookup
    -> reference log-probs (no grad) -> algorithm.prepare -> minibatch updates -> log

The algorithm (:mod:`astarpo.llm.algorithm`) decides how many samples per prompt and the loss;
everything else (AdamW, gradient clipping, the entropy bonus, bf16 autocast on CUDA, metrics,
checkpoints, resume) is here, shared by A*-PO and the baselines. The outer loop (``train``,
``save``, ``resume``) is in :class:`~astarpo.llm.train_loop.TrainLoop`, a base class of
:class:`Trainer`; :func:`~astarpo.llm.trainer_helpers.lookup_v_star` and
:func:`~astarpo.llm.trainer_helpers.resolve_device` live in :mod:`astarpo.llm.trainer_helpers`
and are re-exported here.

Determinism: the data order of epoch ``e`` is ``default_rng([seed, e]).permutation``, the
sampling seed of step ``t`` and the minibatch shuffles derive from ``(seed, t)``, so a run
resumed from a checkpoint reproduces the losses of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from astarpo.llm.algorithm import Algorithm, AStarPO, RolloutBatch
from astarpo.llm.config import AStarPOConfig, TrainConfig
from astarpo.llm.generation import Generator
from astarpo.llm.logprobs import SequenceLogprobs, sequence_logprobs
from astarpo.llm.metrics import peak_memory, timed
from astarpo.llm.train_loop import TrainLoop
from astarpo.llm.trainer_helpers import EvalFn, _seed, lookup_v_star, resolve_device

__all__ = ["AStarPOTrainer", "Trainer", "lookup_v_star", "resolve_device"]


class Trainer(TrainLoop):
    """Stage 2 loop for any :class:`~astarpo.llm.algorithm.Algorithm`.

    Args:
        model: The policy (a ``transformers`` causal LM), trained in place.
        ref_model: The frozen reference (put in eval mode, no gradients); may be ``None`` when
            the algorithm does not need it.
        reward_funcs: Reward functions with TRL's signature (see :mod:`astarpo.llm.rewards`).
        algorithm: The algorithm (A*-PO, GRPO, ...).
        args: A :class:`~astarpo.llm.config.TrainConfig` (or subclass).
        train_dataset: Rows with a ``prompt`` key; the other keys (e.g. ``answer``) are passed to
            the reward functions as columns.
        v_star_table: Stage 1 values (a ``ValueTable`` or ``{prompt: v_star}``); required when
            ``algorithm.needs_v_star``. Every prompt is looked up at construction, so a missing
            one fails before training starts.
        tokenizer: The policy's tokenizer (for generation and padding).
        generator: A :class:`~astarpo.llm.generation.Generator` sampling from ``model``
            (default: :class:`~astarpo.llm.generation.HFGenerator`).
        eval_fn: Optional ``eval_fn(model) -> {name: value}``, called before training, every
            ``eval_steps`` steps and at the end; logged with an ``eval/`` prefix. Its time is
            not counted in ``time/train_total``.
        eval_steps: Steps between evaluations (0: only before and after training).
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        algorithm: Algorithm,
        args: TrainConfig,
        train_dataset: Sequence[Mapping[str, Any]],
        v_star_table: Any = None,
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        self.args = args
        self.algorithm = algorithm
        # Scaling hooks (astarpo.llm.data_parallel / lora / vllm_backend): identity in one
        # process without LoRA; under torchrun, data parallelism over ranks.
        from astarpo.llm.data_parallel import DataParallel
        from astarpo.llm.lora import maybe_apply_lora

        self.dp = DataParallel(args.parallel, args.seed_chunk_size)
        self.dp.check_batch(args.batch_size, args.minibatches)
        self.device = self.dp.device(resolve_device(args.device))
        model, ref_model = maybe_apply_lora(
            model, ref_model, args.lora_r, args.lora_alpha, args.seed
        )
        self.model = model.to(self.device)
        self.ref_model = ref_model
        if algorithm.needs_reference:
            if ref_model is None:
                raise ValueError(f"{algorithm.name} needs a frozen reference model (ref_model).")
            self.ref_model = ref_model.to(self.device).eval().requires_grad_(False)
            self.ref_model = self.dp.prepare_reference(self.ref_model)
        self.reward_funcs = list(reward_funcs)
        self.rows = [dict(r) for r in train_dataset]
        if not self.rows:
            raise ValueError("train_dataset is empty.")
        for i, r in enumerate(self.rows):
            if not isinstance(r.get("prompt"), str):
                raise ValueError(f"train_dataset row {i} has no 'prompt' string: {r!r}.")
        self.v_star = None
        if algorithm.needs_v_star:
            if v_star_table is None:
                raise ValueError(
                    f"{algorithm.name} needs a V* table (run Stage 1: `astarpo value`)."
                )
            self.v_star = lookup_v_star(v_star_table, [r["prompt"] for r in self.rows])
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(model.config._name_or_path)
        self.tokenizer = tokenizer
        self.pad_token_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        if generator is None:  # built before sharding: vLLM starts from the full weights
            from astarpo.llm.vllm_backend import build_generator

            generator = build_generator(args, self.model, tokenizer)
        self.generator = self.dp.wrap_generator(generator)
        self.train_model = self.dp.wrap_policy(self.model)  # DDP/FSDP2 under torchrun
        self.modules = [m.to(self.device) for m in algorithm.modules()]
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.params += [p for m in self.modules for p in m.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=args.learning_rate, weight_decay=args.weight_decay
        )
        bf16 = args.mixed_precision == "bf16" or (
            args.mixed_precision == "auto" and self.device.type == "cuda"
        )
        self.autocast_enabled = bf16 and self.device.type == "cuda"
        self.eval_fn = eval_fn
        self.eval_steps = eval_steps
        self.step_count = 0
        self.data_epoch = 0
        self.data_index = 0
        self.train_time = 0.0
        self.history: list[dict[str, Any]] = []
        self.last_batch: RolloutBatch | None = None

    # ----------------------------------------------------------------- helpers
    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast_enabled:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _next_indices(self) -> list[int]:
        """The next ``batch_size`` row indices of the seeded per-epoch permutation."""
        out: list[int] = []
        n = len(self.rows)
        while len(out) < self.args.batch_size:
            order = np.random.default_rng([self.args.seed, self.data_epoch]).permutation(n)
            take = order[self.data_index : self.data_index + self.args.batch_size - len(out)]
            out.extend(int(i) for i in take)
            self.data_index += len(take)
            if self.data_index >= n:
                self.data_epoch, self.data_index = self.data_epoch + 1, 0
        return out

    def _micro(self, rows: int) -> int:
        return self.args.micro_batch_size or rows

    def _logprobs_no_grad(self, model: Any, batch: RolloutBatch) -> SequenceLogprobs:
        """Log-probs of every row: each rank computes its block of rows, then they are gathered."""
        full = batch
        batch = full.select(torch.tensor(self.dp.shard(len(full)), dtype=torch.long))
        parts = []
        step = self._micro(len(batch))
        with torch.no_grad(), self._autocast():
            for s in range(0, len(batch), step):
                idx = torch.arange(s, min(s + step, len(batch)))
                parts.append(sequence_logprobs(model, batch.select(idx).packed))
        return SequenceLogprobs(
            self.dp.gather_rows(torch.cat([p.logp for p in parts])),
            self.dp.gather_rows(torch.cat([p.token_logp for p in parts])),
            self.dp.gather_rows(torch.cat([p.mask for p in parts])),
        )

    # --------------------------------------------------------------- one step
    def step(self) -> dict[str, Any]:
        """One rollout batch and its updates; returns the logged record."""
        args, algo, t = self.args, self.algorithm, self.step_count + 1
        times: dict[str, float] = {}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        record: dict[str, Any] = {"step": t}

        # 1. Prompts and generation.
        global_idx = self._next_indices()
        positions = self.dp.shard(len(global_idx))  # this rank's block of the global batch
        idx = [global_idx[i] for i in positions]
        prompts = [self.rows[i]["prompt"] for i in idx]
        n = algo.samples_per_prompt
        with timed(times, "generate", self.device):
            self.generator.sync_weights(self.model)
            rollout = self.dp.generate(
                self.generator, prompts, n, args.sampling, _seed(args.seed, t), positions
            )

        # 2. Rewards (other dataset columns repeated per sample).
        with timed(times, "reward"):
            from astarpo.llm.rewards import compute_rewards

            keys = [k for k in self.rows[idx[0]] if k != "prompt"]
            columns = {k: [self.rows[i].get(k) for i in idx for _ in range(n)] for k in keys}
            rewards, reward_metrics = compute_rewards(
                self.reward_funcs, rollout.prompts, rollout.completions, columns
            )
            rollout, rewards = self.dp.gather_rollout(rollout, rewards)  # the global batch
        record.update(self.dp.reduce(reward_metrics))
        idx = global_idx
        v_star = None
        if self.v_star is not None:
            v_star = np.repeat(self.v_star[idx], n)
            record["v_star/mean"] = float(v_star.mean())
        batch = RolloutBatch.from_rollout(rollout, rewards, self.pad_token_id, self.device, v_star)

        # 3. Reference (and old-policy) log-probs, no gradient.
        with timed(times, "ref_logprobs", self.device):
            if algo.needs_reference:
                ref = self._logprobs_no_grad(self.ref_model, batch)
                batch.logp_ref, batch.token_logp_ref = ref.logp, ref.token_logp
            if algo.needs_old_logprobs:
                old = self._logprobs_no_grad(self.model, batch)
                batch.logp_old, batch.token_logp_old = old.logp, old.token_logp

        # 4. Updates: update_epochs x minibatches optimizer steps over whole prompt groups.
        with timed(times, "update", self.device):
            with torch.no_grad(), self._autocast():
                record.update(algo.prepare(batch))
            sums: dict[str, float] = {}
            n_updates = 0
            groups = int(batch.group.max()) + 1
            per_mb = groups // args.minibatches
            for epoch in range(args.update_epochs):
                gen = torch.Generator().manual_seed(_seed(args.seed, t, epoch, 1))
                order = torch.randperm(groups, generator=gen)
                for m in range(args.minibatches):
                    chosen = order[m * per_mb : (m + 1) * per_mb].sort().values
                    rows = (chosen.unsqueeze(1) * n + torch.arange(n)).flatten()
                    rows = rows[self.dp.shard(len(rows))]  # this rank's block of the minibatch
                    stats = self.dp.reduce(self._update(batch.select(rows)))
                    for k, v in stats.items():
                        sums[k] = sums.get(k, 0.0) + v
                    n_updates += 1
            record.update({k: v / n_updates for k, v in sums.items()})

        # 5. Metrics.
        lengths = batch.response_lengths.float()
        record["response_length/mean"] = float(lengths.mean())
        record["response_length/max"] = float(lengths.max())
        record["truncation_rate"] = float(batch.truncated.float().mean())
        record.update(times)
        record["time/step"] = sum(times.values())
        record.update(peak_memory(self.device))
        self.step_count = t
        self.train_time += record["time/step"]
        record["time/train_total"] = self.train_time
        self.last_batch = batch
        return record

    def _update(self, mb: RolloutBatch) -> dict[str, float]:
        """One optimizer step on a minibatch (gradient accumulated over micro-batches)."""
        args = self.args
        self.optimizer.zero_grad(set_to_none=True)
        stats: dict[str, float] = {}
        size = self._micro(len(mb))
        for s in range(0, len(mb), size):
            micro = mb.select(torch.arange(s, min(s + size, len(mb))))
            w = len(micro) / len(mb)
            last = s + size >= len(mb)  # gradients are all-reduced on the last micro-batch only
            with self.dp.gradient_sync(self.train_model, last), self._autocast():
                out = sequence_logprobs(
                    self.train_model,
                    micro.packed,
                    entropy=True,
                    entropy_grad=args.entropy_coef > 0,
                )
                loss, metrics = self.algorithm.loss(out, micro)
                entropy = out.entropy_mean()
                total = loss - args.entropy_coef * entropy if args.entropy_coef else loss
                (total * w).backward()
            kl = 0.0
            if micro.logp_ref is not None:
                kl = float((out.logp.detach() - micro.logp_ref).mean())
            parts = {"loss": float(loss.detach()), "entropy": float(entropy.detach()), "kl": kl}
            parts.update(metrics)
            for k, v in parts.items():
                stats[k] = stats.get(k, 0.0) + w * v
        self.dp.average_gradients([p for m in self.modules for p in m.parameters()])
        if args.max_grad_norm > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.params, args.max_grad_norm)
        else:
            norm = torch.sqrt(
                sum((p.grad.float() ** 2).sum() for p in self.params if p.grad is not None)
            )
        stats["grad_norm"] = float(norm)
        self.optimizer.step()
        return stats


class AStarPOTrainer(Trainer):
    """Stage 2 of A*-PO: the :class:`Trainer` with the :class:`~astarpo.llm.algorithm.AStarPO`
    algorithm (one sample per prompt, loss :func:`astarpo.advantage_regression_loss`).

    Example:
        >>> trainer = AStarPOTrainer(model, ref_model, [exact_match_reward],  # doctest: +SKIP
        ...     args=AStarPOConfig(beta2=1e-3), train_dataset=rows, v_star_table=table,
        ...     tokenizer=tokenizer)
        >>> trainer.train()  # doctest: +SKIP

    The arguments are those of :class:`Trainer`, except that ``args`` is an
    :class:`~astarpo.llm.config.AStarPOConfig` (default ``AStarPOConfig()``) and the algorithm
    is built from it.
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        args: AStarPOConfig | None = None,
        train_dataset: Sequence[Mapping[str, Any]] = (),
        v_star_table: Any = None,
        tokenizer: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        eval_steps: int = 0,
    ) -> None:
        args = args if args is not None else AStarPOConfig()
        if not isinstance(args, AStarPOConfig):
            raise TypeError(f"args must be an AStarPOConfig, got {type(args).__name__}.")
        super().__init__(
            model,
            ref_model,
            reward_funcs,
            AStarPO(beta2=args.beta2),
            args,
            train_dataset,
            v_star_table,
            tokenizer,
            generator,
            eval_fn,
            eval_steps,
        )
