r"""Online gradient descent: the no-regret oracle of the paper's analysis.

In the spirit of optax: a small frozen description of the algorithm with pure ``init`` and
``update`` functions over a typed state. Parameters are a single numpy array or torch tensor
(any shape); ``update`` returns new parameters and never modifies its inputs.

.. math::

    \theta_{t+1} = \Pi_{\|\theta\|_2 \le R}\big(\theta_t - \eta_t g_t\big), \qquad
    \eta_t \in \{c,\; c/\sqrt{t},\; c/t\}

The state also keeps the running parameter average :math:`\bar\theta_T = \frac1T\sum_t \theta_t`.
For convex losses a regret bound transfers to :math:`\bar\theta_T` by Jensen's inequality; the
A*-PO round loss is *not* convex in :math:`\theta` for log-linear policies (it is the square
of a residual that is concave in :math:`\theta`), so a regret bound says nothing directly about
:math:`\bar\theta_T`. What it controls is the mean of the iterates' losses, i.e. a uniformly
drawn iterate or the mixture of the iterates' policies; :mod:`astarpo.theory` reports all
three (see the ``horizon`` experiment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypeVar

import numpy as np
import torch

P = TypeVar("P", np.ndarray, torch.Tensor)
Schedule = Literal["constant", "inverse_sqrt", "inverse"]

__all__ = ["OGDState", "OnlineGradientDescent"]


class OGDState(NamedTuple, Generic[P]):
    """State of :class:`OnlineGradientDescent`."""

    step: int
    """Number of updates done so far (``t`` of the next update is ``step + 1``)."""
    average: P
    """Running mean of the iterates seen by ``update`` (before each step), same shape as the
    parameters; equals the initial parameters after ``init``."""


@dataclass(frozen=True)
class OnlineGradientDescent:
    """Projected online gradient descent with constant, c/sqrt(t) or c/t step sizes.

    Args:
        learning_rate: The constant ``c`` > 0 of the step-size schedule.
        schedule: ``"constant"`` (``eta_t = c``), ``"inverse_sqrt"`` (``c / sqrt(t)``, the
            no-regret choice for convex losses) or ``"inverse"`` (``c / t``, for strongly convex
            losses). ``t`` counts from 1.
        radius: If given, each iterate is projected onto the L2 ball of this radius (the
            bounded parameter set of the analysis). ``None`` (default) means no projection.

    Example:
        >>> import numpy as np
        >>> ogd = OnlineGradientDescent(learning_rate=0.5)
        >>> theta = np.array([1.0, -2.0]); state = ogd.init(theta)
        >>> theta, state = ogd.update(theta, 2 * theta, state)  # gradient of ||theta||^2
    """

    learning_rate: float
    schedule: Schedule = "constant"
    radius: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"learning_rate must be finite and > 0, got {self.learning_rate}.")
        if self.schedule not in ("constant", "inverse_sqrt", "inverse"):
            raise ValueError(
                f"schedule must be 'constant', 'inverse_sqrt' or 'inverse', got {self.schedule!r}."
            )
        if self.radius is not None and not (math.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"radius must be None or finite and > 0, got {self.radius}.")

    def step_size(self, t: int) -> float:
        """Step size ``eta_t`` of update ``t`` (1-based)."""
        if t < 1:
            raise ValueError(f"t counts from 1, got {t}.")
        if self.schedule == "constant":
            return self.learning_rate
        if self.schedule == "inverse_sqrt":
            return self.learning_rate / math.sqrt(t)
        return self.learning_rate / t

    def project(self, params: P) -> P:
        """Project onto the L2 ball of radius ``radius`` over the last axis (identity if None).

        Parameters of shape ``[..., d]`` are treated as a batch of independent vectors, so one
        optimizer can run many seeds or contexts at once.
        """
        if self.radius is None:
            return params
        if isinstance(params, torch.Tensor):
            norm = torch.linalg.vector_norm(params, dim=-1, keepdim=True)
            return params * torch.clamp(self.radius / norm.clamp_min(1e-300), max=1.0)
        norm = np.linalg.norm(params, axis=-1, keepdims=True)
        scale = np.minimum(1.0, self.radius / np.maximum(norm, 1e-300))
        return params * scale

    def init(self, params: P) -> OGDState[P]:
        """Initial state for ``params`` (a numpy array or torch tensor)."""
        avg = params.detach().clone() if isinstance(params, torch.Tensor) else np.array(params)
        return OGDState(step=0, average=avg)

    def update(self, params: P, grad: P, state: OGDState[P]) -> tuple[P, OGDState[P]]:
        """One step: ``params - eta_t * grad``, projected; returns ``(new_params, new_state)``.

        Args:
            params: Current iterate ``theta_t``, any shape.
            grad: (Sub)gradient of the round-``t`` loss at ``theta_t``, same shape.
            state: State from ``init`` or the previous ``update``.
        """
        if tuple(params.shape) != tuple(grad.shape):
            raise ValueError(
                f"grad shape {tuple(grad.shape)} does not match params shape {tuple(params.shape)}."
            )
        t = state.step + 1
        eta = self.step_size(t)
        if isinstance(params, torch.Tensor):
            with torch.no_grad():
                new = self.project(params.detach() - eta * grad.detach())
                average = state.average + (params.detach() - state.average) / t
        else:
            new = self.project(params - eta * grad)
            average = state.average + (params - state.average) / t
        return new, OGDState(step=t, average=average)
