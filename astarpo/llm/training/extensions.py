"""Trainer extensions: research variants of the Stage 2 loop that own a piece of its state.

A *callback* (:mod:`astarpo.llm.training.callbacks`) watches training: it reads the records and
may stop the run. An *extension* changes what a step trains on, so it is part of the run: its
settings are recorded in ``run_config.json`` (a resume with other settings is refused), its
state is saved in every checkpoint and restored on resume, and it may change V* and the
reference, through the trainer's :class:`~astarpo.llm.training.reference.ReferenceState`
(``trainer.reference.set_values``, ``trainer.reference.set_weights``) and nowhere else. The
library's extensions are the moving reference
(:class:`~astarpo.llm.training.refresh.ReferenceRefresh`) and the streamed Stage 1
(:class:`~astarpo.llm.training.stream.StreamedStage1`); the generic
step (:meth:`~astarpo.llm.training.trainer.Trainer.step`) calls their hooks and has no branch
for either. Give them to the trainer as ``Trainer(..., extensions=[...])``.

An extension subclasses :class:`TrainerExtension` (TRL's ``TrainerCallback`` model: a base class
whose hooks do nothing, typed arguments) and overrides what it needs:

``check_config(args)``
    At the start of the trainer's construction, before any model is loaded: refuse settings it
    cannot run with (``ValueError``).
``on_init(trainer)``
    Once the trainer is built (policy, reference, generator, rows, V*): refuse what it cannot
    run on (``ValueError``).
``on_train_begin(trainer)``
    At the start of every :meth:`~astarpo.llm.training.trainer.Trainer.train` call.
``on_step_begin(trainer, step) -> metrics``
    At the start of every step, after its prompts are drawn (:class:`StepBegin`); returns
    metrics for the step's record. May be stopped by SIGTERM/SIGINT (a Stage 1 inside it raises
    :class:`~astarpo.llm.parallel.signals.Interrupted`): it must then leave the trainer as it
    found it (change V* and the reference only once its work is done), and the trainer saves
    the last finished step.
``state_dict(trainer)`` / ``load_state_dict(trainer, state)``
    What a checkpoint stores of it (plain numbers, lists, dicts), and the resume from it
    (``None``: a checkpoint without its state).
``on_save(trainer)``
    After each checkpoint is written and old ones rotated away (e.g. delete files no kept
    checkpoint needs).
``settings()``
    Its settings as plain values, recorded in ``run_config.json``.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch

from astarpo.llm.algorithms.base import Algorithm
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.rollout.base import Generator
from astarpo.llm.training.metrics import timed
from astarpo.llm.training.reference import ReferenceState

__all__ = ["ExtensionHost", "Extensions", "StepBegin", "TrainerExtension"]


class ExtensionHost(Protocol):
    """The trainer as an extension sees it
    (:class:`~astarpo.llm.training.trainer.Trainer` implements it).

    V* and the reference change only through :attr:`reference`.
    """

    @property
    def args(self) -> TrainConfig:
        """The run's config."""
        ...

    @property
    def algorithm(self) -> Algorithm:
        """The algorithm (``needs_reference``, ``needs_v_star``, ``name``)."""
        ...

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The training rows, each with its ``prompt`` and reward columns."""
        ...

    @property
    def reward_funcs(self) -> list[Any]:
        """The reward functions."""
        ...

    @property
    def model(self) -> torch.nn.Module:
        """The policy (trained in place)."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The policy's tokenizer."""
        ...

    @property
    def generator(self) -> Generator:
        """The rollout generator, which samples from the policy."""
        ...

    @property
    def device(self) -> torch.device:
        """The device of the policy."""
        ...

    @property
    def distributed(self) -> bool:
        """Whether the run is one rank of several (``torchrun``)."""
        ...

    @property
    def reference(self) -> ReferenceState:
        """The frozen reference and V* of the training rows (the one place they change)."""
        ...


