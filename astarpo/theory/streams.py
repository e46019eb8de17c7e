"""Independent random streams for every consumer of randomness, and evaluation points.

Each consumer (Stage 1, Stage 2, the PG baseline, ...) has its own *role* number, and seed
``s`` of a run draws from ``numpy.random.default_rng([role, tag, base_seed, s])``. Two roles,
or two tags of one role, never share a stream, whatever the seeds and N are (the old scheme
``default_rng([base + n, s])`` made Stage 1 at N = 1 replay Stage 2's stream).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["BASELINE", "PROBE", "STAGE1", "STAGE2", "generators", "log_checkpoints"]

#: Role of the Stage 1 reference samples.
STAGE1 = 1
#: Role of Stage 2's on-policy samples.
STAGE2 = 2
#: Role of the policy-gradient baseline's samples.
BASELINE = 3
#: Role of the gradient draws that measure a variance (``two-beta``).
PROBE = 4


def generators(role: int, seed: int, n_seeds: int, tag: int = 0) -> list[np.random.Generator]:
    """One generator per seed ``s < n_seeds``: ``default_rng([role, tag, seed, s])``.

    Args:
        role: Who draws (:data:`STAGE1`, :data:`STAGE2`, :data:`BASELINE`).
        seed: The base seed of the run (>= 0).
        n_seeds: S.
        tag: Any non-negative integer that tells streams of one role apart (e.g. N, or the
            index of a setting).

    Returns:
        ``n_seeds`` independent generators; seed ``s``'s stream does not depend on S.
    """
    if min(role, seed, tag) < 0:
        raise ValueError(f"role, seed and tag must be >= 0, got {role}, {seed}, {tag}.")
    return [np.random.default_rng([role, tag, seed, s]) for s in range(n_seeds)]


def log_checkpoints(n_iterations: int, per_decade: int = 8) -> np.ndarray:
    """Iteration counts ``1 <= t <= T``, log-spaced with ``per_decade`` points, ``T`` included."""
    n = max(2, math.ceil(per_decade * math.log10(max(n_iterations, 10))) + 1)
    pts = np.unique(np.round(np.logspace(0, math.log10(n_iterations), n)).astype(int))
    return np.unique(np.append(pts, n_iterations))
