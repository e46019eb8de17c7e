"""``astarpo study NAME``: run a study of :mod:`astarpo.studies` (``astarpo study --list``),
one flag per config field (a tuple takes a comma-separated list, a dict a JSON object, a bool
``--x``/``--no-x``) with its presets under the flags given, and print its Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from astarpo.commands.config_file import add_config_argument
from astarpo.commands.fields import add_field_arguments, field_values, flag_of, name_flags
from astarpo.commands.paths import check_output

__all__ = ["add_arguments", "add_study_arguments", "config_target", "run"]


def add_study_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The flags of study ``name`` (``astarpo study NAME``, and ``astarpo bench``)."""
    from astarpo.studies.registry import STUDIES

    study = STUDIES[name]
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
    add_field_arguments(parser.add_argument_group(f"{name} settings"), study.config, unset=True)
    parser.set_defaults(study_name=name)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``astarpo study --list`` and one sub-command per study."""
    from astarpo.studies.registry import STUDIES

    parser.add_argument("--list", action="store_true", help="name each study and what it measures")
    sub = parser.add_subparsers(dest="name", metavar="NAME")
    for name, study in STUDIES.items():
        p = sub.add_parser(name, help=study.summary, description=study.summary)
        add_study_arguments(p, name)
        add_config_argument(p)


def config_target(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[Any, str]:
    """The parser and file section a ``--config`` file of ``astarpo study ...`` fills: the named
    study's (:attr:`~astarpo.studies.registry.Study.section`)."""
    from astarpo.studies.registry import STUDIES

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    rest = argv[argv.index("study") + 1 :] if "study" in argv else []
    name = next((a for a in rest if a in STUDIES), None)
    return (sub.choices[name], STUDIES[name].section) if name else (parser, "study")


def run(args: argparse.Namespace) -> int:
    """``--list``, or run the named study (or redraw its report) and print its Markdown report."""
    from astarpo.studies.harness.output import OutputDir
    from astarpo.studies.registry import STUDIES

    if getattr(args, "study_name", None) is None:
        if not args.list:
            raise SystemExit(f"error: name a study ({', '.join(STUDIES)}); astarpo study --list")
        print("\n".join(f"{name}: {study.summary}" for name, study in STUDIES.items()))
        return 0
    study = STUDIES[args.study_name]
    check_output(args.out, "--out", folder=True)  # before any work
    given = field_values(study.config, args)
    for key, value in given.items():
        if key.endswith("_dir"):
            check_output(value, flag_of(key), folder=True)
    if args.report_only:
        study.rerender(OutputDir(args.out, study.stem))
    else:
        try:
            cfg = study.config(**{**study.presets(given, args.quick), **given})
        except ValueError as e:
            raise SystemExit(f"error: {name_flags(str(e), study.config)}") from e
        study.run(cfg, args.out, overwrite=args.overwrite, resume=args.resume)
    print((Path(args.out) / f"{study.stem}.md").read_text())
    return 0
