r"""A*-PO's Stage 2 as an :class:`~astarpo.llm.algorithms.base.Algorithm`, and its config.

One on-policy sample per prompt, the frozen reference's log-prob and the Stage 1 value
``v_star`` of the prompt; the loss is :func:`astarpo.advantage_regression_loss` (paper Eq. 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from astarpo.config import doc_field
from astarpo.llm.algorithms.base import RolloutBatch
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import SequenceLogprobs
from astarpo.objective import advantage_regression_loss, check_beta, optimal_advantage

__all__ = ["AStarPO", "AStarPOConfig"]


@dataclass(frozen=True)
class AStarPOConfig(TrainConfig):
    r"""A*-PO Stage 2: :class:`~astarpo.llm.algorithms.train_config.TrainConfig` plus ``beta2``.

    The variants beyond the paper that change V* or the reference during training are trainer
    extensions with their own configs, not fields here: the moving reference
    (:class:`~astarpo.llm.training.refresh.ReferenceRefresh`) and the streamed Stage 1
    (:class:`~astarpo.llm.training.stream.StreamedStage1`).

    Example:
        >>> from astarpo.llm import AStarPOConfig
        >>> AStarPOConfig(batch_size=64, learning_rate=1e-4, beta2=1e-3).sampling.temperature
        1.0
    """

    beta2: float = doc_field(
        1e-3, "KL strength of the Stage 2 regression (paper Eq. 4; the paper uses 1e-3)."
    )
    allow_v_star_mismatch: bool = doc_field(
        False,
        "Train with a V* table whose provenance (reference model, reward functions' dotted "
        "paths, sampling settings, gold answers) differs from this run's; refused by default. "
        "A training set that is a subset of the table's prompts needs no override.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_beta(self.beta2, "beta2")  # here only: the algorithm and its loss trust it


class AStarPO:
    r"""A*-PO Stage 2 (paper Eq. 4): least-squares regression of the scaled log-ratio onto the
    optimal advantage, with one on-policy sample per prompt.

    .. math::

        \ell = \frac1b \sum_{i=1}^{b} \Big(\beta_2 \big(\log\pi(y_i|x_i) -
        \log\pi_{\mathrm{ref}}(y_i|x_i)\big) - \big(r(x_i, y_i) - V^*(x_i)\big)\Big)^2

    The loss is :func:`astarpo.advantage_regression_loss` with ``reduction="mean"``.

    ``beta2`` is validated once: by :class:`AStarPOConfig`, or, given alone, here by the same
    :func:`astarpo.objective.check_beta` (one float checked, no config built); the loss of every
    micro-batch trusts it (``check=False``).

    Args:
        beta2: Regression strength, > 0 (default: :class:`AStarPOConfig`'s, 1e-3 as in the
            paper).
        config: An :class:`AStarPOConfig` (already validated) to take ``beta2`` from instead.

    Raises:
        ValueError: ``beta2`` is not a finite number > 0, or both arguments are given.
    """

    name: ClassVar[str] = "astarpo"
    samples_per_prompt: ClassVar[int] = 1
    needs_reference: ClassVar[bool] = True
    needs_v_star: ClassVar[bool] = True
    needs_old_logprobs: ClassVar[bool] = False

    def __init__(self, beta2: float | None = None, *, config: AStarPOConfig | None = None) -> None:
        if config is not None and beta2 is not None:
            raise ValueError("give beta2 or config, not both.")
        if config is not None:
            self.beta2 = float(config.beta2)  # validated by the config
        else:  # the config's check of the one float, not a 35-field config
            self.beta2 = check_beta(AStarPOConfig.beta2 if beta2 is None else beta2, "beta2")

    def __repr__(self) -> str:
        return f"AStarPO(beta2={self.beta2!r})"

    @classmethod
    def from_config(
        cls, config: AStarPOConfig, model: Any = None, ref_model: Any = None
    ) -> AStarPO:
        """The algorithm of an :class:`AStarPOConfig` (uses ``beta2``, validated by the config;
        the models are unused)."""
        return cls(config=config)

    def modules(self) -> list[torch.nn.Module]:
        """A*-PO has no trainable module besides the policy."""
        return []

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Log the mean and std of the optimal advantage ``reward - v_star`` ``[B]``.

        Nothing is stored in ``batch.extra``: the loss computes the advantage itself, inside
        :func:`astarpo.advantage_regression_loss`, from ``batch.rewards`` and ``batch.v_star``
        (the one place it is computed for the update).
        """
        if batch.v_star is None:
            raise ValueError("A*-PO needs batch.v_star (the Stage 1 value of each prompt).")
        adv = optimal_advantage(batch.rewards, batch.v_star)
        return {
            "advantage/mean": float(adv.mean()),
            "advantage/std": float(adv.std(unbiased=False)),
        }

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean advantage-regression loss over the minibatch (see the class docstring)."""
        if minibatch.logp_ref is None or minibatch.v_star is None:
            raise ValueError("A*-PO needs minibatch.logp_ref and minibatch.v_star.")
        # check=False: beta2 was validated once, by AStarPOConfig, and no host sync per
        # micro-batch; the trainer checks the reduced loss and the gradient norm once per
        # optimizer step (astarpo.llm.training.guards.check_update).
        logp_ref, v_star = minibatch.logp_ref, minibatch.v_star
        loss = advantage_regression_loss(
            out.logp, logp_ref, minibatch.rewards, v_star, self.beta2, "mean", check=False
        )
        log_ratio = (out.logp - minibatch.logp_ref).detach()
        return loss, {"log_ratio/mean": float(log_ratio.mean())}
