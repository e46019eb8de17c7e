"""Helpers of the real-vLLM tests (``test_vllm_real.py``) and
``experiments/benchmarks/vllm_throughput.py``.

Kept free of vLLM and pytest imports: the CLI subprocesses of the tests import
:func:`first_digit_reward` from here (``--reward vllm_helpers:first_digit_reward``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Initializer range of the toy model in these tests: sharper, prompt-dependent next-token
#: distributions than the default 0.02 (near uniform), so that a backend that sampled from the
#: wrong model, prompt or temperature would be detected by the statistical tests.
INIT_RANGE = 0.15


def first_digit_reward(
    prompts: Sequence[str], completions: Sequence[str], **columns: Any
) -> list[float]:
    """1.0 when the completion starts with a digit, else 0.0: under the toy model (initializer
    range :data:`INIT_RANGE`) pass rates of about 0.26 on average with a standard deviation of
    about 0.17 across prompts, so a pass-rate test can tell prompts apart."""
    return [float(text[:1].isdigit()) for text in completions]


def pass_rate_permutation_test(
    k1: np.ndarray, k2: np.ndarray, n: int, draws: int = 20000, seed: int = 0
) -> dict[str, float]:
    """Two-sample test that two backends have the same per-prompt pass rates.

    ``k1[i]`` and ``k2[i]`` are the numbers of passing samples of prompt ``i`` out of ``n`` in
    each backend. Under the null hypothesis (same success probability per prompt, independent
    samples) the ``2n`` samples of a prompt are exchangeable, so given the total
    ``t_i = k1_i + k2_i``, ``k1_i`` is hypergeometric(``2n``, ``t_i``, ``n``): the exact
    conditional (permutation) distribution, simulated ``draws`` times.

    Statistics: ``S = sum_i (k1_i - k2_i)^2`` (per-prompt disagreement: detects pass rates that
    differ prompt by prompt even when the means agree) and ``D = sum_i (k1_i - k2_i)`` (a shift
    of the mean pass rate).

    Returns:
        ``{"S", "p_S", "D", "p_D", "mean1", "mean2"}`` with one-sided ``p_S`` (large S) and
        two-sided ``p_D``.
    """
    k1 = np.asarray(k1, dtype=np.int64)
    k2 = np.asarray(k2, dtype=np.int64)
    t = k1 + k2
    rng = np.random.default_rng(seed)
    sim1 = rng.hypergeometric(t, 2 * n - t, n, size=(draws, len(t)))
    sim_d = 2 * sim1 - t  # k1 - k2 under the null
    s_obs = float(((k1 - k2) ** 2).sum())
    d_obs = float((k1 - k2).sum())
    s_null = (sim_d**2).sum(axis=1)
    d_null = sim_d.sum(axis=1)
    return {
        "S": s_obs,
        "p_S": float((1 + (s_null >= s_obs).sum()) / (draws + 1)),
        "D": d_obs,
        "p_D": float((1 + (np.abs(d_null) >= abs(d_obs)).sum()) / (draws + 1)),
        "mean1": float(k1.mean() / n),
        "mean2": float(k2.mean() / n),
    }
