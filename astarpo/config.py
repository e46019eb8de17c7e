"""Config dataclasses and their command line: each field declared once, with its help.

Every config of the package (``TrainConfig`` and the algorithms' configs, ``Stage1Config``,
the toy ``SFTConfig``) is a frozen dataclass whose fields are declared with :func:`doc_field`:
the default, the help text, and where a field takes one of a few values, its ``choices``. The
command line is made from the fields, so that each default and help is written once:
:func:`add_field_arguments` adds one ``--flag`` per field (:func:`flag_of`), :func:`field_values`
reads the given ones back, and :func:`name_flags` writes the field names of a config's
``ValueError`` as the flags a user typed. :func:`config_fields` lists every field with its
default and help (the docs' tables are checked against it).

The same helpers serve a script of your own::

    @dataclass(frozen=True)
    class MyConfig:
        steps: int = doc_field(100, "Training steps.")
        train: tuple[float, ...] = doc_field((1e-4, 3e-4), "Learning rates swept.")

    parser = argparse.ArgumentParser()
    add_field_arguments(parser, MyConfig)
    cfg = MyConfig(**field_values(MyConfig, parser.parse_args()))

Only the standard library is imported here.
"""

from __future__ import annotations

import argparse
import collections.abc
import copy
import dataclasses
import functools
import json
import re
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

__all__ = [
    "CommaList",
    "JSONObject",
    "add_field_arguments",
    "config_fields",
    "doc_field",
    "field_values",
    "flag_of",
    "name_flags",
    "parse_bool",
]


def doc_field(default: Any, help_text: str, *, choices: Sequence[Any] | None = None) -> Any:
    """A dataclass field with ``default`` and its ``help`` text (and ``choices``) in the metadata.

    Args:
        default: The field's default. A ``dict``, ``list`` or ``set`` is copied for every
            instance (a ``default_factory``), so that no two configs share one.
        help_text: What the field does, in a sentence or two: the flag's help.
        choices: The values the field may take, or None for any: the flag's ``choices``. The
            config's ``__post_init__`` still checks them (a dataclass does not).
    """
    meta: dict[str, Any] = {"help": help_text}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if isinstance(default, (dict, list, set)):
        return dataclasses.field(
            default_factory=functools.partial(copy.deepcopy, default), metadata=meta
        )
    return dataclasses.field(default=default, metadata=meta)


def config_fields(cls: type) -> list[tuple[str, Any, str]]:
    """``(name, default, help)`` of every field of a config dataclass, in declaration order (the
    default ``dataclasses.MISSING`` for a required field)."""
    out = []
    for f in dataclasses.fields(cls):
        default = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = typing.cast(Callable[[], Any], f.default_factory)()
        out.append((f.name, default, f.metadata.get("help", "")))
    return out


def flag_of(name: str) -> str:
    """The flag of field ``name``: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def parse_bool(text: str) -> bool:
    """An argparse type: true/false, yes/no, on/off or 1/0 (a usage error otherwise)."""
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class CommaList:
    """The argparse ``type`` of an option that takes a comma-separated list
    (``--report-to tensorboard,wandb``). A ``--config`` file may give such an option a YAML
    list, which :func:`~astarpo.commands.config_file.apply_config_file` joins with commas.

    Args:
        parse: Turns the text into the option's value (default: the value is the text itself);
            raises ``argparse.ArgumentTypeError`` naming what is wrong.
    """

    def __init__(self, parse: Callable[[str], Any] | None = None) -> None:
        self.parse = parse
        self.__name__ = "comma-separated list"  # argparse's "invalid ... value" names it

    def __call__(self, text: str) -> Any:
        """The option's value of ``text`` (a usage error when ``parse`` refuses it)."""
        return text if self.parse is None else self.parse(text)


