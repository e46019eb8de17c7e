"""The outer Stage 2 loop shared by every trainer: ``train``, checkpoints, resume, evaluation.

:class:`TrainLoop` is a base class of :class:`~astarpo.llm.trainer.Trainer`; it runs
:meth:`~astarpo.llm.trainer.Trainer.step` until ``max_steps`` with logging, periodic
evaluation and checkpoints, and restores the data position on resume. The attributes it reads
are set by :class:`~astarpo.llm.trainer.Trainer`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from astarpo.llm.algorithm import Algorithm
from astarpo.llm.checkpoint import latest_checkpoint
from astarpo.llm.config import TrainConfig
from astarpo.llm.metrics import MetricsLogger
from astarpo.llm.trainer_helpers import EvalFn

__all__ = ["TrainLoop"]


class TrainLoop:
    """``train``, ``save`` and ``resume`` of :class:`~astarpo.llm.trainer.Trainer`.

    Not used on its own: :class:`~astarpo.llm.trainer.Trainer` sets the attributes below and
    implements :meth:`step`.
    """

    args: TrainConfig
    algorithm: Algorithm
    dp: Any
    model: Any
    optimizer: torch.optim.Optimizer
    modules: list[torch.nn.Module]
    eval_fn: EvalFn | None
    eval_steps: int
    step_count: int
    data_epoch: int
    data_index: int
    train_time: float
    history: list[dict[str, Any]]

    def step(self) -> dict[str, Any]:
        """One rollout batch and its updates (implemented by the trainer)."""
        raise NotImplementedError

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "data_epoch": self.data_epoch,
            "data_index": self.data_index,
            "train_time": self.train_time,
            "algorithm": self.algorithm.name,
        }

    def save(self) -> Path:
        """Write a checkpoint of the current step to ``output_dir``."""
        return self.dp.save_checkpoint(
            self.args.output_dir,
            self.step_count,
            self.model,
            self.optimizer,
            self.modules,
            self._trainer_state(),
        )

    def resume(self, path: str | Path | None = None) -> int:
        """Load ``path`` (or the latest checkpoint in ``output_dir``); returns its step.

        Raises:
            FileNotFoundError: if there is no checkpoint to resume from.
        """
        ckpt = Path(path) if path is not None else latest_checkpoint(self.args.output_dir)
        if ckpt is None:
            raise FileNotFoundError(
                f"no checkpoint-<step> directory in {self.args.output_dir} to resume from."
            )
        state = self.dp.load_checkpoint(ckpt, self.model, self.optimizer, self.modules)
        self.step_count = int(state["step"])
        self.data_epoch = int(state["data_epoch"])
        self.data_index = int(state["data_index"])
        self.train_time = float(state["train_time"])
        return self.step_count

    def _evaluate(self, logger: MetricsLogger) -> None:
        if self.eval_fn is None:
            return
        result = self.eval_fn(self.model)
        rec = {"step": self.step_count, "time/train_total": self.train_time}
        rec.update({f"eval/{k}": float(v) for k, v in result.items()})
        logger.log(rec)
        self.history.append(rec)

    def train(self, resume: bool | str | Path = False) -> list[dict[str, Any]]:
        """Run until ``max_steps``; ``resume=True`` continues from the latest checkpoint in
        ``output_dir`` (or from the given checkpoint path).

        Returns:
            The records logged by this call (step records and ``eval/`` records).
        """
        from tqdm.auto import tqdm

        args = self.args
        resume_step = None
        if resume:
            resume_step = self.resume(None if resume is True else resume)
        logger = self.dp.logger(args.output_dir, args.tensorboard, resume_step)
        self.history = []
        if resume_step is None:
            self._evaluate(logger)
        bar = tqdm(
            total=args.max_steps,
            initial=self.step_count,
            # disable=None: tqdm shows the bar only on a terminal
            disable=None if (args.progress and self.dp.is_main) else True,
            desc="train",
        )
        try:
            while self.step_count < args.max_steps:
                record = self.step()
                logger.log(record)
                self.history.append(record)
                bar.update(1)
                bar.set_postfix(
                    reward=f"{record.get('reward/mean', float('nan')):.3f}",
                    loss=f"{record['loss']:.4g}",
                    kl=f"{record['kl']:.3g}",
                )
                t = self.step_count
                if self.eval_steps and t % self.eval_steps == 0 and t < args.max_steps:
                    self._evaluate(logger)
                if args.save_steps and t % args.save_steps == 0 and t < args.max_steps:
                    self.save()
            if resume_step is None or resume_step < args.max_steps:
                self._evaluate(logger)
            self.save()
        finally:
            bar.close()
            logger.close()
        return self.history
