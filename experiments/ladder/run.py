r"""The v_ref ladder study (``python -m experiments.ladder``): prompt sets binned by log10 v_ref.

:func:`run` builds the ladder (:func:`~experiments.harness.ladder_build.build_ladder`): the
scratchpad reference (from the SFT cache) saved with its tokenizer in ``reference/``, the
candidates and each one's exact :math:`v_{ref}` by teacher forcing
(:mod:`experiments.harness.ladder_sets`), the bins (``ladder_prompts.jsonl``), then ``k``
reference samples per kept prompt: per bin, the fractions with pass@8 = 0 and pass@k = 0
against what v_ref predicts (``ladder_samples.jsonl``, ``ladder.json``); and writes its report
(``ladder.md/png``). The other studies read a finished ladder folder (``--ladder DIR``), or
build one into their own ``OUT/ladder`` the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.harness.ladder_build import OUTPUTS, build_ladder
from experiments.harness.ladder_sets import LadderConfig
from experiments.harness.runner import Runner
from experiments.ladder import report

__all__ = ["run"]


def run(
    cfg: LadderConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study (see the module doc) into ``out_dir`` (``overwrite``: delete exactly what
    an earlier run of it recorded there first; ``resume``: continue an interrupted run there,
    its finished runs read back); returns the content of ``ladder.json``."""
    runner = Runner.start(out_dir, "ladder", OUTPUTS, cfg, overwrite, progress, resume=resume)
    result = build_ladder(cfg, runner)
    report.write(runner.output, result)
    return result
