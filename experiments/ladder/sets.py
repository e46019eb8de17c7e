r"""The ladder's prompt sets: scratchpad prompts binned by the reference's exact solve probability.

The scratchpad reward is exact match, so a prompt ``x`` with gold worked solution ``a`` has
exactly one rewarded response, and the reference solves ``x`` with probability

.. math::

    v_{ref}(x) = \pi_{ref}(a \oplus \mathrm{EOS} \mid x)
              = \exp \sum_t \log \pi_{ref}(y_t \mid x, y_{<t}),

computed by teacher forcing (:func:`~experiments.harness.measure.gold_logprobs`, one
forward pass per batch), not sampled.

The rule that gives graded difficulty (:func:`draw_candidates`):

* **zero-rich** candidates: ``candidates`` problems with the SFT data's 4-digit operands whose
  digits are each 0 with probability ``p`` (else uniform in 1..9), ``p`` drawn per problem
  uniformly in ``[zero_low, zero_high]``. The SFT data has uniform digits (a digit is 0 with
  probability 0.1), so operands such as ``0300+0005`` are a pattern it rarely shows; the more
  zeros, the lower v_ref (on the cached reference: log10 v_ref from about -0.2 down to -7);
* **long** candidates: ``long_candidates`` uniform problems with 5-digit operands, one more than
  any SFT example (the zero-pass study's hard set): log10 v_ref below -30.

Candidates are deduplicated in draw order, every prompt of the SFT task's drawn region (SFT
rows, held-out and validation rows) is left out, and each bin keeps its first ``train`` then
``test`` candidates in draw order (:func:`fill_bins`). A bin with too few candidates raises
``RuntimeError`` naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm.rewards.scratchpad import scratchpad_solution
from astarpo.llm.toy.problems import scratchpad_task
from astarpo.llm.toy.tasks import get_task
from experiments.harness.protocol import HELD, REF_SEED, SFT
from experiments.ladder.config import LadderConfig, bin_label, parse_bin

__all__ = ["FIELDS", "draw_candidates", "fill_bins", "load_reference", "short_bins"]
__all__ += ["read_prompts", "write_prompts", "zero_rich"]

#: The fields of a row of ``ladder_prompts.jsonl``, in order.
FIELDS = ("bin", "split", "prompt", "answer", "gold_response", "v_ref")


def zero_rich(n: int, digits: int, low: float, high: float, seed: int) -> list[dict[str, str]]:
    """``n`` problems (duplicates possible) whose operands' digits are 0 with chance ``p ~
    U[low, high]`` (one ``p`` per problem), else uniform in 1..9.

    Returns:
        Rows ``{"prompt": "0300+0005=", "answer": worked solution}``.
    """
    rng = np.random.default_rng(seed)
    p = rng.uniform(low, high, size=(n, 1, 1))
    zero = rng.random((n, 2, digits)) < p
    values = np.where(zero, 0, rng.integers(1, 10, size=(n, 2, digits)))
    ops = (values * 10 ** np.arange(digits)).sum(axis=2)
    rows = []
    for a, b in ops.tolist():
        rows.append({"prompt": f"{a:0{digits}d}+{b:0{digits}d}=",
                     "answer": scratchpad_solution(a, b, digits)})  # fmt: skip
    return rows


def draw_candidates(
    cfg: LadderConfig, top_up: int = 0, drawn: Sequence[dict[str, str]] = ()
) -> list[dict[str, str]]:
    """The zero-rich then the long candidates (see the module doc), deduplicated in draw order,
    without any prompt of the SFT task's drawn region. Rows: ``prompt``, ``answer``.

    With ``top_up = k > 0``: ``candidates`` more zero-rich problems of seed ``seed + 7919 k``
    (no long ones), without the SFT region's prompts and those ``drawn`` already."""
    seen = {r["prompt"] for r in get_task(cfg.protocol().task).rows(HELD + SFT, REF_SEED)}
    seen |= {r["prompt"] for r in drawn}
    seed = cfg.seed + 7919 * top_up
    rows = zero_rich(cfg.candidates, cfg.digits, cfg.zero_low, cfg.zero_high, seed)
    if not top_up:
        rows += scratchpad_task(cfg.long_candidates, seed=cfg.seed + 1, digits=cfg.long_digits)
    out = []
    for r in rows:
        if r["prompt"] not in seen:
            seen.add(r["prompt"])
            out.append({"prompt": r["prompt"], "answer": r["answer"]})
    return out


def short_bins(logp: np.ndarray, cfg: LadderConfig) -> list[str]:
    """The labels of the bins of ``cfg`` that hold fewer than ``train + test`` of the
    candidates whose natural-log v_ref is ``logp``."""
    log10, need, short = logp / math.log(10.0), cfg.train + cfg.test, []
    for spec in cfg.bins:
        hi, lo = parse_bin(spec)
        if int(np.count_nonzero((log10 <= hi) & (log10 > lo))) < need:
            short.append(bin_label(spec))
    return short


def fill_bins(
    rows: Sequence[dict[str, str]], logp: np.ndarray, cfg: LadderConfig
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each bin's first ``train`` then ``test`` candidates (``logp``: their natural-log v_ref).

    Returns:
        ``(rows, info)``: rows with :data:`FIELDS`, bin by bin; per bin label, ``candidates``
        (how many fell in it) and the kept prompts' ``log10_v_ref_min/max``.

    Raises:
        RuntimeError: a bin holds fewer than ``train + test`` candidates.
    """
    log10 = logp / math.log(10.0)
    need, kept, info = cfg.train + cfg.test, [], {}
    for spec in cfg.bins:
        hi, lo = parse_bin(spec)
        label = bin_label(spec)
        inside = np.flatnonzero((log10 <= hi) & (log10 > lo))
        if len(inside) < need:
            raise RuntimeError(
                f"bin {label} holds {len(inside)} of {len(rows)} candidates; {need} are needed. "
                "Raise candidates (or long_candidates for a bin below -30)."
            )
        for j, i in enumerate(inside[:need].tolist()):
            row: dict[str, Any] = {"bin": label, "split": "train" if j < cfg.train else "test"}
            row.update(prompt=rows[i]["prompt"], answer=rows[i]["answer"])
            row.update(gold_response=rows[i]["answer"], v_ref=math.exp(float(logp[i])))
            kept.append(row)
        info[label] = {"candidates": len(inside), "hi": hi, "lo": lo}
        info[label]["log10_v_ref_max"] = float(log10[inside[:need]].max())
        info[label]["log10_v_ref_min"] = float(log10[inside[:need]].min())
    return kept, info


def load_reference(path: str | Path) -> tuple[Any, Any]:
    """``(model in eval mode, tokenizer)`` of a saved ``reference/`` folder, both read by the
    library's loaders (:func:`~astarpo.llm.models.loading.load_tokenizer` reads the character
    tokenizer as written, with the worked solutions' spaces)."""
    from astarpo.llm.models.loading import load_pretrained_model, load_tokenizer

    folder = str(Path(path))
    return load_pretrained_model(folder).eval(), load_tokenizer(folder)


def write_prompts(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``ladder_prompts.jsonl``: one JSON object per row with exactly :data:`FIELDS`."""
    path.write_text("".join(json.dumps({f: r[f] for f in FIELDS}) + "\n" for r in rows))


def read_prompts(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``ladder_prompts.jsonl`` (or of its ``ladder_samples.jsonl``)."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
