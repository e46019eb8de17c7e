"""Measurements of the efficiency benchmark: peak resident memory, held-out accuracy and KL.

:class:`PeakRSS` samples the resident memory of the process during training;
:func:`evaluate_policy` is the held-out evaluation every run performs on the time schedule of
``eval_every_seconds`` (outside the timed training).
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from typing import Any

import numpy as np
import torch

from astarpo.llm.bench.config import BenchConfig
from astarpo.llm.eval import answer_probability
from astarpo.llm.models.logprobs import sequence_logprobs
from astarpo.llm.rollout.base import SamplingConfig
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.toy.tasks import get_task

__all__ = ["PeakRSS", "evaluate_policy"]


class PeakRSS:
    """Peak *current* resident memory of this process while the ``with`` block runs.

    ``ru_maxrss`` is a lifetime peak, usually set by importing and loading (a tiny model's
    training never exceeds it), so a thread reads ``/proc/self/statm`` every ``interval``
    seconds instead. ``start_mb`` is the resident size on entry, ``peak_mb`` the largest sample;
    ``peak_mb - start_mb`` is what training added. Where ``/proc`` is missing (macOS), both fall
    back to ``ru_maxrss``.
    """

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.start_mb = 0.0
        self.peak_mb = 0.0
        self._stop = False
        self._thread: Any = None
        self.paused = False  # set True to ignore a phase (e.g. evaluation)

    @staticmethod
    def current_mb() -> float:
        """Current resident set size in MiB."""
        try:
            with open("/proc/self/statm") as f:
                pages = int(f.read().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return rss / 2**20 if sys.platform == "darwin" else rss / 1024

    def _loop(self) -> None:
        while not self._stop:
            if not self.paused:
                self.peak_mb = max(self.peak_mb, self.current_mb())
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        self.start_mb = self.peak_mb = self.current_mb()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()
        if not self.paused:
            self.peak_mb = max(self.peak_mb, self.current_mb())


def evaluate_policy(
    model: Any,
    ref: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    cfg: BenchConfig,
    seed: int,
    hard: list[bool] | None = None,
) -> dict[str, float]:
    """Held-out accuracy of ``model`` and its KL to ``ref``, scored by the task's reward.

    Returns:
        ``accuracy`` (greedy exact match), ``sampled_accuracy`` (one sample at temperature 1),
        ``expected_accuracy`` (mean :func:`~astarpo.llm.eval.answer_probability`: the sampled
        accuracy without sampling noise, the curve the targets are read on), ``kl`` (mean of
        ``log pi - log pi_ref`` on the sampled responses), ``response_tokens_p50`` and
        ``response_tokens_p90`` (median and 90th percentile of the sampled responses' tokens,
        EOS included), ``truncated_rate`` (sampled responses without EOS) and, when ``hard``
        marks a non-empty subset, ``hard_accuracy`` and ``hard_expected_accuracy`` on it.
    """
    was_training = model.training
    model.eval()
    gen = HFGenerator(model, tokenizer, cfg.generation_batch_size)
    prompts = [r["prompt"] for r in rows]
    answers = [r["answer"] for r in rows]
    reward = get_task(cfg.task).reward
    greedy = gen.generate(prompts, 1, SamplingConfig(cfg.max_new_tokens, 0.0), seed)
    correct = [
        c or 0.0 for c in reward(prompts, greedy.completions, answers, truncated=greedy.truncated)
    ]
    sampled = gen.generate(prompts, 1, SamplingConfig(cfg.max_new_tokens, 1.0), seed + 1)
    sampled_ok = [
        c or 0.0 for c in reward(prompts, sampled.completions, answers, truncated=sampled.truncated)
    ]
    lengths = np.array([len(r) for r in sampled.response_ids], dtype=np.float64)
    pad = int(tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(model, sampled.prompt_ids, sampled.response_ids, pad).logp
        logp_ref = sequence_logprobs(ref, sampled.prompt_ids, sampled.response_ids, pad).logp
    prob = answer_probability(model, tokenizer, rows)
    res = {
        "accuracy": float(sum(correct) / len(rows)),
        "sampled_accuracy": float(sum(sampled_ok) / len(rows)),
        "expected_accuracy": float(prob.mean()),
        "kl": float((logp - logp_ref).mean()),
        "response_tokens_p50": float(np.percentile(lengths, 50)),
        "response_tokens_p90": float(np.percentile(lengths, 90)),
        "truncated_rate": float(np.mean(sampled.truncated)),
    }
    if hard is not None and any(hard):
        idx = [i for i, h in enumerate(hard) if h]
        res["hard_accuracy"] = float(sum(correct[i] for i in idx) / len(idx))
        res["hard_expected_accuracy"] = float(prob[idx].mean())
    model.train(was_training)
    return res
