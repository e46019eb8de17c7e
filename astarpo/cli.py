"""The ``astarpo`` command line: parses the verb and hands over to :mod:`astarpo.commands`.

Verbs: ``theory`` (bandit experiments), ``value`` (Stage 1), ``train`` (Stage 2 and baselines),
``eval`` (benchmarks), ``demo`` (the CPU demo end to end). The studies that measure this
project's own claims are not verbs: they live in the repository's ``experiments/`` folder (not
installed) and run from a clone as ``python -m experiments.NAME``.

Errors: an ordinary mistake prints one ``error: ...`` line to stderr, exit code 2 for a usage
error (a bad flag or argument, raised as ``SystemExit("error: ...")`` by a verb) and 1 for a
runtime error (a bad file, a failed step, a hung reward, a stalled rank under ``torchrun``).
``astarpo --debug VERB ...`` shows the traceback instead. A run stopped by SIGTERM or SIGINT at
a safe point (:mod:`astarpo.llm.parallel.signals`: Stage 2 after a checkpoint, Stage 1 after
flushing its rows) prints ``stopped by SIGNAL after ...`` and exits with ``128 + signal``: 143
for SIGTERM, 130 for SIGINT. Under ``torchrun`` an error is also written to the launcher's
error file, so that its failure summary shows the root cause and its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from astarpo import __version__
from astarpo.commands.config_file import (
    add_config_argument,
    apply_config_file,
    config_values,
    resolve_config_path,
)
from astarpo.commands.console import shown

VERBS: dict[str, str] = {
    "theory": "exact log-linear bandit experiments (horizon, samples, grid, coverage, ..., all)",
    "value": "Stage 1: sample N reference responses per prompt and write the V* table",
    "train": "Stage 2: train a policy with A*-PO (or a baseline: grpo, rloo, ppo, rebel)",
    "eval": "accuracy of a model on benchmark files (greedy pass@1, sampled avg@k)",
    "demo": "the CPU demo: SFT reference, Stage 1, A*-PO, evaluation and a report",
    "convert": "save a GGUF checkpoint (a .gguf file or 'smollm2') as a model folder",
}


#: Verbs that take ``--config FILE`` (:mod:`astarpo.commands.config_file`).
CONFIG_VERBS = ("value", "train", "eval")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``error: ...`` line (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``error: MESSAGE (see PROG --help)`` to stderr and exit with code 2."""
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser(
    verbs: Sequence[str] | None = None, algo: str | None = None
) -> argparse.ArgumentParser:
    """The argument parser; only the modules of ``verbs`` (default: all) are imported.

    ``train`` takes the flags of the config of ``algo`` (default: ``astarpo``'s); the fields of
    the other algorithms are refused by name.
    """
    parser = Parser(
        prog="astarpo", description="A*-PO: optimal advantage regression for LLM reasoning."
    )
    parser.add_argument("--version", action="version", version=f"astarpo {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (before VERB)"
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, help_text in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if verbs is None or verb in verbs:
            module = importlib.import_module(f"astarpo.commands.{verb}")
            module.add_arguments(p, **({"algo": algo} if verb == "train" and algo else {}))
            if verb in CONFIG_VERBS:
                add_config_argument(p)
            p.set_defaults(_module=module)
    return parser


def prescan(argv: Sequence[str]) -> argparse.Namespace:
    """``--config`` and ``--algo`` of ``argv`` (or None), read before the full parser is built:
    the config file may choose the algorithm, whose config fields are ``train``'s flags."""
    pre = _Prescan(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--algo")
    try:
        return pre.parse_known_args([a for a in argv if a not in ("-h", "--help")])[0]
    except ValueError:  # e.g. --config without a value: the full parser reports it
        return argparse.Namespace(config=None, algo=None)


class _Prescan(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def chosen_algo(argv: Sequence[str], spec: str | None) -> str | None:
    """The ``--algo`` of a ``train`` command line, else the ``algo`` of its ``--config`` file.

    Raises:
        SystemExit: an ``error:`` line listing the algorithms when the one chosen is not one
            (checked before the parser is built from its config: a name of a field of another
            algorithm would otherwise be refused first).
    """
    algo = prescan(argv).algo
    source = "argument --algo"
    if algo is None and spec is not None:
        path = resolve_config_path(spec)
        algo = config_values(path, "train").get("algo")
        source = f"--config {path}: algo"
    if algo is None:
        return None
    from astarpo.llm.algorithms.registry import ALGORITHMS

    if not isinstance(algo, str) or algo not in ALGORITHMS:
        raise SystemExit(
            f"error: {source}: invalid choice: {shown(algo)} (choose from "
            f"{', '.join(map(repr, ALGORITHMS))})."
        )
    return algo


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``astarpo`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    wanted = [a for a in argv if not a.startswith("-")][:1]
    spec = prescan(argv).config if wanted and wanted[0] in CONFIG_VERBS else None
    try:
        algo = chosen_algo(argv, spec) if wanted == ["train"] else None
        parser = build_parser([a for a in wanted if a in VERBS] or None, algo)
        if spec is not None:  # the file's values become the verb's defaults; flags override
            verb_parsers = next(
                a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            )
            apply_config_file(verb_parsers[wanted[0]], wanted[0], spec)
        args = parser.parse_args(argv)
        args._argv = argv  # the command as given (a stopped run names the one that continues it)
    except SystemExit as e:  # a refused file or flag: SystemExit("error: ..."); --help: 0
        if not isinstance(e.code, str):
            raise
        print(one_line(e.code), file=sys.stderr)
        return 2
    try:
        return int(args._module.run(args) or 0)
    except SystemExit as e:  # a verb's usage error: SystemExit("error: ...")
        if args.debug or not isinstance(e.code, str):
            raise
        print(
            one_line(e.code if e.code.startswith("error:") else f"error: {e.code}"), file=sys.stderr
        )
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C; or SIGTERM/SIGINT handled at a safe point
        code = getattr(e, "exit_code", None)  # astarpo.llm.parallel.signals.Interrupted
        print(one_line(f"stopped by {e}") if code else "error: interrupted", file=sys.stderr)
        return int(code or 130)
    except Exception as e:
        if args.debug:
            raise
        if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # torchrun's summary names the cause
            from astarpo.llm.parallel.watchdog import outlive_failed_peer, record_for_launcher

            record_for_launcher(e)
            print(one_line(f"error: {error_text(e)}"), file=sys.stderr, flush=True)
            outlive_failed_peer(e)  # so that the peer, not this consequence, is the root cause
            return 1
        print(one_line(f"error: {error_text(e)}"), file=sys.stderr)
        return 1


_ORDINARY = (ValueError, KeyError, OSError, ImportError, AttributeError, RuntimeError, TimeoutError)


def error_text(e: BaseException) -> str:
    """The message of ``e`` for the one ``error:`` line (an unexpected type is named, with the
    hint to rerun with ``--debug``)."""
    msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    if isinstance(e, _ORDINARY) and msg:
        return msg
    return f"{type(e).__name__}: {msg} (an internal error; rerun with --debug for the traceback)"


def one_line(text: str) -> str:
    """``text`` on one line (newlines become ``; ``)."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())
