r"""What the runs of a study measure: :class:`PeakRSS` (memory), :func:`timed_stage1`,
:func:`sample_scores` (one scored sample per prompt and its :math:`\log \pi - \log \pi_{ref}`),
:func:`evaluate_policy` (held-out accuracy and KL through :mod:`astarpo.llm.eval`),
:func:`evaluate_sets` (exact held-out curves from the gold response's probability),
:class:`SuccessCounter` (a reward that counts successes per prompt kind) and :func:`alternate`
(steps timed side by side, for the micro-benchmarks).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from astarpo.llm import (
    HFGenerator,
    SamplingConfig,
    ValueTable,
    answer_probability,
    build_generator,
    estimate_values,
    evaluate,
    get_task,
    model_name,
    peak_memory,
    reward_name,
    sample_and_score,
    sequence_logprobs,
    timed,
)
from experiments.harness.protocol import Protocol

__all__ = ["PeakRSS", "SuccessCounter", "alternate", "evaluate_policy", "evaluate_sets"]
__all__ += ["gold_logprobs", "sample_scores", "timed_stage1"]


class PeakRSS:
    """Peak *current* resident memory (MiB) while the ``with`` block runs (``ru_maxrss`` is a
    lifetime peak): ``/proc/self/statm`` read every ``interval`` s by a thread, ``start_mb`` on
    entry, ``peak_mb`` the largest sample; ``paused`` leaves a phase out."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval, self.start_mb, self.peak_mb, self.paused = interval, 0.0, 0.0, False
        self._stop = threading.Event()

    @staticmethod
    def current_mb() -> float:
        """Current resident set size in MiB (without ``/proc``: the lifetime peak)."""
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
        except OSError:
            return peak_memory(torch.device("cpu"))["memory/rss_peak_mb"]

    def _sample(self) -> None:
        if not self.paused:
            self.peak_mb = max(self.peak_mb, self.current_mb())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakRSS:
        self.start_mb = self.peak_mb = self.current_mb()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def timed_stage1(
    ref: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    cfg: Protocol,
    path: Path,
    seed: int,
    shard: tuple[int, int] | None = None,
    arm: str = "astarpo",
) -> tuple[ValueTable, float]:
    """``(table, seconds)`` of Stage 1 on ``rows`` from scratch (``path`` overwritten) on
    ``cfg.train.backend`` (a vLLM engine starts under ``path.parent``, timed: a run pays it; it is
    closed before the function returns), under run ``arm``'s rule
    (``cfg.stage1_config(seed, arm)``); with ``shard = (i, k)``, only shard ``i``'s prompts,
    into ``path``'s part file. The table records ``ref``'s name (``config._name_or_path``),
    which training checks against its own reference's."""
    path.unlink(missing_ok=True)
    times: dict[str, float] = {}
    with timed(times, "stage1", next(ref.parameters()).device):  # CUDA synchronized
        workdir, batch = path.parent / f"vllm_{path.stem}", cfg.train.generation_batch_size
        gen = build_generator(
            cfg.train.backend, ref, tokenizer, batch_size=batch, seed=seed, workdir=workdir
        )
        reward = [get_task(cfg.task).reward]
        stage1 = cfg.stage1_config(seed, arm)
        try:
            name = model_name(ref)
            prov = {"model": name} if name else None
            table = estimate_values(
                gen, rows, reward, stage1, out_path=path, shard=shard, provenance=prov
            )
        finally:  # a vLLM engine would hold its KV cache beside the training engine's
            close = getattr(gen, "close", None)
            if close is not None:
                close()
    return table, times["time/stage1"]


def sample_scores(
    model: Any,
    ref: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    cfg: Protocol,
    seed: int,
    reward: Any = None,
) -> dict[str, np.ndarray]:
    """One response per row at temperature 1: ``reward`` (the task's or ``reward``, with the
    deadline), ``log_ratio`` (``log pi - log pi_ref``), ``tokens`` and ``truncated``, ``[B]``."""
    gen = HFGenerator(model, tokenizer, cfg.train.generation_batch_size)
    rewards = [reward or get_task(cfg.task).reward]
    sampling = SamplingConfig(cfg.train.max_new_tokens)
    scored = sample_and_score(
        gen.generate, rows, 1, sampling, seed, rewards, timeout=cfg.train.reward_timeout
    )
    out, pad = scored.rollout, int(tokenizer.pad_token_id)
    with torch.no_grad():
        logp = sequence_logprobs(model, out.prompt_ids, out.response_ids, pad).logp
        logp_ref = sequence_logprobs(ref, out.prompt_ids, out.response_ids, pad).logp
    return {
        "reward": scored.rewards,
        "log_ratio": (logp - logp_ref).double().cpu().numpy(),
        "tokens": np.array([len(r) for r in out.response_ids], dtype=np.float64),
        "truncated": np.array(out.truncated, dtype=bool),
    }


