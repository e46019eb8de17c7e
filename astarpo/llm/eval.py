"""Accuracy on benchmark files: greedy pass@1 and sampled avg@k, and the paper-style table.

A response is *correct* when its summed reward is > 0 (math-verify gives 1 or 0). For ``P``
prompts with ``k`` responses each and ``c_i`` correct responses for prompt ``i``:

* ``accuracy`` (avg@k) :math:`= \\frac{1}{P} \\sum_i c_i / k`; with ``k = 1`` and greedy decoding
  this is pass@1.
* ``pass_at_k`` :math:`= \\frac{1}{P} \\sum_i [c_i > 0]` (any of the k responses correct).

The paper's benchmarks ship with the package (``astarpo/llm/data/benchmarks``, provenance in its
README) and are named in :data:`BENCHMARKS`; AMC23 is scored as avg@32 by default (as in the
paper) and the others as greedy pass@1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from astarpo.llm.data.prompts import benchmark_path, load_prompts
from astarpo.llm.data.rows import check_reward_columns
from astarpo.llm.parallel.progress import progress_bar
from astarpo.llm.rollout.backend import named_generator
from astarpo.llm.rollout.base import SamplingConfig, derive_seed
from astarpo.llm.rollout.scored import sample_and_score

__all__ = [
    "BENCHMARKS",
    "GREEDY",
    "PROMPTS_PER_CALL",
    "SAMPLED",
    "Benchmark",
    "answer_probability",
    "evaluate",
    "evaluate_benchmarks",
    "resolve_benchmarks",
]


GREEDY = SamplingConfig(1024, 0.0, 1.0)
"""The sampling of pass@1 (k = 1): greedy, 1024 new tokens (the paper's evaluation)."""
SAMPLED = SamplingConfig(1024, 0.6, 0.95)
"""The sampling of avg@k (k > 1): temperature 0.6, top-p 0.95, 1024 new tokens (the paper's)."""
PROMPTS_PER_CALL = 32
"""Default prompts per ``generate`` call of :func:`evaluate` (``astarpo eval
--prompts-per-call``)."""


@dataclass(frozen=True)
class Benchmark:
    """A set of prompts to evaluate: a benchmark file shipped with the package, or any prompt
    file (:meth:`from_file`).

    Args:
        name: Short name used on the command line, in tables and as the result's key.
        path: File name in the package's ``benchmarks`` folder (see
            :func:`~astarpo.llm.data.prompts.benchmark_path`), or, with ``packaged=False``, the
            path of a prompt file (JSONL, JSON, Parquet, a ``save_to_disk`` folder, ``hf:...``).
        k: Default responses per prompt: 1 = greedy pass@1, > 1 = sampled avg@k.
        title: Column title in the table.
        packaged: Whether ``path`` names a packaged file (default) or a file of the user's.
    """

    name: str
    path: str
    k: int = 1
    title: str = ""
    packaged: bool = True

    @classmethod
    def from_file(cls, path: str | Path) -> Benchmark:
        """A prompt file of the user's as a benchmark: named and titled by its stem, k = 1."""
        stem = Path(path).stem
        return cls(stem, str(path), 1, stem, packaged=False)

    @property
    def file(self) -> Path | str:
        """What :func:`~astarpo.llm.data.prompts.load_prompts` reads: the packaged file
        (:func:`~astarpo.llm.data.prompts.benchmark_path`) or the user's path as given."""
        return benchmark_path(self.path) if self.packaged else self.path


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark("math500", "math500.jsonl", 1, "MATH500"),
        Benchmark("minerva", "minervamath.jsonl", 1, "Minerva"),
        Benchmark("olympiadbench", "olympiadbench.jsonl", 1, "OlympiadBench"),
        Benchmark("amc2023", "amc2023.jsonl", 32, "AMC23"),
        Benchmark("aime24", "aime24.jsonl", 1, "AIME24"),
        Benchmark("aime25", "aime25.jsonl", 1, "AIME25"),
        Benchmark("hmmt25_feb", "hmmt25_feb.jsonl", 1, "HMMT25 Feb"),
        Benchmark("hmmt25_nov", "hmmt25_nov.jsonl", 1, "HMMT25 Nov"),
    )
}
"""The paper's benchmarks: name -> :class:`Benchmark`."""

_ALIASES = {"minervamath": "minerva", "amc23": "amc2023", "olympiad": "olympiadbench"}


