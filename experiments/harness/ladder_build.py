r"""Building the v_ref ladder (:func:`build_ladder`), reading a built one back
(:func:`read_ladder`) and the ladder a study reads (:func:`ladder_for`: the ``--ladder DIR`` it
names, or one built into ``OUT/ladder``); the pass@k of its bins by sampling.

For a prompt solved with probability :math:`v` per sample, ``k`` independent samples all fail
with probability :math:`q = (1 - v)^k`. Over a bin's prompts, the number with pass@k = 0 is
then a Poisson-binomial count :math:`X = \sum_i B_i`, :math:`B_i \sim \mathrm{Bernoulli}(q_i)`,
of mean :math:`\sum_i q_i` and variance :math:`\sum_i q_i (1 - q_i)`; :func:`agreement` gives
its exact two-sided p-value at the observed count (:func:`poisson_binomial`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm import (
    HFGenerator,
    SamplingConfig,
    derive_seed,
    get_task,
    make_char_tokenizer,
    sample_and_score,
)
from experiments.harness.ladder_search import seek_candidates
from experiments.harness.ladder_sets import (
    LadderConfig,
    bin_label,
    draw_candidates,
    excluded_prompts,
    fill_bins,
    read_prompts,
    short_bins,
    write_prompts,
)
from experiments.harness.measure import gold_logprobs
from experiments.harness.protocol import Protocol, make_reference
from experiments.harness.report import write_json
from experiments.harness.runner import Runner

__all__ = ["OUTPUTS", "PASS_K", "agreement", "bins_of", "build_ladder", "check_bins"]
__all__ += [
    "describe_bin",
    "draw_for",
    "ladder_for",
    "pass_summary",
    "poisson_binomial",
    "read_ladder",
]
__all__ += ["sample_successes", "summarize"]

#: What a ladder writes besides ``ladder.json`` (and the ladder study's ``ladder.md/png``).
OUTPUTS = ("reference", "ladder_prompts.jsonl", "ladder_samples.jsonl")
#: The smaller k of the pass@k = 0 fractions (the larger is ``config.k``).
PASS_K = 8


def sample_successes(
    ref: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], k: int, cfg: Protocol, seed: int
) -> np.ndarray:
    """``k`` reference samples per row at temperature 1 (budget ``max_new_tokens``), scored by
    the task's reward (:func:`astarpo.llm.sample_and_score`).

    Returns:
        Boolean ``[P, k]``: sample ``j`` of row ``i`` solved it (reward > 0).
    """
    if not rows:
        return np.zeros((0, k), dtype=bool)
    gen = HFGenerator(ref, tokenizer, cfg.train.generation_batch_size)
    sampling, reward = SamplingConfig(cfg.train.max_new_tokens), [get_task(cfg.task).reward]
    scored = sample_and_score(
        gen.generate, rows, k, sampling, derive_seed(seed, "ladder"), reward,
        timeout=cfg.train.reward_timeout,
    )  # fmt: skip
    return np.asarray(scored.by_prompt > 0)


def poisson_binomial(q: Sequence[float] | np.ndarray) -> np.ndarray:
    r"""The pmf of :math:`X = \sum_i B_i`, :math:`B_i \sim \mathrm{Bernoulli}(q_i)`: float64
    ``[len(q) + 1]``, by convolving the terms one at a time (exact up to rounding)."""
    pmf = np.ones(1)
    for qi in np.asarray(q, dtype=np.float64).tolist():
        pmf = np.concatenate([pmf * (1.0 - qi), [0.0]]) + np.concatenate([[0.0], pmf * qi])
    return pmf


def agreement(q: Sequence[float] | np.ndarray, observed: int) -> dict[str, float]:
    r"""The observed count of events of chances ``q`` against its Poisson-binomial law.

    Returns:
        ``observed``, ``expected`` (:math:`\sum q_i`), ``sd``, and ``p_value``: two-sided,
        :math:`\min(1, 2 \min(P(X \le x), P(X \ge x)))`.
    """
    q = np.asarray(q, dtype=np.float64)
    pmf = poisson_binomial(q)
    low, high = float(pmf[: observed + 1].sum()), float(pmf[observed:].sum())
    return {
        "observed": int(observed),
        "expected": float(q.sum()),
        "sd": float(np.sqrt((q * (1.0 - q)).sum())),
        "p_value": min(1.0, 2.0 * min(low, high)),
    }


def pass_summary(v_ref: np.ndarray, solved: np.ndarray, ks: Sequence[int]) -> dict[str, Any]:
    """For each ``k`` of ``ks``: the fraction of prompts whose first ``k`` samples all failed
    (``solved``: ``[P, K]``, ``K >= k``), the fraction v_ref predicts (mean of
    :math:`(1 - v)^k`) and the count's :func:`agreement` with it; and the mean success rate."""
    out: dict[str, Any] = {"prompts": len(v_ref)}
    out["success_rate"] = float(solved.mean()) if solved.size else 0.0
    out["v_ref_mean"] = float(np.mean(v_ref)) if len(v_ref) else 0.0
    for k in ks:
        zero = np.asarray(~solved[:, :k].any(axis=1), dtype=bool)
        q = (1.0 - np.asarray(v_ref, dtype=np.float64)) ** k
        fit = agreement(q, int(zero.sum()))
        out[f"pass{k}_zero"] = float(zero.mean()) if zero.size else 0.0
        out[f"pass{k}_zero_expected"] = float(q.mean()) if len(q) else 0.0
        out[f"pass{k}_agreement"] = fit
    return out


