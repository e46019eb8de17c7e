r"""How many Stage 1 samples each prompt gets when N need not be the same for all (adaptive N).

A pilot of :math:`n_0` reference samples per prompt is drawn first; the rest of a budget of
:math:`N X` samples (X prompts, N the mean) is then shared in proportion to

.. math:: w(x) = \frac{1}{\hat p(x) + 1/n_0},

:math:`\hat p(x)` the fraction of the pilot's rewards that are > 0. Why this weight: for 0/1
rewards :math:`V^* = \beta_1 \log(1 + p (e^{1/\beta_1} - 1))` is steepest at small p, so a
prompt the pilot rarely solves carries the estimate's largest error (its bias when no sample
succeeds, its variance otherwise), while a prompt solved every time is already pinned near its
maximum; the :math:`1/n_0` keeps the weight finite at :math:`\hat p = 0` and gives a prompt
solved every time a small share. With every pilot alike it gives every prompt N: uniform N.
The theory experiment ``astarpo theory adaptive`` and the LLM Stage 1
(``Stage1Config(allocation="adaptive")``) both call :func:`allocate`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["allocate"]


def allocate(first: np.ndarray, budget: int, cap: int) -> np.ndarray:
    r"""Samples per prompt for a total ``budget`` (per leading index), more where the pilot failed.

    Prompt x gets the ``n0`` pilot samples plus a share of ``budget - n0 X`` proportional to
    :math:`1/(\hat p(x) + 1/n_0)` (the module's rule), rounded by largest remainder (ties broken
    deterministically) and capped at ``cap`` (samples above the cap are not drawn).

    Args:
        first: Rewards of the pilot, ``[..., X, n0]``; a reward > 0 counts as solved.
        budget: Total samples of the X prompts (>= ``n0 * X``).
        cap: Most samples of one prompt (>= ``n0``).

    Returns:
        Integer counts ``[..., X]``, each in ``[n0, cap]``, summing to at most ``budget``.

    Raises:
        ValueError: ``budget`` below the pilot's ``n0 X`` samples, or ``cap`` below ``n0``.
    """
    first = np.asarray(first)
    *lead, x, n0 = first.shape
    rest = budget - n0 * x
    if rest < 0:
        raise ValueError(f"budget {budget} is below the pilot's {n0 * x} samples ({x} x {n0}).")
    if cap < n0:
        raise ValueError(f"cap {cap} is below the pilot's {n0} samples per prompt.")
    flat = (first > 0).reshape(-1, x, n0)
    w = 1.0 / (flat.mean(-1) + 1.0 / n0)
    share = rest * w / w.sum(-1, keepdims=True)
    extra = np.floor(share).astype(int)
    left = rest - extra.sum(-1)
    order = np.argsort(-(share - extra), axis=-1)
    for i in range(len(flat)):
        extra[i, order[i, : left[i]]] += 1
    return np.minimum(n0 + extra, cap).reshape(*lead, x)