def resolve_benchmarks(names: str | Sequence[str]) -> list[Benchmark]:
    """Benchmarks from a comma-separated string or a list; ``"all"`` gives every one.

    Raises:
        ValueError: naming an unknown benchmark and listing the known ones.
    """
    items = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    if items == ["all"]:
        return list(BENCHMARKS.values())
    out = []
    for n in items:
        key = _ALIASES.get(n.lower(), n.lower())
        if key not in BENCHMARKS:
            raise ValueError(f"unknown benchmark {n!r}; known: {', '.join(BENCHMARKS)} or 'all'.")
        out.append(BENCHMARKS[key])
    return out


def evaluate(
    generator: Any,
    rows: Sequence[dict[str, Any]],
    reward_funcs: Sequence[Any],
    k: int = 1,
    sampling: Any = None,
    seed: int = 0,
    batch_size: int = PROMPTS_PER_CALL,
    progress: bool = True,
    reward_timeout: float = 600.0,
) -> dict[str, Any]:
    """Generate ``k`` responses per prompt, score them, and report accuracy.

    Args:
        generator: A :class:`~astarpo.llm.rollout.hf.Generator`, or a model name (``"toy"``, a
            directory, a GGUF checkpoint such as ``"smollm2"``) sampled by Hugging Face
            ``generate`` (:func:`~astarpo.llm.rollout.backend.named_generator`).
        rows: Rows with ``prompt`` and the reward columns (e.g. ``answer``), ``[P]``.
        reward_funcs: Reward functions, summed by
            :func:`~astarpo.llm.rewards.scoring.compute_rewards`.
        k: Responses per prompt. ``k == 1`` with greedy sampling is pass@1; ``k > 1`` needs
            ``temperature > 0`` (avg@k).
        sampling: :class:`~astarpo.llm.rollout.hf.SamplingConfig` (default :data:`GREEDY`:
            greedy, 1024 new tokens).
        seed: Seed of the sampled responses (per batch, derived from it).
        batch_size: Prompts per ``generate`` call.
        progress: Show a tqdm bar (off a terminal it refreshes every 30 s).
        reward_timeout: Deadline in seconds of a custom reward's call on a batch (0 = none).

    Returns:
        ``{"n_prompts", "k", "metric" ("pass@1" or "avg@k"), "accuracy", "pass_at_k",
        "mean_reward", "truncated_rate", "mean_response_tokens", "unscored" (reason -> count),
        "correct" (correct responses per prompt, ``[P]``)}``.

    Raises:
        ValueError: if ``rows`` is empty, a row has no ``prompt`` text or lacks a column a
            reward needs (checked before generating), ``k < 1``, or ``k > 1`` with greedy
            decoding.
    """
    if not rows:
        raise ValueError("no rows to evaluate.")
    if k < 1 or batch_size < 1:
        raise ValueError(f"k and batch_size must be >= 1, got {k}, {batch_size}.")
    generator = named_generator(generator)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or not isinstance(row.get("prompt"), str):
            raise ValueError(
                f"rows[{i}] has no 'prompt' text ({row!r:.80}); load the rows with "
                "astarpo.llm.data.load_prompts, which adds it."
            )
    check_reward_columns(reward_funcs, rows)
    sampling = sampling if sampling is not None else GREEDY
    if k > 1 and sampling.greedy:
        raise ValueError(f"avg@{k} needs sampling with temperature > 0; greedy gives k copies.")
    correct: list[int] = []
    rewards_all: list[np.ndarray] = []
    truncated = tokens = 0
    unscored: dict[str, float] = {}
    bar = progress_bar(len(rows), "eval", "prompt", enabled=progress)
    for b, start in enumerate(range(0, len(rows), batch_size)):
        batch = rows[start : start + batch_size]
        seed_b = derive_seed("eval", seed, b)
        scored = sample_and_score(
            generator.generate, batch, k, sampling, seed_b, reward_funcs, timeout=reward_timeout
        )
        rollout = scored.rollout
        for name, v in scored.unscored.items():
            unscored[name] = unscored.get(name, 0.0) + v
        r = scored.by_prompt
        rewards_all.append(r)
        correct.extend(int(c) for c in (r > 0).sum(axis=1))
        truncated += sum(bool(t) for t in rollout.truncated)
        tokens += sum(len(ids) for ids in rollout.response_ids)
        bar.update(len(batch))
    bar.close()
    c = np.array(correct, dtype=np.float64)
    n_resp = len(rows) * k
    return {
        "n_prompts": len(rows),
        "k": k,
        "metric": "pass@1" if k == 1 and sampling.greedy else f"avg@{k}",
        "accuracy": float((c / k).mean()),
        "pass_at_k": float((c > 0).mean()),
        "mean_reward": float(np.concatenate(rewards_all).mean()),
        "truncated_rate": truncated / n_resp,
        "mean_response_tokens": tokens / n_resp,
        "unscored": unscored,
        "correct": correct,
    }


