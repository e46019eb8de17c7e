"""Stage 1 streamed (a trainer extension): V* of each step's new prompts, estimated just before
the step.

The paper runs Stage 1 once, up front, on every training prompt. A run that goes through its
data once (or stops early) then pays for prompts it never trains on. With
``Trainer(..., v_star_table=None, extensions=[StreamedStage1(StreamConfig(n_samples=N))])``
(``astarpo train --stream-stage1 true --stream-n-samples N``) the trainer takes no V* table;
at the start of step ``t``, for the prompts of its batch that have no V* yet:

1. the frozen reference samples ``n_samples`` responses per prompt with transformers'
   ``generate`` (whatever the training backend: the engine of a vLLM run serves the policy),
   the run's sampling settings and the seed ``derive_seed(seed, "stream", t)``;
2. V* = ``beta1 * log mean exp(r / beta1)`` of their rewards
   (:func:`~astarpo.llm.stage1.estimate.estimate_values` with the config of
   :func:`stream_stage1_config`) is set for every training row of those prompts, through the
   trainer's :class:`~astarpo.llm.training.reference.ReferenceState`, once the estimate is
   done (a SIGTERM/SIGINT during it leaves the trainer as it was, and the trainer saves the
   step before).

A prompt seen again (a later epoch) keeps the V* of its first step, as with an up-front table.
The samples and time are training cost: ``time/stage1`` of the step, counted in
``time/train_total`` and so in ``max_train_seconds``. Every step record holds
``stream/prompts`` (prompts estimated so far), ``stream/samples`` (Stage 1 samples drawn) and
``stream/seconds`` (their time). A checkpoint stores the values estimated so far, so a resumed
run continues with them and reproduces an uninterrupted one.

Not supported (refused at construction with a ``ValueError``): an algorithm without V*, a
``v_star_table`` given as well, another extension that changes V* (a reference refresh), LoRA
(the reference is the policy with its adapters disabled), ``torchrun`` (data parallel), and
greedy sampling with more than one sample per prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from astarpo.config import doc_field
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.stage1.config import Stage1Config, training_stage1_config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import lookup_v_star
from astarpo.llm.training.extensions import ExtensionHost, StepBegin, TrainerExtension
from astarpo.objective import check_beta

__all__ = ["StreamConfig", "StreamedStage1", "stream_stage1_config"]


@dataclass(frozen=True)
class StreamConfig:
    """The settings of :class:`StreamedStage1` (``astarpo train --stream-*`` flags).

    Example:
        >>> StreamConfig(n_samples=8).beta1
        0.5
    """

    n_samples: int = doc_field(
        8, "Reference samples per prompt of the streamed V* (the paper's N for Stage 1)."
    )
    beta1: float = doc_field(
        0.5, "beta1 of the streamed V* = beta1 log mean exp(r / beta1), > 0 (the paper: 0.5)."
    )

    def __post_init__(self) -> None:
        n = self.n_samples
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n_samples must be an integer >= 1, got {n!r}.")
        check_beta(self.beta1, "beta1")


def stream_stage1_config(config: StreamConfig, args: TrainConfig, step: int) -> Stage1Config:
    """The :class:`~astarpo.llm.stage1.config.Stage1Config` of the streamed Stage 1 before
    ``step``: ``n_samples`` per prompt (fixed allocation), ``beta1`` and the seed
    ``derive_seed(seed, "stream", step)``
    (:func:`~astarpo.llm.stage1.config.training_stage1_config`: the run's sampling, reward
    deadline and ``generation_batch_size // N`` prompts per generate call)."""
    seed = derive_seed(args.seed, "stream", step)
    return training_stage1_config(args, config.n_samples, config.beta1, seed)


class StreamedStage1(TrainerExtension):
    """The streamed Stage 1 (see the module docstring), a
    :class:`~astarpo.llm.training.extensions.TrainerExtension`.

    Args:
        config: Its settings (default ``StreamConfig()``: 8 samples, ``beta1`` 0.5).

    Attributes:
        config: Its settings.
        prompts: Distinct prompts estimated so far (this run, a resumed one included); every
            training row of a prompt gets its value at once.
        samples: Stage 1 samples drawn for them.
        seconds: Their time.

    Example:
        >>> trainer = AStarPOTrainer(model, ref, rewards, args=AStarPOConfig(),  # doctest: +SKIP
        ...     train_dataset=rows, v_star_table=None,
        ...     extensions=[StreamedStage1(StreamConfig(n_samples=8))])
    """

    name: ClassVar[str] = "stream"
    provides_values: ClassVar[bool] = True
    changes_values: ClassVar[bool] = True

    def __init__(self, config: StreamConfig | None = None) -> None:
        config = StreamConfig() if config is None else config
        if not isinstance(config, StreamConfig):
            raise TypeError(
                f"StreamedStage1 needs a StreamConfig, got {type(config).__name__}; e.g. "
                "StreamedStage1(StreamConfig(n_samples=8))."
            )
        self.config = config
        self.prompts, self.samples, self.seconds = 0, 0, 0.0
        self._generator: HFGenerator | None = None
        self._rows: dict[str, list[int]] | None = None

    def check_config(self, args: TrainConfig) -> None:
        """Refuse LoRA and greedy sampling with several samples per prompt."""
        n = self.config.n_samples
        if args.sampling.greedy and n > 1:
            raise ValueError(
                f"temperature 0 (greedy) gives the streamed Stage 1 {n} identical samples per "
                "prompt, so V* would be one reward; sample with temperature > 0, or use "
                "n_samples=1."
            )
        if args.lora_r:
            raise ValueError(
                "the streamed Stage 1 is not supported with LoRA (lora_r > 0): the reference is "
                "the policy with its adapters disabled. Train without LoRA, or give a V* table "
                "and train without the streamed Stage 1."
            )

    def on_init(self, trainer: ExtensionHost) -> None:
        """Refuse an algorithm without V* and ``torchrun``."""
        algo = trainer.algorithm
        if not algo.needs_v_star:
            raise ValueError(
                f"the streamed Stage 1 needs an algorithm with V*; {algo.name} has none."
            )
        if trainer.distributed:
            raise ValueError(
                "the streamed Stage 1 is not supported under torchrun (data parallel); run "
                "Stage 1 first (`astarpo value`, sharded by rank) and train on its table."
            )

    def on_step_begin(self, trainer: ExtensionHost, step: StepBegin) -> dict[str, float]:
        """Estimate V* of the rows of ``step.batch`` that have none yet; returns the
        ``stream/`` metrics of the step record."""
        values = trainer.reference.v_star
        assert values is not None  # on_init: the algorithm has V*
        new = sorted({i for i in step.batch if np.isnan(values[i])})
        if new:
            before = step.times.get("time/stage1", 0.0)
            with step.timed("stage1"):
                rows = [trainer.rows[i] for i in new]
                table = estimate_values(  # may be stopped: nothing changed yet
                    self._reference_generator(trainer),
                    rows,
                    trainer.reward_funcs,
                    stream_stage1_config(self.config, trainer.args, step.step),
                )
                # every row of those prompts, those of later batches (duplicates) included
                prompts = dict.fromkeys(str(r["prompt"]) for r in rows)
                same = [i for p in prompts for i in self._rows_of(trainer)[p]]
                v_star = lookup_v_star(table, [trainer.rows[i]["prompt"] for i in same])
                trainer.reference.set_values(v_star, same)
            self.prompts += len(table)
            self.samples += sum(len(row.rewards) for row in table)
            self.seconds += step.times["time/stage1"] - before
        return {
            "stream/prompts": float(self.prompts),
            "stream/samples": float(self.samples),
            "stream/seconds": self.seconds,
        }

    def _rows_of(self, trainer: ExtensionHost) -> dict[str, list[int]]:
        """Prompt -> the indices of the training rows that hold it (built once)."""
        if self._rows is None:
            self._rows = {}
            for i, row in enumerate(trainer.rows):
                self._rows.setdefault(str(row["prompt"]), []).append(i)
        return self._rows

    def _reference_generator(self, trainer: ExtensionHost) -> HFGenerator:
        if self._generator is None:  # shares the reference's weights: built once, no copy
            batch = trainer.args.generation_batch_size
            self._generator = HFGenerator(trainer.reference.ref_model, trainer.tokenizer, batch)
        return self._generator

    def state_dict(self, trainer: ExtensionHost) -> dict[str, Any]:
        """The counters and the values so far (``None`` for a row not estimated yet)."""
        values = trainer.reference.v_star
        v = [] if values is None else [None if np.isnan(x) else float(x) for x in values]
        return dict(prompts=self.prompts, samples=self.samples, seconds=self.seconds, v=v)

    def load_state_dict(self, trainer: ExtensionHost, state: Mapping[str, Any] | None) -> None:
        """Continue from a checkpoint's :meth:`state_dict`.

        Raises:
            ValueError: the checkpoint has no stream state, or values for another number of
                rows.
        """
        if state is None or len(state.get("v", ())) != len(trainer.rows):
            raise ValueError(
                "this run streams Stage 1 (StreamedStage1), but the checkpoint holds no "
                "streamed values for its training rows (written by a run with other settings or "
                "data); resume with the settings and data of the run that wrote it."
            )
        values = np.array([np.nan if v is None else v for v in state["v"]], dtype=np.float64)
        trainer.reference.set_values(values)
        self.prompts, self.samples = int(state["prompts"]), int(state["samples"])
        self.seconds = float(state["seconds"])

    def settings(self) -> dict[str, Any]:
        """Its settings (:class:`StreamConfig`'s fields)."""
        return dataclasses.asdict(self.config)
