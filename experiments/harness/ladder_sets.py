r"""The v_ref ladder's prompt sets: scratchpad prompts binned by the reference's exact solve
probability, its settings (:class:`LadderConfig`) and its files.

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

**Top-ups** (``top_ups`` rounds, the quick ladder's): a stronger reference leaves the hard bins
nearly empty, and no number of draws of the same problems fills them: under a reference
fine-tuned from another SFT seed, 59,515 zero-rich candidates held none in [-4,-6), and a greedy
descent over one-digit changes stalled at log10 v_ref = -4.06. Problems with shorter operands
than any SFT example (2 and 3 digits) lie below, from about -5 down. So while a bin is short,
each round (:func:`~experiments.harness.ladder_search.seek_candidates`) scores the one-digit
neighbours of the candidates nearest the bin from above and from below, not yet expanded: the
search walks up from the short operands and down from the 4-digit ones until the bin holds
enough. The first round also seeds problems of 2- and 3-digit operands. Draw order is kept, so a
bin the draw filled keeps the same prompts; a searched bin can mix operand widths (each row's
prompt says its width).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from astarpo import doc_field
from astarpo.llm import (
    SCRATCHPAD_DIGITS,
    get_task,
    load_pretrained_model,
    load_tokenizer,
    scratchpad_solution,
    scratchpad_task,
)
from experiments.harness.config import StudyConfig, check_integers, nested
from experiments.harness.protocol import HELD, REF_SEED, SFT, Protocol

__all__ = [
    "BINS",
    "FIELDS",
    "QUICK",
    "LadderConfig",
    "bin_label",
    "bin_labels",
    "bin_spec",
    "draw_candidates",
    "excluded_prompts",
    "fill_bins",
    "load_reference",
    "new_rows",
    "parse_bin",
    "read_prompts",
    "short_bins",
    "write_prompts",
    "zero_rich",
]

#: The bins a ladder can be built on (the long candidates fill the last one).
BINS = ("0:-1", "-1:-2", "-2:-3", "-3:-4", "-4:-6", "-30:-inf")
#: The fields of a row of ``ladder_prompts.jsonl``, in order.
FIELDS = ("bin", "split", "prompt", "answer", "gold_response", "v_ref")


def parse_bin(text: str) -> tuple[float, float]:
    """``(hi, lo)`` of a bin written ``"HI:LO"`` (log10 v_ref, ``hi > lo``; ``LO`` may be
    ``-inf``): the bin holds ``lo < log10 v_ref <= hi``. ``ValueError`` for another text."""
    parts = text.split(":")
    try:
        hi, lo = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"a bin is 'HI:LO' (log10 v_ref, e.g. '-1:-2'), got {text!r}.") from None
    if not (math.isfinite(hi) and hi <= 0 and lo < hi and not math.isnan(lo)):
        raise ValueError(f"a bin 'HI:LO' needs 0 >= HI > LO (LO may be -inf), got {text!r}.")
    return hi, lo


def bin_label(text: str) -> str:
    """The label of bin ``"HI:LO"``: ``"[-1,-2)"`` (``hi`` included), ``"<=-30"`` for
    ``LO = -inf``."""
    hi, lo = parse_bin(text)
    return f"<={hi:g}" if lo == -math.inf else f"[{hi:g},{lo:g})"


def bin_spec(label: str) -> str:
    """The bin ``"HI:LO"`` of a label (``"[-1,-2)"`` -> ``"-1:-2"``, ``"<=-30"`` ->
    ``"-30:-inf"``); a ``"HI:LO"`` as it is. ``ValueError`` for another text."""
    text = label.strip()
    if text.startswith("<="):
        spec = f"{text[2:]}:-inf"
    elif text.startswith("[") and text.endswith(")") and text.count(",") == 1:
        spec = ":".join(text[1:-1].split(","))
    else:
        spec = text
    parse_bin(spec)  # a ValueError for another text
    return spec


def bin_labels(items: tuple[str, ...] | str) -> tuple[str, ...]:
    """Ladder bin labels of ``items``: a label (``"[-2,-3)"``, ``"<=-30"``) as it is, a bin
    ``"HI:LO"`` as its label (``"-2:-3"`` -> ``"[-2,-3)"``), and the two halves of a label a
    comma-separated command line split (``"[-2"``, ``"-3)"``) joined again."""
    out: list[str] = []
    for item in (items,) if isinstance(items, str) else items:
        text = str(item).strip()
        if out and out[-1].startswith("[") and not out[-1].endswith(")"):
            out[-1] = f"{out[-1]},{text}"
        else:
            out.append(bin_label(text) if ":" in text else text)
    return tuple(out)


#: The protocol of the ladder's reference: the scratchpad task (the efficiency and zero-pass
#: studies' reference, from the same cache) with a budget for the long candidates' gold
#: responses (``16 d + 6`` tokens with EOS for ``d = 5`` digits, plus 8).
PROTOCOL = Protocol.from_dict(
    dict(
        task="scratchpad",
        max_new_tokens=16 * (SCRATCHPAD_DIGITS + 1) + 6 + 8,
        sft_lr=get_task("scratchpad").sft_lr,
        generation_batch_size=2048,
    )
)


@dataclass(frozen=True)
class LadderConfig(StudyConfig):
    """Settings of the ladder (:func:`~experiments.harness.ladder_build.build_ladder`; each
    field's help says what it does).

    Bins are ``"HI:LO"`` strings (``lo < log10 v_ref <= hi``), disjoint; ``train`` and
    ``test`` prompts are kept per bin; the candidates are drawn as the module doc says. The
    reference is ``protocol``'s.
    """

    bins: tuple[str, ...] = doc_field(
        ("-1:-2", "-2:-3", "-3:-4", "-4:-6", "-30:-inf"),
        "Bins of log10 v_ref, each 'HI:LO' (LO < log10 v_ref <= HI; LO may be -inf); on the "
        "command line with '=' (--bins=-1:-2,-30:-inf), as the values start with '-'.",
    )
    train: int = doc_field(200, "Training prompts per bin (>= 200 in the full run).")
    test: int = doc_field(200, "Held-out prompts per bin (>= 200 in the full run).")
    candidates: int = doc_field(
        120000, "Zero-rich 4-digit candidates drawn (before dedup: about 45000 distinct)."
    )
    long_candidates: int = doc_field(1000, "5-digit candidates drawn (the zero-pass regime).")
    top_ups: int = doc_field(
        0,
        "Rounds of search while a bin holds too few (a stronger reference leaves fewer hard "
        "ones): each scores the one-digit neighbours of the candidates nearest the bin, the "
        "first also 2- and 3-digit problems (the module doc); 0: the sets as drawn.",
    )
    zero_low: float = doc_field(0.5, "Lowest chance that a digit of a zero-rich operand is 0.")
    zero_high: float = doc_field(0.95, "Highest chance that a digit of a zero-rich operand is 0.")
    seed: int = doc_field(30, "Seed of the candidates' draw.")
    sample_seed: int = doc_field(31, "Seed of the pass@k samples.")
    k: int = doc_field(64, "Reference samples per prompt (pass@k = 0 for k = 8 and k).")
    batch: int = doc_field(256, "Sequences per teacher-forced forward pass.")
    protocol: Protocol = nested(
        PROTOCOL,
        {
            "generation_batch_size": "train.generation_batch_size",
            "threads": "threads",
            "rerun_slow": "rerun_slow",
        },
    )

    def __post_init__(self) -> None:
        """Check the fields (``ValueError`` naming the first that is wrong)."""
        super().__post_init__()
        check_integers(self, train=1, test=1, candidates=1, long_candidates=1, top_ups=0)
        check_integers(self, seed=0, sample_seed=0, k=8, batch=1)
        if not isinstance(self.bins, tuple) or not self.bins:
            raise ValueError(f"bins must be a non-empty tuple of 'HI:LO', got {self.bins!r}.")
        edges = sorted((parse_bin(b) for b in self.bins), reverse=True)
        for (_, lo), (hi, _) in itertools.pairwise(edges):
            if hi > lo:
                raise ValueError(f"bins must not overlap, got {self.bins!r}.")
        if len(set(self.bins)) != len(self.bins):
            raise ValueError(f"bins must be distinct, got {self.bins!r}.")
        if not 0 <= self.zero_low <= self.zero_high < 1:
            raise ValueError(
                f"0 <= zero_low <= zero_high < 1 is required, got {self.zero_low} and "
                f"{self.zero_high}."
            )

    @property
    def digits(self) -> int:
        """Operand digits of the zero-rich candidates: the SFT data's."""
        return SCRATCHPAD_DIGITS

    @property
    def long_digits(self) -> int:
        """Operand digits of the long candidates: one more than every SFT example's."""
        return SCRATCHPAD_DIGITS + 1


#: ``--quick``: every bin, 6 + 6 prompts each, topped up by search while a bin is short (a
#: reference SFT'd on another machine can be stronger: fewer hard candidates).
QUICK: dict[str, Any] = dict(train=6, test=6, candidates=24000, long_candidates=200, top_ups=6)


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


def excluded_prompts(cfg: LadderConfig) -> set[str]:
    """The prompts no ladder holds: the SFT task's drawn region (SFT, held-out and validation
    rows) of ``cfg.protocol``'s task."""
    return {r["prompt"] for r in get_task(cfg.protocol.task).rows(HELD + SFT, REF_SEED)}


def new_rows(rows: Sequence[dict[str, str]], taken: set[str]) -> list[dict[str, str]]:
    """``rows`` whose prompt is not in ``taken``, first of each prompt, as ``prompt`` and
    ``answer`` (``taken`` gains them)."""
    out = []
    for r in rows:
        if r["prompt"] not in taken:
            taken.add(r["prompt"])
            out.append({"prompt": r["prompt"], "answer": r["answer"]})
    return out


def draw_candidates(cfg: LadderConfig) -> list[dict[str, str]]:
    """The zero-rich then the long candidates (see the module doc), deduplicated in draw order,
    without any prompt of the SFT task's drawn region. Rows: ``prompt``, ``answer``."""
    rows = zero_rich(cfg.candidates, cfg.digits, cfg.zero_low, cfg.zero_high, cfg.seed)
    rows += scratchpad_task(cfg.long_candidates, seed=cfg.seed + 1, digits=cfg.long_digits)
    return new_rows(rows, excluded_prompts(cfg))


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
                "Raise top_ups (--top-ups, rounds of search toward a short bin) or candidates "
                "(long_candidates for a bin below -30)."
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
    library's loaders (:func:`astarpo.llm.load_tokenizer` reads the character tokenizer as
    written, with the worked solutions' spaces)."""
    folder = str(Path(path))
    return load_pretrained_model(folder).eval(), load_tokenizer(folder)


def write_prompts(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``ladder_prompts.jsonl``: one JSON object per row with exactly :data:`FIELDS`."""
    path.write_text("".join(json.dumps({f: r[f] for f in FIELDS}) + "\n" for r in rows))


def read_prompts(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``ladder_prompts.jsonl`` (or of its ``ladder_samples.jsonl``);
    ``ValueError`` naming the file and the line that is not a JSON object (a truncated
    file)."""
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path}: line {i} is not JSON ({e}); the file is cut short or damaged: build "
                "the ladder again (python -m experiments.ladder --overwrite)."
            ) from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}: line {i} is not a JSON object; build the ladder again.")
        rows.append(row)
    return rows
