"""Stage 1 streamed: V* of each step's new prompts, estimated just before the step.

The paper runs Stage 1 once, up front, on every training prompt. A run that goes through its
data once (or stops early) then pays for prompts it never trains on. With ``stream_stage1=True``
(:class:`~astarpo.llm.algorithms.astarpo.AStarPOConfig`) the trainer takes no ``v_star_table``;
at the start of step ``t``, for the prompts of its batch that have no V* yet:

1. the frozen reference samples ``stream_n_samples`` responses per prompt with transformers'
   ``generate`` (whatever the training backend: the engine of a vLLM run serves the policy),
   the run's sampling settings and the seed ``derive_seed(seed, "stream", t)``;
2. V* = ``stream_beta1 * log mean exp(r / stream_beta1)`` of their rewards
   (:func:`~astarpo.llm.stage1.estimate.estimate_values` with the config of
   :func:`stream_stage1_config`) fills the trainer's ``v_star`` array for those prompts.

A prompt seen again (a later epoch) keeps the V* of its first step, as with an up-front table.
The samples and time are training cost: ``time/stage1`` of the step, counted in
``time/train_total`` and so in ``max_train_seconds``. Every step record holds
``stream/prompts`` (prompts estimated so far), ``stream/samples`` (Stage 1 samples drawn) and
``stream/seconds`` (their time). A checkpoint stores the values estimated so far, so a resumed
run continues with them and reproduces an uninterrupted one.

Not supported (refused at construction with a ``ValueError``): an algorithm without V*, a
``v_star_table`` given as well, a refresh rule (``refresh_every_steps > 0``), LoRA (the
reference is the policy with its adapters disabled) and ``torchrun`` (data parallel).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.config import Stage1Config, training_stage1_config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import lookup_v_star
from astarpo.llm.training.metrics import timed

__all__ = ["StreamedStage1", "stream_stage1_config"]


def stream_stage1_config(config: Any, step: int) -> Stage1Config:
    """The :class:`~astarpo.llm.stage1.config.Stage1Config` of the streamed Stage 1 before
    ``step``: ``stream_n_samples`` per prompt (fixed allocation), ``stream_beta1`` and the seed
    ``derive_seed(seed, "stream", step)``
    (:func:`~astarpo.llm.stage1.config.training_stage1_config`: the run's sampling, reward
    deadline and ``generation_batch_size // N`` prompts per generate call)."""
    seed = derive_seed(config.seed, "stream", step)
    return training_stage1_config(config, int(config.stream_n_samples), config.stream_beta1, seed)


def _check_supported(trainer: Any, v_star_table: Any) -> None:
    """Refuse what the stream cannot do right (see the module docstring)."""
    args, algo = trainer.args, trainer.algorithm
    fix = "Set stream_stage1=False"
    if not algo.needs_v_star:
        raise ValueError(f"stream_stage1=True needs an algorithm with V*; {algo.name} has none.")
    if v_star_table is not None:
        raise ValueError(
            "stream_stage1=True estimates V* during training, but a v_star_table was given too; "
            f"pass v_star_table=None, or {fix} to train on the table."
        )
    if getattr(args, "refresh_every_steps", 0):
        raise ValueError(
            "stream_stage1=True cannot be combined with refresh_every_steps > 0 (a refresh "
            f"re-estimates every prompt anyway); {fix} or refresh_every_steps=0."
        )
    if getattr(args, "lora_r", 0):
        raise ValueError(
            "stream_stage1=True is not supported with LoRA (lora_r > 0): the reference is the "
            f"policy with its adapters disabled. Train without LoRA, or {fix} and give a table."
        )
    if trainer.dp.info.distributed:
        raise ValueError(
            "stream_stage1=True is not supported under torchrun (data parallel); run Stage 1 "
            f"first (`astarpo value`, sharded by rank) and {fix}."
        )


class StreamedStage1:
    """The streamed Stage 1 of one trainer (a no-op when ``stream_stage1`` is off).

    Args:
        trainer: The :class:`~astarpo.llm.training.trainer.Trainer`, built up to its reference,
            rows, rewards and ``v_star`` (``NaN`` for every row when the stream is on: no value
            yet); its ``v_star`` entries are filled by :meth:`before_step`.
        v_star_table: The table the trainer was given (must be ``None`` with the stream on).

    Attributes:
        on: ``stream_stage1``.
        prompts: Distinct prompts estimated so far (this run, a resumed one included); every
            training row of a prompt gets its value at once.
        samples: Stage 1 samples drawn for them.
        seconds: Their time.

    Raises:
        ValueError: the stream is on and not supported (see the module docstring).
    """

    def __init__(self, trainer: Any, v_star_table: Any) -> None:
        self.on = bool(getattr(trainer.args, "stream_stage1", False))
        self.prompts, self.samples, self.seconds = 0, 0, 0.0
        self._generator: HFGenerator | None = None
        self._rows: dict[str, list[int]] | None = None
        if self.on:
            _check_supported(trainer, v_star_table)

    def before_step(
        self, trainer: Any, idx: Sequence[int], t: int, times: dict[str, float]
    ) -> dict[str, float]:
        """Estimate V* of the rows ``idx`` (step ``t``'s batch) that have none yet; returns the
        ``stream/`` metrics of the step record (``{}`` when the stream is off)."""
        if not self.on:
            return {}
        new = sorted({int(i) for i in idx if np.isnan(trainer.v_star[i])})
        if new:
            with timed(times, "stage1", trainer.device):
                rows = [trainer.rows[i] for i in new]
                table = estimate_values(
                    self._reference_generator(trainer),
                    rows,
                    trainer.reward_funcs,
                    stream_stage1_config(trainer.args, t),
                )
                # every row of those prompts, those of later batches (duplicates) included
                prompts = dict.fromkeys(str(r["prompt"]) for r in rows)
                same = [i for p in prompts for i in self._rows_of(trainer)[p]]
                trainer.v_star[same] = lookup_v_star(
                    table, [trainer.rows[i]["prompt"] for i in same]
                )
            self.prompts += len(table)
            self.samples += sum(len(row.rewards) for row in table)
            self.seconds += times["time/stage1"]
        return {
            "stream/prompts": float(self.prompts),
            "stream/samples": float(self.samples),
            "stream/seconds": self.seconds,
        }

    def _rows_of(self, trainer: Any) -> dict[str, list[int]]:
        """Prompt -> the indices of the training rows that hold it (built once)."""
        if self._rows is None:
            self._rows = {}
            for i, row in enumerate(trainer.rows):
                self._rows.setdefault(str(row["prompt"]), []).append(i)
        return self._rows

    def _reference_generator(self, trainer: Any) -> HFGenerator:
        if self._generator is None:  # shares the reference's weights: built once, no copy
            batch = trainer.args.generation_batch_size
            self._generator = HFGenerator(trainer.ref_model, trainer.tokenizer, batch)
        return self._generator

    def state(self, v_star: np.ndarray | None) -> dict[str, Any] | None:
        """What a checkpoint stores: the counters and the values so far (``None`` for a row
        not estimated yet); ``None`` when the stream is off."""
        if not self.on or v_star is None:
            return None
        values = [None if np.isnan(v) else float(v) for v in v_star]
        return dict(prompts=self.prompts, samples=self.samples, seconds=self.seconds, v=values)

    def restore(self, trainer: Any, state: dict[str, Any] | None) -> None:
        """Continue from a checkpoint's :meth:`state` (nothing to do when the stream is off).

        Raises:
            ValueError: the stream is on and the checkpoint has no stream state, or values for
                another number of rows.
        """
        if not self.on:
            return
        if state is None or len(state["v"]) != len(trainer.rows):
            raise ValueError(
                "this run streams Stage 1 (stream_stage1=True), but the checkpoint holds no "
                "streamed values for its training rows (written by a run with other settings or "
                "data); resume with the settings and data of the run that wrote it."
            )
        trainer.v_star[:] = [np.nan if v is None else v for v in state["v"]]
        self.prompts, self.samples = int(state["prompts"]), int(state["samples"])
        self.seconds = float(state["seconds"])
