r"""PPO's critic: a scalar value head on a causal LM's transformer, one value per token.

The value of the state before response token :math:`y_t` (prompt and :math:`y_{<t}`) is read
from the hidden state at the position that predicts :math:`y_t`, so ``values[:, t]`` lines up
with ``token_logp[:, t]`` of :func:`~astarpo.llm.algorithms.logprobs.sequence_logprobs`.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from astarpo.llm.algorithms.logprobs import PackedSequences

__all__ = ["ValueModel"]


class ValueModel(torch.nn.Module):
    """A transformer body (no LM head) with a linear head ``hidden -> 1``.

    Args:
        backbone: A ``transformers`` base model (e.g. ``Qwen2Model``) returning
            ``last_hidden_state [B, L, H]``.
        hidden_size: ``H``.

    The head starts at zero (every value 0), so the first GAE advantages equal the discounted
    returns.
    """

    def __init__(self, backbone: torch.nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def from_causal_lm(cls, model: Any) -> ValueModel:
        """A critic whose body is a trainable copy of ``model``'s transformer (its LM head is
        dropped); ``model`` itself is not modified."""
        base = getattr(model, "base_model", None)
        if base is None or base is model:
            raise ValueError(
                f"{type(model).__name__} has no separate base_model to copy; pass a critic built "
                "with ValueModel(backbone, hidden_size)."
            )
        body = copy.deepcopy(base).requires_grad_(True).train()
        return cls(body, int(model.config.hidden_size))

    def forward(self, packed: PackedSequences) -> torch.Tensor:
        """Values ``[B, L]`` in float32 aligned with the token log-probs; 0 off the response.

        Args:
            packed: The prompt + response batch (as in the log-prob computation).
        """
        device = self.head.weight.device
        packed = packed.to(device)
        attn = packed.attention_mask
        position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
        hidden = self.backbone(
            input_ids=packed.input_ids, attention_mask=attn, position_ids=position_ids
        ).last_hidden_state
        v = self.head(hidden).squeeze(-1).float()  # v[:, l]: state after token l
        shifted = torch.cat([torch.zeros_like(v[:, :1]), v[:, :-1]], dim=1)
        return torch.where(packed.response_mask, shifted, torch.zeros_like(shifted))
