"""A study's settings: its own fields, and the library's configs it holds (:class:`StudyConfig`).

One config system: a study's config is a frozen dataclass whose fields are either its own
(declared with :func:`astarpo.doc_field`, checked in its ``__post_init__``) or a library config
(``TrainConfig`` or an algorithm's config, ``Stage1Config``, ``SFTConfig``, or another study
config) declared with :func:`nested`, which names the fields of that config that are settings
of the study, under the study's name for them (``sft_steps`` is the SFT config's ``steps``;
``seconds`` may be ``train.max_train_seconds``). Nothing is declared twice: a nested setting's
type, default, help and checks are the library's, and the study varies the library's configs
with ``dataclasses.replace``.

The study sees its settings as one flat mapping of names (its flags, its JSON's ``config``):
:meth:`StudyConfig.from_dict` builds a config from one (the command line with its presets, a
run's ``spec.json``), :meth:`StudyConfig.to_dict` gives it back, :func:`flat_view` is a
dataclass of the flat settings (one flag each: :func:`astarpo.add_field_arguments`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Self

from astarpo import doc_field

__all__ = [
    "Flat",
    "StudyConfig",
    "check_choices",
    "check_integers",
    "check_positive",
    "flat_fields",
    "flat_view",
    "nested",
]


def nested(default: Any, flags: Sequence[str] | Mapping[str, str | Sequence[str]] = ()) -> Any:
    """A field holding the config ``default`` (a frozen dataclass instance), with the settings
    of the study that are its fields: ``flags`` lists their names, or maps a setting's name to
    the field (``"steps"``; a dotted path into a config it holds, ``"train.learning_rate"``)
    or fields (one setting for several) it sets."""
    items = {name: name for name in flags} if not isinstance(flags, Mapping) else flags
    paths = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in items.items()}
    return dataclasses.field(default=default, metadata={"flags": paths})


class Flat(NamedTuple):
    """One setting of a study config: its ``name``, the ``paths`` it sets (``("beta2",)``: an
    own field; ``("astarpo.beta2",)``: a field of a nested config; several: all of them), its
    type ``hint``, ``default`` and field ``metadata`` (help, choices)."""

    name: str
    paths: tuple[str, ...]
    hint: Any
    default: Any
    metadata: Mapping[str, Any]


def _field_of(cls: type, name: str) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f
    raise ValueError(f"{cls.__name__} has no field {name!r}.")


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


_FLAT: dict[type, dict[str, Flat]] = {}  # flat_fields' cache, by class
_VIEW: dict[type, type] = {}  # flat_view's


def flat_fields(cls: type) -> dict[str, Flat]:
    """The settings of the study config ``cls`` by name, in field order (own fields, then each
    nested config's ``flags`` at its place)."""
    if cls not in _FLAT:
        _FLAT[cls] = _flat_fields(cls)
    return _FLAT[cls]


def _flat_fields(cls: type) -> dict[str, Flat]:
    base = cls()
    out: dict[str, Flat] = {}

    def describe(name: str, path: str) -> None:
        *heads, leaf = path.split(".")
        owner: Any = base
        for part in heads:
            owner = getattr(owner, part)
        owner = type(owner)
        hint, meta = typing.get_type_hints(owner)[leaf], _field_of(owner, leaf).metadata
        if name in out:
            out[name] = out[name]._replace(paths=(*out[name].paths, path))
        else:
            out[name] = Flat(name, (path,), hint, copy.deepcopy(_get(base, path)), meta)

    for f in dataclasses.fields(cls):
        if "flags" in f.metadata:
            for name, paths in f.metadata["flags"].items():
                for path in paths:
                    describe(name, f"{f.name}.{path}")
        else:
            describe(f.name, f.name)
    return out


def flat_view(cls: type) -> type:
    """A dataclass of the settings of the study config ``cls`` (one field each, with its type,
    default and help): the flags of the study."""
    if cls not in _VIEW:
        _VIEW[cls] = _flat_view(cls)
    return _VIEW[cls]


def _flat_view(cls: type) -> type:
    fields = []
    for flat in flat_fields(cls).values():
        default = flat.default
        kw: dict[str, Any] = {"metadata": dict(flat.metadata)}
        if isinstance(default, (dict, list, set)):
            kw["default_factory"] = functools.partial(copy.deepcopy, default)
        else:
            kw["default"] = default
        fields.append((flat.name, flat.hint, dataclasses.field(**kw)))
    return dataclasses.make_dataclass(f"{cls.__name__}Settings", fields, frozen=True)


def _restore(value: Any, hint: Any) -> Any:
    """``value`` as the field's type holds it: a JSON list of a tuple field as a tuple."""
    if typing.get_origin(hint) is tuple and isinstance(value, list):
        return tuple(value)
    return value


def _replace(obj: Any, changes: Mapping[str, Any], names: Mapping[str, str]) -> Any:
    """``obj`` with the dotted ``changes`` applied by ``dataclasses.replace`` at every level; a
    ``ValueError`` of a config names each changed field by its setting (``names``: path ->
    setting) where the two differ."""
    own: dict[str, Any] = {}
    deeper: dict[str, dict[str, Any]] = {}
    for path, value in changes.items():
        head, _, rest = path.partition(".")
        if rest:
            deeper.setdefault(head, {})[rest] = value
        else:
            own[head] = value
    for head, inner in deeper.items():
        sub = {k.partition(".")[2]: v for k, v in names.items() if k.startswith(f"{head}.")}
        own[head] = _replace(getattr(obj, head), inner, sub)
    if not own:
        return obj
    try:
        return dataclasses.replace(obj, **own)
    except ValueError as e:
        message = str(e)
        for path, name in names.items():
            if "." not in path and path != name and path in own:
                message = re.sub(rf"(?<![\w.'-]){path}(?![\w'])", name, message)
        raise ValueError(message) from None


@dataclass(frozen=True)
class StudyConfig:
    """The base of every study's config: how its runs start, and the flat settings
    (:meth:`from_dict`, :meth:`to_dict`, :meth:`replace`)."""

    threads: int = doc_field(1, "Torch CPU threads per run (1: steadier timings when shared).")
    rerun_slow: bool = doc_field(
        False, "Run again, once, a run whose CPU/wall time is below 0.9 (its core was shared)."
    )

    def __post_init__(self) -> None:
        """Check the fields every study has."""
        check_integers(self, threads=1)
        if not isinstance(self.rerun_slow, bool):
            raise ValueError(f"rerun_slow must be True or False, got {self.rerun_slow!r}.")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The config of the flat ``values`` (settings by name; the others at their defaults):
        ``ValueError`` for an unknown name or a value a config refuses (named by its
        setting)."""
        flats = flat_fields(cls)
        unknown = sorted(set(values) - set(flats))
        if unknown:
            raise ValueError(
                f"unknown settings {', '.join(unknown)} of {cls.__name__}; its settings are "
                f"{', '.join(flats)}."
            )
        changes = {
            path: _restore(value, flats[name].hint)
            for name, value in values.items()
            for path in flats[name].paths
        }
        names = {path: name for name in values for path in flats[name].paths}
        config: Self = _replace(cls(), changes, names)
        return config

    def to_dict(self) -> dict[str, Any]:
        """The flat settings of this config, by name (the ``config`` of the study's JSON)."""
        return {
            n: copy.deepcopy(_get(self, f.paths[0])) for n, f in flat_fields(type(self)).items()
        }

    def replace(self, **changes: Any) -> Self:
        """A copy with the settings ``changes`` (flat names) applied by ``dataclasses.replace``
        (what no setting names stays as it is)."""
        flats = flat_fields(type(self))
        unknown = sorted(set(changes) - set(flats))
        if unknown:
            raise ValueError(f"unknown settings {', '.join(unknown)} of {type(self).__name__}.")
        paths = {
            path: _restore(value, flats[name].hint)
            for name, value in changes.items()
            for path in flats[name].paths
        }
        names = {path: name for name in changes for path in flats[name].paths}
        config: Self = _replace(self, paths, names)
        return config


def check_integers(cfg: Any, **lows: int) -> None:
    """``ValueError`` unless each field ``name`` of ``cfg`` is an integer >= ``lows[name]``."""
    for name, low in lows.items():
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {v!r}.")


def check_positive(cfg: Any, *names: str) -> None:
    """``ValueError`` unless each field of ``names`` is a finite number > 0."""
    for name in names:
        v = getattr(cfg, name)
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not (number and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}.")


def check_choices(cfg: Any) -> None:
    """``ValueError`` unless each own field of ``cfg`` with ``choices`` holds one of them."""
    for f in dataclasses.fields(cfg):
        if "choices" in f.metadata and getattr(cfg, f.name) not in f.metadata["choices"]:
            allowed = ", ".join(map(repr, f.metadata["choices"]))
            raise ValueError(f"{f.name} must be one of {allowed}; got {getattr(cfg, f.name)!r}.")
