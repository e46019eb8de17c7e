r"""The error of Stage 1's :math:`\hat V^*` against the exact :math:`V^*`, fixed N against adaptive.

For a 0/1 reward whose reference solve rate is :math:`v_{ref}(x)` the exact value is

.. math:: V^*(x) = \beta_1 \log \mathbb E_{\pi_{ref}} e^{r/\beta_1}
                 = \beta_1 \log\big(1 + v_{ref}(x)\,(e^{1/\beta_1} - 1)\big)

(:func:`exact_v_star`). On the scratchpad ladder :math:`v_{ref}` is the teacher-forced
probability of the one gold response, so :math:`V^*` is known exactly and the error of an
estimate from sampled rewards can be measured prompt by prompt.

:func:`estimator_errors` takes ``M`` reference rewards per prompt, drawn once, and reads every
rule from them: fixed N uses the first N rewards; the adaptive rule
(:func:`astarpo.allocation.allocate`, the rule ``Stage1Config(allocation="adaptive")`` calls)
sees the first ``pilot`` rewards of each prompt of a call and gives the prompt the first
``counts`` of its rewards. The draws are i.i.d., so a prefix of ``M`` draws has the law of a
fresh draw of that size, and every rule is compared on the same samples (a paired comparison).
The estimate is always :func:`astarpo.optimal_value` (paper Eq. 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from astarpo import allocate, optimal_value
from astarpo.analysis import holm, mean_interval, paired_difference

__all__ = ["adaptive_estimates", "estimator_errors", "exact_v_star", "fixed_estimates"]


def exact_v_star(v_ref: np.ndarray | Sequence[float], beta1: float) -> np.ndarray:
    r"""The exact :math:`V^*(x) = \beta_1 \log(1 + v_{ref}(x)(e^{1/\beta_1} - 1))` of a 0/1 reward
    with solve rate ``v_ref`` ``[X]`` (computed with ``log1p``/``expm1``: exact for tiny
    ``v_ref``, where :math:`V^* \approx \beta_1 v_{ref} (e^{1/\beta_1} - 1)`)."""
    if isinstance(beta1, bool) or not isinstance(beta1, (int, float)) or not beta1 > 0:
        raise ValueError(f"beta1 must be a number > 0, got {beta1!r}.")
    if not math.isfinite(beta1):
        raise ValueError(f"beta1 must be finite, got {beta1!r}.")
    p = np.asarray(v_ref, dtype=np.float64)
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError("v_ref must be probabilities in [0, 1].")
    return beta1 * np.log1p(p * math.expm1(1.0 / beta1))


def fixed_estimates(rewards: np.ndarray, n: int, beta1: float) -> np.ndarray:
    r""":math:`\hat V^*` of every prompt from its first ``n`` rewards: ``optimal_value(rewards[:,
    :n], beta1)`` ``[X]`` (``rewards`` ``[X, M]``, ``n <= M``)."""
    if not 1 <= n <= rewards.shape[-1]:
        raise ValueError(f"n must lie in [1, {rewards.shape[-1]}] (the rewards drawn), got {n}.")
    return np.asarray(optimal_value(rewards[:, :n].astype(np.float64), beta1))


def adaptive_estimates(
    rewards: np.ndarray,
    mean_n: int,
    pilot: int,
    cap: int,
    beta1: float,
    prompts_per_call: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    r"""``(v_star [X], counts [X])`` of the adaptive rule at a mean of ``mean_n`` samples per
    prompt: the prompts in a seeded random order, in calls of ``prompts_per_call``; each call's
    budget ``mean_n * len(call)`` shared by :func:`~astarpo.allocation.allocate` from the first
    ``pilot`` rewards (each prompt at most ``cap <= M``); prompt x's estimate from its first
    ``counts[x]`` rewards.

    Raises:
        ValueError: ``cap`` above the rewards drawn, or ``pilot <= mean_n <= cap`` broken.
    """
    x, m = rewards.shape
    if not pilot <= mean_n <= cap <= m:
        raise ValueError(
            f"the adaptive rule needs pilot <= mean_n <= cap <= rewards drawn, got {pilot}, "
            f"{mean_n}, {cap}, {m}."
        )
    order = np.random.default_rng(seed).permutation(x)
    counts = np.empty(x, dtype=int)
    for start in range(0, x, prompts_per_call):
        idx = order[start : start + prompts_per_call]
        counts[idx] = allocate(rewards[idx, :pilot], mean_n * len(idx), cap)
    v = np.empty(x)
    for n in np.unique(counts):
        sel = counts == n
        v[sel] = optimal_value(rewards[sel, :n].astype(np.float64), beta1)
    return v, counts


def _summary(v: np.ndarray, truth: np.ndarray, counts: np.ndarray) -> dict[str, Any]:
    err = v - truth
    return {
        "bias": mean_interval(err),
        "mse": mean_interval(err**2, bounds=(0.0, math.inf)),
        "samples": float(counts.mean()),
        "all_wrong": float(np.mean(v == 0.0)),
    }


def estimator_errors(
    rewards: np.ndarray,
    v_ref: np.ndarray,
    bins: Sequence[str],
    beta1: float,
    fixed: Sequence[int],
    adaptive: Sequence[int],
    pilot: int,
    cap: int,
    prompts_per_call: int,
    seed: int,
) -> dict[str, Any]:
    r"""Bias and MSE of :math:`\hat V^*` against :func:`exact_v_star`, per bin and rule.

    Args:
        rewards: 0/1 rewards of ``M`` reference samples per prompt, ``[X, M]``.
        v_ref: Each prompt's exact solve rate ``[X]``.
        bins: Each prompt's bin label ``[X]``; the adaptive rule's calls mix the bins (the
            prompts are shuffled), as a training pool's do.
        beta1: Stage 1's KL strength.
        fixed: The fixed N of the comparison (each <= M).
        adaptive: The adaptive rule's mean samples per prompt (its budgets).
        pilot: The adaptive rule's pilot samples per prompt.
        cap: The adaptive rule's most samples per prompt.
        prompts_per_call: Prompts sharing one budget (``Stage1Config.prompts_per_call``).
        seed: Seed of the calls' composition.

    Returns:
        A dict with ``rules`` (rule name -> bin -> ``bias``, ``mse``, ``samples``,
        ``all_wrong``), ``paired`` (``"N=n"`` -> bin -> difference) and ``bins`` (bin ->
        ``prompts``, ``v_ref_geomean``, ``v_ref_mean``, ``v_star``, ``sample_rate``).
        ``bias`` and ``mse`` are means over the bin's prompts
        with 95% t-intervals (the MSE's clipped at 0), ``samples`` the mean samples drawn per
        prompt, ``all_wrong`` the fraction with :math:`\hat V^* = 0`. ``paired``: for every
        adaptive budget that is also a fixed N, the squared error of adaptive minus fixed,
        paired by prompt (:func:`~astarpo.analysis.stats.paired_difference`), per bin and over
        ``"all"`` prompts, each with ``p_holm``: Holm's adjustment over every difference of the
        table (one family). ``sample_rate`` is the fraction of all ``M`` rewards that are 1,
        beside the mean ``v_ref`` (they agree when the sampler is the reference).
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    v_ref = np.asarray(v_ref, dtype=np.float64)
    labels = np.asarray(list(bins))
    if rewards.ndim != 2 or len(rewards) != len(v_ref) or len(labels) != len(v_ref):
        raise ValueError(
            f"rewards [X, M], v_ref [X] and bins [X] must agree, got {rewards.shape}, "
            f"{v_ref.shape}, {labels.shape}."
        )
    truth = exact_v_star(v_ref, beta1)
    estimates: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for n in fixed:
        estimates[f"fixed N={n}"] = (
            fixed_estimates(rewards, n, beta1),
            np.full(len(v_ref), n),
        )
    for n in adaptive:
        v, counts = adaptive_estimates(rewards, n, pilot, cap, beta1, prompts_per_call, seed)
        estimates[f"adaptive N={n}"] = (v, counts)
    names = list(dict.fromkeys(labels.tolist()))
    sq = {rule: (v - truth) ** 2 for rule, (v, _) in estimates.items()}
    paired: dict[str, dict[str, Any]] = {}
    for n in adaptive:
        if n in fixed:
            a, f = sq[f"adaptive N={n}"], sq[f"fixed N={n}"]
            paired[f"N={n}"] = {
                b: paired_difference(a[labels == b].tolist(), f[labels == b].tolist())
                for b in names
            }
            paired[f"N={n}"]["all"] = paired_difference(a.tolist(), f.tolist())
    family = {f"{key}|{b}": d["p"] for key, row in paired.items() for b, d in row.items()}
    adjusted = holm(family)
    for key, row in paired.items():
        for b, d in row.items():
            d["p_holm"] = adjusted[f"{key}|{b}"]
    rules = {
        rule: {b: _summary(v[labels == b], truth[labels == b], c[labels == b]) for b in names}
        for rule, (v, c) in estimates.items()
    }
    info = {
        b: {
            "prompts": int((labels == b).sum()),
            "v_ref_geomean": float(np.exp(np.log(np.maximum(v_ref[labels == b], 1e-300)).mean())),
            "v_ref_mean": float(v_ref[labels == b].mean()),
            "v_star": float(truth[labels == b].mean()),
            "sample_rate": float(rewards[labels == b].mean()),
        }
        for b in names
    }
    return {"rules": rules, "paired": paired, "bins": info}
