r"""The Fisher-information floor of a log-linear policy (the paper's Assumption 4).

For :math:`\pi_\theta \propto \pi_{ref} e^{\theta^\top\phi}` the Fisher information is

.. math::

    F(\theta) = E_{x\sim\rho}\,\mathrm{Cov}_{y\sim\pi_\theta(\cdot|x)}\big[\phi(x, y)\big],

and Assumption 4 asks for :math:`\lambda_{\min}(F(\theta)) \ge \lambda > 0` along the run. Some
directions never change the policy (a feature that is constant over the actions of every
context, e.g. the per-context offsets of one-hot features); :math:`F` is 0 on them for every
:math:`\theta`, so the floor is taken on the identifiable subspace, the range of
:math:`F` at the reference (every policy of the class has the reference's support).
"""

from __future__ import annotations

import numpy as np

from astarpo.theory.bandit import LogLinearBandit

__all__ = ["fisher_floor", "fisher_information", "identifiable_basis"]


def fisher_information(bandit: LogLinearBandit, theta: np.ndarray) -> np.ndarray:
    """:math:`F(\\theta)` for ``theta [..., d]``; returns ``[..., d, d]``."""
    pol = bandit.policy(theta)  # [..., X, Y]
    phi = bandit.features
    mean = np.einsum("...xy,xyd->...xd", pol, phi)
    second = np.einsum("...xy,xyd,xye,x->...de", pol, phi, phi, bandit.context_probs)
    first = np.einsum("...xd,...xe,x->...de", mean, mean, bandit.context_probs)
    return second - first


def identifiable_basis(bandit: LogLinearBandit, rtol: float = 1e-9) -> np.ndarray:
    """Orthonormal basis ``[d, r]`` of the directions that change the policy (range of F(0))."""
    f0 = fisher_information(bandit, np.zeros(bandit.dim))
    w, u = np.linalg.eigh(f0)
    return u[:, w > rtol * max(w.max(), 1e-300)]


def fisher_floor(
    bandit: LogLinearBandit, theta: np.ndarray, basis: np.ndarray | None = None
) -> np.ndarray:
    r""":math:`\lambda_{\min}` of :math:`F(\theta)` on the identifiable subspace.

    Args:
        bandit: The instance.
        theta: Parameters ``[..., d]``.
        basis: Output of :func:`identifiable_basis` (computed when ``None``).

    Returns:
        ``[...]``, the smallest eigenvalue of :math:`U^\top F(\theta) U`.
    """
    u = identifiable_basis(bandit) if basis is None else basis
    f = fisher_information(bandit, theta)
    restricted = np.einsum("dr,...de,es->...rs", u, f, u)
    return np.linalg.eigvalsh(restricted)[..., 0]
