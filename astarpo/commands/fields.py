"""Flags made from a config dataclass: one ``--flag`` per field, with the field's type, default
and help text, so that each default is written once, in the dataclass.

``astarpo value`` gets its flags from :class:`~astarpo.llm.stage1.config.Stage1Config`,
``astarpo train`` from the chosen algorithm's config; a flag of another algorithm is an
:class:`NotAnOption`, refused by name on the command line and in a ``--config`` file.
"""

from __future__ import annotations

import argparse
import collections.abc
import dataclasses
import json
import re
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, NoReturn

__all__ = [
    "CommaList",
    "NotAnOption",
    "Repeatable",
    "add_field_arguments",
    "field_values",
    "flag_of",
    "name_flags",
    "parse_bool",
]


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


def add_field_arguments(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    skip: Collection[str] = (),
    unset: bool = False,
    prefix: str = "",
) -> None:
    """Add one flag per field of the dataclass ``cls`` (except ``skip``) to ``parser`` (or an
    argument group), named ``--PREFIX-FIELD`` with ``prefix`` (``"stream_"``: the field
    ``n_samples`` is ``--stream-n-samples``, read back by :func:`field_values`): its type is the
    type of the field's default, its help the field's ``help`` metadata with the default, its
    choices the ``choices`` metadata. A field that may hold a sequence (``report_to: str |
    Sequence[str]``) takes a :class:`CommaList`, a tuple field a comma-separated list of its
    items (``1e-4,3e-4``), a dict field a JSON object. A bool reads true/false; with ``unset``
    (a study's flags), it is ``--x``/``--no-x`` and every flag is left out of the namespace
    unless given (so that presets apply under the given flags, or an option given for a
    feature that is off is seen)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        factory = typing.cast(Callable[[], Any], f.default_factory)
        default = factory() if f.default is dataclasses.MISSING else f.default
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        kw: dict[str, Any] = {"default": argparse.SUPPRESS if unset else default}
        kw["help"] = f"{f.metadata.get('help', '')} (default {shown})".replace("%", "%%")
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        hint = hints[f.name]
        if isinstance(default, bool) and unset:
            kw["action"] = argparse.BooleanOptionalAction
        elif isinstance(default, bool):
            kw.update(type=parse_bool, metavar="BOOL")
        elif typing.get_origin(hint) is tuple:
            kw["type"] = CommaList(_items(typing.get_args(hint)[0]))
        elif any(typing.get_origin(a) is collections.abc.Sequence for a in typing.get_args(hint)):
            kw["type"] = CommaList()
        elif isinstance(default, dict):
            kw["type"] = _json_object
        else:
            kw["type"] = str if default is None else type(default)
        parser.add_argument(flag_of(prefix + f.name), **kw)


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


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object ({{...}}), got {text!r}")
    return value


def field_values(
    cls: type, args: argparse.Namespace, skip: Collection[str] = (), prefix: str = ""
) -> dict:
    """``{field: value}`` of every field of ``cls`` (except ``skip``) that ``args`` holds
    (under ``prefix + field``, see :func:`add_field_arguments`)."""
    names = [f.name for f in dataclasses.fields(cls) if f.name not in skip]
    return {n: getattr(args, prefix + n) for n in names if hasattr(args, prefix + n)}


def name_flags(message: str, cls: type, flags: Mapping[str, str] | None = None) -> str:
    """``message`` (a config's ``ValueError``) with each field name of ``cls`` written as its
    flag: ``"n_samples must be ..."`` -> ``"--n-samples must be ..."``; ``flags`` gives the
    flag of a field that a verb sets under another name (``{"output_dir": "--out"}``)."""
    for f in dataclasses.fields(cls):
        flag = (flags or {}).get(f.name, flag_of(f.name))
        message = re.sub(rf"(?<![\w.'-]){f.name}(?![\w'])", flag, message)
    return message


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


class Repeatable(argparse._AppendAction):
    """``action="append"`` whose values on the command line replace the option's default
    instead of extending it: with ``reward: [gsm8k]`` in a ``--config`` file (the default),
    ``--reward exact_match`` means exact_match alone, as a flag wins over the file."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        """Append ``values`` to the ones this command line gave (none yet: a new list)."""
        items = getattr(namespace, self.dest, None)
        given = [] if items is None or items is self.default else list(items)
        setattr(namespace, self.dest, [*given, values])


class NotAnOption(argparse.Action):
    """A flag (hidden from ``--help``) that is refused, with ``reason``, when given: a field of
    another algorithm than the chosen ``--algo``.
    :func:`~astarpo.commands.config_file.apply_config_file` refuses it as a file's key too."""

    def __init__(self, option_strings: list[str], dest: str, reason: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.reason = reason

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> NoReturn:
        """Stop with ``error: FLAG REASON`` (exit code 2 through :func:`astarpo.cli.main`)."""
        raise SystemExit(f"error: {option or self.option_strings[0]} {self.reason}")
