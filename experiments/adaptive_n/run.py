r"""The adaptive-N study (``python -m experiments.adaptive_n``): does spending Stage 1's samples
where the pilot failed estimate V* better than the paper's fixed N, for the same samples?

:func:`run` takes the v_ref ladder (:mod:`experiments.harness.ladder_build`: prompts binned by
the reference's exact, teacher-forced solve probability, and ``k`` reference samples per prompt
scored by the exact-match reward), built first into ``OUT/ladder`` unless ``ladder`` names a
finished one (``--ladder DIR``), and reads every rule from the same samples
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
from pathlib import Path
from typing import Any

import numpy as np

from experiments.adaptive_n import report
from experiments.adaptive_n.config import BINS, AdaptiveNConfig
from experiments.adaptive_n.errors import estimator_errors
from experiments.harness.ladder_build import check_bins, ladder_for, read_ladder
from experiments.harness.ladder_sets import bin_label
from experiments.harness.runner import Runner

__all__ = ["OUTPUTS", "ladder_samples", "run"]

#: What the study writes besides ``adaptive_n.json/md/png`` (the ladder, when built here).
OUTPUTS = ("ladder",)


def ladder_samples(
    folder: Path, bins: tuple[str, ...] = ()
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(rewards [X, k], v_ref [X], bins [X])`` of a finished ladder folder: each prompt's
    ``k`` sampled 0/1 rewards (``ladder_samples.jsonl``) beside its exact v_ref
    (``ladder_prompts.jsonl``), of the prompts of ``bins`` (labels or ``HI:LO``; empty: all).

    Raises:
        ValueError: a bin of ``bins`` the ladder lacks, a file that is not JSON lines (named),
            or two files that do not list the same prompts.
    """
    for name in ("ladder_prompts.jsonl", "ladder_samples.jsonl"):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder / name} does not exist: name a finished `python -m experiments.ladder` "
                "folder, or leave --ladder empty to build the ladder here."
            )
    rows = check_bins(bins, folder)
    if bins:
        wanted = {bin_label(b) if ":" in b else b for b in bins}
        rows = [r for r in rows if r["bin"] in wanted]
    solved = {}
    path = folder / "ladder_samples.jsonl"
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                d = json.loads(line)
                solved[(d["bin"], d["split"], d["prompt"])] = [c == "1" for c in d["solved"]]
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(
                    f"{path}: line {i} is not a ladder sample ({e}); the file is cut short or "
                    "damaged: build the ladder again."
                ) from None
    keys = [(r["bin"], r["split"], r["prompt"]) for r in rows]
    if not set(keys) <= set(solved):
        raise ValueError(
            f"{folder}: ladder_prompts.jsonl and ladder_samples.jsonl list different prompts; "
            "build the ladder again."
        )
    rewards = np.array([solved[k] for k in keys], dtype=np.float64)
    return rewards, np.array([r["v_ref"] for r in rows]), [r["bin"] for r in rows]


def check_samples(cfg: AdaptiveNConfig, k: int, folder: Path) -> None:
    """``ValueError`` naming the options that ask for more samples per prompt than the ladder
    ``folder`` drew (``k``)."""
    asked = {"--fixed": max(cfg.fixed), "--adaptive": max(cfg.adaptive)}
    asked["--cap"] = cfg.stage1.max_samples
    over = [f"{flag} {n}" for flag, n in asked.items() if n > k]
    if over:
        raise ValueError(
            f"the ladder {folder} holds {k} samples per prompt (its k), but {', '.join(over)} "
            f"asks for more; keep --fixed, --adaptive and --cap at most {k}, or build a "
            "ladder with a larger --k."
        )


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
    needs = ("ladder_prompts.jsonl", "ladder_samples.jsonl")
    if cfg.ladder:  # before any work: a folder that is no ladder is refused
        read_ladder(cfg.ladder, needs=needs)
    runner = Runner.start(out_dir, "adaptive_n", OUTPUTS, cfg, overwrite, progress, resume=resume)
    output, say = runner.output, runner.say
    build = cfg.ladder_config()
    folder, built = ladder_for(
        cfg.ladder,
        build,
        runner,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
        needs=needs,
    )
    ladder = built["config"]
    asked = cfg.bins if cfg.ladder and cfg.bins != BINS else ()
    rewards, v_ref, bins = ladder_samples(folder, asked)
    check_samples(cfg, rewards.shape[1], folder)
    t0 = time.perf_counter()
    s1 = cfg.stage1
    errors = estimator_errors(
        rewards, v_ref, bins, s1.beta1, cfg.fixed, cfg.adaptive, s1.pilot_samples,
        s1.max_samples, s1.prompts_per_call, cfg.calls_seed,
    )  # fmt: skip
    say(f"[adaptive-n] {len(v_ref)} prompts x {rewards.shape[1]} samples read")
    config = cfg.to_dict()
    if cfg.ladder:  # the bins the results cover
        config["bins"] = list(dict.fromkeys(bins))
    result: dict[str, Any] = {"config": config, "ladder": {"folder": str(folder), **ladder}}
    result.update(errors=errors, seconds=time.perf_counter() - t0, runs=[])
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
