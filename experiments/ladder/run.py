r"""The v_ref ladder study (``python -m experiments.ladder``): prompt sets binned by log10 v_ref.

:func:`run` builds (or reads from the SFT cache) the scratchpad reference, saves it with its
tokenizer in ``reference/``, draws the candidates and computes each one's exact
:math:`v_{ref}` by teacher forcing (:mod:`experiments.ladder.sets`), fills the bins
(``ladder_prompts.jsonl``), then samples ``k`` reference responses per kept prompt
(:mod:`experiments.ladder.passk`): per bin, the fractions with pass@8 = 0 and pass@k = 0
against what v_ref predicts (``ladder_samples.jsonl``, ``ladder.json/md/png``).

TODO (the training part, not built yet): per bin, A*-PO and GRPO runs on the bin's training
prompts in fresh processes (the harness's ``Runner``, ``train_run``), Stage 1 (N = 8) once per
bin outside the clocks, equal Stage 2 budgets and seeds per arm, held-out curves read exactly
from the gold probability of the bin's test prompts; the report: the final held-out solve
probability against the bin's log10 v_ref per arm (where Theorem 1's v_ref > 0 assumption stops
paying), with the pass@k = 0 fractions of this part beside it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm.models.toy import make_char_tokenizer
from experiments.harness.measure import gold_logprobs
from experiments.harness.protocol import make_reference
from experiments.harness.runner import Runner
from experiments.ladder import report
from experiments.ladder.config import LadderConfig
from experiments.ladder.passk import pass_summary, sample_successes
from experiments.ladder.sets import draw_candidates, fill_bins, short_bins, write_prompts

__all__ = ["OUTPUTS", "PASS_K", "run"]

#: What the study writes besides ``ladder.json/md/png``.
OUTPUTS = ("reference", "ladder_prompts.jsonl", "ladder_samples.jsonl")
#: The smaller k of the pass@k = 0 fractions (the larger is ``config.k``).
PASS_K = 8


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
    output, say = runner.output, runner.say
    out, protocol = output.path.resolve(), cfg.protocol().resolved()
    for name in OUTPUTS:
        output.record(name)
    ref, sft_info = make_reference(protocol, out)
    tok = make_char_tokenizer()
    say(f"[ladder] reference: {sft_info}")
    t0 = time.perf_counter()
    candidates = draw_candidates(cfg)
    logp = gold_logprobs(ref, tok, candidates, cfg.batch)
    for k in range(1, cfg.top_ups + 1):  # a stronger reference leaves the hard bins short
        if not (short := short_bins(logp, cfg)):
            break
        more = draw_candidates(cfg, top_up=k, drawn=candidates)
        say(f"[ladder] {', '.join(short)} short: {len(more)} more candidates (top-up {k})")
        candidates += more
        logp = np.concatenate([logp, gold_logprobs(ref, tok, more, cfg.batch)])
    rows, bins = fill_bins(candidates, logp, cfg)
    forcing = {"candidates": len(candidates), "seconds": time.perf_counter() - t0}
    write_prompts(out / "ladder_prompts.jsonl", rows)
    say(f"[ladder] {len(candidates)} candidates teacher-forced in {forcing['seconds']:.1f} s")
    lines, t1 = [], time.perf_counter()
    for i, (label, info) in enumerate(bins.items()):
        part = [r for r in rows if r["bin"] == label]
        solved = sample_successes(ref, tok, part, cfg.k, protocol, cfg.sample_seed + i)
        v_ref = np.array([r["v_ref"] for r in part])
        info.update(pass_summary(v_ref, solved, (PASS_K, cfg.k)))
        for split in ("train", "test"):
            sel = np.array([r["split"] == split for r in part])
            info[split] = pass_summary(v_ref[sel], solved[sel], (PASS_K, cfg.k))
        for r, s in zip(part, solved.tolist(), strict=True):
            line = {"bin": label, "split": r["split"], "prompt": r["prompt"], "k": cfg.k}
            line.update(solved="".join("1" if x else "0" for x in s))
            lines.append(json.dumps(line) + "\n")
        say(f"[ladder] {label}: {report.describe_bin(info, PASS_K, cfg.k)}")
    (out / "ladder_samples.jsonl").write_text("".join(lines))
    sampling = {"samples": len(rows) * cfg.k, "seconds": time.perf_counter() - t1}
    result: dict[str, Any] = {"config": asdict(cfg), "protocol": asdict(protocol)}
    result.update(reference=sft_info, pass_k=[PASS_K, cfg.k], teacher_forcing=forcing)
    result.update(sampling=sampling, bins=bins, runs=[])
    result["summary"] = report.summarize(result)
    runner.stamp(result)
    report.write(output, result)
    return result
