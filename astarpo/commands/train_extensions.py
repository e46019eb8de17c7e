"""The trainer extensions on the command line of ``astarpo train``
(:mod:`astarpo.llm.training.extensions`).

``--refresh-every-steps K`` (K > 0; 0, the default, keeps the paper's fixed reference) installs
:class:`~astarpo.llm.training.refresh.ReferenceRefresh`, set by ``--refresh-n-samples``,
``--refresh-beta1`` and ``--refresh-allocation`` (the fields of
:class:`~astarpo.llm.training.refresh.RefreshConfig`); ``--stream-stage1 true`` installs
:class:`~astarpo.llm.training.stream.StreamedStage1`, set by ``--stream-n-samples`` and
``--stream-beta1`` (:class:`~astarpo.llm.training.stream.StreamConfig`). An option of an
extension that is off cannot take effect and is refused, naming it and the switch; so are the
options of both for an algorithm without V*. A ``--config`` file sets them by the same names.

A run's ``run_config.json`` records each extension's settings under ``extensions``;
:func:`~astarpo.commands.run_config.extension_options` turns them back into these options, so
``astarpo train --config run_config.json`` repeats the run with its extensions.
"""

from __future__ import annotations

import argparse
import dataclasses

from astarpo.commands.fields import NotAnOption
from astarpo.commands.run_config import SWITCHES
from astarpo.config import add_field_arguments, field_values, flag_of, name_flags, parse_bool
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.training.extensions import TrainerExtension
from astarpo.llm.training.refresh import ReferenceRefresh, RefreshConfig
from astarpo.llm.training.stream import StreamConfig, StreamedStage1

__all__ = ["add_extension_arguments", "build_extensions"]

# The options of each extension besides its switch: the fields of its config, prefixed.
_OPTIONS: dict[str, tuple[type, tuple[str, ...]]] = {
    ReferenceRefresh.name: (RefreshConfig, ("every_steps",)),  # every_steps is the switch
    StreamedStage1.name: (StreamConfig, ()),
}


def _dests(name: str) -> list[str]:
    """The option names (argparse dests) of extension ``name``, its switch first."""
    cls, skip = _OPTIONS[name]
    fields = [f"{name}_{f.name}" for f in dataclasses.fields(cls) if f.name not in skip]
    return [SWITCHES[name], *fields]


def add_extension_arguments(parser: argparse.ArgumentParser, algo: str, supported: bool) -> None:
    """The extensions' options of ``astarpo train --algo algo``; ``supported=False`` (an
    algorithm without V*): each of them is a :class:`~astarpo.commands.fields.NotAnOption`."""
    if not supported:
        reason = (
            f"does not apply to --algo {algo}: the reference refresh and the streamed Stage 1 "
            "change V*, which only --algo astarpo has"
        )
        for name in SWITCHES:
            for dest in _dests(name):
                parser.add_argument(flag_of(dest), action=NotAnOption, reason=reason)
        return
    every = dataclasses.fields(RefreshConfig)[0]
    group = parser.add_argument_group(
        "a moving reference (ReferenceRefresh; beyond the paper): --refresh-every-steps K "
        "turns it on, the other --refresh-* options set it"
    )
    group.add_argument(
        flag_of(SWITCHES["refresh"]),
        type=int,
        default=0,
        help=f"{every.metadata['help']} 0 = never (default 0: the paper's fixed reference)",
    )
    add_field_arguments(group, RefreshConfig, skip=("every_steps",), unset=True, prefix="refresh_")
    group = parser.add_argument_group(
        "Stage 1 streamed (StreamedStage1; beyond the paper): --stream-stage1 true turns it "
        "on (no --v-star), the other --stream-* options set it"
    )
    group.add_argument(
        flag_of(SWITCHES["stream"]),
        type=parse_bool,
        default=False,
        metavar="BOOL",
        help="Estimate V* of each step's prompts not seen before, just before the step, from "
        "--stream-n-samples reference samples each (Stage 1 streamed; its samples and time count "
        "as training cost), instead of reading --v-star; not with --refresh-every-steps, LoRA "
        "or torchrun (default false: the paper's Stage 1 up front)",
    )
    add_field_arguments(group, StreamConfig, unset=True, prefix="stream_")


def build_extensions(args: argparse.Namespace, cfg: TrainConfig) -> list[TrainerExtension]:
    """The extensions the options of ``args`` turn on, checked against the training config
    ``cfg`` (:meth:`~astarpo.llm.training.extensions.TrainerExtension.check_config`) before any
    model is loaded.

    Raises:
        SystemExit: an ``error:`` line naming the option: one of an extension that is off, a
            bad value, a setting the extension cannot run with.
    """
    every = getattr(args, SWITCHES["refresh"], None) or 0  # None: an algorithm without V*
    if every < 0:
        raise SystemExit(
            f"error: --refresh-every-steps must be >= 0 (0: never refresh), got {every}."
        )
    on = {"refresh": every > 0, "stream": bool(getattr(args, SWITCHES["stream"], False))}
    for name, is_on in on.items():
        given = [d for d in _dests(name)[1:] if getattr(args, d, None) is not None]
        if given and not is_on:
            option = flag_of(given[0])
            what, off, how = {
                "refresh": ("the reference refresh", "--refresh-every-steps 0", "K > 0"),
                "stream": ("the streamed Stage 1", "--stream-stage1 false", "true"),
            }[name]
            raise SystemExit(
                f"error: {option} would be ignored: it sets {what}, which is off ({off}); turn "
                f"it on with {flag_of(SWITCHES[name])} {how}, or drop {option}."
            )
    extensions: list[TrainerExtension] = []
    for name in (n for n, is_on in on.items() if is_on):
        cls, _ = _OPTIONS[name]
        flags = {f.name: flag_of(f"{name}_{f.name}") for f in dataclasses.fields(cls)}
        flags["every_steps"] = flag_of(SWITCHES["refresh"])
        values = field_values(cls, args, prefix=f"{name}_")
        try:
            if name == "refresh":
                ext: TrainerExtension = ReferenceRefresh(RefreshConfig(**values))
            else:
                ext = StreamedStage1(StreamConfig(**values))
            ext.check_config(cfg)
        except ValueError as e:  # named by flag
            message = name_flags(name_flags(str(e), cls, flags), type(cfg))
            raise SystemExit(f"error: {message}") from e
        extensions.append(ext)
    if len(extensions) > 1:
        raise SystemExit(
            "error: --stream-stage1 true and --refresh-every-steps cannot be combined (each "
            "changes V*: a refresh re-estimates every prompt anyway); choose one."
        )
    return extensions
