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
from astarpo.llm.algorithms.config import check_choice
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import SequenceLogprobs
from astarpo.objective import advantage_regression_loss, check_beta, optimal_advantage

__all__ = ["AStarPO", "AStarPOConfig"]


@dataclass(frozen=True)
class AStarPOConfig(TrainConfig):
    r"""A*-PO Stage 2: :class:`~astarpo.llm.algorithms.train_config.TrainConfig` plus ``beta2``
    and the refresh rule of the reference.

    A fixed reference caps what A*-PO can learn: the regression pulls the policy towards
    :math:`\pi_{\mathrm{ref}} e^{A^*/\beta_2}`, which stays close to the starting model. With
    ``refresh_every_steps = K > 0`` the reference moves (as OAPL, arXiv 2602.19362, refreshes a
    lagged reference): after every step ``t`` with ``t % K == 0``, before step ``t + 1``, the
    reference becomes a frozen copy of the current policy and V* is estimated again under it
    for every training prompt by Stage 1 (:func:`~astarpo.llm.stage1.estimate.estimate_values`
    with ``refresh_n_samples`` samples per prompt, ``refresh_beta1`` and the run's sampling;
    :mod:`astarpo.llm.training.refresh`). The samples and time of a refresh count as training
    cost. ``refresh_every_steps = 0`` (the default) keeps the reference and the V* table of the
    run's start, as in the paper.

    With ``stream_stage1=True`` the trainer takes no V* table: before each step it estimates V*
    of the batch's prompts not seen before from ``stream_n_samples`` reference samples each
    (:mod:`astarpo.llm.training.stream`), so a run that sees each prompt once pays Stage 1 only
    for the prompts it trains on; that time is training time.

    Attributes:
        refresh_every_steps: Steps between refreshes of the reference (0: never, the paper).
        refresh_n_samples: Stage 1 samples per prompt of each refresh's V* (with adaptive
            allocation, their mean over each generate call's prompts).
        refresh_beta1: ``beta1`` of each refresh's V* (``beta1 log mean exp(r / beta1)``).
        refresh_allocation: ``"fixed"`` or ``"adaptive"``
            (:attr:`~astarpo.llm.stage1.config.Stage1Config.allocation`).
        stream_stage1: Estimate V* per step, on each prompt's first use, instead of taking a
            table (the paper: False, Stage 1 up front).
        stream_n_samples: Reference samples per prompt of the streamed V* (N).
        stream_beta1: ``beta1`` of the streamed V*.

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

    refresh_every_steps: int = doc_field(
        0,
        "Refresh the reference every this many steps: after each step that is a multiple of it, "
        "the reference becomes a frozen copy of the policy and V* is estimated again under it "
        "(Stage 1 on the training prompts; its samples and time count as training cost); "
        "0 = never (the paper's fixed reference).",
    )
    refresh_n_samples: int = doc_field(
        8, "Stage 1 samples per prompt of each refresh's V* estimate (with refresh_every_steps)."
    )
    refresh_beta1: float = doc_field(
        0.5, "beta1 of each refresh's V* = beta1 log mean exp(r / beta1), > 0 (the paper: 0.5)."
    )
    refresh_allocation: str = doc_field(
        "fixed",
        "How each refresh spreads its samples over prompts: 'fixed' (refresh_n_samples each) or "
        "'adaptive' (Stage 1's allocation rule, with its default pilot and cap).",
    )

    stream_stage1: bool = doc_field(
        False,
        "Estimate V* of each step's prompts not seen before, just before the step, from "
        "stream_n_samples reference samples each (Stage 1 streamed; its samples and time count "
        "as training cost), instead of taking a v_star_table; False = the paper's Stage 1 up "
        "front. Not with refresh_every_steps, LoRA or torchrun.",
    )
    stream_n_samples: int = doc_field(
        8, "Reference samples per prompt of the streamed V* (with stream_stage1; the paper's N)."
    )
    stream_beta1: float = doc_field(
        0.5, "beta1 of the streamed V* = beta1 log mean exp(r / beta1), > 0 (the paper: 0.5)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_beta(self.beta2, "beta2")  # here only: the algorithm and its loss trust it
        self._check_refresh()
        self._check_stream()

    def _check_stream(self) -> None:
        if not isinstance(self.stream_stage1, bool):
            raise ValueError(f"stream_stage1 must be True or False, got {self.stream_stage1!r}.")
        n = self.stream_n_samples
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"stream_n_samples must be an integer >= 1, got {n!r}.")
        check_beta(self.stream_beta1, "stream_beta1")
        if self.stream_stage1 and self.sampling.greedy and n > 1:
            raise ValueError(
                f"temperature 0 (greedy) gives the streamed Stage 1 {n} identical samples per "
                "prompt, so V* would be one reward; sample with temperature > 0, or use "
                "stream_n_samples=1."
            )

    def _check_refresh(self) -> None:
        for name, low in (("refresh_every_steps", 0), ("refresh_n_samples", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(
                    f"{name} must be an integer >= {low}, got {v!r}"
                    + (" (0 turns the refresh off)." if low == 0 else ".")
                )
        check_beta(self.refresh_beta1, "refresh_beta1")
        check_choice(self, "refresh_allocation", ("fixed", "adaptive"))
        if not self.refresh_every_steps:
            return
        if self.lora_r:
            raise ValueError(
                "refresh_every_steps > 0 is not supported with LoRA (lora_r > 0): the reference "
                "is the policy with its adapters disabled, so it cannot become a copy of the "
                "policy. Train without LoRA (lora_r=0) or keep the reference (refresh_every_steps"
                "=0)."
            )
        if self.sampling.greedy and self.refresh_n_samples > 1:
            raise ValueError(
                f"temperature 0 (greedy) gives each refresh {self.refresh_n_samples} identical "
                "samples per prompt, so V* would be one reward; sample with temperature > 0, or "
                "use refresh_n_samples=1."
            )


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
