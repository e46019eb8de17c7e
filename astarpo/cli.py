"""The ``astarpo`` command line: parses the verb and hands over to :mod:`astarpo.commands`.

Verbs: ``theory`` (bandit experiments), ``value`` (Stage 1), ``train`` (Stage 2 and baselines),
``eval`` (benchmarks), ``demo`` (the CPU demo end to end), ``bench`` (efficiency comparison).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from astarpo import __version__

VERBS: dict[str, str] = {
    "theory": "exact log-linear bandit experiments (horizon, samples, grid, coverage, ..., all)",
    "value": "Stage 1: sample N reference responses per prompt and write the V* table",
    "train": "Stage 2: train a policy with A*-PO (or a baseline: grpo, rloo, ppo, rebel)",
    "eval": "accuracy of a model on benchmark files (greedy pass@1, sampled avg@k)",
    "demo": "the CPU demo: SFT reference, Stage 1, A*-PO, evaluation and a report",
    "bench": "A*-PO against GRPO/RLOO/PPO/REBEL side by side: time, memory, accuracy",
}


def build_parser(verbs: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; only the modules of ``verbs`` (default: all) are imported."""
    parser = argparse.ArgumentParser(
        prog="astarpo", description="A*-PO: optimal advantage regression for LLM reasoning."
    )
    parser.add_argument("--version", action="version", version=f"astarpo {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, help_text in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if verbs is None or verb in verbs:
            module = importlib.import_module(f"astarpo.commands.{verb}")
            module.add_arguments(p)
            p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``astarpo`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    wanted = [a for a in argv[:1] if a in VERBS]
    parser = build_parser(wanted or None)
    args = parser.parse_args(argv)
    return int(args._module.run(args) or 0)
