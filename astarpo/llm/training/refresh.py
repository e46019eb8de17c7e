"""The refresh rule of A*-PO's reference: a moving reference and its V*, re-estimated by Stage 1.

With ``refresh_every_steps = K > 0`` (:class:`~astarpo.llm.algorithms.astarpo.AStarPOConfig`),
after every step ``t`` with ``t % K == 0`` and before step ``t + 1`` (at the start of that step,
so a run that stops at ``t`` spends nothing on it):

1. the policy's weights are copied into the frozen reference module (no gradients, eval mode);
2. V* of every training prompt is estimated again under the new reference with Stage 1
   (:func:`~astarpo.llm.stage1.estimate.estimate_values` and the config of
   :func:`refresh_stage1_config`): the trainer's own generator, synced with the policy (which
   *is* the new reference), samples ``refresh_n_samples`` responses per prompt with the run's
   sampling settings and the seed ``derive_seed(seed, "refresh", t)``;
3. the trainer's ``v_star`` array is replaced, and the reference weights (``reference.pt``)
   and the table (``values.jsonl``) are written to ``OUTPUT_DIR/refresh/step-<t>/``.

The copy and the estimate are training cost: their time is ``time/refresh`` of step ``t + 1``
and counts in ``time/train_total``. Every step record of a run with a refresh rule holds
``refresh/count`` (refreshes so far), ``refresh/samples`` (Stage 1 samples they drew),
``refresh/seconds`` (their time) and ``refresh/v_star_mean`` (the mean V* of the training rows
now). A checkpoint stores the last refresh step; a resume reloads that refresh's folder, so it
continues with the reference and the V* it had. Refresh folders no kept checkpoint needs are
deleted when checkpoints are rotated.

Not supported (refused at construction with a ``ValueError``): LoRA (the reference is the
policy with its adapters disabled), ``torchrun`` (data parallel), a reference of another
architecture than the policy, and an algorithm without a reference or V*.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm.models.lora import AdapterDisabledReference
from astarpo.llm.parallel.dist import unwrap_model
from astarpo.llm.rollout.base import derive_seed
from astarpo.llm.stage1.config import Stage1Config, training_stage1_config
from astarpo.llm.stage1.estimate import estimate_values
from astarpo.llm.stage1.table import ValueTable, lookup_v_star
from astarpo.llm.training.checkpoint import CheckpointError, checkpoints
from astarpo.llm.training.metrics import timed

__all__ = [
    "REFRESH_DIR",
    "ReferenceRefresh",
    "refresh_folder",
    "refresh_rule",
    "refresh_stage1_config",
]

REFRESH_DIR = "refresh"
"""The folder of ``output_dir`` holding one ``step-<t>`` folder per refresh."""

_STEP = re.compile(r"^step-(\d+)$")


def refresh_rule(config: Any) -> dict[str, Any] | None:
    """The refresh rule of a config (its ``refresh_*`` fields), or ``None`` when it never
    refreshes (``refresh_every_steps`` 0 or absent); recorded in ``run_config.json``."""
    if not getattr(config, "refresh_every_steps", 0):
        return None
    fields = dataclasses.asdict(config)
    return {k: v for k, v in fields.items() if k.startswith("refresh_")}


def refresh_stage1_config(config: Any, step: int) -> Stage1Config:
    """The :class:`~astarpo.llm.stage1.config.Stage1Config` of the refresh after ``step``: the
    rule's N, ``beta1`` and allocation and the seed ``derive_seed(seed, "refresh", step)``
    (:func:`~astarpo.llm.stage1.config.training_stage1_config`: the run's sampling, reward
    deadline and ``generation_batch_size // N`` prompts per generate call)."""
    seed = derive_seed(config.seed, "refresh", step)
    n, beta1 = int(config.refresh_n_samples), config.refresh_beta1
    return training_stage1_config(config, n, beta1, seed, config.refresh_allocation)


def refresh_folder(output_dir: str | Path, step: int) -> Path:
    """``output_dir/refresh/step-<step>``: the reference and V* table of the refresh after
    ``step``."""
    return Path(output_dir) / REFRESH_DIR / f"step-{step}"


def _check_supported(trainer: Any) -> None:
    """Refuse what a refresh cannot do right (see the module docstring)."""
    algo, ref = trainer.algorithm, trainer.ref_model
    if not (algo.needs_reference and algo.needs_v_star):
        raise ValueError(
            f"refresh_every_steps > 0 needs an algorithm with a reference and V*; {algo.name} "
            "has not both. Set refresh_every_steps=0."
        )
    if trainer.dp.info.distributed:
        raise ValueError(
            "refresh_every_steps > 0 is not supported under torchrun (data parallel): the "
            "refresh re-estimates V* in one process. Train in one process or set "
            "refresh_every_steps=0."
        )
    if isinstance(ref, AdapterDisabledReference) or not isinstance(ref, torch.nn.Module):
        raise ValueError(
            "refresh_every_steps > 0 needs a separate reference module to copy the policy into; "
            f"the reference is {type(ref).__name__} (LoRA's adapter-disabled policy is not "
            "supported). Train without LoRA or set refresh_every_steps=0."
        )
    policy = unwrap_model(trainer.model).state_dict()
    mine = ref.state_dict()
    shapes = {k: tuple(v.shape) for k, v in policy.items()}
    if shapes != {k: tuple(v.shape) for k, v in mine.items()}:
        raise ValueError(
            "refresh_every_steps > 0 copies the policy's weights into the reference, but "
            "ref_model has another architecture (other parameter names or shapes). Give a "
            "reference of the policy's architecture (or ref_model=None), or set "
            "refresh_every_steps=0."
        )


class ReferenceRefresh:
    """The refresh rule of one trainer (a no-op when the config never refreshes).

    Args:
        trainer: The :class:`~astarpo.llm.training.trainer.Trainer`, fully built (its policy,
            reference, generator, rows, rewards and ``v_star``); its ``ref_model`` and ``v_star``
            are replaced by each refresh.

    Attributes:
        every: ``refresh_every_steps`` (0: never).
        initial_v_star: The run's Stage 1 values (``v_star`` at construction), recorded in the
            run's provenance whatever the refreshes did since.
        step: The step after which the last refresh ran (0: none yet).
        count: Refreshes so far (this run, a resumed one included).
        samples: Stage 1 samples those refreshes drew.
        seconds: Their time (the copy and the estimate).

    Raises:
        ValueError: the refresh is on and not supported (see the module docstring).
    """

    def __init__(self, trainer: Any) -> None:
        self.every = int(getattr(trainer.args, "refresh_every_steps", 0) or 0)
        self.initial_v_star: np.ndarray | None = trainer.v_star
        self.step, self.count, self.samples, self.seconds = 0, 0, 0, 0.0
        if self.every:
            _check_supported(trainer)

    def before_step(self, trainer: Any, t: int, times: dict[str, float]) -> dict[str, float]:
        """Refresh before step ``t`` when step ``t - 1`` ends a period (once); returns the
        ``refresh/`` metrics of the step record (``{}`` when the rule is off)."""
        if not self.every:
            return {}
        last = t - 1
        if last > 0 and last % self.every == 0 and self.step != last:
            seconds = times.get("time/refresh", 0.0)
            with timed(times, "refresh", trainer.device):
                table = self._refresh(trainer, last)
            self.seconds += times["time/refresh"] - seconds
            self._write(trainer, last, table)  # I/O, like a checkpoint: not training time
        return {
            "refresh/count": float(self.count),
            "refresh/samples": float(self.samples),
            "refresh/seconds": self.seconds,
            "refresh/v_star_mean": float(np.mean(trainer.v_star)),
        }

    def _refresh(self, trainer: Any, step: int) -> ValueTable:
        """Copy the policy into the reference and estimate V* under it (Stage 1)."""
        with torch.no_grad():
            trainer.ref_model.load_state_dict(unwrap_model(trainer.model).state_dict())
        trainer.ref_model.eval().requires_grad_(False)
        trainer.generator.sync_weights(trainer.model)  # the policy is the new reference
        table = estimate_values(
            trainer.generator,
            trainer.rows,
            trainer.reward_funcs,
            refresh_stage1_config(trainer.args, step),
            provenance={"model": f"policy after step {step}"},
        )
        trainer.v_star = lookup_v_star(table, [r["prompt"] for r in trainer.rows])
        self.step, self.count = step, self.count + 1
        self.samples += sum(len(row.rewards) for row in table)
        return table

    def _write(self, trainer: Any, step: int, table: ValueTable) -> None:
        """``refresh/step-<step>/`` with ``reference.pt`` and ``values.jsonl``, written whole
        (a temporary folder renamed)."""
        final = refresh_folder(trainer.args.output_dir, step)
        tmp = final.with_name(f".tmp-{final.name}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        torch.save(trainer.ref_model.state_dict(), tmp / "reference.pt")
        table.save(tmp / "values.jsonl")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)

    def state(self) -> dict[str, Any]:
        """What a checkpoint stores of the rule (plain numbers)."""
        return dict(step=self.step, count=self.count, samples=self.samples, seconds=self.seconds)

    def restore(self, trainer: Any, state: dict[str, Any] | None) -> None:
        """Continue from a checkpoint's :meth:`state`: reload the reference and V* of its last
        refresh (``None`` or no refresh yet: those of the run's start, which a new trainer holds).

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
            trainer.ref_model.load_state_dict(weights)
            trainer.v_star = lookup_v_star(table, [r["prompt"] for r in trainer.rows])
        else:
            trainer.v_star = self.initial_v_star
        self.step, self.count = step, int(state["count"])
        self.samples, self.seconds = int(state["samples"]), float(state["seconds"])

    def prune(self, output_dir: str | Path) -> None:
        """Delete the refresh folders that neither a kept checkpoint nor this trainer needs
        (a checkpoint of step ``s`` continues the refresh after ``K * ((s - 1) // K)``)."""
        root = Path(output_dir) / REFRESH_DIR
        if not self.every or not root.is_dir():
            return
        needed = {self.step}
        for ckpt in checkpoints(output_dir):
            s = int(ckpt.name.rpartition("-")[2])
            needed.add(self.every * ((s - 1) // self.every) if s > 0 else 0)
        for p in root.iterdir():
            m = _STEP.match(p.name)
            if m and int(m.group(1)) not in needed:
                shutil.rmtree(p, ignore_errors=True)
