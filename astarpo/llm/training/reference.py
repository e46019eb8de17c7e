"""The frozen reference and V* of every training row under it: :class:`ReferenceState`, the one
place they change during training.

The trainer builds one (``Trainer.reference``) from its reference module and the Stage 1 values
of its rows; its extensions (:mod:`astarpo.llm.training.extensions`) change them only through
:meth:`ReferenceState.set_values` and :meth:`ReferenceState.set_weights`, and everything
else reads them: :attr:`ReferenceState.v_star` is a read-only view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["ReferenceState"]


class ReferenceState:
    """The frozen reference and V* ``[N]`` of the training rows.

    Args:
        ref_model: The frozen reference module (``None`` when the algorithm needs none).
        v_star: V* of every training row ``[N]`` (float64; ``NaN``: not estimated yet), or
            ``None`` when the algorithm needs none.
        owner: The algorithm's name (in the errors).

    Attributes:
        ref_model: The reference module (its weights change in place, never the object).
    """

    def __init__(self, ref_model: Any, v_star: np.ndarray | None, owner: str) -> None:
        self.ref_model = ref_model
        self._v_star = None if v_star is None else np.array(v_star, dtype=np.float64)
        self._start = None if self._v_star is None else self._v_star.copy()
        self._owner = owner

    @staticmethod
    def _read_only(values: np.ndarray | None) -> np.ndarray | None:
        if values is None:
            return None
        view = values.view()
        view.flags.writeable = False
        return view

    @property
    def v_star(self) -> np.ndarray | None:
        """V* of every training row ``[N]`` now (read-only; :meth:`set_values` changes it)."""
        return self._read_only(self._v_star)

    @property
    def v_star_at_start(self) -> np.ndarray | None:
        """V* as the trainer was given it ``[N]`` (read-only): the run's Stage 1 values,
        whatever changed them since."""
        return self._read_only(self._start)

    def set_values(self, v_star: Any, rows: Sequence[int] | None = None) -> None:
        """Set V* of the training rows ``rows`` (every row when ``None``).

        Args:
            v_star: One value per row ``[len(rows)]`` (``[N]`` for every row); ``NaN`` marks
                a value not estimated yet.
            rows: Indices into the training rows.

        Raises:
            ValueError: the algorithm has no V*, not one value per row, an infinite value, or
                an index outside ``[0, N)``.
        """
        if self._v_star is None:
            raise ValueError(f"{self._owner} has no V* to set.")
        n = len(self._v_star)
        values = np.asarray(v_star, dtype=np.float64)
        idx = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
        if values.shape != idx.shape:
            got = values.shape[0] if values.ndim else "a scalar"
            raise ValueError(f"set_values: {got} values for {len(idx)} rows; give one per row.")
        if np.isinf(values).any():
            raise ValueError("set_values: V* must be finite (or NaN: not estimated yet).")
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"set_values: a row index is outside [0, {n}).")
        self._v_star[idx] = values

    def set_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Load ``weights`` (a ``state_dict`` of the reference's architecture, e.g. the
        policy's) into the reference, which stays in eval mode without gradients.

        Raises:
            ValueError: the algorithm has no reference module.
        """
        if not isinstance(self.ref_model, torch.nn.Module):
            raise ValueError(f"{self._owner} has no reference module to load weights into.")
        with torch.no_grad():
            self.ref_model.load_state_dict(weights)
        self.ref_model.eval().requires_grad_(False)
