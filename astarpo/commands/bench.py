"""``astarpo bench``: the short name of ``astarpo study efficiency`` (the same flags).

A*-PO against GRPO, RLOO, PPO and REBEL on one wall-clock protocol
(:mod:`astarpo.studies.efficiency`): same reference, pool, held-out set, data order and budget
for every run (A*-PO's Stage 1 inside it), each run in its own process, each algorithm at the
learning rate a small sweep chose. Writes ``OUT/bench.json``, ``OUT/bench.md`` and
``OUT/bench.png``; ``--peers trl`` adds TRL's trainers under the same protocol.
"""

from __future__ import annotations

import argparse

from astarpo.commands.study import add_study_arguments, run_study


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``astarpo study efficiency``."""
    add_study_arguments(parser, "efficiency")


def run(args: argparse.Namespace) -> int:
    """Run the efficiency study and print its report."""
    return run_study(args)
