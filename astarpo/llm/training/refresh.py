"""The moving reference of A*-PO (a trainer extension): every K steps the reference becomes the
policy and V* is estimated again under it by Stage 1.

With ``Trainer(..., extensions=[ReferenceRefresh(RefreshConfig(every_steps=K))])`` (``astarpo
train --refresh-every-steps K``), after every step ``t`` with ``t % K == 0`` and before step
``t + 1`` (at the start of that step, so a run that stops at ``t`` spends nothing on it):

1. V* of every training prompt is estimated under the policy, which is about to become the
   reference, by Stage 1 (:func:`~astarpo.llm.stage1.estimate.estimate_values` and the config of
   :func:`refresh_stage1_config`): the trainer's own generator, synced with the policy, samples
   ``n_samples`` responses per prompt with the run's sampling settings and the seed
   ``derive_seed(seed, "refresh", t)``;
2. the policy's weights are copied into the frozen reference and V* is replaced, through the
   trainer's :class:`~astarpo.llm.training.reference.ReferenceState`, once the estimate is
   done (a SIGTERM/SIGINT during it leaves the trainer as it was, and the trainer saves step
   ``t``);
3. the reference weights (``reference.pt``) and the table (``values.jsonl``) are written to
   ``OUTPUT_DIR/refresh/step-<t>/``.

The estimate and the copy are training cost: their time is ``time/refresh`` of step ``t + 1``
and counts in ``time/train_total``. Every step record holds ``refresh/count`` (refreshes so
far), ``refresh/samples`` (Stage 1 samples they drew), ``refresh/seconds`` (their time) and
``refresh/v_star_mean`` (the mean V* of the training rows now). A checkpoint stores the last
refresh step; a resume reloads that refresh's folder, so it continues with the reference and
the V* it had. Refresh folders no kept checkpoint needs are deleted when checkpoints are
rotated. A run whose ``max_steps`` is at most ``every_steps`` never refreshes: it is warned.

Not supported (refused at construction with a ``ValueError``): LoRA (the reference is the
policy with its adapters disabled), ``torchrun`` (data parallel), a reference of another
architecture than the policy, an algorithm without a reference or V*, and greedy sampling with
more than one sample per prompt.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from astarpo.config import doc_field
from astarpo.llm.algorithms.config import check_choice
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.lora import AdapterDisabledReference
from astarpo.llm.parallel.dist import unwrap_model
from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.stage1.config import Stage1Config, training_stage1_config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import ValueTable, lookup_v_star
from astarpo.llm.training.checkpoint import CheckpointError, checkpoints
from astarpo.llm.training.extensions import ExtensionHost, StepBegin, TrainerExtension
from astarpo.objective import check_beta

__all__ = [
    "REFRESH_DIR",
    "ReferenceRefresh",
    "RefreshConfig",
    "refresh_folder",
    "refresh_stage1_config",
]

logger = logging.getLogger(__name__)

REFRESH_DIR = "refresh"
"""The folder of ``output_dir`` holding one ``step-<t>`` folder per refresh."""

_STEP = re.compile(r"^step-(\d+)$")


@dataclass(frozen=True)
class RefreshConfig:
    r"""The refresh rule of :class:`ReferenceRefresh` (``astarpo train --refresh-*`` flags).

    A fixed reference caps what A*-PO can learn: the regression pulls the policy towards
    :math:`\pi_{\mathrm{ref}} e^{A^*/\beta_2}`, which stays close to the starting model. A
    refresh moves it (as OAPL, arXiv 2602.19362, refreshes a lagged reference); see the module
    docstring.

    Example:
        >>> RefreshConfig(every_steps=25, n_samples=8).allocation
        'fixed'
    """

    every_steps: int = doc_field(
        dataclasses.MISSING,
        "Refresh the reference every this many steps (K >= 1): after each step that is a "
        "multiple of it, the reference becomes a frozen copy of the policy and V* is estimated "
        "again under it (Stage 1 on the training prompts; its samples and time count as training "
        "cost).",
    )
    n_samples: int = doc_field(
        8,
        "Stage 1 samples per prompt of each refresh's V* estimate (with adaptive allocation, "
        "their mean over each generate call's prompts).",
    )
    beta1: float = doc_field(
        0.5, "beta1 of each refresh's V* = beta1 log mean exp(r / beta1), > 0 (the paper: 0.5)."
    )
    allocation: str = doc_field(
        "fixed",
        "How each refresh spreads its samples over prompts: 'fixed' (n_samples each) or "
        "'adaptive' (Stage 1's allocation rule, with its default pilot and cap).",
    )

    def __post_init__(self) -> None:
        for name in ("every_steps", "n_samples"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}.")
        check_beta(self.beta1, "beta1")
        check_choice(self, "allocation", ("fixed", "adaptive"))


def refresh_stage1_config(config: RefreshConfig, args: TrainConfig, step: int) -> Stage1Config:
    """The :class:`~astarpo.llm.stage1.config.Stage1Config` of the refresh after ``step``: the
    rule's ``n_samples``, ``beta1`` and ``allocation`` and the seed ``derive_seed(seed,
    "refresh", step)`` (:func:`~astarpo.llm.stage1.config.training_stage1_config`: the run's
    sampling, reward deadline and ``generation_batch_size // N`` prompts per generate call)."""
    seed = derive_seed(args.seed, "refresh", step)
    return training_stage1_config(args, config.n_samples, config.beta1, seed, config.allocation)


def refresh_folder(output_dir: str | Path, step: int) -> Path:
    """``output_dir/refresh/step-<step>``: the reference and V* table of the refresh after
    ``step``."""
    return Path(output_dir) / REFRESH_DIR / f"step-{step}"


class ReferenceRefresh(TrainerExtension):
    """The moving reference (see the module docstring), a
    :class:`~astarpo.llm.training.extensions.TrainerExtension`.

    Args:
        config: The refresh rule.

    Attributes:
        config: The refresh rule.
        step: The step after which the last refresh ran (0: none yet).
        count: Refreshes so far (this run, a resumed one included).
        samples: Stage 1 samples those refreshes drew.
        seconds: Their time (the estimate and the copy).

    Example:
        >>> trainer = AStarPOTrainer(model, ref, rewards, args=AStarPOConfig(),  # doctest: +SKIP
        ...     train_dataset=rows, v_star_table=table,
        ...     extensions=[ReferenceRefresh(RefreshConfig(every_steps=25))])
    """

    name: ClassVar[str] = "refresh"
    changes_values: ClassVar[bool] = True

    def __init__(self, config: RefreshConfig) -> None:
        if not isinstance(config, RefreshConfig):
            raise TypeError(
                f"ReferenceRefresh needs a RefreshConfig, got {type(config).__name__}; e.g. "
                "ReferenceRefresh(RefreshConfig(every_steps=25))."
            )
        self.config = config
        self.step, self.count, self.samples, self.seconds = 0, 0, 0, 0.0

    def check_config(self, args: TrainConfig) -> None:
        """Refuse LoRA and greedy sampling with several samples per prompt."""
        if args.lora_r:
            raise ValueError(
                "a reference refresh (refresh every_steps) is not supported with LoRA (lora_r > "
                "0): the reference is the policy with its adapters disabled, so it cannot become "
                "a copy of the policy. Train without LoRA (lora_r=0) or without the refresh."
            )
        if args.sampling.greedy and self.config.n_samples > 1:
            raise ValueError(
                f"temperature 0 (greedy) gives each refresh {self.config.n_samples} identical "
                "samples per prompt, so V* would be one reward; sample with temperature > 0, or "
                "use n_samples=1."
            )

    def on_init(self, trainer: ExtensionHost) -> None:
        """Refuse an algorithm without a reference or V*, ``torchrun``, and a reference the
        policy's weights cannot be copied into."""
        algo, ref = trainer.algorithm, trainer.reference.ref_model
        if not (algo.needs_reference and algo.needs_v_star):
            raise ValueError(
                f"a reference refresh needs an algorithm with a reference and V*; {algo.name} "
                "has not both. Train without the refresh."
            )
        if trainer.distributed:
            raise ValueError(
                "a reference refresh is not supported under torchrun (data parallel): it "
                "re-estimates V* in one process. Train in one process or without the refresh."
            )
        if isinstance(ref, AdapterDisabledReference) or not isinstance(ref, torch.nn.Module):
            raise ValueError(
                "a reference refresh needs a separate reference module to copy the policy into; "
                f"the reference is {type(ref).__name__} (LoRA's adapter-disabled policy is not "
                "supported). Train without LoRA or without the refresh."
            )
        policy = unwrap_model(trainer.model).state_dict()
        shapes = {k: tuple(v.shape) for k, v in policy.items()}
        if shapes != {k: tuple(v.shape) for k, v in ref.state_dict().items()}:
            raise ValueError(
                "a reference refresh copies the policy's weights into the reference, but "
                "ref_model has another architecture (other parameter names or shapes). Give a "
                "reference of the policy's architecture (or ref_model=None), or train without "
                "the refresh."
            )

    def on_train_begin(self, trainer: ExtensionHost) -> None:
        """Warn when the run ends before the first refresh."""
        every, last = self.config.every_steps, trainer.args.max_steps
        if every >= last:
            logger.warning(
                "the reference refresh never runs: every_steps (--refresh-every-steps) is %d and "
                "the run stops at max_steps (--max-steps) %d, while the first refresh comes after "
                "step %d. Refresh more often than max_steps, or train without the refresh.",
                every,
                last,
                every,
            )

    def on_step_begin(self, trainer: ExtensionHost, step: StepBegin) -> dict[str, float]:
        """Refresh before step ``t`` when step ``t - 1`` ends a period (once); returns the
        ``refresh/`` metrics of the step record."""
        last, every = step.step - 1, self.config.every_steps
        if last > 0 and last % every == 0 and self.step != last:
            before = step.times.get("time/refresh", 0.0)
            with step.timed("refresh"):
                table = self._estimate(trainer, last)  # may be stopped: nothing changed yet
                trainer.reference.set_weights(unwrap_model(trainer.model).state_dict())
                v_star = lookup_v_star(table, [r["prompt"] for r in trainer.rows])
                trainer.reference.set_values(v_star)
            self.step, self.count = last, self.count + 1
            self.samples += sum(len(row.rewards) for row in table)
            self.seconds += step.times["time/refresh"] - before
            self._write(trainer, last, table)  # I/O, like a checkpoint: not training time
        values = trainer.reference.v_star
        assert values is not None  # on_init: the algorithm has V*
        return {
            "refresh/count": float(self.count),
            "refresh/samples": float(self.samples),
            "refresh/seconds": self.seconds,
            "refresh/v_star_mean": float(np.mean(values)),
        }

    def _estimate(self, trainer: ExtensionHost, step: int) -> ValueTable:
        """V* of every training prompt under the policy (Stage 1, the trainer's generator)."""
        trainer.generator.sync_weights(trainer.model)  # the policy is the new reference
        return estimate_values(
            trainer.generator,
            trainer.rows,
            trainer.reward_funcs,
            refresh_stage1_config(self.config, trainer.args, step),
            provenance={"model": f"policy after step {step}"},
        )

    def _write(self, trainer: ExtensionHost, step: int, table: ValueTable) -> None:
        """``refresh/step-<step>/`` with ``reference.pt`` and ``values.jsonl``, written whole
        (a temporary folder renamed)."""
        final = refresh_folder(trainer.args.output_dir, step)
        tmp = final.with_name(f".tmp-{final.name}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save(trainer.reference.ref_model.state_dict(), tmp / "reference.pt")
        table.save(tmp / "values.jsonl")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)

    def state_dict(self, trainer: ExtensionHost) -> dict[str, Any]:
        """The last refresh step and the counters (plain numbers)."""
        return dict(step=self.step, count=self.count, samples=self.samples, seconds=self.seconds)

    def load_state_dict(self, trainer: ExtensionHost, state: Mapping[str, Any] | None) -> None:
        """Continue from a checkpoint's :meth:`state_dict`: reload the reference and V* of its
        last refresh (``None`` or no refresh yet: those of the run's start, which a new trainer
        holds).

        Raises:
            CheckpointError: the refresh folder the checkpoint names is missing or unreadable.
            RuntimeError: this trainer already refreshed and the checkpoint predates every
                refresh (resume it in a new trainer, which holds the starting reference).
        """
        state = state or {"step": 0, "count": 0, "samples": 0, "seconds": 0.0}
        step = int(state["step"])
        if step == 0 and self.step != 0:
            raise RuntimeError(
                "this trainer's reference was refreshed, and the checkpoint predates every "
                "refresh; resume it in a new Trainer (built with the starting reference)."
            )
        if step:
            folder = refresh_folder(trainer.args.output_dir, step)
            try:
                weights = torch.load(folder / "reference.pt", "cpu", weights_only=True)
                table = ValueTable.load(folder / "values.jsonl")
            except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
                raise CheckpointError(
                    f"the checkpoint continues the reference refreshed after step {step}, but "
                    f"{folder} is missing or unreadable ({e}); resume from an earlier "
                    "checkpoint or start over."
                ) from e
            trainer.reference.set_weights(weights)
            trainer.reference.set_values(lookup_v_star(table, [r["prompt"] for r in trainer.rows]))
        elif (start := trainer.reference.v_star_at_start) is not None:
            trainer.reference.set_values(start)  # the run's Stage 1 values
        self.step, self.count = step, int(state["count"])
        self.samples, self.seconds = int(state["samples"]), float(state["seconds"])

    def on_save(self, trainer: ExtensionHost) -> None:
        """Delete the refresh folders that neither a kept checkpoint nor this trainer needs
        (a checkpoint of step ``s`` continues the refresh after ``K * ((s - 1) // K)``)."""
        output_dir = trainer.args.output_dir
        root = Path(output_dir) / REFRESH_DIR
        if not root.is_dir():
            return
        every, needed = self.config.every_steps, {self.step}
        for ckpt in checkpoints(output_dir):
            s = int(ckpt.name.rpartition("-")[2])
            needed.add(every * ((s - 1) // every) if s > 0 else 0)
        for p in root.iterdir():
            m = _STEP.match(p.name)
            if m and int(m.group(1)) not in needed:
                shutil.rmtree(p, ignore_errors=True)

    def settings(self) -> dict[str, Any]:
        """The refresh rule (:class:`RefreshConfig`'s fields)."""
        return dataclasses.asdict(self.config)
