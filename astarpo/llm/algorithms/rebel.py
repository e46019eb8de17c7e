r"""REBEL (Gao et al. 2024) and its config: two samples per prompt, regression of the
difference of their log-ratios onto their reward difference
(:func:`~astarpo.llm.algorithms.losses.rebel_loss`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from astarpo.config import doc_field
from astarpo.llm.algorithms.base import RolloutBatch, single_update
from astarpo.llm.algorithms.config import check_positive_fields
from astarpo.llm.algorithms.losses import rebel_loss
from astarpo.llm.algorithms.train_config import TrainConfig
from astarpo.llm.models.logprobs import SequenceLogprobs

__all__ = ["REBEL", "REBELConfig"]


@dataclass(frozen=True)
class REBELConfig(TrainConfig):
    """REBEL (Gao et al. 2024): regression of the difference of log-ratios of two responses per
    prompt onto their reward difference.

    ``micro_batch_size`` must be even (a micro-batch holds whole pairs).
    """

    eta: float = doc_field(
        1e3,
        "Step size of REBEL's mirror-descent update (> 0); 1/eta scales the log-ratio like "
        "A*-PO's beta2, so the default 1e3 matches beta2 = 1e-3.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_fields(self, "eta")
        if self.micro_batch_size % 2:
            raise ValueError(
                f"micro_batch_size must be even for REBEL (pairs stay together), got "
                f"{self.micro_batch_size}."
            )


class REBEL:
    """REBEL: two samples per prompt, regression onto their reward difference.

    Args:
        config: A :class:`~astarpo.llm.algorithms.grpo.REBELConfig`.
    """

    name: ClassVar[str] = "rebel"
    samples_per_prompt: ClassVar[int] = 2
    needs_reference: ClassVar[bool] = False
    needs_v_star: ClassVar[bool] = False

    def __init__(self, config: REBELConfig) -> None:
        self.config = config

    @property
    def needs_old_logprobs(self) -> bool:
        """When a rollout gets more than one optimizer step."""
        return not single_update(self.config)

    @classmethod
    def from_config(cls, config: REBELConfig, model: Any = None, ref_model: Any = None) -> REBEL:
        """The algorithm of a config (the models are unused)."""
        return cls(config)

    def modules(self) -> list[torch.nn.Module]:
        """No trainable module besides the policy."""
        return []

    def prepare(self, batch: RolloutBatch) -> dict[str, float]:
        """Nothing to precompute; logs the mean absolute reward difference of the pairs."""
        r = batch.rewards.view(-1, 2)
        return {"reward_diff/abs_mean": float((r[:, 0] - r[:, 1]).abs().mean())}

    def loss(
        self, out: SequenceLogprobs, minibatch: RolloutBatch
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Mean REBEL loss over the pairs (rows ``2i`` and ``2i + 1``) of the minibatch."""
        if len(minibatch) % 2 or not torch.equal(minibatch.group[0::2], minibatch.group[1::2]):
            raise ValueError(
                "REBEL needs each (micro)batch to hold whole pairs of responses to one prompt; "
                "use an even micro_batch_size."
            )
        old = minibatch.logp_old if minibatch.logp_old is not None else out.logp.detach()
        r = minibatch.rewards
        loss = rebel_loss(
            out.logp[0::2],
            out.logp[1::2],
            old[0::2],
            old[1::2],
            r[0::2],
            r[1::2],
            self.config.eta,
            check=False,  # eta validated once, by the config
        )
        return loss, {}
