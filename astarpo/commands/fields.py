"""The ``astarpo`` verbs' own argparse actions, beside the flags made from a config dataclass
(:mod:`astarpo.config`).

``astarpo train`` gets its flags from the chosen algorithm's config; a flag of another
algorithm is a :class:`NotAnOption`, refused by name on the command line and in a ``--config``
file. A repeatable option (``--reward``) is a :class:`Repeatable`.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

__all__ = ["NotAnOption", "Repeatable"]


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