def describe_bin(info: dict[str, Any], small: int, k: int) -> str:
    """One line on a measured bin: prompts, log10 v_ref range, pass@k = 0 fractions."""
    return (
        f"{info['prompts']} prompts, log10 v_ref in [{info['log10_v_ref_min']:.2f}, "
        f"{info['log10_v_ref_max']:.2f}], pass@{small} = 0: {info[f'pass{small}_zero']:.3f} "
        f"(v_ref: {info[f'pass{small}_zero_expected']:.3f}), pass@{k} = 0: "
        f"{info[f'pass{k}_zero']:.3f} (v_ref: {info[f'pass{k}_zero_expected']:.3f})"
    )


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Per bin label: prompts, log10 v_ref range, and for each k the observed and predicted
    pass@k = 0 fractions with the count's two-sided p-value; ``min_p_value`` over them."""
    out: dict[str, Any] = {}
    for label, info in result["bins"].items():
        row = {"prompts": info["prompts"], "candidates": info["candidates"]}
        row.update(log10_min=info["log10_v_ref_min"], log10_max=info["log10_v_ref_max"])
        for k in result["pass_k"]:
            row[f"pass{k}_zero"] = info[f"pass{k}_zero"]
            row[f"pass{k}_zero_expected"] = info[f"pass{k}_zero_expected"]
            row[f"pass{k}_p_value"] = info[f"pass{k}_agreement"]["p_value"]
        out[label] = row
    ps = [r[f"pass{k}_p_value"] for r in out.values() for k in result["pass_k"]]
    return {"bins": out, "min_p_value": min(ps) if ps else None}


def draw_for(
    cfg: LadderConfig, ref: Any, tokenizer: Any, say: Any = print
) -> tuple[list[dict[str, str]], np.ndarray]:
    """``(candidates, their natural-log v_ref)`` under the reference ``ref``: the draw, then
    up to ``top_ups`` rounds of search while a bin holds too few (:func:`short_bins`,
    :func:`~experiments.harness.ladder_search.seek_candidates`); the search stops early when a
    round finds nothing new."""
    candidates = draw_candidates(cfg)
    logp = gold_logprobs(ref, tokenizer, candidates, cfg.batch)
    taken = excluded_prompts(cfg) | {r["prompt"] for r in candidates}
    expanded: set[str] = set()
    for k in range(1, cfg.top_ups + 1):  # a stronger reference leaves the hard bins short
        if not (short := short_bins(logp, cfg)):
            break
        more = seek_candidates(cfg, candidates, logp, k, taken, expanded)
        if not more:
            break
        say(f"[ladder] {', '.join(short)} short: {len(more)} more candidates (search round {k})")
        candidates += more
        logp = np.concatenate([logp, gold_logprobs(ref, tokenizer, more, cfg.batch)])
    return candidates, logp


