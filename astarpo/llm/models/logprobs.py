r"""Masked log-probabilities of responses under a causal LM (policy or reference).

One forward pass on the concatenated ``prompt + response`` ids gives, for every response token
:math:`y_t`, :math:`\log \pi(y_t \mid x, y_{<t})`; the sequence log-probability is their sum over
the response tokens (EOS included, prompt and padding excluded):

.. math::

    \log \pi(y \mid x) = \sum_{t=1}^{|y|} \log \pi(y_t \mid x, y_{<t})

Sequences are packed with :func:`pack` in one of two layouts, which give the same values (the
position ids are computed from the attention mask, so padding never shifts positions):

* ``"left"`` (default, the layout of generation): prompts left-padded to a common width ``P``,
  responses right-padded after them, so every response starts at column ``P``;
* ``"right"``: ``prompt + response`` followed by padding.

The token entropy :math:`H_t = -\sum_v \pi(v \mid \cdot) \log \pi(v \mid \cdot)` of the policy at
each response position is returned too (for the entropy bonus and the logged metric).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["PackedSequences", "SequenceLogprobs", "masked_mean", "pack", "sequence_logprobs"]

Layout = Literal["left", "right"]


@dataclass
class PackedSequences:
    """Prompt + response token ids packed into one padded batch.

    Attributes:
        input_ids: Token ids ``[B, L]`` (padding holds ``pad_token_id``).
        attention_mask: 1 on real tokens (prompt and response), 0 on padding, ``[B, L]``.
        response_mask: True on response tokens only, ``[B, L]``.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor

    def to(self, device: torch.device | str) -> PackedSequences:
        """The same tensors on ``device``."""
        return PackedSequences(
            self.input_ids.to(device), self.attention_mask.to(device), self.response_mask.to(device)
        )


