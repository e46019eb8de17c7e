r"""The adaptive-N study (``python -m experiments.adaptive_n``): does spending Stage 1's samples
where
the pilot failed estimate V* better than the paper's fixed N, for the same samples?

:func:`run` takes the v_ref ladder (:mod:`experiments.ladder`: prompts binned by the
reference's exact, teacher-forced solve probability, and ``k`` reference samples per prompt
scored by the exact-match reward), runs it first into ``OUT/ladder`` unless ``ladder`` names a
finished one, and reads every rule from the same samples
(:func:`~experiments.adaptive_n.errors.estimator_errors`): fixed N from the first N samples
of each prompt, the adaptive rule of ``Stage1Config(allocation="adaptive")``
(:func:`astarpo.allocation.allocate`) on calls of ``prompts_per_call`` prompts of all bins
mixed. Each estimate is compared with the exact
:math:`V^* = \beta_1 \log(1 + v_{ref}(e^{1/\beta_1} - 1))` of its prompt: bias and MSE per bin,
and adaptive minus fixed at equal budget, paired by prompt, Holm-adjusted over the table.

What would change the conclusion: if the paired MSE differences at N = 8 were below 0 in the
pool ("all") and in the hard bins, the adaptive rule would pay for itself before training
starts; if they are above 0 (the easy prompts lose more than the hard ones gain) or not shown,
a cheaper Stage 1 must come from a smaller budget, not from the allocation.

Not built yet (the issue's downstream part): A*-PO's time to target with Stage 1 inside, fixed
N = 8 against adaptive at the same and at half the budget, on the efficiency study's protocols.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

from experiments.adaptive_n import report
from experiments.adaptive_n.config import AdaptiveNConfig
from experiments.adaptive_n.errors import estimator_errors
from experiments.harness.runner import Runner
from experiments.ladder.config import LadderConfig
from experiments.ladder.run import run as run_ladder
from experiments.ladder.sets import read_prompts

__all__ = ["OUTPUTS", "ladder_samples", "run"]

#: What the study writes besides ``adaptive_n.json/md/png`` (the ladder, when run here).
OUTPUTS = ("ladder",)


def ladder_samples(folder: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(rewards [X, k], v_ref [X], bins [X])`` of a finished ladder folder: each prompt's
    ``k`` sampled 0/1 rewards (``ladder_samples.jsonl``) beside its exact v_ref
    (``ladder_prompts.jsonl``).

    Raises:
        FileNotFoundError: the folder lacks either file (name a finished ladder run).
        ValueError: the two files do not list the same prompts.
    """
    for name in ("ladder_prompts.jsonl", "ladder_samples.jsonl"):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder / name} does not exist: name a finished `python -m experiments.ladder` "
                "folder, or leave --ladder empty to run the ladder here."
            )
    rows = read_prompts(folder / "ladder_prompts.jsonl")
    lines = (folder / "ladder_samples.jsonl").read_text().splitlines()
    solved = {}
    for line in lines:
        if line.strip():
            d = json.loads(line)
            solved[(d["bin"], d["split"], d["prompt"])] = [c == "1" for c in d["solved"]]
    keys = [(r["bin"], r["split"], r["prompt"]) for r in rows]
    if set(keys) != set(solved):
        raise ValueError(
            f"{folder}: ladder_prompts.jsonl and ladder_samples.jsonl list different prompts; "
            "run the ladder again."
        )
    rewards = np.array([solved[k] for k in keys], dtype=np.float64)
    return rewards, np.array([r["v_ref"] for r in rows]), [r["bin"] for r in rows]


def run(
    cfg: AdaptiveNConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the study (see the module doc) into ``out_dir`` (``overwrite``: delete exactly what
    an earlier run of it recorded there first; ``resume``: continue an interrupted run there,
    its finished runs read back); returns the content of ``adaptive_n.json``."""
    runner = Runner.start(out_dir, "adaptive_n", OUTPUTS, cfg, overwrite, progress, resume=resume)
    output, say = runner.output, runner.say
    if cfg.ladder:
        folder = Path(cfg.ladder)
        ladder = json.loads((folder / "ladder.json").read_text())["config"]
    else:
        folder = output.record("ladder")
        names = {f.name for f in fields(LadderConfig)}
        ladder_cfg = LadderConfig(**{k: v for k, v in asdict(cfg).items() if k in names})
        ladder = run_ladder(
            ladder_cfg, folder, overwrite=overwrite, progress=progress, resume=resume
        )["config"]
    rewards, v_ref, bins = ladder_samples(folder)
    t0 = time.perf_counter()
    errors = estimator_errors(
        rewards, v_ref, bins, cfg.beta1, cfg.fixed, cfg.adaptive, cfg.pilot, cfg.cap,
        cfg.prompts_per_call, cfg.calls_seed,
    )  # fmt: skip
    say(f"[adaptive-n] {len(v_ref)} prompts x {rewards.shape[1]} samples read")
    result: dict[str, Any] = {"config": asdict(cfg), "ladder": {"folder": str(folder), **ladder}}
    result.update(errors=errors, seconds=time.perf_counter() - t0, runs=[])
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