def build_ladder(cfg: LadderConfig, runner: Runner) -> dict[str, Any]:
    """Build the ladder of ``cfg`` into ``runner``'s folder and write its ``ladder.json``:
    the reference (``reference/``, from the SFT cache), the candidates' exact v_ref by teacher
    forcing, topped up while a bin is short, the bins (``ladder_prompts.jsonl``), and ``k``
    reference samples per kept prompt (``ladder_samples.jsonl``: per bin, the fractions with
    pass@8 = 0 and pass@k = 0 against what v_ref predicts). Returns the content of
    ``ladder.json``."""
    output, say = runner.output, runner.say
    out, protocol = output.path.resolve(), cfg.protocol.resolved()
    for name in OUTPUTS:
        output.record(name)
    ref, sft_info = make_reference(protocol, out)
    tok = make_char_tokenizer()
    say(f"[ladder] reference: {sft_info}")
    t0 = time.perf_counter()
    candidates, logp = draw_for(cfg, ref, tok, say)
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
        say(f"[ladder] {label}: {describe_bin(info, PASS_K, cfg.k)}")
    (out / "ladder_samples.jsonl").write_text("".join(lines))
    sampling = {"samples": len(rows) * cfg.k, "seconds": time.perf_counter() - t1}
    result: dict[str, Any] = {"config": cfg.to_dict(), "protocol": protocol.to_dict()}
    result.update(reference=sft_info, pass_k=[PASS_K, cfg.k], teacher_forcing=forcing)
    result.update(sampling=sampling, bins=bins, runs=[])
    result["summary"] = summarize(result)
    runner.stamp(result)
    write_json(output, result)
    return result


def read_ladder(
    folder: str | Path, flag: str = "--ladder", needs: Sequence[str] = OUTPUTS
) -> dict[str, Any]:
    """The ``ladder.json`` of a built ladder ``folder``, checked to hold the files ``needs``
    that a study reads (of ``ladder_prompts.jsonl``, ``ladder_samples.jsonl``,
    ``reference/``).

    Raises:
        ValueError: a missing folder or file, or a ``ladder.json`` that is not a ladder's,
            named with ``flag`` and the fix.
    """
    path = Path(folder)
    fix = (
        f"give {flag} a folder that `python -m experiments.ladder --out DIR` finished (or leave "
        f"{flag} out to build the ladder here)"
    )
    if not path.is_dir():
        raise ValueError(f"{flag} {folder}: no such folder; {fix}.")
    missing = [n for n in ("ladder.json", *needs) if not (path / n).exists()]
    if missing:
        lacks = ", ".join(missing)
        raise ValueError(f"{flag} {folder} is not a finished ladder (no {lacks}); {fix}.")
    try:
        result = json.loads((path / "ladder.json").read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path / 'ladder.json'} is not JSON ({e}); {fix}.") from None
    if not isinstance(result, dict) or not isinstance(result.get("config"), dict):
        raise ValueError(f"{path / 'ladder.json'} is not a ladder's result; {fix}.")
    return result


def ladder_for(
    given: str,
    build: LadderConfig,
    runner: Runner,
    *,
    overwrite: bool = False,
    resume: bool = False,
    progress: bool = True,
    needs: Sequence[str] = OUTPUTS,
) -> tuple[Path, dict[str, Any]]:
    """The ladder a study reads: ``(folder, its ladder.json)``: ``given`` (a built ladder, its
    files ``needs`` checked by :func:`read_ladder`), or else the ladder of ``build`` built into
    the study's ``ladder/`` (with ``resume``, one finished there with the same settings is read
    back)."""
    if given:
        return Path(given).resolve(), read_ladder(given, needs=needs)
    folder = runner.output.record("ladder").resolve()
    if resume and (folder / "ladder.json").exists():
        done = read_ladder(folder, "the study's ladder/")
        if done["config"] == json.loads(json.dumps(build.to_dict())):
            runner.say(f"[ladder] finished earlier with the same settings: read back ({folder})")
            return folder, done
    inner = Runner.start(folder, "ladder", OUTPUTS, build, overwrite, progress, 1, resume)
    return folder, build_ladder(build, inner)


def bins_of(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The bin labels of a ladder's rows, in order."""
    return list(dict.fromkeys(r["bin"] for r in rows))


def check_bins(asked: Sequence[str], folder: Path, flag: str = "--bins") -> list[dict[str, Any]]:
    """The rows of ``folder``'s ``ladder_prompts.jsonl``; ``ValueError`` naming the bins of
    ``asked`` (labels or ``HI:LO``) it lacks, with the bins it holds."""
    rows = read_prompts(folder / "ladder_prompts.jsonl")
    labels = [bin_label(b) if ":" in b else b for b in asked]
    missing = [b for b in labels if b not in bins_of(rows)]
    if missing:
        raise ValueError(
            f"{flag}: the ladder {folder} holds no bin {', '.join(missing)}; its bins are "
            f"{', '.join(bins_of(rows))}."
        )
    return rows
