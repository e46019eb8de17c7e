"""The studies by name (:data:`STUDIES`). Adding a study is one subpackage (a config
dataclass, ``run.run`` and ``report.write``) and one entry here."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.adaptive_n import config as adaptive_n
from experiments.efficiency import config as efficiency
from experiments.ladder import config as ladder
from experiments.ladder_train import config as ladder_train
from experiments.refresh import config as refresh
from experiments.two_beta import config as two_beta
from experiments.zero_pass import config as zero_pass

__all__ = ["STUDIES", "Study"]


@dataclass(frozen=True)
class Study:
    """One study.

    Args:
        package: Its subpackage, imported only when called: ``PACKAGE.run.run(config, out_dir,
            overwrite=, progress=)``; ``PACKAGE.report``'s ``refresh(result)`` (the summary
            made again from the runs) and ``write(output, result, with_json)``.
        config: Its config dataclass (one flag per field).
        stem: The stem of its output files (``stem.json``, ``stem.md``, ``stem.png``).
        summary: One line on what it measures.
        presets: ``presets(given fields, quick) -> fields``: what ``--quick`` (or a given field
            such as ``task``) selects, under the given fields.
        section: The section of a sectioned ``--config`` file it reads.
        builds_on: The studies whose outputs it reads and whose packages it may import (their
            subpackage names, e.g. ``"ladder"``); any other study it must not import.
    """

    package: str
    config: type
    stem: str
    summary: str
    presets: Callable[[Mapping[str, Any], bool], dict[str, Any]]
    section: str = "study"
    builds_on: tuple[str, ...] = ()

    def run(self, config: Any, out_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
        """Run the study: ``PACKAGE.run.run(config, out_dir, **kwargs)``."""
        run: Callable[..., dict[str, Any]] = importlib.import_module(f"{self.package}.run").run
        return run(config, out_dir, **kwargs)

    def rerender(self, output: Any) -> None:
        """Write ``stem.md`` and ``stem.png`` again from ``output``'s ``stem.json`` (its summary
        refreshed; the JSON itself is not rewritten)."""
        report = importlib.import_module(f"{self.package}.report")
        result = json.loads((output.path / f"{self.stem}.json").read_text())
        report.write(output, report.refresh(result), with_json=False)


#: Study name (``python -m experiments.NAME``) -> :class:`Study`.
STUDIES: dict[str, Study] = {
    "efficiency": Study(
        "experiments.efficiency",
        efficiency.EfficiencyConfig,
        "bench",
        "A*-PO against GRPO/RLOO/PPO/REBEL (and TRL's trainers) on one wall-clock budget, or "
        "for equal steps (--protocol paper): time to accuracy targets, total time, peak memory, "
        "final accuracy (also `python -m experiments.efficiency`)",
        efficiency.presets,
        section="bench",
    ),
    "zero-pass": Study(
        "experiments.zero_pass",
        zero_pass.ZeroPassConfig,
        "zero_pass",
        "prompts the reference never solves (pass@64 = 0): does A*-PO, or an exploring "
        "baseline, learn them",
        zero_pass.presets,
    ),
    "two-beta": Study(
        "experiments.two_beta",
        two_beta.TwoBetaConfig,
        "two_beta",
        "A*-PO with V* at each beta1 (beta2 = 1e-3, equal steps): final accuracy, KL, steps "
        "to target and gradient noise, paired against the paper's beta1 = 0.5",
        two_beta.presets,
    ),
    "ladder": Study(
        "experiments.ladder",
        ladder.LadderConfig,
        "ladder",
        "prompt sets binned by the reference's exact solve probability v_ref (teacher-forced), "
        "with their sampled pass@8 = 0 and pass@64 = 0 fractions",
        ladder.presets,
    ),
    "adaptive-n": Study(
        "experiments.adaptive_n",
        adaptive_n.AdaptiveNConfig,
        "adaptive_n",
        "Stage 1's V* error against the exact value on the ladder (bias, MSE), fixed N against "
        "the adaptive allocation at equal samples, paired by prompt",
        adaptive_n.presets,
        builds_on=("ladder",),
    ),
    "refresh": Study(
        "experiments.refresh",
        refresh.RefreshConfig,
        "refresh",
        "A*-PO with a fixed reference against one refreshed every K steps, on the ladder's "
        "bins near the threshold: exact held-out pass@k per bin, KL to the original reference, "
        "Stage 1 samples spent",
        refresh.presets,
        builds_on=("ladder",),
    ),
    "ladder-train": Study(
        "experiments.ladder_train",
        ladder_train.LadderTrainConfig,
        "ladder_train",
        "who learns, per bin of log10 v_ref: A*-PO and GRPO on every ladder bin alone, the "
        "all-wrong filter, PPO and REBEL near the threshold, alone and mixed with easy prompts, "
        "for equal steps: held-out gain, successes sampled, the v_ref where each stops learning",
        ladder_train.presets,
        builds_on=("ladder", "zero_pass", "efficiency"),
    ),
}
