"""The ``astarpo`` command line: parses the verb and hands over to :mod:`astarpo.commands`.

Verbs: ``theory`` (bandit experiments), ``value`` (Stage 1), ``train`` (Stage 2 and baselines),
``eval`` (benchmarks), ``demo`` (the CPU demo end to end), ``bench`` (efficiency comparison).

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
from astarpo.commands.config_file import add_config_argument, apply_config_file

VERBS: dict[str, str] = {
    "theory": "exact log-linear bandit experiments (horizon, samples, grid, coverage, ..., all)",
    "value": "Stage 1: sample N reference responses per prompt and write the V* table",
    "train": "Stage 2: train a policy with A*-PO (or a baseline: grpo, rloo, ppo, rebel)",
    "eval": "accuracy of a model on benchmark files (greedy pass@1, sampled avg@k)",
    "demo": "the CPU demo: SFT reference, Stage 1, A*-PO, evaluation and a report",
    "bench": "A*-PO against GRPO/RLOO/PPO/REBEL side by side: time, memory, accuracy",
}


#: Verbs that take ``--config FILE`` (:mod:`astarpo.commands.config_file`).
CONFIG_VERBS = ("value", "train", "eval", "bench")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``error: ...`` line (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``error: MESSAGE (see PROG --help)`` to stderr and exit with code 2."""
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def build_parser(verbs: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the modules of ``verbs`` (default: all) are imported."""
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
            module.add_arguments(p)
            if verb in CONFIG_VERBS:
                add_config_argument(p)
            p.set_defaults(_module=module)
    return parser


def config_spec(argv: Sequence[str]) -> str | None:
    """The value of ``--config`` in ``argv`` (``--config F`` or ``--config=F``), or None."""
    for i, a in enumerate(argv):
        if a == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``astarpo`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    wanted = [a for a in argv if not a.startswith("-")][:1]
    parser = build_parser([a for a in wanted if a in VERBS] or None)
    spec = config_spec(argv)
    if spec is not None and wanted and wanted[0] in CONFIG_VERBS:
        verb_parsers = next(
            a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)
        )
        try:  # the file's values become the verb's defaults; flags still override them
            apply_config_file(verb_parsers[wanted[0]], wanted[0], spec)
        except SystemExit as e:
            print(one_line(str(e.code)), file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
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
            from astarpo.llm.parallel.watchdog import record_for_launcher

            record_for_launcher(e)
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
