"""The Stage 2 trainer: one loop for every algorithm of the registry.

Read :meth:`Trainer.step` top to bottom: it is one iteration of::

    prompts (deterministic order from the seed) -> generate -> rewards -> V* lookup
    -> reference log-probs (no grad) -> algorithm.prepare -> minibatch updates -> log

The algorithm (:mod:`astarpo.llm.algorithms`) decides how many samples per prompt and the loss;
everything else (AdamW, gradient clipping, the entropy bonus, bf16 autocast on CUDA, metrics,
checkpoints, resume) is here, shared by A*-PO and the baselines. :meth:`Trainer.train` runs
:meth:`Trainer.step` until ``max_steps`` with logging, evaluation and checkpoints.

Determinism: the data order of epoch ``e`` is a permutation seeded by ``(seed, e)``
(:class:`~astarpo.llm.training.inputs.EpochOrder`), the
sampling seed of step ``t`` is ``derive_seed(seed, t)`` and the minibatch shuffles are
:func:`~astarpo.llm.training.update.minibatch_order` (``derive_seed(seed, "minibatch", t,
epoch)``; :func:`~astarpo.llm.rollout.base.derive_seed`), so a run resumed from a checkpoint
reproduces the losses of an uninterrupted run.

Variants (a moving reference, Stage 1 streamed) are extensions whose hooks the loop calls
(:mod:`astarpo.llm.training.extensions`); V* and the reference change in ``self.reference``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.algorithms.base import Algorithm, RolloutBatch
from astarpo.llm.algorithms.registry import build_algorithm
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.lora import maybe_apply_lora
from astarpo.llm.parallel.dist import barrier, resolve_device
from astarpo.llm.parallel.progress import progress_bar
from astarpo.llm.parallel.signals import Interrupted
from astarpo.llm.rewards.scoring import as_reward_funcs
from astarpo.llm.rollout.base import Generator, Rollout, derive_seed
from astarpo.llm.rollout.scored import sample_and_score
from astarpo.llm.stage1.provenance import model_name
from astarpo.llm.training.callbacks import EvalFn, Schedule, call_hook, check_callbacks, evaluate
from astarpo.llm.training.checkpoint import (
    checkpoints,
    load_first_readable,
    rotate_checkpoints,
    save_checkpoint,
)
from astarpo.llm.training.data_parallel import DataParallel
from astarpo.llm.training.extensions import Extensions, StepBegin, TrainerExtension
from astarpo.llm.training.final_model import save_model_folder
from astarpo.llm.training.guards import (
    check_batch,
    check_distinct_reference,
    check_train_rows,
    check_v_star_table,
    explain_non_finite,
    train_v_star,
)
from astarpo.llm.training.inputs import EpochOrder, frozen_reference, resolve_inputs
from astarpo.llm.training.metrics import peak_memory, response_metrics, timed
from astarpo.llm.training.preemption import TrainingSignals
from astarpo.llm.training.reference import ReferenceState
from astarpo.llm.training.run_dir import announce_resume, run_record, start_run
from astarpo.llm.training.update import (
    autocast_factory,
    build_optimizer,
    optimizer_step,
    rollout_updates,
    trainable_parameters,
)

__all__ = ["Trainer"]


class Trainer:
    """Stage 2 loop for any :class:`~astarpo.llm.algorithms.base.Algorithm`.

    Args:
        model: The policy: a ``transformers`` causal LM (trained in place, put in train mode),
            a local directory (loaded with ``local_files_only=True``) or a hub id (downloaded
            because named; :mod:`astarpo.llm.models.loading`).
        ref_model: The frozen reference (object or name as ``model``; put in eval mode, no
            gradients). ``None``: a frozen copy of ``model`` as it is at construction, when
            the algorithm needs a reference (under LoRA the policy with its adapters disabled,
            no copy).
        reward_funcs: One reward function or a list (or ``"module:function"`` names), called
            with TRL's keyword arguments ``prompts``, ``completions``, ``completion_ids``,
            ``truncated`` and the dataset's other columns; each gets those its signature names
            (:func:`~astarpo.llm.rewards.scoring.compute_rewards`).
        args: The algorithm's config (``AStarPOConfig``, ``GRPOConfig``, ...); the algorithm is
            built from it through the registry unless ``algorithm`` is given.
        train_dataset: A ``datasets.Dataset`` or a list of dicts with a ``prompt`` (text, or a
            list of ``{"role", "content"}`` messages rendered with the tokenizer's chat
            template); the other keys (e.g. ``answer``) are passed to the reward functions as
            columns. Rows the model cannot read (characters its tokenizer maps to unknown,
            prompts longer than its positions) are refused here
            (:func:`~astarpo.llm.models.fit.check_sampling_fits`), and so are rows lacking a
            column a reward function requires, and duplicate prompts with different answers.
        v_star_table: Stage 1 values (a ``ValueTable`` or ``{prompt: v_star}``); required when
            ``algorithm.needs_v_star``, unless an extension estimates V* itself (then ``None``:
            :class:`~astarpo.llm.training.stream.StreamedStage1`). Every prompt is looked up
            at construction, so a missing one fails before training starts.
        tokenizer: The policy's tokenizer (for generation and padding); default: loaded from
            the model's local directory.
        processing_class: TRL's name for ``tokenizer`` (give one of the two).
        generator: A :class:`~astarpo.llm.rollout.base.Generator` sampling from ``model``
            (default: :func:`~astarpo.llm.rollout.backend.build_generator` of ``args.backend``).
        eval_fn: Optional ``eval_fn(model) -> {name: value}``, called before training, on the
            schedule of ``args.eval_steps`` / ``args.eval_every_seconds`` and at the end;
            logged with an ``eval/`` prefix. Its time is not counted in ``time/train_total``.
            A result that is not a mapping of names to numbers is a ``TypeError``.
        callbacks: Objects with ``on_step_end(record) -> bool`` (``True`` stops training) and
            optionally ``on_train_begin``, ``on_evaluate``, ``on_train_end``
            (:mod:`astarpo.llm.training.callbacks`); one that would never be called (a plain
            function, a ``transformers`` ``TrainerCallback``) is refused with a ``TypeError``.
        algorithm: An algorithm object to use instead of the registry's for ``args``.
        extensions: :class:`~astarpo.llm.training.extensions.TrainerExtension` objects, e.g.
            :class:`~astarpo.llm.training.refresh.ReferenceRefresh` or
            :class:`~astarpo.llm.training.stream.StreamedStage1`.
    """

    def __init__(
        self,
        model: Any,
        ref_model: Any = None,
        reward_funcs: Any = (),
        *,
        args: TrainConfig,
        train_dataset: Iterable[Mapping[str, Any]] = (),
        v_star_table: Any = None,
        tokenizer: Any = None,
        processing_class: Any = None,
        generator: Generator | None = None,
        eval_fn: EvalFn | None = None,
        callbacks: Sequence[Any] = (),
        algorithm: Algorithm | None = None,
        extensions: Sequence[TrainerExtension] = (),
    ) -> None:
        self.args = args
        self.extensions = Extensions(extensions, args)  # checked before any model is loaded
        self.dp = DataParallel(args.parallel, args.seed_chunk_size, dist_timeout=args.dist_timeout)
        self.dp.check_batch(args.batch_size, args.minibatches)
        self.distributed = self.dp.info.distributed  # one rank of several (torchrun)
        reference_name = model_name(ref_model if ref_model is not None else model)
        self.device = self.dp.device(resolve_device(args.device))
        model, ref_model, tokenizer, self.rows = resolve_inputs(
            model, ref_model, tokenizer, processing_class, train_dataset, args
        )
        model, ref_model = maybe_apply_lora(
            model, ref_model, args.lora_r, args.lora_alpha, args.seed
        )
        self.model = model.to(self.device).train()
        if algorithm is None:
            algorithm = build_algorithm(args, model, ref_model)
        self.algorithm = algorithm
        check_distinct_reference(model, ref_model)
        self.ref_model = ref_model
        if algorithm.needs_reference:  # frozen on the device (a copy of the policy if None)
            frozen = frozen_reference(self.model, ref_model, self.device)
            self.ref_model = self.dp.prepare_reference(frozen)
        self.reward_funcs = as_reward_funcs(reward_funcs)
        check_train_rows(self.rows, self.reward_funcs)
        provider = self.extensions.value_provider  # None: V* from the table
        v_star = train_v_star(algorithm, v_star_table, self.rows, provider)  # [N] or None
        self.reference = ReferenceState(self.ref_model, v_star, algorithm.name)
        self.tokenizer = tokenizer
        check_v_star_table(v_star_table, self.rows, self.reward_funcs, args, reference_name)
        self.pad_token_id = int(
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        if generator is None:  # built before sharding: vLLM starts from the full weights
            generator = self.dp.build_generator(args, self.model, tokenizer)
        self.generator = self.dp.wrap_generator(generator)
        self.train_model = self.dp.wrap_policy(self.model)  # DDP/FSDP2 under torchrun
        self.modules = [m.to(self.device) for m in algorithm.modules()]
        self.params = trainable_parameters(model, self.modules)
        sharded = self.dp.info.distributed and self.dp.strategy == "fsdp"
        self.optimizer = build_optimizer(self.params, args, self.device, sharded)
        self._autocast = autocast_factory(args.mixed_precision, self.device)
        self.eval_fn = eval_fn
        self.callbacks = check_callbacks(callbacks)
        self.step_count = 0
        self.order = EpochOrder(len(self.rows), args.seed)
        self.train_time = 0.0
        self.history: list[dict[str, Any]] = []
        self._checkpoint: Path | None = None  # of this step: written or resumed from
        self.extensions.on_init(self)

    @property
    def v_star(self) -> np.ndarray | None:
        """V* of every training row now ``[N]`` (read-only: ``self.reference.set_values``)."""
        return self.reference.v_star

    def _micro(self, rows: int) -> int:
        return self.args.micro_batch_size or rows

    def step(self) -> dict[str, Any]:
        """One rollout batch and its updates; returns the logged record."""
        args, algo, t = self.args, self.algorithm, self.step_count + 1
        times: dict[str, float] = {}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        record: dict[str, Any] = {"step": t}

        # 1-2. Prompts, the extensions' hook (a signal in its Stage 1 gives the prompts back),
        # generation and rewards (dataset columns repeated per sample).
        with self.order.given_back_on(Interrupted):
            global_idx = self.order.take(args.batch_size)
            begin = StepBegin(t, tuple(global_idx), times, self.device)
            record.update(self.extensions.on_step_begin(self, begin))
        positions = self.dp.shard(len(global_idx))  # this rank's block of the global batch
        n = algo.samples_per_prompt

        def generate(prompts: list[str], n: int, sampling: Any, seed: int) -> Rollout:
            self.generator.sync_weights(self.model)
            return self.dp.generate(self.generator, prompts, n, sampling, seed, positions)

        phase = functools.partial(self.dp.phase, step=t, times=times, device=self.device)

        scored = sample_and_score(
            generate,
            [self.rows[global_idx[i]] for i in positions],
            n,
            args.sampling,
            derive_seed(args.seed, t),
            self.reward_funcs,
            timeout=args.reward_timeout,
            phase=phase,
        )
        with timed(times, "reward"):  # the global batch, on every rank
            rollout, rewards = self.dp.gather_rollout(scored.rollout, scored.rewards)
        record.update(self.dp.reduce(scored.metrics))
        v_star = None
        if self.v_star is not None:
            v_star = np.repeat(self.v_star[global_idx], n)
            record["v_star/mean"] = float(v_star.mean())
        batch = RolloutBatch.from_rollout(rollout, rewards, self.pad_token_id, self.device, v_star)
        with explain_non_finite(t, record, args.learning_rate, args.output_dir):
            check_batch(batch)  # e.g. rewards past float32's range

        # 3. Reference (and old-policy) log-probs, no gradient.
        with phase("ref_logprobs"):
            if algo.needs_reference:
                ref = self.dp.logprobs(self.ref_model, batch, self._micro, self._autocast)
                batch.logp_ref, batch.token_logp_ref = ref.logp, ref.token_logp
            if algo.needs_old_logprobs:
                old = self.dp.logprobs(self.model, batch, self._micro, self._autocast)
                batch.logp_old, batch.token_logp_old = old.logp, old.token_logp

        # 4. Updates: update_epochs x minibatches optimizer steps over whole prompt groups.
        with phase("update"):
            with torch.no_grad(), self._autocast():
                record.update(algo.prepare(batch))

            def update(minibatch: RolloutBatch) -> dict[str, float]:
                with explain_non_finite(t, record, args.learning_rate, args.output_dir):
                    return optimizer_step(
                        self.train_model,
                        algo,
                        minibatch,
                        self.optimizer,
                        self.params,
                        self.modules,
                        self.dp,
                        args,
                        self._autocast,
                    )

            record.update(rollout_updates(batch, len(global_idx), n, t, args, self.dp, update))

        # 5. Metrics.
        record.update(response_metrics(batch.response_lengths, batch.truncated))
        record.update(times)
        record["time/step"] = sum(times.values())
        record.update(peak_memory(self.device))
        self.step_count, self._checkpoint = t, None
        self.train_time += record["time/step"]
        record["time/train_total"] = self.train_time
        return record

    def save(self) -> Path:
        """Write a checkpoint of the current step to ``output_dir`` (every rank must call it),
        then keep only the newest ``save_total_limit`` checkpoints."""
        out, step = self.args.output_dir, self.step_count
        state: dict[str, Any] = {**self.order.state_dict(), "train_time": self.train_time}
        state.update(algorithm=self.algorithm.name, extensions=self.extensions.state_dict(self))
        with self.dp.watch("checkpoint", step):
            path = save_checkpoint(out, step, self.model, self.optimizer, self.modules, state)
        rotate_checkpoints(out, self.args.save_total_limit)
        self._checkpoint = path
        self.extensions.on_save(self)  # e.g. delete the files no kept checkpoint needs
        return path

    def save_model(self, output_dir: str | Path | None = None, *, overwrite: bool = False) -> Path:
        """Write the policy and tokenizer with ``save_pretrained`` (TRL's ``save_model``;
        LoRA merged, FSDP2 gathered; every rank must call it) to ``output_dir`` (default
        ``OUT/final``), marked ``astarpo_model.json`` (:mod:`astarpo.llm.training.final_model`).

        Raises:
            FileExistsError: ``output_dir`` is a file, or a non-empty folder astarpo did not
                write (without ``overwrite``).
        """
        owned = output_dir is None  # OUT/final lies in the run directory, which the run owns
        out = Path(self.args.output_dir) / "final" if output_dir is None else Path(output_dir)
        return save_model_folder(
            self.model, self.tokenizer, out, step=self.step_count, owned=owned, overwrite=overwrite
        )

    def resume(self, path: str | Path | None = None) -> int:
        """Load ``path`` (or the latest checkpoint in ``output_dir``); returns its step.

        Without ``path``, a corrupt latest checkpoint falls back to the one before it, with a
        warning.

        Raises:
            FileNotFoundError: if there is no checkpoint to resume from.
            CheckpointError: the checkpoint (every checkpoint, without ``path``) is unreadable.
        """
        out = self.args.output_dir
        found = [Path(path)] if path is not None else checkpoints(out)[::-1]
        state = load_first_readable(found, out, self.model, self.optimizer, self.modules)
        self.step_count = int(state["step"])
        self.order.load_state_dict(state)
        self.train_time = float(state["train_time"])
        self.extensions.load_state_dict(self, state.get("extensions"))  # e.g. the reference
        self._checkpoint = Path(path or Path(out) / f"checkpoint-{self.step_count}")
        return self.step_count

    def train(self, resume: bool | str | Path = False) -> list[dict[str, Any]]:
        """Run until ``max_steps``, the ``max_train_seconds`` budget or a callback's stop;
        ``resume=True`` continues from the latest checkpoint in ``output_dir`` (or from the
        given checkpoint path).

        Returns:
            The records logged by this call (step records and ``eval/`` records).

        Raises:
            RunDirError: a fresh run in a directory holding an earlier run (without
                ``overwrite_output_dir``), or a resume whose settings differ from the run it
                continues (:mod:`astarpo.llm.training.run_dir`).
            NonFiniteError: a step's rewards, loss or gradient norm are not finite; the update
                is not applied and nothing is saved.
            RewardTimeoutError: a reward function ran past ``reward_timeout``.
            Interrupted: SIGTERM or SIGINT arrived (on any rank); the step running then was
                finished and checkpointed, or the one before it when the signal stopped an
                extension's Stage 1 (:mod:`astarpo.llm.training.preemption`).
        """
        args, extensions = self.args, self.extensions.settings()
        v_star = self.reference.v_star_at_start  # the run's Stage 1 values, not refreshed ones
        record = run_record(args, self.algorithm, self.rows, self.reward_funcs, v_star, extensions)
        start_run(args.output_dir, record, bool(resume), args.overwrite_output_dir, self.dp.is_main)
        barrier()
        resume_step = None
        if resume:
            resume_step = self.resume(None if resume is True else resume)
            announce_resume(args.output_dir, resume_step, args.max_steps, self.dp.is_main)
        logger = self.dp.logger(args.output_dir, args.reporters, resume_step)
        self.history = []
        schedule = Schedule.from_config(args, self.train_time)
        self.extensions.on_train_begin(self)
        call_hook(self.callbacks, "on_train_begin", self)
        if resume_step is None:
            evaluate(self, logger)
        show = args.progress and self.dp.is_main
        bar = progress_bar(args.max_steps, "train", "step", initial=self.step_count, enabled=show)
        with contextlib.ExitStack() as finally_:
            finally_.callback(logger.close)  # closed last, after the bar and the signals
            finally_.callback(bar.close)
            # SIGTERM/SIGINT: stop after the step, with a checkpoint (training/preemption).
            signals = finally_.enter_context(TrainingSignals(self.dp, args.max_steps))
            stop = schedule.done(self.step_count, self.train_time)
            while not stop:
                with signals.in_step(self.step_count + 1, self.save, self._checkpoint):
                    record = self.step()  # a stop inside its Stage 1 saves the step before
                logger.log(record)
                self.history.append(record)
                reward = record.get("reward/mean", float("nan"))
                post = {"reward": f"{reward:.3f}", "loss": f"{record['loss']:.4g}"}
                bar.set_postfix(post, refresh=False, kl=f"{record['kl']:.3g}")
                bar.update(1)
                t = self.step_count
                stop = call_hook(self.callbacks, "on_step_end", record)
                stop = schedule.done(t, self.train_time) or stop
                if schedule.evaluate_now(t, self.train_time) and not stop:
                    evaluate(self, logger)
                if args.save_steps and t % args.save_steps == 0 and not stop:
                    self.save()
                signals.after_step(t, stop, self.save, self._checkpoint)
            if resume_step is None or resume_step < self.step_count:
                evaluate(self, logger)
            self.save()
            self.save_model()  # OUT/final: a plain Hugging Face model directory
            call_hook(self.callbacks, "on_train_end", self.history)
        return self.history
