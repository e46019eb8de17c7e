"""The lab's command line: ``python -m experiments.NAME [flags]`` runs study ``NAME`` of
:data:`~experiments.registry.STUDIES` (``python -m experiments`` lists them), one flag per
setting of its config (:func:`~experiments.harness.config.flat_view`: a tuple takes a
comma-separated list, a dict a JSON object, a bool ``--x``/``--no-x``) with its presets under
the flags given, and prints its Markdown report. The flags and the ``--config`` file are the
library's (:func:`astarpo.add_field_arguments`, :func:`astarpo.apply_config_file`).

Errors are one ``error: ...`` line on stderr (exit 2 for a usage error, 1 for a failed run), as
the ``astarpo`` verbs do; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from astarpo import (
    add_config_argument,
    add_field_arguments,
    apply_config_file,
    check_output,
    field_values,
    flag_of,
    name_flags,
)
from experiments.harness.config import flat_view

__all__ = ["SECTIONS", "build_parser", "config_spec", "error_text", "main", "one_line", "run"]

#: The sections a sectioned ``--config`` file of a study may hold (each study reads its
#: :attr:`~experiments.registry.Study.section`: ``bench`` for the efficiency study, ``study``
#: for the others).
SECTIONS = ("bench", "study")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def one_line(text: str) -> str:
    """``text`` on one line (newlines become ``; ``)."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


#: Errors whose message is the whole story; another is named with its type and ``--debug``.
ORDINARY = (ValueError, KeyError, OSError, ImportError, RuntimeError, TimeoutError)


def error_text(e: BaseException) -> str:
    """The message of ``e`` for the one ``error:`` line (an unexpected type is named, with the
    hint to rerun with ``--debug``)."""
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    if isinstance(e, ORDINARY) and msg:
        return msg
    return f"{type(e).__name__}: {msg} (an internal error; rerun with --debug for the traceback)"


def config_spec(argv: Sequence[str]) -> str | None:
    """The ``--config`` of ``argv`` (None without one), read before the parser is built."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.partition("=")[2]
    return None


def build_parser(name: str) -> argparse.ArgumentParser:
    """The flags of study ``name``: ``--out``, ``--quick``, ``--overwrite``/``--resume``,
    ``--report-only``, ``--config`` and one flag per field of its config."""
    from experiments.registry import STUDIES

    study = STUDIES[name]
    parser = _Parser(
        prog=f"python -m experiments.{study.package.rpartition('.')[2]}", description=study.summary
    )
    parser.add_argument("--out", default=f"runs/{study.stem}", help="output folder")
    parser.add_argument("--quick", action="store_true", help="a smoke run of every code path")
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--overwrite", action="store_true", help="delete an earlier run of this study in --out"
    )
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run of this study in --out: a run that finished with "
        "the same settings is read back, not run again",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help=f"write {study.stem}.md and {study.stem}.png again from --out's {study.stem}.json",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    settings = flat_view(study.config)
    add_field_arguments(parser.add_argument_group(f"{name} settings"), settings, unset=True)
    add_config_argument(parser)
    return parser


def run(name: str, args: argparse.Namespace) -> int:
    """Run study ``name`` with the parsed ``args`` (or redraw its report) and print its
    Markdown report."""
    from experiments.harness.output import OutputDir
    from experiments.registry import STUDIES

    study = STUDIES[name]
    check_output(args.out, "--out", folder=True)  # before any work
    settings = flat_view(study.config)
    given = field_values(settings, args)
    for key, value in given.items():
        if key.endswith("_dir"):
            check_output(value, flag_of(key), folder=True)
    if args.report_only:
        study.rerender(OutputDir(args.out, study.stem))
    else:
        try:
            cfg = study.config.from_dict({**study.presets(given, args.quick), **given})
        except ValueError as e:
            raise SystemExit(f"error: {name_flags(str(e), settings)}") from e
        study.run(cfg, args.out, overwrite=args.overwrite, resume=args.resume)
    print((Path(args.out) / f"{study.stem}.md").read_text())
    return 0


def main(name: str, argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.NAME``: parse ``argv`` and run study ``name``; returns the exit
    code (see the module doc)."""
    from experiments.registry import STUDIES

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(name)
        spec = config_spec(argv)
        if spec is not None:  # the file's values become the defaults; flags override
            apply_config_file(parser, STUDIES[name].section, spec, SECTIONS)
        args = parser.parse_args(argv)
    except SystemExit as e:
        if not isinstance(e.code, str):
            raise
        print(one_line(e.code), file=sys.stderr)
        return 2
    try:
        return run(name, args)
    except SystemExit as e:
        if args.debug or not isinstance(e.code, str):
            raise
        print(
            one_line(e.code if e.code.startswith("error:") else f"error: {e.code}"), file=sys.stderr
        )
        return 2
    except KeyboardInterrupt as e:
        code = getattr(e, "exit_code", None)
        print(one_line(f"stopped by {e}") if code else "error: interrupted", file=sys.stderr)
        return int(code or 130)
    except Exception as e:
        if args.debug:
            raise
        print(one_line(f"error: {error_text(e)}"), file=sys.stderr)
        return 1