def evaluate_benchmarks(
    generator: Any,
    benchmarks: Sequence[Benchmark],
    reward_funcs: Sequence[Any],
    k: Mapping[str, int] | None = None,
    greedy: Any = None,
    sampled: Any = None,
    seed: int = 0,
    batch_size: int = PROMPTS_PER_CALL,
    limit: int | None = None,
    template: str = "auto",
    progress: bool = True,
    prompt_options: Mapping[str, Any] | None = None,
    reward_timeout: float = 600.0,
) -> dict[str, dict[str, Any]]:
    """:func:`evaluate` on each benchmark; ``k`` overrides the default k by name.

    What ``astarpo eval`` runs, on ``--benchmarks`` as on ``--data`` files
    (:meth:`Benchmark.from_file`): greedy sampling for k = 1, ``sampled`` for k > 1.

    Args:
        generator: The model's :class:`~astarpo.llm.rollout.hf.Generator`, or a model name
            (as in :func:`evaluate`; its tokenizer renders ``chat_template`` prompts when
            ``prompt_options`` names none).
        benchmarks: From :func:`resolve_benchmarks`, or :meth:`Benchmark.from_file` of any
            prompt file.
        reward_funcs: Reward functions (usually ``[math_verify_reward]``).
        k: Name -> responses per prompt, overriding :attr:`Benchmark.k`.
        greedy: Sampling for k = 1 (default :data:`GREEDY`: greedy, 1024 new tokens).
        sampled: Sampling for k > 1 (default :data:`SAMPLED`: temperature 0.6, top_p 0.95,
            1024 new tokens).
        seed: Seed of the sampled responses.
        batch_size: Prompts per ``generate`` call.
        limit: Evaluate only the first ``limit`` prompts of each benchmark (quick runs).
        template: Prompt template (``"auto"`` keeps the files' own instruction).
        progress: Show tqdm bars.
        prompt_options: Other keyword arguments of :func:`~astarpo.llm.data.load_prompts`
            (``tokenizer``, ``chat_template``, ``system_prompt``, ``max_prompt_tokens``, and for
            a file of the user's ``problem_key``, ``answer_key``), e.g. to evaluate an instruct
            model with its chat template.
        reward_timeout: Deadline in seconds of a custom reward's call on a batch (0 = none),
            as in :func:`evaluate`.

    Returns:
        Benchmark name -> the result dict of :func:`evaluate` (plus ``"title"``).
    """
    greedy = greedy if greedy is not None else GREEDY
    sampled = sampled if sampled is not None else SAMPLED
    generator = named_generator(generator)
    options = dict(prompt_options or {})
    if options.get("chat_template") and options.get("tokenizer") is None:
        options["tokenizer"] = getattr(generator, "tokenizer", None)
    out: dict[str, dict[str, Any]] = {}
    for bench in benchmarks:
        kk = (k or {}).get(bench.name, bench.k)
        rows = load_prompts(bench.file, template=template, limit=limit, **options)
        res = evaluate(
            generator,
            rows,
            reward_funcs,
            k=kk,
            sampling=greedy if kk == 1 else sampled,
            seed=seed,
            batch_size=batch_size,
            progress=progress,
            reward_timeout=reward_timeout,
        )
        out[bench.name] = {"title": bench.title or bench.name, **res}
    return out


def answer_probability(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]]) -> Any:
    """Exact-answer probability of every row, ``[B]`` float tensor on the CPU.

    .. math:: p_i = \\pi(a_i \\oplus \\text{EOS} \\mid x_i)

    the probability that one sample at temperature 1 is exactly the answer ``a_i``: the
    expected sampled exact-match accuracy of the row without sampling noise. A response that
    only adds white space, which :func:`~astarpo.llm.rewards.builtin.exact_match_reward` also
    accepts, is not counted, so the mean is a lower bound of the expected sampled accuracy.

    Args:
        model: A causal LM (put it in eval mode for dropout-free scores).
        tokenizer: Its tokenizer (with ``eos_token_id`` and ``pad_token_id``).
        rows: Rows with ``prompt`` and ``answer``.
    """
    import torch

    from astarpo.llm.models.logprobs import sequence_logprobs

    prompts = tokenizer([r["prompt"] for r in rows], add_special_tokens=False)["input_ids"]
    answers = tokenizer([str(r["answer"]) for r in rows], add_special_tokens=False)["input_ids"]
    answers = [[*a, tokenizer.eos_token_id] for a in answers]
    with torch.no_grad():
        out = sequence_logprobs(model, prompts, answers, int(tokenizer.pad_token_id))
    return out.logp.exp().cpu()