def evaluate_policy(
    model: Any,
    ref: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    cfg: Protocol,
    seed: int,
    hard: list[bool] | None = None,
) -> dict[str, float]:
    """Held-out accuracy of ``model`` and its KL to ``ref`` (the task's reward): ``accuracy``
    (greedy), ``sampled_accuracy`` (one sample at temperature 1, seed ``seed + 1``),
    ``expected_accuracy`` (mean answer probability, the curves' targets), ``kl`` (mean
    ``log pi - log pi_ref`` of the samples), ``response_tokens_p50``/``_p90``,
    ``truncated_rate`` and, where ``hard`` marks some rows, ``hard_(expected_)accuracy``."""
    was_training = model.training
    model.eval()
    gen = HFGenerator(model, tokenizer, cfg.train.generation_batch_size)
    greedy = evaluate(
        gen,
        rows,
        [get_task(cfg.task).reward],
        sampling=SamplingConfig(cfg.train.max_new_tokens, 0.0),
        seed=seed,
        batch_size=cfg.train.generation_batch_size,
        progress=False,
        reward_timeout=cfg.train.reward_timeout,
    )
    correct = np.array(greedy["correct"], dtype=np.float64)
    sampled = sample_scores(model, ref, tokenizer, rows, cfg, seed + 1)
    prob = answer_probability(model, tokenizer, rows).double().numpy()
    res = {
        "accuracy": float(correct.mean()),
        "sampled_accuracy": float(sampled["reward"].mean()),
        "expected_accuracy": float(prob.mean()),
        "kl": float(sampled["log_ratio"].mean()),
        "response_tokens_p50": float(np.percentile(sampled["tokens"], 50)),
        "response_tokens_p90": float(np.percentile(sampled["tokens"], 90)),
        "truncated_rate": float(sampled["truncated"].mean()),
    }
    if hard is not None and any(hard):
        res["hard_accuracy"] = float(correct[np.array(hard)].mean())
        res["hard_expected_accuracy"] = float(prob[np.array(hard)].mean())
    model.train(was_training)
    return res


def alternate(
    steps: dict[str, Any], rounds: int, warmup: int = 0
) -> dict[str, dict[str, list[float]]]:
    """Call ``steps[name](i)`` for every name in turn, ``warmup + rounds`` times (so that a load
    change hits all of them). Returns, per name over the timed rounds, ``wall`` and ``cpu``
    seconds and every number the call returned in a dict (``time/generate``, ...)."""
    out: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in steps}
    for i in range(warmup + rounds):
        for name, step in steps.items():
            t0, c0 = time.perf_counter(), time.process_time()
            record = step(i)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if i >= warmup:
                numbers = {k: v for k, v in (record or {}).items() if isinstance(v, (int, float))}
                for k, v in {"wall": wall, "cpu": cpu, **numbers}.items():
                    out[name].setdefault(k, []).append(float(v))
    return out


def gold_logprobs(
    model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], batch: int = 256
) -> np.ndarray:
    r""":math:`\log \pi(a \oplus \mathrm{EOS} \mid x)` of each row's gold answer ``a``
    (``row["answer"]``) given its ``prompt``, by teacher forcing, float64 ``[B]`` (below
    ``answer_probability``'s float32 range): ``exp`` of it is the expected sampled accuracy of
    an exact-match reward, and under the reference the prompt's exact :math:`v_{ref}`."""
    out = []
    pad, eos = int(tokenizer.pad_token_id), int(tokenizer.eos_token_id)
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        prompts = tokenizer([r["prompt"] for r in part], add_special_tokens=False)["input_ids"]
        answers = tokenizer([str(r["answer"]) for r in part], add_special_tokens=False)
        responses = [[*a, eos] for a in answers["input_ids"]]
        with torch.no_grad():
            out.append(sequence_logprobs(model, prompts, responses, pad).logp.double().cpu())
    return torch.cat(out).numpy() if out else np.zeros(0)


class SuccessCounter:
    """``reward``, counting samples and successes (reward > 0) per prompt kind: ``"hard"`` for
    the prompts of ``hard``, else ``"easy"``; its scores, name, module and qualified name are
    ``reward``'s (so the V* table's provenance check sees the reward it computes).

    Args:
        reward: The task's reward (TRL signature, takes ``truncated``).
        hard: The hard prompts (exact texts).
    """

    def __init__(self, reward: Any, hard: Sequence[str]) -> None:
        self.reward, self.hard = reward, frozenset(hard)
        self.samples, self.successes = {"hard": 0, "easy": 0}, {"hard": 0, "easy": 0}
        self.__name__ = reward_name(reward)
        self.__module__ = str(getattr(reward, "__module__", type(reward).__module__))
        self.__qualname__ = str(getattr(reward, "__qualname__", self.__name__))

    def __call__(
        self,
        prompts: Sequence[str],
        completions: Sequence[str],
        answer: Sequence[Any],
        truncated: Sequence[bool] | None = None,
        **columns: Any,
    ) -> list[float | None]:
        """Score like ``reward`` and count (``columns`` other than ``report`` are ignored)."""
        scores = self.reward(
            prompts, completions, answer, truncated=truncated, report=columns.get("report")
        )
        for prompt, score in zip(prompts, scores, strict=True):
            kind = "hard" if prompt in self.hard else "easy"
            self.samples[kind] += 1
            self.successes[kind] += int((score or 0.0) > 0)
        return list(scores)


def evaluate_sets(
    model: Any, tokenizer: Any, held_out: dict[str, list[dict[str, Any]]]
) -> dict[str, float]:
    """``{kind}_expected_accuracy`` (mean gold probability) and ``{kind}_log10_gold`` (mean
    log10 of it) for each held-out set ``kind`` (``"hard"``, ``"easy"``)."""
    was_training, res = model.training, {}
    model.eval()
    for kind, rows in held_out.items():
        lp = gold_logprobs(model, tokenizer, rows)
        res[f"{kind}_expected_accuracy"] = float(np.exp(lp).mean())
        res[f"{kind}_log10_gold"] = float(lp.mean() / math.log(10.0))
    model.train(was_training)
    return res