@dataclass
class SequenceLogprobs:
    """Output of :func:`sequence_logprobs`.

    Attributes:
        logp: Sequence log-probability of each response (sum over response tokens), ``[B]``.
        token_logp: Per-token log-probabilities aligned with ``input_ids``, 0 off the response,
            ``[B, T]`` (``T = L``).
        mask: True on response tokens, ``[B, T]``.
        entropy: Per-token entropy of the model's next-token distribution at each response token,
            0 off the response, ``[B, T]``; ``None`` unless requested.
    """

    logp: torch.Tensor
    token_logp: torch.Tensor
    mask: torch.Tensor
    entropy: torch.Tensor | None = None

    def entropy_mean(self) -> torch.Tensor:
        """Token-mean entropy over all response tokens of the batch (a scalar)."""
        if self.entropy is None:
            raise ValueError("Entropy was not computed; call sequence_logprobs(..., entropy=True).")
        return masked_mean(self.entropy, self.mask)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the entries where ``mask`` is true (0 when there are none)."""
    m = mask.to(values.dtype)
    return (values * m).sum() / m.sum().clamp(min=1.0)


def pack(
    prompt_ids: Sequence[Sequence[int]],
    response_ids: Sequence[Sequence[int]],
    pad_token_id: int,
    layout: Layout = "left",
) -> PackedSequences:
    """Pack unpadded prompt and response ids ``[B][*]`` into padded tensors (see module doc).

    Raises:
        ValueError: on mismatched lengths, an empty prompt or an unknown layout.
    """
    if len(prompt_ids) != len(response_ids):
        raise ValueError(
            f"prompt_ids has {len(prompt_ids)} rows but response_ids {len(response_ids)}."
        )
    if layout not in ("left", "right"):
        raise ValueError(f"layout must be 'left' or 'right', got {layout!r}.")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError(
            "Every prompt needs at least one token (the first response token's context)."
        )
    b = len(prompt_ids)
    p_w = max((len(p) for p in prompt_ids), default=0)
    r_w = max((len(r) for r in response_ids), default=0)
    if layout == "left":
        width = p_w + r_w
    else:
        width = max(
            (len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True)), default=0
        )
    # Rows built as lists, then one tensor each (not 5 small tensor writes per row).
    ids, attn, resp = [], [], []
    for p, r in zip(prompt_ids, response_ids, strict=True):
        start = p_w - len(p) if layout == "left" else 0
        tail = width - start - len(p) - len(r)
        ids.append([pad_token_id] * start + [int(t) for t in p] + [int(t) for t in r])
        ids[-1] += [pad_token_id] * tail
        attn.append([0] * start + [1] * (len(p) + len(r)) + [0] * tail)
        resp.append([False] * (start + len(p)) + [True] * len(r) + [False] * tail)
    return PackedSequences(
        torch.tensor(ids, dtype=torch.long).reshape(b, width),
        torch.tensor(attn, dtype=torch.long).reshape(b, width),
        torch.tensor(resp, dtype=torch.bool).reshape(b, width),
    )


def sequence_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]] | PackedSequences,
    response_ids: Sequence[Sequence[int]] | None = None,
    pad_token_id: int = 0,
    *,
    entropy: bool = False,
    entropy_grad: bool = True,
    layout: Layout = "left",
) -> SequenceLogprobs:
    """Log-probabilities of responses given prompts, from one forward pass of ``model``.

    Gradients flow when called outside ``torch.no_grad`` (policy); wrap the reference call in
    ``torch.no_grad()``. Log-softmax is taken in float32 even under bf16 autocast.

    Args:
        model: A causal LM returning ``.logits`` ``[B, L, V]`` (accepts ``position_ids``,
            ``logits_to_keep`` and ``use_cache`` like ``transformers`` models).
        prompt_ids: Unpadded prompt ids ``[B][*]``, or an already :func:`pack`-ed batch (then
            ``response_ids`` is ``None``).
        response_ids: Unpadded response ids ``[B][*]`` (EOS included when generated).
        pad_token_id: Id used for padding (never scored: padding is masked by position).
        entropy: Also return per-token entropies.
        entropy_grad: Let gradients flow through the entropies (for an entropy bonus); when
            False they are computed without a graph, saving a ``[B, T, V]`` buffer.
        layout: Packing layout when lists are given (``"left"`` or ``"right"``; same values).

    Returns:
        A :class:`SequenceLogprobs` on the model's device.
    """
    if isinstance(prompt_ids, PackedSequences):
        packed = prompt_ids
    else:
        if response_ids is None:
            raise ValueError("response_ids is required when prompt_ids is not a PackedSequences.")
        packed = pack(prompt_ids, response_ids, pad_token_id, layout)
    device = next(model.parameters()).device
    packed = packed.to(device)
    ids, attn, mask = packed.input_ids, packed.attention_mask, packed.response_mask
    b, length = ids.shape
    if b == 0 or not bool(mask.any()):
        zeros = torch.zeros((b, length), device=device)
        return SequenceLogprobs(zeros.sum(-1), zeros, mask, zeros if entropy else None)
    # Only the logits that predict response tokens are needed: those of the columns from the
    # one before the earliest response token to the second-to-last. The last column predicts
    # nothing and, the model being causal, changes no earlier output: it is not fed.
    first = int(mask.any(0).nonzero()[0, 0])
    keep = length - first
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(  # use_cache=False: no KV cache is built for a scoring pass
        input_ids=ids[:, :-1],
        attention_mask=attn[:, :-1],
        position_ids=position_ids[:, :-1],
        logits_to_keep=keep,
        use_cache=False,
    ).logits
    logits = logits[:, -keep:]  # predicts columns first .. L-1
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    targets = ids[:, first:]
    lse = torch.logsumexp(logits, dim=-1)
    tok = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    sub_mask = mask[:, first:]
    tok = torch.where(sub_mask, tok, torch.zeros_like(tok))
    token_logp = torch.zeros((b, length), dtype=tok.dtype, device=device)
    token_logp = torch.cat([token_logp[:, :first], tok], dim=1)
    ent_full = None
    if entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            logp_all = logits - lse.unsqueeze(-1)
            ent = -(logp_all.exp() * logp_all).sum(-1)
        ent = torch.where(sub_mask, ent, torch.zeros_like(ent))
        ent_full = torch.cat([torch.zeros_like(token_logp[:, :first]), ent], dim=1)
    return SequenceLogprobs(token_logp.sum(-1), token_logp, mask, ent_full)
