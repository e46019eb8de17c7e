r"""pass@k of the ladder's bins by sampling, and its agreement with the computed v_ref.

For a prompt solved with probability :math:`v` per sample, ``k`` independent samples all fail
with probability :math:`q = (1 - v)^k`. Over a bin's prompts, the number with pass@k = 0 is
then a Poisson-binomial count :math:`X = \sum_i B_i`, :math:`B_i \sim \mathrm{Bernoulli}(q_i)`,
of mean :math:`\sum_i q_i` and variance :math:`\sum_i q_i (1 - q_i)`; :func:`agreement` gives
its exact two-sided p-value at the observed count (:func:`poisson_binomial`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from astarpo.llm.rollout.base import SamplingConfig, derive_seed
from astarpo.llm.rollout.hf import HFGenerator
from astarpo.llm.rollout.scored import sample_and_score
from astarpo.llm.toy.tasks import get_task
from experiments.harness.protocol import Protocol

__all__ = ["agreement", "pass_summary", "poisson_binomial", "sample_successes"]


def sample_successes(
    ref: Any,
    tokenizer: Any,
    rows: Sequence[dict[str, Any]],
    k: int,
    cfg: Protocol,
    seed: int,
) -> np.ndarray:
    """``k`` reference samples per row at temperature 1 (budget ``cfg.max_new_tokens``), scored
    by the task's reward (:func:`~astarpo.llm.rollout.scored.sample_and_score`).

    Returns:
        Boolean ``[P, k]``: sample ``j`` of row ``i`` solved it (reward > 0).
    """
    if not rows:
        return np.zeros((0, k), dtype=bool)
    gen = HFGenerator(ref, tokenizer, cfg.generation_batch_size)
    sampling, reward = SamplingConfig(cfg.max_new_tokens), [get_task(cfg.task).reward]
    scored = sample_and_score(
        gen.generate, rows, k, sampling, derive_seed(seed, "ladder"), reward,
        timeout=cfg.reward_timeout,
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