class JSONObject:
    """The argparse ``type`` of an option that takes a mapping: a JSON object on the command
    line (``--model-overrides '{"hidden_size": 32}'``), a mapping in a ``--config`` file."""

    __name__ = "JSON object"

    def __call__(self, text: str) -> dict[str, Any]:
        """The mapping of ``text`` (a usage error for anything but a JSON object)."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {text!r}")
        return value


def _items(kind: type) -> Callable[[str], tuple[Any, ...]]:
    """The parser of a comma-separated list of ``kind`` (``1e-4,3e-4``: a tuple of floats)."""

    def parse(text: str) -> tuple[Any, ...]:
        try:
            return tuple(kind(x.strip()) for x in text.split(",") if x.strip())
        except ValueError:
            what = "numbers (e.g. 1e-4,3e-4)" if kind is float else f"{kind.__name__} values"
            raise argparse.ArgumentTypeError(
                f"expected comma-separated {what}, got {text!r}"
            ) from None

    return parse


def add_field_arguments(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    skip: Collection[str] = (),
    unset: bool = False,
    prefix: str = "",
) -> None:
    """Add one flag per field of the dataclass ``cls`` (except ``skip``) to ``parser`` (or an
    argument group), named ``--PREFIX-FIELD`` (``prefix="stream_"``: the field ``n_samples`` is
    ``--stream-n-samples``, read back by :func:`field_values` with the same prefix).

    A flag's type is the type of the field's default, its help the field's ``help`` metadata
    with the default, its choices the ``choices`` metadata. A field that may hold a sequence
    (``report_to: str | Sequence[str]``) takes a :class:`CommaList`, a tuple field a
    comma-separated list of its items (``1e-4,3e-4``), a dict field a :class:`JSONObject`. A
    bool reads true/false.

    Args:
        parser: The parser or argument group.
        cls: The config dataclass.
        skip: Fields that get no flag (another flag of the command sets them).
        unset: A bool is ``--x``/``--no-x``, and every flag is left out of the namespace unless
            given (so that presets can apply under the flags given, or an option given for a
            feature that is off is seen).
        prefix: Prepended to each field's name in its flag and namespace attribute.
    """
    hints = typing.get_type_hints(cls)
    for name, default, help_text in config_fields(cls):
        if name in skip:
            continue
        meta = next(f.metadata for f in dataclasses.fields(cls) if f.name == name)
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        kw: dict[str, Any] = {"default": argparse.SUPPRESS if unset else default}
        kw["help"] = f"{help_text} (default {shown})".replace("%", "%%")
        if "choices" in meta:
            kw["choices"] = meta["choices"]
        hint = hints[name]
        if isinstance(default, bool) and unset:
            kw["action"] = argparse.BooleanOptionalAction
        elif isinstance(default, bool):
            kw.update(type=parse_bool, metavar="BOOL")
        elif typing.get_origin(hint) is tuple:
            kw["type"] = CommaList(_items(typing.get_args(hint)[0]))
        elif any(typing.get_origin(a) is collections.abc.Sequence for a in typing.get_args(hint)):
            kw["type"] = CommaList()
        elif isinstance(default, dict):
            kw["type"] = JSONObject()
        else:
            kw["type"] = str if default is None else type(default)
        parser.add_argument(flag_of(prefix + name), **kw)


def field_values(
    cls: type, args: argparse.Namespace, skip: Collection[str] = (), prefix: str = ""
) -> dict[str, Any]:
    """``{field: value}`` of every field of ``cls`` (except ``skip``) that ``args`` holds, under
    ``prefix + field`` (see :func:`add_field_arguments`)."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in skip]
    return {n: getattr(args, prefix + n) for n in names if hasattr(args, prefix + n)}


def name_flags(message: str, cls: type, flags: Mapping[str, str] | None = None) -> str:
    """``message`` (a config's ``ValueError``) with each field name of ``cls`` written as its
    flag: ``"n_samples must be ..."`` -> ``"--n-samples must be ..."``; ``flags`` gives the
    flag of a field that a command sets under another name (``{"output_dir": "--out"}``)."""
    for f in dataclasses.fields(cls):
        flag = (flags or {}).get(f.name, flag_of(f.name))
        message = re.sub(rf"(?<![\w.'-]){f.name}(?![\w'])", flag, message)
    return message