@dataclass(frozen=True)
class StepBegin:
    """What :meth:`TrainerExtension.on_step_begin` learns of the step about to run.

    Attributes:
        step: The step's number ``t`` (1 for the first step).
        batch: The indices of the step's training rows ``[batch_size]``, in batch order.
        times: The step's phase timers (``time/<phase>`` -> seconds), added up in
            ``time/step`` and ``time/train_total``; fill them with :meth:`timed`.
        device: The policy's device (a CUDA device is synchronized around a timed block).
    """

    step: int
    batch: tuple[int, ...]
    times: dict[str, float] = field(default_factory=dict)
    device: torch.device | None = None

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Add the block's wall time to ``times["time/" + phase]`` (training time; CUDA
        synchronized)."""
        with timed(self.times, phase, self.device):
            yield


class TrainerExtension:
    """The base class of trainer extensions: every hook does nothing (see the module docstring).

    Attributes:
        name: Its key in checkpoints and in ``run_config.json`` (unique per trainer).
        provides_values: It estimates V* itself, so the trainer takes no ``v_star_table`` and
            starts with ``NaN`` for every row.
        changes_values: It changes V* or the reference during training (at most one such
            extension per trainer).
    """

    name: ClassVar[str] = "extension"
    provides_values: ClassVar[bool] = False
    changes_values: ClassVar[bool] = False

    def check_config(self, args: TrainConfig) -> None:
        """Refuse a config this extension cannot run with (``ValueError``)."""

    def on_init(self, trainer: ExtensionHost) -> None:
        """Refuse a trainer this extension cannot run on (``ValueError``)."""

    def on_train_begin(self, trainer: ExtensionHost) -> None:
        """At the start of every ``train()`` call."""

    def on_step_begin(self, trainer: ExtensionHost, step: StepBegin) -> Mapping[str, float]:
        """At the start of every step; returns metrics for its record."""
        return {}

    def on_save(self, trainer: ExtensionHost) -> None:
        """After every checkpoint (older ones rotated away)."""

    def state_dict(self, trainer: ExtensionHost) -> dict[str, Any]:
        """What a checkpoint stores of this extension."""
        return {}

    def load_state_dict(self, trainer: ExtensionHost, state: Mapping[str, Any] | None) -> None:
        """Continue from a checkpoint's :meth:`state_dict` (``None``: the checkpoint has none)."""

    def settings(self) -> dict[str, Any]:
        """Its settings, recorded in ``run_config.json`` (a resume must use the same)."""
        return {}


class Extensions:
    """The extensions of one trainer, checked, and their hooks called on each in order.

    Args:
        extensions: :class:`TrainerExtension` objects (or one).
        args: The trainer's config (:meth:`TrainerExtension.check_config` of each).

    Raises:
        TypeError: an item that is not a :class:`TrainerExtension` (a callback given here).
        ValueError: two extensions of one name, more than one that changes V* or the
            reference, or a config an extension cannot run with.
    """

    def __init__(self, extensions: Any, args: TrainConfig) -> None:
        items = [extensions] if isinstance(extensions, TrainerExtension) else list(extensions)
        for i, ext in enumerate(items):
            if not isinstance(ext, TrainerExtension):
                raise TypeError(
                    f"extensions[{i}] ({type(ext).__name__}) is not a TrainerExtension; give "
                    "ReferenceRefresh(RefreshConfig(...)), StreamedStage1(StreamConfig(...)) or "
                    "a subclass of astarpo.llm.training.extensions.TrainerExtension (an "
                    "observer of the records is a callback: callbacks=[...])."
                )
        names = collections.Counter(ext.name for ext in items)
        if twice := [n for n, c in names.items() if c > 1]:
            n = names[twice[0]]
            raise ValueError(f"extensions: {twice[0]!r} is given {n} times; give it once.")
        changing = [type(ext).__name__ for ext in items if ext.changes_values]
        if len(changing) > 1:
            raise ValueError(
                f"extensions {', '.join(changing)} all change V* or the reference; they cannot "
                "be combined (each would undo the other's values). Give one of them."
            )
        for ext in items:
            ext.check_config(args)
        self.items = items

    def __iter__(self) -> Iterator[TrainerExtension]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def value_provider(self) -> str | None:
        """The class name of the extension that estimates V* itself, if any."""
        return next((type(e).__name__ for e in self.items if e.provides_values), None)

    def on_init(self, trainer: ExtensionHost) -> None:
        """:meth:`TrainerExtension.on_init` of each."""
        for ext in self.items:
            ext.on_init(trainer)

    def on_train_begin(self, trainer: ExtensionHost) -> None:
        """:meth:`TrainerExtension.on_train_begin` of each."""
        for ext in self.items:
            ext.on_train_begin(trainer)

    def on_step_begin(self, trainer: ExtensionHost, step: StepBegin) -> dict[str, float]:
        """:meth:`TrainerExtension.on_step_begin` of each; their metrics together."""
        metrics: dict[str, float] = {}
        for ext in self.items:
            metrics.update(ext.on_step_begin(trainer, step))
        return metrics

    def on_save(self, trainer: ExtensionHost) -> None:
        """:meth:`TrainerExtension.on_save` of each."""
        for ext in self.items:
            ext.on_save(trainer)

    def state_dict(self, trainer: ExtensionHost) -> dict[str, dict[str, Any]]:
        """``{name: state}`` of each, for the checkpoint."""
        return {ext.name: ext.state_dict(trainer) for ext in self.items}

    def load_state_dict(self, trainer: ExtensionHost, saved: Mapping[str, Any] | None) -> None:
        """:meth:`TrainerExtension.load_state_dict` of each with its state in ``saved``
        (:meth:`state_dict` of a checkpoint; ``None`` for an extension it lacks)."""
        for ext in self.items:
            ext.load_state_dict(trainer, (saved or {}).get(ext.name))

    def settings(self) -> dict[str, dict[str, Any]] | None:
        """``{name: settings}`` of each, recorded in ``run_config.json`` (``None``: none)."""
        return {ext.name: ext.settings() for ext in self.items} or None
