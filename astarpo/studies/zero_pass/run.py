r"""The zero-pass study (``astarpo study zero-pass``): prompts the reference never solves.

Theorem 1 assumes the reference solves every prompt with probability at least
:math:`v_{ref} > 0`. :func:`run` trains on prompts where it does not, in one invocation:

1. the reference: the scratchpad task's SFT'd reference (the efficiency study's, from the same
   cache), saved with its tokenizer to ``out/reference``;
2. the hard set (:func:`~astarpo.studies.zero_pass.sets.build_hard_set`): scratchpad problems
   with one more operand digit than any SFT example, whose ``k = 64`` reference samples are all
   wrong, ``hard_train`` of them for training and ``hard_eval`` held out
   (``hard_prompts.jsonl``, with the split; ``hard_pass64.jsonl``, every candidate's rewards);
3. the easy set: problems of the SFT distribution (the protocol's pool and held-out rows);
4. Stage 1 (N = 8) on each training set, once, timed. It is not inside the runs' clocks (it is
   shared by every seed, as the paper's offline Stage 1): every run has the same Stage 2
   budget, and Stage 1's seconds are reported beside;
5. A*-PO, A*-PO with the all-wrong filter, GRPO, PPO and REBEL on three training sets -- hard
   only, easy + hard mixed, easy only -- with :func:`~astarpo.studies.zero_pass.config.seeds_of`
   seeds, each run in a fresh process, ``workers`` at a time;
6. the report (:mod:`~astarpo.studies.zero_pass.report`): ``zero_pass.json``, ``.md``, ``.png``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm.models.toy import make_char_tokenizer
from astarpo.llm.stage1.table import lookup_v_star
from astarpo.studies.harness.measure import timed_stage1
from astarpo.studies.harness.output import OutputDir
from astarpo.studies.harness.protocol import make_reference, splits
from astarpo.studies.harness.runner import Runner
from astarpo.studies.zero_pass import report
from astarpo.studies.zero_pass.config import ARMS, SETS, ZeroPassConfig, seeds_of
from astarpo.studies.zero_pass.sets import build_hard_set
from astarpo.studies.zero_pass.worker import evaluate_sets

__all__ = ["ENTRY", "OUTPUTS", "run"]

#: The function a run's process calls.
ENTRY = "astarpo.studies.zero_pass.worker:run_one"
#: What the study writes besides ``runs/`` and ``zero_pass.json/md/png``.
OUTPUTS = (
    "reference",
    "hard_pass64.jsonl",
    "hard_prompts.jsonl",
    *(f"values_{s}.jsonl" for s in SETS),
)


def _stage1(
    ref: Any, sets: dict[str, list[dict[str, Any]]], hard: list[dict[str, Any]], cfg: Any, out: Path
) -> dict[str, Any]:
    """Stage 1 on each training set, timed, into ``values_{set}.jsonl``."""
    info = {}
    for kind, rows in sets.items():
        table, secs = timed_stage1(
            ref, make_char_tokenizer(), rows, cfg, out / f"values_{kind}.jsonl", 0
        )
        v = lookup_v_star(table, [r["prompt"] for r in hard if r["prompt"] in table])
        info[kind] = {
            "seconds": secs,
            "prompts": len(table),
            "all_wrong": int(sum(r.pass_rate == 0 for r in table)),
            "v_star_hard_max_abs": float(np.abs(v).max()) if len(v) else None,
            "v_star_mean": float(np.mean([r.v_star for r in table])),
        }
    return info


def run(
    cfg: ZeroPassConfig, out_dir: str | Path, *, overwrite: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Run the study (see the module doc); writes ``zero_pass.json``, ``.md`` and ``.png``.

    Args:
        cfg: The settings.
        out_dir: Output folder.
        overwrite: Delete an earlier run of the study in ``out_dir`` first (exactly what its
            manifest lists; anything else is never deleted).
        progress: Print a line per phase and per run.

    Returns:
        The content of ``zero_pass.json``.
    """
    output = OutputDir(out_dir, "zero_pass", OUTPUTS)
    output.clear(overwrite)
    say = print if progress else (lambda *a, **k: None)
    describe = lambda r: str(r.get("skipped") or r.get("steps", ""))  # noqa: E731
    runner = Runner(output, cfg.threads, cfg.workers, cfg.rerun_slow, say, describe)
    out = output.path.resolve()  # the specs' paths: absolute, whatever a worker's cwd
    protocol = cfg.protocol().resolved()
    for name in OUTPUTS:
        output.record(name)
    ref, sft_info = make_reference(protocol, out)
    say(f"[zero-pass] reference: {sft_info}")
    hard_train, hard_eval, hard_info = build_hard_set(ref, cfg, out, runner)
    say(f"[zero-pass] hard set: {json.dumps(hard_info)}")
    with open(out / "hard_prompts.jsonl", "w") as f:
        for split, rows in (("train", hard_train), ("held_out", hard_eval)):
            for r in rows:
                f.write(
                    json.dumps({"prompt": r["prompt"], "answer": r["answer"], "split": split})
                    + "\n"
                )
    parts = splits(protocol)
    easy_train, easy_eval = parts["pool"], parts["held_out"]
    sets = {"hard": hard_train, "mixed": easy_train + hard_train, "easy": easy_train}
    stage1_info = _stage1(ref, sets, hard_train, protocol, out)
    say(f"[zero-pass] stage 1: {stage1_info}")
    held = {"hard": hard_eval, "easy": easy_eval}
    ref_eval = evaluate_sets(ref, make_char_tokenizer(), held)
    del ref
    common = {
        "entry": ENTRY,
        "config": asdict(protocol),
        "reference": str(out / "reference"),
        "lr": cfg.learning_rate,
        "seconds": cfg.seconds,
        "held_out": held,
        "reference_eval": ref_eval,
        "hard_prompts": [r["prompt"] for r in hard_train],
        "check": {"hard": hard_train[: cfg.check_rows], "easy": easy_train[: cfg.check_rows]},
        "check_values": str(out / "values_mixed.jsonl"),
        "paths": ["reference", "values", "check_values"],
    }
    specs = [
        (
            f"{s}_{arm}_s{seed}",
            {
                **common,
                "arm": arm,
                "set": s,
                "seed": seed,
                "train": sets[s],
                "values": str(out / f"values_{s}.jsonl"),
            },
        )
        for seed in range(max(cfg.seeds_main, cfg.seeds_other))  # seed-major: loads mix
        for s in SETS
        for arm in ARMS
        if seed < seeds_of(cfg, s, arm)
    ]
    say(f"[zero-pass] {len(specs)} runs, {cfg.workers} at a time, {cfg.seconds:g} s each")
    result: dict[str, Any] = {
        "config": asdict(cfg),
        "protocol": asdict(protocol),
        "reference": {"sft": sft_info, "eval": ref_eval},
        "hard_set": hard_info,
        "sizes": {
            "hard_train": len(hard_train),
            "hard_eval": len(hard_eval),
            "easy_train": len(easy_train),
            "easy_eval": len(easy_eval),
        },
        "stage1": stage1_info,
        "runs": runner.run_all(specs),
    }
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
