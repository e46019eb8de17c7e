"""The order in which the trainer visits its prompts: a seeded permutation per epoch.

Epoch ``e`` visits the rows in the order
``numpy.random.default_rng(derive_seed(seed, "epoch", e)).permutation(n)``;
a step takes the next ``batch_size`` of them, crossing into the next epoch when one runs out.
The position ``(epoch, index)`` is saved in checkpoints, so a resumed run continues exactly where
the interrupted one stopped. The permutation is computed once per epoch, not once per step.
"""

from __future__ import annotations

import numpy as np

from astarpo.llm.rollout.seeds import derive_seed

__all__ = ["EpochOrder"]


class EpochOrder:
    """Seeded per-epoch permutations of ``range(n)``, consumed ``batch_size`` rows at a time.

    Args:
        n: Number of rows, >= 1.
        seed: Seed of the permutations.

    Attributes:
        epoch: The current epoch.
        index: Rows of the current epoch already taken.
    """

    def __init__(self, n: int, seed: int) -> None:
        if n < 1:
            raise ValueError(f"EpochOrder needs at least one row, got n={n}.")
        self.n = n
        self.seed = seed
        self.epoch = 0
        self.index = 0
        self._perm: tuple[int, np.ndarray] | None = None

    def permutation(self, epoch: int) -> np.ndarray:
        """The row order of ``epoch`` ``[n]`` (cached for the current epoch)."""
        if self._perm is None or self._perm[0] != epoch:
            rng = np.random.default_rng(derive_seed(self.seed, "epoch", epoch))
            self._perm = (epoch, rng.permutation(self.n))
        return self._perm[1]

    def take(self, batch_size: int) -> list[int]:
        """The next ``batch_size`` row indices (advancing the position)."""
        out: list[int] = []
        while len(out) < batch_size:
            perm = self.permutation(self.epoch)
            chunk = perm[self.index : self.index + batch_size - len(out)]
            out.extend(int(i) for i in chunk)
            self.index += len(chunk)
            if self.index >= self.n:
                self.epoch, self.index = self.epoch + 1, 0
        return out
